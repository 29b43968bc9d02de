// The invariants can fail: cores with a planted bug are caught, with the seed (STYLE.md 8 —
// an invariant that cannot fail is worthless). Each test runs a calm seed (no network faults,
// no faulty process) so the planted bug is the only thing wrong.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import type { Core, CoreEffect } from '../../src/core/node.ts';
import type { ProcessId } from '../../src/core/ports.ts';
import type { ByzantineBehaviour } from '../../src/faults/byzantine.ts';
import { realCores } from '../../src/sim/cores.ts';
import { DEFAULT_TIMING } from '../../src/core/constants.ts';
import { expectedDetection, judgeDetection, type Detection } from '../../src/sim/detection.ts';
import { DIAGNOSIS_BUDGET_MS, HEAL_BUDGET_MS, planFor, type FaultPlan } from '../../src/sim/fault-plan.ts';
import { NO_NETWORK_FAULTS } from '../../src/sim/network.ts';
import { runSeed, type SeedOptions } from '../../src/sim/run-seed.ts';

const SEED = 11;

const calm = (p: FaultPlan): FaultPlan => ({ ...p, network: NO_NETWORK_FAULTS, partitions: [], process: { type: 'none' }, livenessExpected: true });

function run(extra: Partial<SeedOptions> = {}, adjust: (p: FaultPlan) => FaultPlan = calm) {
  return runSeed(SEED, { agents: 4, cores: realCores, adjustPlan: adjust, ...extra });
}

/** A core whose effects pass through `edit` (one effect in, any number out). */
function editEffects(core: Core, edit: (e: CoreEffect) => CoreEffect[]): Core {
  return { id: core.id, step: (input) => core.step(input).flatMap(edit), nextWakeMs: () => core.nextWakeMs() };
}

const alterGssn3: ByzantineBehaviour[] = [{ type: 'gc.alter', fromGssn: 3, toGssn: 3, agents: 'all', variant: 9 }];

describe('the invariant checker catches planted bugs', () => {
  it('a calm seed with correct cores has no violation (the baseline of every test below)', () => {
    const r = run();
    expect(r.counts.commands).toBeGreaterThan(10);
    expect(r.violations).toEqual([]);
  });

  it('a replica that changes one GC for its agent while the others do not is caught when it is supposed to be correct', () => {
    const r = run({ bugs: new Map([['r3', alterGssn3]]) });
    expect(r.violations.length).toBeGreaterThan(0);
    expect(r.violations[0]).toMatchObject({ seed: SEED, invariant: 'a.group-delivery' });
    expect(r.violations[0]?.message).toMatch(/correct replicas r\d and r3 sent different GCs .* GSSN 3/);
  });

  it('the same replica, declared Byzantine, is masked by the agents\' vote: no violation', () => {
    const r = run({ byzantine: new Map([['r3', alterGssn3]]) });
    expect(r.violations).toEqual([]);
  });

  it('an agent that delivers a command twice is caught', () => {
    let doubled = false;
    const wrapCore = (id: ProcessId, core: Core) => (id !== 'a1' ? core : editEffects(core, (e) => {
      if (e.type !== 'deliver.command' || doubled) return [e];
      doubled = true;
      return [e, e];
    }));
    const r = run({ wrapCore });
    expect(doubled).toBe(true);
    expect(r.violations[0]?.message).toMatch(/a1 delivered GSSN \d+ after GSSN \d+ \(duplicate or out of order\)/);
  });

  it('an agent that skips a command is caught as a gap in its chain', () => {
    let skipped = false;
    const wrapCore = (id: ProcessId, core: Core) => (id !== 'a2' ? core : editEffects(core, (e) => {
      if (e.type !== 'deliver.command' || skipped) return [e];
      skipped = true;
      return [];
    }));
    const r = run({ wrapCore });
    expect(skipped).toBe(true);
    expect(r.violations.some((v) => v.invariant === 'a.group-delivery' && /a2 delivered GSSN \d+ \(prevGssn \d+\) but its last delivery was GSSN \d+: a gap/.test(v.message))).toBe(true);
  });

  it('a replica that delivers a different request at an RSN than the others is caught', () => {
    const wrapCore = (id: ProcessId, core: Core) => (id !== 'r2' ? core : editEffects(core, (e) => (
      e.type === 'deliver.request' && e.rsn === 4 ? [{ ...e, csn: e.csn + 100 }] : [e]
    )));
    const r = run({ wrapCore });
    expect(r.violations.some((v) => v.invariant === 'b.request-order' && /RSN 4/.test(v.message))).toBe(true);
  });

  it('a primary that skips an RSN, believed correct, is condemned by the backups: the checker calls that a correct replica condemned', () => {
    const r = run({ bugs: new Map([['r1', [{ type: 'rsn.skip', atRsn: 3 }]]]) });
    expect(r.violations.some((v) => v.invariant === 'g.condemned-correct' && /r1/.test(v.message))).toBe(true);
  });

  it('a verifier and link keys that accept anything let a corrupted frame in, and the admission check catches it', () => {
    const corrupting = (p: FaultPlan): FaultPlan => ({ ...calm(p), network: { ...NO_NETWORK_FAULTS, corrupt: 0.5 } });
    const honest = run({}, corrupting);
    expect(honest.network.corrupted).toBeGreaterThan(20);
    expect(honest.violations.filter((v) => v.invariant === 'c.admission')).toEqual([]);
    const r = run({ wrapVerifier: (v) => ({ has: v.has, verify: () => true }), wrapLinkAuth: (l) => ({ ...l, check: () => true }) }, corrupting);
    expect(r.violations.some((v) => v.invariant === 'c.admission' && /never emitted/.test(v.message))).toBe(true);
  });

  it('a core that throws is reported with the seed, and the run goes on without it', () => {
    const wrapCore = (id: ProcessId, core: Core): Core => (id !== 'r3' ? core : {
      id, nextWakeMs: () => core.nextWakeMs(),
      step: (input) => {
        if (input.nowMs > 150) throw new Error('planted');
        return core.step(input);
      },
    });
    const r = run({ wrapCore });
    expect(r.violations[0]).toMatchObject({ seed: SEED, invariant: 'e.core', message: 'r3 threw Error: planted' });
  });

  it('a core whose timer never moves past now is reported as livelocked instead of hanging the run', () => {
    const wrapCore = (id: ProcessId, core: Core): Core => (id !== 'a3' ? core : { id, step: (i) => core.step(i), nextWakeMs: () => 0 });
    const r = run({ wrapCore });
    expect(r.violations.some((v) => v.invariant === 'e.core' && /a3 nextWakeMs\(\) stays at .* \(livelock\)/.test(v.message))).toBe(true);
  });
});

