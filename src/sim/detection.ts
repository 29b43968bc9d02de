// Detection bounds (issue 15 item 2; PROTOCOL §10.2, spec §1.3): a faulty replica is condemned by
// the rule meant for its fault, within that rule's bound, and a corrupted one is never merely
// tolerated. A slower rule covering for a broken faster one is a violation: a crashed backup
// condemned on the agents' reports after 1.5 s means the silence rule did not fire.
//
// Judged from the plan (what was done to whom, when) and the condemnations the correct replicas
// executed (InvariantChecker.condemnations), never from the replicas' own logs. Only within the
// fault model's timing bounds: on a network beyond them (run-seed.ts beyondTimingBounds) correct
// replicas may be accused too, and no bound is promised.
import type { Timing } from '../core/constants.ts';
import type { ProcessId } from '../core/ports.ts';
import type { AccuseReason } from '../core/wire/messages.ts';
import type { FaultPlan } from './fault-plan.ts';

/** What a network within the timing bounds may add to a rule's own time: a frame lost twice in
 *  a row (40 + 80 ms of retransmission) and one latency spike (< 100 ms, run-seed.ts). */
export const detectionSlackMs = (t: Timing): number => 3 * t.retransmitMs + 100;

export type Detection = {
  target: ProcessId;
  /** What the plan did, for messages: "crash", "corrupt (csn)". */
  fault: string;
  /** The rules that may condemn it; anything else is a slower (or wrong) rule covering. */
  reasons: readonly AccuseReason[];
  /** Condemned by `fromMs + boundMs` at the latest; null: the fault may never show (a Byzantine
   *  behaviour whose trigger the workload may not reach), so only the rule is judged. */
  boundMs: number | null;
  fromMs: number;
};

/** The rules each Byzantine behaviour is meant to meet (PROTOCOL §10.2). Behaviours missing here
 *  (ack.inflate, cg.drop: only agents and backups' forwards see them; port.alter, state.forge: a
 *  replacement's refusal) are not judged. */
const BYZANTINE_RULES: Readonly<Record<string, readonly AccuseReason[]>> = {
  'rsn.skip': ['rsn.gap'],
  // A swap holds the first of the two requests until a second comes; when none does, the primary
  // has withheld an order, and the progress rule is the one that sees it (seed 16).
  'rsn.swap': ['equivocation', 'rsn.gap', 'primary.progress'],
  'order.withhold': ['primary.progress'],
  'order.lie': ['order.lie'],
  'agents.mute': ['agent.reports'],
  'gc.alter': ['agent.reports'],
};

/** At a crash's onset, whether another replica had not yet heard the target's heartbeat
 *  (`unheard`), or had no session with it yet (`unmet`, which implies unheard). */
export type EarlyCrash = { unheard: boolean; unmet: boolean };
const NOT_EARLY: EarlyCrash = { unheard: false, unmet: false };

/** The detection the plan's replica fault calls for, or null when there is none to judge.
 *  `primary`: the initial primary (within the bounds no view changes before the faulty replica
 *  is condemned). `onsetMs`: when the fault took hold, null if it never did (a corruption that
 *  found nothing to change, a crash of a replica already gone). `early`: what the others knew of
 *  the target at its onset. */
