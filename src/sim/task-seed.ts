// One task seed end to end (issue 3): draw a workload of tasks and a fault from the seed, run
// them on a simulated cluster (src/sim/tasks.ts), heal, run until every accepted task has
// finished (or the hard end), then check the task invariants and the group layer's. Pure
// function of (seed, options): the same seed replays exactly (`npm run sim -- --tasks --seed S`).
// A fixed slice of seeds (A21_SEED_EVERY) crashes two replicas at once instead (spec §9.2 A21):
// the watchdog must reset the cluster and the fresh group run every accepted task again.
import type { ProcessId } from '../core/ports.ts';
import type { Violation } from './invariants.ts';
import { DEFAULT_LINK } from './world.ts';
import { streamFor, type SeededRandom } from './random.ts';
import type { CoreFactories } from './world.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../core/signals.ts';
import { RESTORE_BOUND_MS, TaskSim, type SimApp } from './tasks.ts';
import { condemned } from './run-seed.ts';

/** Faults happen in [0, FAULT_END_MS); then the network heals and the run settles. */
export const TASK_FAULT_END_MS = 1200;
/** Long enough for a node declared failed, reset and rejoined, and a task retried after a
 *  Start-TO (1 s in task seeds) and its terminate, several times over. */
export const TASK_HARD_END_MS = 15_000;
export const TASK_POLL_MS = 50;
export const MAX_TASKS_PER_SEED = 4;
export const MAX_TASK_SIZE = 5;

export type TaskKind = 'work' | 'exit-3' | 'missing' | 'forever-killed' | 'stubborn-killed' | 'linked-chatter';
/** Broadcast and group requests each linked process of a seed may send. */
export const MAX_APP_REQUESTS = 6;
/** One task seed in this many (those with seed % A21_SEED_EVERY === A21_SEED_OFFSET) crashes two
 *  replicas at the same moment (spec §9.2 A21) instead of its drawn fault: 50 of the 1000 seeds
 *  of the fixed slices, each several seconds of simulated time longer than the others. */
export const A21_SEED_EVERY = 20;
export const A21_SEED_OFFSET = 7;
/** Replicas crash in [A21_CRASH_MIN_MS, A21_CRASH_MAX_MS]: while tasks are still submitted
 *  (20–500 ms), so some are accepted and live, some pending at the crash and some finished. */
export const A21_CRASH_MIN_MS = 50;
export const A21_CRASH_MAX_MS = 800;
/** A Byzantine member of a linked task (issue 15 item 3): once the chatter starts, it
 *  - `stale`: replays requests with epochs already over (and one with an epoch not yet reached);
 *  - `disagree`: asks for SYNCs with an argument of its own, again at every epoch;
 *  - `flood`: sends FLOOD_REQUESTS broadcast requests at once.
 *  Correct members must be unaffected: t.group-request counts what stale requests would have
 *  made, t.atomic-broadcast what every member received. */
export type AppFault = { vpid: number; kind: 'stale' | 'disagree' | 'flood' };
export const APP_FAULT_KINDS = ['stale', 'disagree', 'flood'] as const;
/** Linked tasks with a Byzantine member. */
export const APP_FAULT_CHANCE = 0.4;
export const FLOOD_REQUESTS = 40;
export type TaskPlanItem = { atMs: number; kind: TaskKind; size: number; durationMs: number; killAtMs: number; appFault: AppFault | null };
export type TaskFault =
  | { type: 'none' }
  | { type: 'process-crash'; atMs: number[] }
  | { type: 'agent-death'; agent: ProcessId; atMs: number; restartAfterMs: number }
  | { type: 'power-off'; agent: ProcessId; atMs: number }
  | { type: 'partition'; agent: ProcessId; fromMs: number; untilMs: number }
  | { type: 'replica-crash'; replica: ProcessId; atMs: number }
  /** Spec §9.2 A21: two replicas at the same moment; only a cluster reset brings the group back. */
  | { type: 'replicas-crash'; replicas: [ProcessId, ProcessId]; atMs: number };

export type TaskPlan = { seed: number; tasks: TaskPlanItem[]; fault: TaskFault; loss: number };

const pick = <T>(rng: SeededRandom, xs: readonly T[]): T => xs[Math.floor(rng.next() * xs.length)] as T;
const between = (rng: SeededRandom, lo: number, hi: number): number => lo + Math.floor(rng.next() * (hi - lo + 1));

