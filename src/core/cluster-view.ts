// The manager's task and process state as others read it (DESIGN.md §3; docs/PROTOCOL.md §8,
// §9.5): its canonical plain tree, which the state digest and state transfer carry, and the
// cluster view `trine ps` shows.
import { encodeData } from '../../fsm/plain-data.ts';
import { rankHeld, rankTable } from './cluster-rollback.ts';
import { MAX_VIEW_TASK_CHARS } from './constants.ts';
import { encodeTaskSignals } from './task-signals.ts';
import { byNumber, isLive, procCtx, procState, sortedProcs, taskCtx, taskState, usedSlots, type ClusterState, type NodeRecord, type TaskRecord } from './cluster-state.ts';
import { toHex } from '../base/hex.ts';
import type { ProcessId } from './ports.ts';
import { dgrpOption, recovery } from './wire/messages.ts';
import { isStraggler, progressOf, stragglerPart } from './straggler.ts';
import { dgrpState, isRecommended } from './dgrp.ts';
import type { ClusterView, NodeView, ProcView, TaskView } from './status.ts';

/** Canonical plain tree (DESIGN.md §3): fixed field order, Maps sorted by key; the machines'
 *  data in its array form (fsm/plain-data.ts encodeData: a plain object would be a msgpack
 *  map, which the strict decoder refuses, so state transfer could not read it back). The task's
 *  `number` is not encoded: it is the digits of its id. */
export function encodeCluster(cs: ClusterState): unknown {
  return [
    cs.tick, cs.nextTask,
    [...cs.tasks.values()].sort(byNumber).map((r) => [
      r.id, r.name, r.size, r.file, r.args, r.cwd, r.env, r.submittedRsn, encodeData(r.fsm),
      sortedProcs(r).map(([vpid, d]) => [vpid, encodeData(d)]), [...r.reserved].sort((a, b) => a[0] - b[0]), r.waitReason, r.outcome, r.reason,
      r.mode, encodeTaskSignals(r.signals), [...r.endpoints].sort((a, b) => a[0] - b[0]),
      [r.sigStats.broadcasts, r.sigStats.pointToPoint, r.sigStats.groupRequests, r.sigStats.dropped],
      r.submit === null ? null : [r.submit.nonce, r.submit.bytes, r.submit.sig],
      // Part of the digest like the rest of the request (hex: the tree stays plain data); never
      // in clusterView (PROTOCOL §9.5).
      toHex(r.taskKey),
      // The option as the request carried it, and a rollback task's ranks (PROTOCOL §11.2).
      recovery.enc(r.recovery), rankTable.enc(r.rollback),
      // A DGRP task's option and group (PROTOCOL §12).
      dgrpOption.enc(r.dgrp), dgrpState.enc(r.dgrpState),
      // A straggler policy and its progress and flags (PROTOCOL §13).
      stragglerPart.enc(r),
      r.maxSpawns,
      [...r.spawnTicks].sort((a, b) => a[0] - b[0]),
    ]),
    cs.finished,
    cs.allocations.map((a) => [a.task, a.vpids]),
    cs.serviceQueue.map((s) => [s.task, s.service]),
    cs.serviceActive === null ? null : [cs.serviceActive.task, cs.serviceActive.service],
  ];
}

/** A linked process that has not connected this long after its start was commanded is shown as
 *  not linked yet, with the likely mistake and its fix (issue 19): a Node program that links
 *  does so in well under a second unloaded; a plain program never does, and its start fails
 *  only at the connect timeout (DEFAULT_TIMING.connectTimeoutMs). */
export const LINK_HINT_MS = 1000;

/** What `trine ps` shows of a linked process still spawning after LINK_HINT_MS. */
export const notLinkedYet = (ms: number): string =>
  `not linked after ${(ms / 1000).toFixed(1)} s: a --linked task's program must call link() from trine/app; a plain program is submitted without --linked`;

/** `tickMs`: the task clock's period (Timing.taskTickMs), to tell how long a start has taken. */
export function clusterView(cs: ClusterState, nodes: Map<ProcessId, NodeRecord>, tickMs = 0): Omit<ClusterView, 'events'> {
  const used = usedSlots(cs);
  const nodeViews: NodeView[] = [...nodes].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([agent, n]) => ({
    agent, node: n.node, slots: n.slots, used: used.get(n.node) ?? 0,
    state: n.failed ? 'failed' : n.draining ? 'draining' : n.joined ? 'up' : 'joining', inc: n.inc,
  }));
  const all = [...cs.tasks.values()].sort(byNumber);
  const toView = (r: TaskRecord): TaskView => {
    const c = taskCtx(r);
    /** How long since `vpid`'s spawn was commanded, when it says it is not linked yet. */
    const linkHint = (vpid: number): string | null => {
      const since = r.spawnTicks.get(vpid);
      const ms = since === undefined ? 0 : (cs.tick - since) * tickMs;
      return r.mode === 'linked' && tickMs > 0 && ms >= LINK_HINT_MS ? notLinkedYet(ms) : null;
    };
    const procs: ProcView[] = sortedProcs(r).map(([vpid, d]) => {
      const p = procCtx(d);
      const state = procState(d);
      return {
        vpid, node: p.node, pid: p.pid, state, exitCode: p.exitCode, signal: p.signal,
        reason: p.reason ?? (state === 'spawning' ? linkHint(vpid) : null),
        endpoint: r.endpoints.get(vpid) ?? null, rank: rankHeld(r, vpid),
        progress: progressOf(r.stragglerState, vpid), straggler: isStraggler(r.stragglerState, vpid),
        recommended: r.dgrpState === null || procState(d) !== 'running' ? null : isRecommended(r.dgrpState, vpid),
      };
    });
    return {
      id: r.id, name: r.name, size: r.size, state: taskState(r), command: [r.file, ...r.args], cwd: r.cwd,
      submittedRsn: r.submittedRsn, startAttempts: c.startCount, restarted: c.restarted, waitReason: r.waitReason,
      outcome: r.outcome, reason: r.reason, failure: c.failure, mode: r.mode, epoch: r.signals.epoch,
      quorum: r.signals.quorum, signals: { ...r.sigStats }, procs,
    };
  };
  const tasks = all.filter(isLive).map(toView);
  // Finished tasks, newest first, while the view fits the status reply (MAX_VIEW_TASK_CHARS):
  // a status reply over the wire limit would reach no operator at all. The size counts only
  // replicated data, so every replica trims the same tasks.
  let chars = JSON.stringify(tasks).length;
  const finished: TaskView[] = [];
  let omittedTasks = 0;
  for (const r of all.filter((x) => !isLive(x)).reverse()) {
    const v = toView(r);
    const size = JSON.stringify(v).length + 1;
    if (omittedTasks > 0 || chars + size > MAX_VIEW_TASK_CHARS) {
      omittedTasks++;
      continue;
    }
    chars += size;
    finished.push(v);
  }
  return { tick: cs.tick, nodes: nodeViews, tasks: [...tasks, ...finished.reverse()], omittedTasks };
}