describe('g.detection: the rule meant for the fault, within its bound (issue 15 item 2; src/sim/detection.ts)', () => {
  /** A calm seed whose only fault is `process`, with time for self-diagnosis. */
  const faulty = (process: FaultPlan['process'], required: boolean) => (p: FaultPlan): FaultPlan => ({
    ...calm(p), process, diagnosis: { target: 'r3', required }, hardEndMs: p.faultEndMs + HEAL_BUDGET_MS + DIAGNOSIS_BUDGET_MS,
  });
  const crashR3 = faulty({ type: 'crash', target: 'r3', atMs: 100, restartAtMs: null }, true);
  const corruptR3 = faulty({ type: 'corrupt', target: 'r3', atMs: 100, kind: 'slots' }, false);
  const detection = (r: ReturnType<typeof run>) => r.violations.filter((v) => v.invariant === 'g.detection');

  it('correct cores: a crashed backup is condemned as silent, a corrupted one for its digest, within their bounds', () => {
    for (const adjust of [crashR3, corruptR3]) {
      const r = run({}, adjust);
      expect(r.reached.get('inv g.detection')).toBe(1);
      expect(r.violations).toEqual([]);
    }
  });

  it('a backup whose silence accusations never leave it: the crashed backup is not condemned within its bound, and that is reported with the seed first', () => {
    // r2 accuses r3 as silent but never sends it; r1's accusation alone is no evidence
    // (PROTOCOL §10.3), and r2, having accused, waits for the primary's order.
    const wrapCore = (id: ProcessId, core: Core) => (id !== 'r2' ? core : editEffects(core, (e) => (
      e.type === 'send' && e.item.type === 'ptp' && e.item.body?.type === 'accuse' && e.item.body.signed.accusation.reason === 'silent' ? [] : [e]
    )));
    const r = run({ wrapCore }, crashR3);
    expect(r.violations[0]).toMatchObject({
      seed: SEED, invariant: 'g.detection', message: expect.stringMatching(/^r3 \(crash at 100 ms\) was not condemned by 1020 ms \(its bound: silent within 920 ms\)/),
    });
  });

  it('a slower rule covering for the one meant for the fault, or the right rule too late, is reported (judgeDetection)', () => {
    const plan = crashR3(planFor(SEED, { agents: ['a1', 'a2', 'a3', 'a4'], replicas: ['r1', 'r2', 'r3'] }));
    const d = expectedDetection(plan, DEFAULT_TIMING, 'r1', ['r1', 'r2', 'r3'], 100);
    expect(d).toMatchObject({ target: 'r3', reasons: ['silent'], fromMs: 100, boundMs: 920 });
    const judge = (reasons: string[], atMs: number) => judgeDetection(d as Detection, { atMs, reasons }, 5_000);
    expect(judge(['silent'], 700)).toBeNull();
    expect(judge(['silent'], 1_020)).toBeNull();
    // Seed 238's shape, on a network beyond the bounds: one accuser's silence rule never started.
    expect(judge(['agent.reports', 'silent'], 1_680)).toBe('r3 (crash at 100 ms) was condemned for agent.reports+silent at 1680 ms; the rule meant for it is silent');
    expect(judge(['silent'], 1_021)).toBe('r3 (crash at 100 ms) was condemned for silent 921 ms later; its bound is 920 ms');
    // A crashed primary may also be found by the backups' progress timers; a backup may not.
    expect(expectedDetection({ ...plan, process: { type: 'crash', target: 'r1', atMs: 100, restartAtMs: null } }, DEFAULT_TIMING, 'r1', ['r1', 'r2', 'r3'], 100)?.reasons).toEqual(['silent', 'primary.progress']);
    // PROTOCOL §5.6: a primary that crashed before a backup met it is judged after the start
    // grace, within the same bound; an unmet backup is not timed from the grace.
    const crashR1 = { ...plan, process: { type: 'crash' as const, target: 'r1', atMs: 30, restartAtMs: null } };
    const early = { unheard: true, unmet: true };
    expect(expectedDetection(crashR1, DEFAULT_TIMING, 'r1', ['r1', 'r2', 'r3'], 30, early)).toMatchObject({ fromMs: DEFAULT_TIMING.startGraceMs });
    expect(expectedDetection(crashR1, DEFAULT_TIMING, 'r1', ['r1', 'r2', 'r3'], 30)).toMatchObject({ fromMs: 30, boundMs: 920 });
    // §6: a backup a peer never heard is found by the agents' reports, within three ReplicaTimeouts.
    expect(expectedDetection(plan, DEFAULT_TIMING, 'r1', ['r1', 'r2', 'r3'], 100, early)).toMatchObject({ fromMs: 100, reasons: ['silent', 'agent.reports'], boundMs: 1720 });
    expect(expectedDetection(plan, DEFAULT_TIMING, 'r1', ['r1', 'r2', 'r3'], 100, { unheard: true, unmet: false })?.fromMs).toBe(100);
  });

  it('replicas that never compare a peer\'s digest tolerate its corrupted state, and that is reported', () => {
    // r1 and r2 drop the digest claims of r3's heartbeats (RSN 0 is never compared).
    const wrapCore = (id: ProcessId, core: Core): Core => (id === 'r3' ? core : {
      id, nextWakeMs: () => core.nextWakeMs(),
      step: (input) => core.step(input.type !== 'frame' || input.frame.from !== 'r3' ? input : {
        ...input, frame: { ...input.frame, items: input.frame.items.map((i) => (i.type === 'hb' && i.info.type === 'replica' ? { ...i, info: { ...i.info, rsn: 0, ckptRsn: 0 } } : i)) },
      }),
    });
    const r = run({ wrapCore }, corruptR3);
    expect(detection(r)).toEqual([expect.objectContaining({ seed: SEED, message: expect.stringMatching(/^r3 \(corrupt \(slots\) at 100 ms\) was not condemned by 470 ms \(its bound: digest or rsn\.gap or agent\.reports within 370 ms\)/) })]);
  });
});