export function expectedDetection(plan: FaultPlan, timing: Timing, primary: ProcessId, replicas: readonly ProcessId[], onsetMs: number | null, early: EarlyCrash = NOT_EARLY): Detection | null {
  const f = plan.process;
  if (f.type === 'none' || !replicas.includes(f.target) || onsetMs === null) return null;
  const cutOff = plan.partitions.some((p) => p.isolated.includes(f.target));
  const silent: AccuseReason[] = f.target === primary ? ['silent', 'primary.progress'] : ['silent'];
  // A partition that cuts the target off (the only replica one may cut, fault-plan.ts) may get
  // it condemned as silent first, and delays what the others see of it until the heal.
  const fromMs = cutOff ? Math.max(onsetMs, plan.faultEndMs) : onsetMs;
  const slack = detectionSlackMs(timing);
  switch (f.type) {
    case 'crash': {
      // Spec §1.3: the missed heartbeat is found within two checks, then DiagnosisTimeout. A
      // replica a peer never heard is still starting to that peer, which never suspects it of
      // silence (PROTOCOL §6): the agents' reports find it, by the copies it never sends (three
      // ReplicaTimeouts, §5.2). A primary a backup never met is judged by its progress once the
      // backups' start grace is over (§5.6), within the silence bound.
      const bySilence = 2 * timing.replicaCheckMs + timing.diagnosisTimeoutMs + slack;
      return {
        target: f.target, fault: 'crash',
        reasons: early.unheard ? [...silent, 'agent.reports'] : silent,
        boundMs: early.unheard ? Math.max(bySilence, 3 * timing.replicaTimeoutMs + slack) : bySilence,
        fromMs: early.unmet && f.target === primary ? Math.max(fromMs, timing.startGraceMs) : fromMs,
      };
    }
    case 'corrupt':
      // PROTOCOL §10.4: every heartbeat carries the current digest; a corrupted counter shows as
      // a gap as soon as the corrupted replica orders or confirms with it.
      // The agents' reports may name it first: its copies differ from the other two (§5.2).
      return {
        target: f.target, fault: `corrupt (${f.kind})`, reasons: cutOff ? ['digest', 'rsn.gap', 'agent.reports', ...silent] : ['digest', 'rsn.gap', 'agent.reports'],
        boundMs: 2 * timing.replicaHeartbeatMs + slack, fromMs,
      };
    case 'byzantine': {
      const rules = new Set<AccuseReason>();
      for (const b of f.behaviours) {
        const r = BYZANTINE_RULES[b.type];
        if (r === undefined) return null;
        for (const x of r) rules.add(x);
      }
      if (cutOff) for (const x of silent) rules.add(x);
      return { target: f.target, fault: f.behaviours.map((b) => b.type).join('+'), reasons: [...rules], boundMs: null, fromMs };
    }
    case 'hang':
      return null;
  }
}

/** The violation, if any, for a run that ended at `endMs`, given the first condemnation of the
 *  target the correct replicas executed. `healed`: a corruption the replica's own next step
 *  overwrote before anyone compared (its state equal to a correct replica's at the same RSN at
 *  the bound): nothing is left to detect. */
export function judgeDetection(d: Detection, condemned: { atMs: number; reasons: readonly string[] } | undefined, endMs: number, healed = false): string | null {
  const by = d.boundMs === null ? null : d.fromMs + d.boundMs;
  if (condemned === undefined) {
    if (by !== null && endMs > by && !healed) return `${d.target} (${d.fault} at ${fmt(d.fromMs)} ms) was not condemned by ${fmt(by)} ms (its bound: ${d.reasons.join(' or ')} within ${fmt(d.boundMs ?? 0)} ms); still a member at ${fmt(endMs)} ms`;
    return null;
  }
  const wrong = condemned.reasons.filter((r) => !d.reasons.includes(r as AccuseReason));
  if (wrong.length > 0) {
    return `${d.target} (${d.fault} at ${fmt(d.fromMs)} ms) was condemned for ${condemned.reasons.join('+')} at ${fmt(condemned.atMs)} ms; the rule meant for it is ${d.reasons.join(' or ')}`;
  }
  if (by !== null && condemned.atMs > by) {
    return `${d.target} (${d.fault} at ${fmt(d.fromMs)} ms) was condemned for ${condemned.reasons.join('+')} ${fmt(condemned.atMs - d.fromMs)} ms later; its bound is ${fmt(d.boundMs ?? 0)} ms`;
  }
  return null;
}

const fmt = (ms: number): string => String(Math.round(ms));
