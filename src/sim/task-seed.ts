// One task seed end to end (issue 3): draw a workload of tasks and a fault from the seed, run
// them on a simulated cluster (src/sim/tasks.ts), heal, run until every accepted task has
// finished (or the hard end), then check the task invariants and the group layer's. Pure
// function of (seed, options): the same seed replays exactly (`npm run sim -- --tasks --seed S`).
import type { ProcessId } from '../core/ports.ts';
import type { Violation } from './invariants.ts';
import { DEFAULT_LINK } from './world.ts';
import { streamFor, type SeededRandom } from './random.ts';
import type { CoreFactories } from './world.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../core/signals.ts';
import { TaskSim, type SimApp } from './tasks.ts';
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
export type TaskPlanItem = { atMs: number; kind: TaskKind; size: number; durationMs: number; killAtMs: number };
export type TaskFault =
  | { type: 'none' }
  | { type: 'process-crash'; atMs: number[] }
  | { type: 'agent-death'; agent: ProcessId; atMs: number; restartAfterMs: number }
  | { type: 'power-off'; agent: ProcessId; atMs: number }
  | { type: 'partition'; agent: ProcessId; fromMs: number; untilMs: number }
  | { type: 'replica-crash'; replica: ProcessId; atMs: number };

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
    tasks.push({ atMs, kind, size: between(rng, 1, MAX_TASK_SIZE), durationMs: between(rng, 20, 400), killAtMs: atMs + between(rng, 50, 700) });
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
  return { seed, tasks, fault, loss: rng.next() < 0.3 ? rng.next() * 0.02 : 0 };
}

export function describeTaskPlan(p: TaskPlan): string {
  const tasks = p.tasks.map((t) => `${t.kind}×${t.size}@${t.atMs}`).join(' ');
  return `tasks [${tasks}] fault ${JSON.stringify(p.fault)} loss ${p.loss.toFixed(3)}`;
}

export type TaskSeedResult = {
  seed: number;
  plan: TaskPlan;
  violations: Violation[];
  simulatedMs: number;
  accepted: number;
  stats: TaskSim['stats'];
};

export function runTaskSeed(seed: number, opts: { agents: number; cores: CoreFactories; inspect?: (sim: TaskSim) => void }): TaskSeedResult {
  const agentIds = Array.from({ length: opts.agents }, (_, i) => `a${i + 1}`);
  const plan = taskPlanFor(seed, agentIds);
  const sim = new TaskSim({
    seed, agents: opts.agents, cores: opts.cores, crypto: 'keyed', link: DEFAULT_LINK,
    networkFaults: { loss: plan.loss, duplicate: plan.loss / 2, corrupt: 0, spike: 0, spikeMaxMs: 0 },
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
  sim.appBehaviour = (app, sig) => {
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
  plan.tasks.forEach((t, i) => {
    s.at(t.atMs, () => {
      const file = t.kind === 'missing' ? 'sim-missing' : t.kind === 'forever-killed' ? 'sim-forever' : t.kind === 'stubborn-killed' ? 'sim-stubborn'
        : t.kind === 'linked-chatter' ? 'sim-linked' : 'sim-work';
      const args = t.kind === 'work' ? [String(t.durationMs), '0'] : t.kind === 'exit-3' ? [String(t.durationMs), '3'] : [];
      sim.submit({ name: `${t.kind}-${i}`, size: t.size, file, args }, (ok, text) => {
        if (ok && (t.kind === 'forever-killed' || t.kind === 'stubborn-killed' || t.kind === 'linked-chatter')) s.at(t.killAtMs, () => sim.kill(text));
        if (ok && t.kind === 'linked-chatter') {
          // Once its processes run, each asks for one broadcast: the chatter starts.
          s.at(t.atMs + 150, () => {
            for (const a of sim.apps.values()) if (a.task === text) sim.appSend(a, 100 + (a.vpid % 10), GSIG_BROADCAST, a.vpid);
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
      w.network.addPartition({ fromMs: f.fromMs, untilMs: f.untilMs, isolated: [f.agent] });
      break;
    case 'replica-crash':
      s.at(f.atMs, () => w.crash(f.replica));
      break;
  }
  s.at(TASK_FAULT_END_MS, () => w.network.setFaultWindow(false));
  w.runUntil(TASK_FAULT_END_MS);
  let t = TASK_FAULT_END_MS;
  // Settled: every task finished and nothing runs, the group layer owes nothing (every
  // replica executed every RSN the others did), and a crashed replica has been replaced.
  const replaced = (): boolean => f.type !== 'replica-crash' || condemned(w, f.replica);
  while (t < TASK_HARD_END_MS && w.checker.violations.length === 0 && !(sim.settled() && replaced() && w.checker.missing(1).length === 0)) {
    t += TASK_POLL_MS;
    w.runUntil(t);
  }
  if (w.checker.violations.length === 0 && !replaced()) w.checker.fail('g.recovered', `crashed replica ${f.type === 'replica-crash' ? f.replica : ''} is still a member at ${w.now} ms`);
  sim.finish(true);
  w.checker.finish({ livenessExpected: true, digests: w.digests() });
  opts.inspect?.(sim);
  return { seed, plan, violations: w.checker.violations, simulatedMs: w.now, accepted: sim.accepted.size, stats: sim.stats };
}