export function taskPlanFor(seed: number, agents: readonly ProcessId[]): TaskPlan {
  const rng = streamFor(seed, 'tasks');
  const tasks: TaskPlanItem[] = [];
  const n = between(rng, 1, MAX_TASKS_PER_SEED);
  for (let i = 0; i < n; i++) {
    const r = rng.next();
    const kind: TaskKind = r < 0.45 ? 'work' : r < 0.55 ? 'exit-3' : r < 0.62 ? 'missing' : r < 0.75 ? 'forever-killed' : r < 0.82 ? 'stubborn-killed' : 'linked-chatter';
    const atMs = between(rng, 20, 500);
    tasks.push({ atMs, kind, size: between(rng, 1, MAX_TASK_SIZE), durationMs: between(rng, 20, 400), killAtMs: atMs + between(rng, 50, 700), appFault: null });
  }
  // From a stream of its own, so the rest of every plan stays as drawn before these faults.
  const byz = streamFor(seed, 'app-faults');
  for (const t of tasks) {
    if (t.kind !== 'linked-chatter' || byz.next() >= APP_FAULT_CHANCE) continue;
    t.appFault = { vpid: between(byz, 0, t.size - 1), kind: pick(byz, APP_FAULT_KINDS) };
  }
  const f = rng.next();
  const agent = pick(rng, agents);
  let fault: TaskFault;
  if (f < 0.15) fault = { type: 'none' };
  else if (f < 0.4) fault = { type: 'process-crash', atMs: Array.from({ length: between(rng, 1, 3) }, () => between(rng, 50, 900)) };
  else if (f < 0.6) fault = { type: 'agent-death', agent, atMs: between(rng, 50, 800), restartAfterMs: between(rng, 20, 300) };
  else if (f < 0.75) fault = { type: 'power-off', agent, atMs: between(rng, 50, 800) };
  else if (f < 0.9) {
    const fromMs = between(rng, 50, 700);
    fault = { type: 'partition', agent, fromMs, untilMs: fromMs + between(rng, 100, 500) };
  } else {
    // The primary as well as a backup: the group condemns it and starts a replacement, which
    // gets the task state with the rest (PROTOCOL §10).
    fault = { type: 'replica-crash', replica: pick(rng, ['r1', 'r2', 'r3']), atMs: between(rng, 50, 800) };
  }
  const loss = rng.next() < 0.3 ? rng.next() * 0.02 : 0;
  if (seed % A21_SEED_EVERY === A21_SEED_OFFSET) {
    // Drawn from a stream of its own, after the others: the rest of the plan stays as drawn.
    const a21 = streamFor(seed, 'a21');
    const replicas = ['r1', 'r2', 'r3'];
    const spared = Math.floor(a21.next() * replicas.length);
    const crashed = replicas.filter((_, i) => i !== spared) as [ProcessId, ProcessId];
    fault = { type: 'replicas-crash', replicas: crashed, atMs: between(a21, A21_CRASH_MIN_MS, A21_CRASH_MAX_MS) };
  }
  return { seed, tasks, fault, loss };
}

/** The faults a task plan injects, for the simulator's coverage summary. */
export function taskFaultLabels(p: TaskPlan): string[] {
  const out = p.fault.type === 'none' ? [] : [`fault task ${p.fault.type}`];
  if (p.loss > 0) out.push('fault network loss');
  for (const kind of new Set(p.tasks.map((t) => t.kind))) out.push(`workload ${kind}`);
  for (const kind of new Set(p.tasks.flatMap((t) => (t.appFault === null ? [] : [t.appFault.kind])))) out.push(`fault app ${kind}`);
  return out;
}

export function describeTaskPlan(p: TaskPlan): string {
  const tasks = p.tasks.map((t) => `${t.kind}×${t.size}@${t.atMs}${t.appFault === null ? '' : ` (vpid ${t.appFault.vpid} ${t.appFault.kind})`}`).join(' ');
  return `tasks [${tasks}] fault ${JSON.stringify(p.fault)} loss ${p.loss.toFixed(3)}`;
}

export type TaskSeedResult = {
  seed: number;
  plan: TaskPlan;
  violations: Violation[];
  simulatedMs: number;
  accepted: number;
  stats: TaskSim['stats'];
  /** What the run reached (InvariantChecker.reached). */
  reached: ReadonlyMap<string, number>;
  /** The digest of its whole trace, when asked for (src/sim/trace-digest.ts). */
  traceDigest?: string;
};

