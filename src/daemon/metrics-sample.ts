// What a daemon's gauges read at scrape time (docs/OPERATIONS.md "Metrics"): a MetricsSample
// built from its core's own status (src/core/status.ts, agent.ts, watchdog-state.ts), the same
// document `trine status` shows; an agent's also from its protector's counts (protector.ts
// `stats()`) and its keeper's restarts (keeper.ts, told with `go`). Kept apart from
// src/daemon/metrics.ts so that manager.ts, agent.ts and scc.ts can name their sample without
// loading prom-client: a daemon without metrics never loads it. Pure functions of a status;
// nothing here is called per event.
import type { AgentStatus } from '../core/agent.ts';
import type { ReplicaStatus } from '../core/status.ts';
import type { WatchdogStatus } from '../core/watchdog-state.ts';
import type { KeeperRestarts } from './keeper.ts';
import type { ProtectorStats } from './protector.ts';

export type PeerSample = { id: string; connected: boolean | null; heartbeatAgeMs: number | null };

/** Every field optional: each daemon fills what its core knows. Counts by state are keyed by
 *  the FSM state names of fsm/ (finite), nodes by NodeView's four states. */
export type MetricsSample = {
  view?: number;
  rsn?: number;
  gssn?: number;
  /** Replica: 1 when it is the primary. */
  primary?: boolean;
  members?: number;
  phase?: string;
  tasks?: Record<string, number>;
  processes?: Record<string, number>;
  nodes?: Record<string, number>;
  /** Messages the core refused after they verified (replays, non-members…), by reason, since start. */
  coreDrops?: Record<string, number>;
  peers?: PeerSample[];
  /** Agent: its task processes alive on this node. */
  nodeProcesses?: number;
  /** Agent: requests sent to the group and not yet acknowledged. */
  pendingRequests?: number;
  /** Agent: its protector's counts and state (PROTOCOL §11.4), once it listens. */
  protector?: ProtectorStats;
  /** Agent: the agents its keeper replaced, by why, as the keeper said with `go`; absent when
   *  the agent runs without a keeper. */
  keeperRestarts?: KeeperRestarts;
  /** Watchdog: restarts by its supervisor; rule 2 armed. */
  supervisorRestarts?: number;
  armed?: boolean;
};

const count = (into: Record<string, number>, key: string): void => {
  into[key] = (into[key] ?? 0) + 1;
};

export function replicaSample(s: ReplicaStatus): MetricsSample {
  const tasks: Record<string, number> = {};
  const processes: Record<string, number> = {};
  for (const t of s.cluster.tasks) {
    count(tasks, t.state);
    for (const p of t.procs) count(processes, p.state);
  }
  const nodes: Record<string, number> = {};
  for (const n of s.cluster.nodes) count(nodes, n.state);
  return {
    view: s.view, rsn: s.rsn, gssn: s.gssn, primary: s.role === 'primary', members: s.members.length, phase: s.phase,
    tasks, processes, nodes, coreDrops: s.drops,
    peers: [
      ...s.replicas.map((r) => ({ id: r.id, connected: r.connected, heartbeatAgeMs: r.lastHeartbeatAgeMs })),
      ...s.agents.map((a) => ({ id: a.id, connected: a.connected, heartbeatAgeMs: a.lastHeartbeatAgeMs })),
    ],
  };
}

/** What the agent's process knows besides its core: its protector (null until it listens, or
 *  if it could not) and its keeper's restarts (null without a keeper). */
export type AgentExtras = { protector?: ProtectorStats | null; keeperRestarts?: KeeperRestarts | null };

export function agentSample(s: AgentStatus, nodeProcesses: number, extras: AgentExtras = {}): MetricsSample {
  return {
    view: s.view, gssn: s.gssnDelivered, coreDrops: s.drops, nodeProcesses, pendingRequests: s.pendingRequests,
    peers: s.replicas.map((r) => ({ id: r.id, connected: r.connected, heartbeatAgeMs: null })),
    ...(extras.protector === undefined || extras.protector === null ? {} : { protector: extras.protector }),
    ...(extras.keeperRestarts === undefined || extras.keeperRestarts === null ? {} : { keeperRestarts: extras.keeperRestarts }),
  };
}

export function watchdogSample(s: WatchdogStatus, supervisorRestarts: number | null): MetricsSample {
  return {
    coreDrops: s.drops, armed: s.armed,
    ...(supervisorRestarts === null ? {} : { supervisorRestarts }),
    peers: s.replicas.map((r) => ({ id: r.id, connected: null, heartbeatAgeMs: r.lastHeartbeatAgeMs })),
  };
}
