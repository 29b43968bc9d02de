// A manager's replicated task and process state driven directly, for the unit rows of
// src/core/cluster-inputs.ts and the cluster-* modules behind it (cluster-inputs.test.ts,
// cluster-inputs-slips.test.ts): a fake node table, synthetic agent reports, ordered ticks, and
// readers of what an agent, an operator or a replica comparing digests observes.
import { nodeFailed, nodeJoined, operateTask, procReports, signalRequest, submitTask, tick } from '../../../src/core/cluster-inputs.ts';
import { createClusterState, type ClusterState, type NodeRecord, type TaskEffect, type TaskTimers } from '../../../src/core/cluster-state.ts';
import { clusterView, encodeCluster } from '../../../src/core/cluster-view.ts';
import { GSIG_BROADCAST, GSIG_CM } from '../../../src/core/signals.ts';
import type { TaskView } from '../../../src/core/status.ts';
import type { GroupCommand, ProcReport, ProcSpawn, TaskSubmit } from '../../../src/core/wire/messages.ts';

export const TIMERS: TaskTimers = { startTimeoutTicks: 3, terminateTimeoutTicks: 2, maxStartAttempts: 3, maxTerminateAttempts: 2, groupRequestTimeoutTicks: 4, replicaStartTimeoutTicks: 300 };

export type Cmd = { agent: string; command: GroupCommand };