export function runTaskSeed(seed: number, opts: { agents: number; cores: CoreFactories; digest?: boolean; inspect?: (sim: TaskSim) => void }): TaskSeedResult {
  const agentIds = Array.from({ length: opts.agents }, (_, i) => `a${i + 1}`);
  const plan = taskPlanFor(seed, agentIds);
  const sim = new TaskSim({
    seed, agents: opts.agents, cores: opts.cores, crypto: 'keyed', link: DEFAULT_LINK,
    networkFaults: { loss: plan.loss, duplicate: plan.loss / 2, corrupt: 0, spike: 0, spikeMaxMs: 0 },
    ...(opts.digest === true ? { digest: true } : {}),
  });
  const w = sim.world;
  const s = w.scheduler;
  w.network.setFaultWindow(true);
  w.start();
  const rng = streamFor(seed, 'workload');
  // Linked processes chatter: at each broadcast they may ask for another broadcast or a SYNC,
  // so requests race within epochs (t.atomic-broadcast checks what every process received).
  const apps = streamFor(seed, 'apps');
  const sent = new Map<SimApp, number>();
  /** Byzantine members by task id (TaskPlanItem.appFault), once their task was accepted. */
  const faultyApps = new Map<string, AppFault>();
  sim.appBehaviour = (app, sig) => {
    const fault = faultyApps.get(app.task);
    if (fault !== undefined && fault.vpid === app.vpid) return misbehave(app, sig, fault);
    if (sig.dest !== GSIG_BROADCAST || (sent.get(app) ?? 0) >= MAX_APP_REQUESTS) return;
    const r = apps.next();
    if (r < 0.35) {
      sent.set(app, (sent.get(app) ?? 0) + 1);
      sim.appSend(app, 100 + (app.vpid % 10), GSIG_BROADCAST, Math.floor(apps.next() * 1000));
    } else if (r < 0.5) {
      sent.set(app, (sent.get(app) ?? 0) + 1);
      sim.appSend(app, GSIG.REQ_SYNC, GSIG_CM, app.epoch % 2);
    }
  };
  const faults = streamFor(seed, 'app-fault-moves');
  const flooded = new Set<SimApp>();
  function misbehave(app: SimApp, sig: SimApp['received'][number], fault: AppFault): void {
    if (sig.dest !== GSIG_BROADCAST && sig.dest !== GSIG_CM) return;
    switch (fault.kind) {
      case 'stale':
        // Requests of epochs already over: each would be a vote if the manager took it.
        for (let e = Math.max(0, app.epoch - 2); e < app.epoch; e++) {
          sim.appSend(app, GSIG.REQ_SYNC, GSIG_CM, 1, e);
          sim.appSend(app, 100, GSIG_BROADCAST, 7, e);
        }
        if (faults.next() < 0.3) sim.appSend(app, GSIG.REQ_SYNC, GSIG_CM, 1, app.epoch + 3);
        return;
      case 'disagree':
        if ((sent.get(app) ?? 0) >= MAX_APP_REQUESTS) return;
        sent.set(app, (sent.get(app) ?? 0) + 1);
        sim.appSend(app, GSIG.REQ_SYNC, GSIG_CM, 2 + Math.floor(faults.next() * 1000));
        return;
      case 'flood':
        if (flooded.has(app)) return;
        flooded.add(app);
        for (let i = 0; i < FLOOD_REQUESTS; i++) sim.appSend(app, 100 + (i % 10), GSIG_BROADCAST, i);
        return;
    }
  }
  // Tasks the operator means to kill, by nonce, with the cluster resets before its last kill: a
  // task restored after a reset runs again and is killed again (its old kill may have been
  // ordered before the restore, or by the old group while the task was still terminating).
  const toKill = new Map<string, number>();
  plan.tasks.forEach((t, i) => {
    s.at(t.atMs, () => {
      const file = t.kind === 'missing' ? 'sim-missing' : t.kind === 'forever-killed' ? 'sim-forever' : t.kind === 'stubborn-killed' ? 'sim-stubborn'
        : t.kind === 'linked-chatter' ? 'sim-linked' : 'sim-work';
      const args = t.kind === 'work' ? [String(t.durationMs), '0'] : t.kind === 'exit-3' ? [String(t.durationMs), '3'] : [];
      const nonce = sim.submit({ name: `${t.kind}-${i}`, size: t.size, file, args }, (ok, text) => {
        if (ok && (t.kind === 'forever-killed' || t.kind === 'stubborn-killed' || t.kind === 'linked-chatter')) {
          s.at(t.killAtMs, () => {
            toKill.set(nonce, w.resets);
            sim.kill(text);
          });
        }
        if (ok && t.appFault !== null) faultyApps.set(text, t.appFault);
        if (ok && t.kind === 'linked-chatter') {
          // Once its processes run, each asks for one broadcast: the chatter starts. In half the
          // tasks they first all ask for a quorum below the task's size, so that SYNCs asked by
          // only some of them can be performed (t.group-request then judges them).
          const quorum = apps.next() < 0.5 ? 1 + Math.floor(apps.next() * t.size) : null;
          s.at(t.atMs + 150, () => {
            for (const a of sim.apps.values()) {
              if (a.task !== text) continue;
              if (quorum !== null) sim.appSend(a, GSIG.REQ_SETQUORUM, GSIG_CM, quorum);
              sim.appSend(a, 100 + (a.vpid % 10), GSIG_BROADCAST, a.vpid);
            }
          });
        }
      });
    });
  });
  const f = plan.fault;
  switch (f.type) {
    case 'none':
      break;
    case 'process-crash':
      for (const at of f.atMs) s.at(at, () => sim.crashProcess((n) => Math.floor(rng.next() * n)));
      break;
    case 'agent-death':
      s.at(f.atMs, () => sim.agentDeath(f.agent, f.restartAfterMs));
      break;
    case 'power-off':
      s.at(f.atMs, () => sim.powerOff(f.agent));
      break;
    case 'partition':
      sim.partition(f.agent, f.fromMs, f.untilMs);
      break;
    case 'replica-crash':
      s.at(f.atMs, () => w.crash(f.replica));
      break;
    case 'replicas-crash': {
      s.at(f.atMs, () => sim.crashReplicas(f.replicas));
      const again = (): void => {
        for (const [nonce, resets] of toKill) {
          if (resets === w.resets) continue;
          const id = sim.liveTaskId(nonce);
          if (id === null) continue;
          toKill.set(nonce, w.resets);
          sim.kill(id);
        }
        s.after(TASK_POLL_MS, again);
      };
      s.after(TASK_POLL_MS, again);
      break;
    }
  }
  s.at(TASK_FAULT_END_MS, () => w.network.setFaultWindow(false));
  w.runUntil(TASK_FAULT_END_MS);
  let t = TASK_FAULT_END_MS;
  // Settled: every task finished and nothing runs, the group layer owes nothing (every
  // replica executed every RSN the others did), and a crashed replica has been replaced.
  const replaced = (): boolean => f.type !== 'replica-crash' || condemned(w, f.replica);
  // A21: the cluster was reset, the watchdog restored every journalled task, and t.restored's
  // deadline has passed (its check ran).
  const restored = (): boolean => {
    if (f.type !== 'replicas-crash') return true;
    const last = sim.clusterResets[sim.clusterResets.length - 1];
    return last !== undefined && w.now > last.atMs + RESTORE_BOUND_MS && sim.watchdogStatus().restoresPending.length === 0;
  };
  while (t < TASK_HARD_END_MS && w.checker.violations.length === 0 && !(sim.settled() && replaced() && restored() && w.checker.missing(1).length === 0)) {
    t += TASK_POLL_MS;
    w.runUntil(t);
  }
  if (f.type === 'replica-crash') w.checker.reach('inv g.recovered');
  if (w.checker.violations.length === 0 && !replaced()) w.checker.fail('g.recovered', `crashed replica ${f.type === 'replica-crash' ? f.replica : ''} is still a member at ${w.now} ms`);
  if (w.checker.violations.length === 0 && f.type === 'replicas-crash' && sim.clusterResets.length === 0) {
    w.checker.fail('g.cluster-reset', `${f.replicas.join(' and ')} crashed at ${f.atMs} ms, but the watchdog had not reset the cluster at ${w.now} ms`);
  }
  sim.finish(true);
  w.checker.finish({ livenessExpected: true, digests: w.digests() });
  opts.inspect?.(sim);
  return {
    seed, plan, violations: w.checker.violations, simulatedMs: w.now, accepted: sim.accepted.size, stats: sim.stats, reached: w.checker.reached,
    ...(opts.digest === true ? { traceDigest: w.traceDigest() ?? '' } : {}),
  };
}