describe('npm run sim', () => {
  const sim = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', 'src/sim/cli.ts', ...args], { encoding: 'utf8' });

  it('ends with "sim: N seeds, V violations" and exits non-zero exactly when V > 0; a progress line per seed on stderr with --progress-ms 0 (issue 19)', () => {
    const r = sim('--seeds', '3', '--from', '5', '--progress-ms', '0');
    const lines = r.stdout.trim().split('\n');
    const last = lines[lines.length - 1] as string;
    const m = /^sim: 3 seeds, (\d+) violations$/.exec(last);
    expect(m).not.toBeNull();
    expect(r.status).toBe(Number(m?.[1]) > 0 ? 1 : 0);
    const fails = lines.filter((x) => x.startsWith('FAIL'));
    for (const l of fails) expect(l).toMatch(/replay: npm run sim -- --seed \d+/);
    // Progress: seeds done/total, failing so far, elapsed, ETA; on stderr only.
    const progress = r.stderr.trim().split('\n');
    expect(progress).toHaveLength(3);
    progress.forEach((l, i) => expect(l).toMatch(new RegExp(`^sim: ${i + 1}/3 seeds, \\d+ failed, \\d+ s elapsed, (ETA \\d+ s|done)$`)));
    expect(progress[2]).toMatch(new RegExp(`^sim: 3/3 seeds, ${fails.length} failed, .*, done$`));
    expect(r.stdout).not.toMatch(/elapsed/);
  });

  it('rejects a bad flag with a one-line error saying what to do', () => {
    const r = sim('--seeds', 'many');
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/--seeds must be a whole number.*Usage: npm run sim/);
  });
});