/** A manager's cluster state with agents a1…aN on nodes n1…nN, and what its last input did. */
export class Cluster {
  cs: ClusterState = createClusterState();
  nodes = new Map<string, NodeRecord>();
  effects: TaskEffect[] = [];
  rsn = 0;
  constructor(count: number, slots = 1, joined = count) {
    for (let i = 1; i <= count; i++) {
      this.nodes.set(`a${i}`, { node: `n${i}`, joined: i <= joined, slots: i <= joined ? slots : 0, failed: false, draining: false, inc: 1, protector: '' });
    }
  }
  submit(size: number, extra: Partial<TaskSubmit> = {}): { ok: boolean; text: string } {
    const req: TaskSubmit = {
      type: 'task.submit', nonce: '0'.repeat(32), name: 'job', size, file: '/bin/sleep', args: ['1'], cwd: '/tmp',
      env: [['A', '1'], ['B', '2']], mode: 'plain', taskKey: new Uint8Array(32).fill(7), recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, ...extra,
    };
    const r = submitTask(this.cs, this.nodes, TIMERS, req, ++this.rsn);
    this.effects = r.effects;
    return r.outcome;
  }
  kill(task: string, what: 'kill' | 'restart' = 'kill'): { ok: boolean; text: string } {
    const r = operateTask(this.cs, this.nodes, TIMERS, task, what);
    this.effects = r.effects;
    return r.outcome;
  }
  /** A report from `agent` (by default the agent of the process's node). */
  report(task: string, vpid: number, kind: ProcReport['kind'], extra: Partial<ProcReport> & { agent?: string } = {}): TaskEffect[] {
    const { agent, ...fields } = extra;
    const from = agent ?? this.agentOf(this.proc(task, vpid).node ?? '');
    const r: ProcReport = { task, vpid, kind, pid: 0, exitCode: null, signal: null, reason: '', endpoint: '', ...fields };
    this.effects = procReports(this.cs, this.nodes, TIMERS, from, [r]);
    return this.effects;
  }
  /** Reports for every member of `task` in turn; returns every effect. */
  reportAll(task: string, kind: ProcReport['kind'], extra: (vpid: number) => Partial<ProcReport> = () => ({})): TaskEffect[] {
    const all: TaskEffect[] = [];
    for (const p of this.task(task).procs) all.push(...this.report(task, p.vpid, kind, extra(p.vpid)));
    this.effects = all;
    return all;
  }
  tick(n = 1): TaskEffect[] {
    const all: TaskEffect[] = [];
    for (let i = 0; i < n; i++) all.push(...tick(this.cs, this.nodes, TIMERS));
    this.effects = all;
    return all;
  }
  fail(agent: string): TaskEffect[] {
    const rec = this.nodes.get(agent) as NodeRecord;
    this.nodes.set(agent, { ...rec, failed: true });
    this.effects = nodeFailed(this.cs, this.nodes, TIMERS, agent);
    return this.effects;
  }
  join(agent: string, slots: number) {
    const rec = this.nodes.get(agent) as NodeRecord;
    this.nodes.set(agent, { ...rec, joined: true, failed: false, slots, inc: rec.inc + 1 });
    const r = nodeJoined(this.cs, this.nodes, TIMERS, agent);
    this.effects = r.effects;
    return r.adopt;
  }
  agentOf(node: string): string {
    return [...this.nodes].find(([, n]) => n.node === node)?.[0] ?? 'a?';
  }
  view() {
    return clusterView(this.cs, this.nodes);
  }
  task(id: string): TaskView {
    const t = this.view().tasks.find((x) => x.id === id);
    if (t === undefined) throw new Error(`no ${id} in view`);
    return t;
  }
  proc(task: string, vpid: number) {
    const p = this.task(task).procs.find((x) => x.vpid === vpid);
    if (p === undefined) throw new Error(`no ${task}/${vpid}`);
    return p;
  }
  commands(effects = this.effects): Cmd[] {
    return effects.flatMap((e) => (e.type === 'command' ? [{ agent: e.agent, command: e.command }] : []));
  }
  spawns(effects = this.effects): (ProcSpawn & { agent: string })[] {
    return this.commands(effects).flatMap((c) => (c.command.type === 'proc.spawn' ? [{ ...c.command, agent: c.agent }] : []));
  }
  terminates(effects = this.effects): string[] {
    return this.commands(effects).flatMap((c) => (c.command.type === 'proc.terminate' ? [`${c.agent}:${c.command.task}/${c.command.vpid}`] : []));
  }
  events(effects = this.effects): string[] {
    return effects.flatMap((e) => (e.type === 'event' ? [e.text] : []));
  }
  digest(): string {
    return JSON.stringify(encodeCluster(this.cs));
  }
  /** Every member spawns (pid 100+vpid) and, unless `stay`, the task is then running. */
  start(task: string): void {
    this.reportAll(task, 'spawnSucceeded', (v) => ({ pid: 100 + v }));
  }
  /** Every member of a linked task connects, announcing endpoint h:<vpid>. */
  startLinked(task: string): TaskEffect[] {
    return this.reportAll(task, 'spawnSucceeded', (v) => ({ pid: 100 + v, endpoint: `h:${v}` }));
  }
  /** A signal from `task`/`vpid`, sent by its node's agent unless `agent`; the epoch is the task's current one unless given. */
  signal(task: string, vpid: number, signum: number, dest: number, arg = 0, extra: { epoch?: number; agent?: string } = {}): TaskEffect[] {
    const from = extra.agent ?? this.agentOf(this.proc(task, vpid).node ?? '');
    const epoch = extra.epoch ?? this.task(task).epoch;
    this.effects = signalRequest(this.cs, this.nodes, TIMERS, from, { task, vpid, signum, dest, arg, epoch });
    return this.effects;
  }
  /** Group request `signum(arg)` from each of `vpids` in turn; returns every effect. */
  ask(task: string, vpids: number[], signum: number, arg = 0): TaskEffect[] {
    const all = vpids.flatMap((v) => this.signal(task, v, signum, GSIG_CM, arg));
    this.effects = all;
    return all;
  }
  /** proc.signal commands as `agent vpids signum src→dest arg @epoch`, plus node/data when set. */
  sigs(effects = this.effects): string[] {
    const addr = (a: number) => (a === GSIG_CM ? 'CM' : a === GSIG_BROADCAST ? 'ALL' : `${a}`);
    return this.commands(effects).flatMap((c) => (c.command.type === 'proc.signal'
      ? [`${c.agent} [${c.command.vpids.join(',')}] ${c.command.signum} ${addr(c.command.src)}→${addr(c.command.dest)} ${c.command.arg} @${c.command.epoch}${c.command.node === '' && c.command.data === '' ? '' : ` ${c.command.node} ${c.command.data}`}`]
      : []));
  }
  mappings(effects = this.effects) {
    return this.commands(effects).flatMap((c) => (c.command.type === 'proc.mapping' ? [{ ...c.command, agent: c.agent }] : []));
  }
}

/** Cluster `nodes` × 1 slot with linked task t1 of `size` connected and Running. */
export function linkedRunning(size: number, nodes = size): Cluster {
  const c = new Cluster(nodes);
  c.submit(size, { mode: 'linked' });
  c.startLinked('t1');
  return c;
}
