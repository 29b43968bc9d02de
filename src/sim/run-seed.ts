// One seed end to end: draw its fault plan and workload, build the world, open the fault
// window, run the workload, heal, poll liveness until it holds (or the hard end), then run the
// end-of-run checks. Pure function of (seed, options): the same seed replays exactly.
import type { ProcessId } from '../core/ports.ts';
import type { ByzantineBehaviour } from '../faults/byzantine.ts';
import { expectedDetection, judgeDetection, type EarlyCrash } from './detection.ts';
import { DIAGNOSIS_BUDGET_MS, planFor, type FaultPlan } from './fault-plan.ts';
import type { InvariantChecker, Violation } from './invariants.ts';
import type { NetworkStats } from './network.ts';
import type { SimCrypto } from './sim-signer.ts';
import { SimWatchdog } from './sim-watchdog.ts';
import { World, type CoreFactories, type WorldOptions } from './world.ts';

/** How often liveness is polled after the heal. Each poll is cheap (a few hundred set lookups). */
export const LIVENESS_POLL_MS = 25;

export type SeedOptions = {
  agents: number;
  cores: CoreFactories;
  crypto?: SimCrypto;
  /** Replace the plan's process fault (tests of the checker itself). */
  byzantine?: ReadonlyMap<ProcessId, readonly ByzantineBehaviour[]>;
  /** Override the drawn plan (tests). */
  adjustPlan?: (plan: FaultPlan) => FaultPlan;
  /** Replicas with a deliberate bug: wrapped like Byzantine ones but still counted as correct,
   *  so the invariants must catch them (tests of the checker itself). */
  bugs?: ReadonlyMap<ProcessId, readonly ByzantineBehaviour[]>;
  /** Plant a bug in any core or in the verifier (tests of the checker; see WorldOptions). */
  wrapCore?: WorldOptions['wrapCore'];
  wrapVerifier?: WorldOptions['wrapVerifier'];
  wrapLinkAuth?: WorldOptions['wrapLinkAuth'];
  /** Record the full trace and hand the world over at the end (debugging, tests). */
  trace?: boolean;
  /** Keep a digest of the whole trace, returned as `traceDigest` (src/sim/trace-digest.ts). */
  digest?: boolean;
  inspect?: (world: World) => void;
};

export type SeedResult = {
  seed: number;
  plan: FaultPlan;
  violations: Violation[];
  simulatedMs: number;
  events: number;
  network: NetworkStats;
  counts: InvariantChecker['counts'];
  /** What the run reached (InvariantChecker.reached). */
  reached: ReadonlyMap<string, number>;
  /** The digest of its whole trace, when asked for (SeedOptions.digest). */
  traceDigest?: string;
};

/** Network faults beyond the fault model's timing bounds: frequent loss (three lost
 *  retransmissions in a row become likely within a diagnosis) or latency spikes longer than the
 *  primary-progress timeout. Accusations of correct replicas are then possible; safety is not
 *  at stake, and liveness after the heal is still checked. */
export function beyondTimingBounds(plan: FaultPlan): boolean {
  const n = plan.network;
  return n.loss > 0.05 || (n.spike > 0 && n.spikeMaxMs >= 100);
}

/** Whether `target` is out of the group as every other serving replica sees it. */
export function condemned(world: World, target: ProcessId): boolean {
  let serving = 0;
  for (const [id, g] of world.checker.groups()) {
    if (id === target) continue;
    serving++;
    if (g.members.includes(target)) return false;
  }
  return serving > 0;
}

const INITIAL_REPLICAS: readonly ProcessId[] = ['r1', 'r2', 'r3'];
/** How long past crash + watchdogSilenceMs a watched run goes on: a few heartbeat periods. */
const WATCHDOG_MARGIN_MS = 300;
/** World: r1 is the primary of view 1. */
const INITIAL_PRIMARY: ProcessId = 'r1';

/** Whether `id`'s state equals that of another serving replica at the same RSN. */
function sameStateAsPeer(world: World, id: ProcessId): boolean {
  const digests = world.digests();
  const own = digests.get(id);
  if (own === undefined) return false;
  return [...digests].some(([peer, d]) => peer !== id && world.checker.isCorrect(peer) && d.rsn === own.rsn && d.digest === own.digest);
}

