// Views, tasks and replica answers for the CLI's pure tests (cli/op-client.ts, cli/task-report.ts).
import type { ClusterView, NodeView, ProcView, TaskView } from '../../../src/core/status.ts';
import type { ViewAnswer } from '../../../cli/replies.ts';

export const proc = (vpid: number, over: Partial<ProcView> = {}): ProcView => ({
  vpid, node: `n${vpid + 1}`, pid: 1000 + vpid, state: 'running', exitCode: null, signal: null, reason: null, endpoint: null, rank: null, progress: null, straggler: false, recommended: null, ...over,
});

export const task = (id: string, over: Partial<TaskView> = {}): TaskView => ({
  id, name: 'sleep', size: 2, state: 'running', command: ['sleep', '10'], cwd: '/tmp', submittedRsn: 5, startAttempts: 1,
  restarted: false, waitReason: null, outcome: null, reason: null, failure: null, procs: [proc(0), proc(1)], mode: 'plain', epoch: 0, quorum: 2,
  signals: { broadcasts: 0, pointToPoint: 0, groupRequests: 0, dropped: 0 }, ...over,
});

export const node = (n: number, over: Partial<NodeView> = {}): NodeView => ({
  agent: `a${n}`, node: `n${n}`, slots: 4, used: 0, state: 'up', inc: 1_700_000_000_000 + n, ...over,
});

export const view = (over: Partial<ClusterView> = {}): ClusterView => ({
  tick: 3, nodes: [node(1), node(2)], tasks: [task('t1')], omittedTasks: 0, events: [{ atMs: 0, rsn: 5, task: 't1', vpid: null, text: 't1 submitted: 2 × sleep' }], ...over,
});

export const answer = (id: string, rsn: number, over: Partial<ViewAnswer> = {}): ViewAnswer => ({
  id, role: id === 'r1' ? 'primary' : 'backup', primary: 'r1', rsn, digest: `d${rsn}`, view: view(), ...over,
});
