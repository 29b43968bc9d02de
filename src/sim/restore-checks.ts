// What the simulator checks of a cluster reset and the task restore after it (spec §1.6, §9.2
// A21; PROTOCOL §10.9), as pure reads of the world: which tasks the journals held, which tasks
// each replica holds by their submit's nonce (the one name of a task that survives a reset: a
// restored task keeps its id only if the fresh group has not given it away), and t.restored's
// fresh-group part. src/sim/tasks.ts carries out the reset and calls these.
import type { ProcessId } from '../core/ports.ts';
import type { ReplicatedState } from '../core/replicated-state.ts';
import { decodeJournal } from '../core/task-journal.ts';
import type { WatchdogStatus } from '../core/watchdog-state.ts';
import type { World } from './world.ts';

/** A task as a replica holds it, found by its submit's nonce. */
export type HeldTask = { id: string; outcome: 'normal' | 'abnormal' | null; restarted: boolean };

/** One cluster reset the watchdog ordered, as the simulator carried it out. */
export type ClusterResetRun = {
  atMs: number;
  reason: string;
  /** Replicas of the group that had failed when it was ordered (g.cluster-reset). */
  failed: ProcessId[];
  /** Replicas whose journal the watchdog read, and every nonce the journals held (→ old id). */
  journals: ProcessId[];
  held: Map<string, string>;
  /** Accepted tasks the fresh group owes (t.restored): nonce → id in the old group. */
  owed: Map<string, string>;
};

/** Every entry of the journals, nonce → task id, whatever its signature (the watchdog checks
 *  those; a journal that does not decode holds nothing). */
export function journalledTasks(journals: readonly { data: Uint8Array }[]): Map<string, string> {
  const held = new Map<string, string>();
  for (const { data } of journals) {
    const j = decodeJournal(data);
    if (j.ok) for (const e of j.value.tasks) if (!held.has(e.nonce)) held.set(e.nonce, e.task);
  }
  return held;
}

/** Correct replicas up, serving and members of their own group. */
export function servingReplicas(world: World): ProcessId[] {
  return world.liveReplicas().filter((id) => {
    const r = world.replica(id);
    if (r === null || r.state === undefined || r.phase() !== 'serving' || !world.checker.isCorrect(id)) return false;
    return r.state().replicas.includes(id);
  });
}

/** The tasks replica `rid` holds, by their submit's nonce: id, outcome, FsmTask's restarted flag. */
export function tasksByNonce(world: World, rid: ProcessId): Map<string, HeldTask> {
  const out = new Map<string, HeldTask>();
  const r = world.replica(rid);
  if (r === null || r.state === undefined) return out;
  for (const rec of (r.state() as ReplicatedState).cluster.tasks.values()) {
    if (rec.submit === null) continue;
    const restarted = (rec.fsm.context as { restarted?: boolean }).restarted === true;
    out.set(rec.submit.nonce, { id: rec.id, outcome: rec.outcome, restarted });
  }
  return out;
}

/** t.restored, the fresh group's part, `boundMs` after the reset: the watchdog restores nothing
 *  any more, two replicas or more serve, and each holds every owed task with the restarted flag;
 *  and nothing is invented (checkNotInvented). */
export function checkRestored(world: World, run: ClusterResetRun, watchdog: WatchdogStatus, submitted: ReadonlySet<string>, boundMs: number): void {
  const fail = (m: string): void => world.checker.fail('t.restored', m);
  world.checker.setTime(world.now);
  const pending = watchdog.restoresPending;
  if (pending.length > 0) fail(`${boundMs} ms after the cluster reset the watchdog still restores ${pending.map((p) => p.task).join(', ')}`);
  const serving = servingReplicas(world);
  if (serving.length < 2) fail(`${boundMs} ms after the cluster reset only ${serving.length} replica(s) serve`);
  for (const rid of serving) {
    const held = tasksByNonce(world, rid);
    for (const [nonce, oldId] of run.owed) {
      const t = held.get(nonce);
      if (t === undefined) fail(`task ${oldId} was accepted and live at the cluster reset, but ${rid} does not hold it ${boundMs} ms after`);
      else if (!t.restarted) fail(`task ${oldId} is ${t.id} at ${rid} after the cluster reset, without the restarted flag`);
    }
  }
  checkNotInvented(world, run, submitted);
}

/** The group after reset `run` holds only tasks restored from its journals (restarted flag set)
 *  and tasks an operator submitted (`submitted`: their nonces). */
export function checkNotInvented(world: World, run: ClusterResetRun, submitted: ReadonlySet<string>): void {
  for (const rid of servingReplicas(world)) {
    for (const [nonce, t] of tasksByNonce(world, rid)) {
      if (t.restarted && !run.held.has(nonce)) world.checker.fail('t.restored', `${rid} restored task ${t.id}, which no journal held at the cluster reset`);
      if (!t.restarted && !submitted.has(nonce)) world.checker.fail('t.restored', `${rid} holds task ${t.id}, which no operator submitted`);
    }
  }
}
