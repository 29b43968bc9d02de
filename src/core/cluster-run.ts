// One input's run over the cluster state (docs/PROTOCOL.md §8): a FIFO work queue of
// (machine, event) that the machines' actions append to, so an action that feeds an event to
// another machine (or the same one) never recurses and every action runs in the order its
// machine returned it; the effects and journal events the input gives; and the agent that
// speaks for a node. cluster-machines.ts drains it.
import type { FsmProcEvent } from '../../fsm/fsm-proc.ts';
import type { FsmTaskEvent } from '../../fsm/fsm-task-types.ts';
import type { ClusterState, NodeRecord, TaskEffect, TaskRecord } from './cluster-state.ts';
import { eventEffect, procNode } from './cluster-state.ts';
import type { ProcessId } from './ports.ts';
import type { EventTag } from './status.ts';
import type { GroupCommand } from './wire/messages.ts';

export type WorkItem =
  | { kind: 'task'; task: string; event: FsmTaskEvent }
  | { kind: 'proc'; task: string; vpid: number; event: FsmProcEvent }
  /** Feed the procs.* aggregates of a task (FsmTask header contract), computed when reached. */
  | { kind: 'aggregate'; task: string };

export type Run = {
  cs: ClusterState;
  nodes: Map<ProcessId, NodeRecord>;
  queue: WorkItem[];
  effects: TaskEffect[];
  /** Tasks with an aggregate item still queued: one pending evaluation covers every change. */
  aggregatePending: Set<string>;
};

export const newRun = (cs: ClusterState, nodes: Map<ProcessId, NodeRecord>): Run =>
  ({ cs, nodes, queue: [], effects: [], aggregatePending: new Set() });

/** Journal `text` about `task`/`vpid`; `tag` says what kind of fact it is (status.ts EventKind). */
export function note(run: Run, task: string | null, vpid: number | null, text: string, tag?: EventTag): void {
  run.effects.push(eventEffect(task, vpid, text, tag));
}

export function agentOf(run: Run, node: string): ProcessId | null {
  for (const [agent, rec] of run.nodes) if (rec.node === node) return agent;
  return null;
}

/** Commands for the processes `vpids` of `rec`, one per agent (in node order, VPIDs ascending). */
export function perAgent(run: Run, rec: TaskRecord, vpids: readonly number[], make: (vpids: number[]) => GroupCommand): void {
  const byNode = new Map<string, number[]>();
  for (const v of [...vpids].sort((a, b) => a - b)) {
    const node = procNode(rec, v);
    if (node !== null) byNode.set(node, [...(byNode.get(node) ?? []), v]);
  }
  for (const [node, list] of [...byNode].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
    const agent = agentOf(run, node);
    if (agent !== null) run.effects.push({ type: 'command', agent, command: make(list) });
  }
}