/** The g.detection invariant, at the end of a run within the timing bounds (a run that already
 *  failed is left to its first violation). */
function judgeDetectionOf(world: World, plan: FaultPlan, onsetMs: number | null, healed: boolean, early: EarlyCrash): void {
  if (world.checker.violations.length > 0 || beyondTimingBounds(plan)) return;
  const d = expectedDetection(plan, world.membership.timing, INITIAL_PRIMARY, INITIAL_REPLICAS, onsetMs, early);
  if (d === null) return;
  world.checker.reach('inv g.detection');
  const v = judgeDetection(d, world.checker.condemnations.get(d.target), world.now, healed);
  if (healed) world.checker.reach('path corruption.healed');
  if (v !== null) world.checker.fail('g.detection', v);
}

export function runSeed(seed: number, opts: SeedOptions): SeedResult {
  const agentIds = Array.from({ length: opts.agents }, (_, i) => `a${i + 1}`);
  let plan = planFor(seed, { agents: agentIds, replicas: INITIAL_REPLICAS });
  if (opts.adjustPlan !== undefined) plan = opts.adjustPlan(plan);
  const byzantine = new Map<ProcessId, readonly ByzantineBehaviour[]>(opts.byzantine ?? []);
  const f = plan.process;
  if (opts.byzantine === undefined && f.type === 'byzantine' && f.fromMs === 0) byzantine.set(f.target, f.behaviours);

  const world = new World({
    seed, agents: opts.agents, cores: opts.cores, crypto: opts.crypto ?? 'keyed',
    link: plan.link, networkFaults: plan.network, byzantine,
    clockOffsetMs: (id) => plan.clockOffsetsMs[id] ?? 0,
    ...(opts.bugs !== undefined ? { bugs: opts.bugs } : {}),
    ...(opts.trace === true ? { trace: true } : {}),
    ...(opts.digest === true ? { digest: true } : {}),
    ...(opts.wrapCore !== undefined ? { wrapCore: opts.wrapCore } : {}),
    ...(opts.wrapVerifier !== undefined ? { wrapVerifier: opts.wrapVerifier } : {}),
    ...(opts.wrapLinkAuth !== undefined ? { wrapLinkAuth: opts.wrapLinkAuth } : {}),
  });
  for (const p of plan.partitions) world.network.addPartition(p);
  // A replica cut off is faulty in the model's terms (it may rightly be condemned), and so is
  // every replica when the network breaks the timing bounds (PROTOCOL §10.2, FAULT-MODEL).
  for (const p of plan.partitions) for (const id of p.isolated) world.checker.markFaulty(id);
  world.checker.outOfBounds = beyondTimingBounds(plan);
  world.network.setFaultWindow(true);
  world.start();

  const s = world.scheduler;
  for (const w of plan.workload) {
    if (w.type === 'echo') {
      s.at(w.atMs, () => world.request(w.agent, { type: 'echo', tag: w.tag, fanout: w.fanout, count: w.count, data: w.data }));
    } else {
      s.at(w.atMs, () => world.notice(w.from, w.to, w.text));
    }
  }
  // When the replica fault took hold, for the detection bounds (src/sim/detection.ts): null
  // when it never did (a crash of a replica already gone, a corruption with nothing to change).
  let onsetMs: number | null = f.type === 'byzantine' ? f.fromMs : null;
  // What the other replicas knew of the one that crashed (PROTOCOL §5.6's start grace, §6).
  const early: EarlyCrash = { unheard: false, unmet: false };
  if (f.type === 'crash') {
    s.at(f.atMs, () => {
      onsetMs = world.replica(f.target) !== null ? world.now : null;
      for (const b of INITIAL_REPLICAS) {
        const seen = b === f.target ? undefined : world.replica(b)?.status?.(world.now).replicas.find((r) => r.id === f.target);
        if (seen === undefined) continue;
        if (seen.health === 'unknown') early.unheard = true;
        if (!seen.connected) early.unmet = true;
      }
      if (early.unheard) world.checker.reach('path crash before heard');
      world.crash(f.target);
    });
    if (f.restartAtMs !== null) s.at(Math.min(f.restartAtMs, plan.faultEndMs), () => world.restart(f.target));
  }
  if (f.type === 'hang') s.at(f.atMs, () => world.hang(f.target, f.untilMs));
  // A corruption the replica's next step overwrites (a GSSN chain link rewritten by the next
  // command) leaves nothing to detect: at the bound, compare its state with a correct replica's
  // at the same RSN (src/sim/detection.ts judgeDetection `healed`).
  let healed = false;
  if (f.type === 'corrupt') {
    s.at(f.atMs, () => {
      onsetMs = world.replica(f.target) !== null && world.corrupt(f.target, f.kind) !== null ? world.now : null;
      const d = onsetMs === null ? null : expectedDetection(plan, world.membership.timing, INITIAL_PRIMARY, INITIAL_REPLICAS, onsetMs);
      if (d?.boundMs != null) s.at(d.fromMs + d.boundMs, () => { healed = sameStateAsPeer(world, f.target); });
    });
  }
  if (opts.byzantine === undefined && f.type === 'byzantine' && f.fromMs > 0) s.at(f.fromMs, () => world.misbehave(f.target, f.behaviours));
  s.at(plan.faultEndMs, () => world.network.setFaultWindow(false));

  // The watchdog (spec §1.6; PROTOCOL §10.8), fed by the replicas as in task seeds. With at most
  // one faulty replica it must never reset the cluster, however long that replica stays down
  // (g.cluster-reset); a node reset it orders is recorded, not carried out (group seeds have no
  // nodes to power-cycle: an agent that crashed for good stays down).
  const watchdog = new SimWatchdog(world, (e) => {
    if (e.type === 'reset.node') world.checker.reach('path watchdog reset.node');
    if (e.type === 'reset.cluster') world.checker.onWatchdogReset(e.reason);
  });
  // In every other seed of a replica crash, the run lasts past the watchdog's silence bound after
  // the crash (issue 15 item 3), instead of ending once the replacement serves.
  const timing = world.membership.timing;
  const watchUntilMs = f.type === 'crash' && INITIAL_REPLICAS.includes(f.target) && seed % 2 === 0
    ? f.atMs + timing.watchdogSilenceMs + WATCHDOG_MARGIN_MS : 0;
  // A replica that crashed before the others met it may be judged only after their start grace
  // (PROTOCOL §5.3, §5.6: a primary the backups never met, a backup the agents never met): the
  // run may last until then and a diagnosis budget more.
  const graceUntilMs = () => (early.unheard ? timing.startGraceMs + DIAGNOSIS_BUDGET_MS : 0);
  if (watchUntilMs > 0) world.checker.reach('path watchdog past silence bound');

  world.runUntil(plan.faultEndMs);
  // After the heal: stop as soon as everything owed has arrived (and the faulty replica is out
  // of the group, when the fault is one self-diagnosis should find), or at the hard end.
  const failed = () => world.checker.violations.length > 0;
  const d = plan.diagnosis;
  const diagnosed = (): boolean => d === null || condemned(world, d.target);
  let t = plan.faultEndMs;
  while (t < Math.max(plan.hardEndMs, watchUntilMs, graceUntilMs()) && !failed()) {
    if (!plan.livenessExpected && t >= plan.faultEndMs + 4 * LIVENESS_POLL_MS) break;
    if (plan.livenessExpected && diagnosed() && world.checker.missing(1).length === 0 && t >= watchUntilMs) break;
    t += LIVENESS_POLL_MS;
    world.runUntil(t);
  }
  // The detection bound first: a replica never condemned is first of all a rule that did not fire.
  judgeDetectionOf(world, plan, onsetMs, healed, early);
  if (d !== null) world.checker.reach('inv g.recovered');
  if (d !== null && d.required && !failed() && !condemned(world, d.target)) {
    world.checker.fail('g.recovered', `${d.target} (${plan.process.type}) is still a member of the group at ${world.now} ms`);
  }
  world.checker.finish({ livenessExpected: plan.livenessExpected, digests: world.digests() });
  opts.inspect?.(world);
  return {
    seed, plan, violations: world.checker.violations, simulatedMs: world.now, events: s.eventsRun, network: world.network.stats,
    counts: world.checker.counts, reached: world.checker.reached, ...(opts.digest === true ? { traceDigest: world.traceDigest() ?? '' } : {}),
  };
}
