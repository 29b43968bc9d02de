// Replica and watchdog answers for the status tests (cli/replica-group.ts, cli/status-report.ts):
// a local 4-node cluster's config, and status replies of a group that changed.
import type { Answer, StatusAnswers } from '../../../cli/status-client.ts';
import type { ReplicaStatus } from '../../../src/core/status.ts';
import type { WatchdogReplicaView, WatchdogStatus } from '../../../src/core/watchdog-state.ts';
import { clusterIds, planCluster, type ClusterConfig } from '../../../src/io/cluster-dir.ts';
import { view } from './fixtures.ts';

export function config(): ClusterConfig {
  const ids = clusterIds(4);
  const keys = new Map(ids.all.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
  return planCluster({ nodes: 4, ports: ids.listeners.map((_, i) => 20_000 + i) }, keys);
}

type Group = { view: number; members: string[]; primary: string };

/** A serving member's reply: healthy peers and agents, one RSN and digest. */
export function replica(id: string, g: Group, over: Partial<ReplicaStatus> = {}): ReplicaStatus {
  return {
    id, role: id === g.primary ? 'primary' : 'backup', inc: 1, rsn: 20, gssn: 10, primary: g.primary, digest: 'ab'.repeat(32),
    replicas: g.members.filter((r) => r !== id).map((r) => ({ id: r, connected: true, lastHeartbeatAgeMs: 30, health: 'healthy' as const })),
    agents: ['a1', 'a2', 'a3', 'a4'].map((a, i) => ({ id: a, node: `n${i + 1}`, connected: true, joined: true, lastHeartbeatAgeMs: 20, health: 'healthy' as const })),
    suspicions: 0, drops: {}, view: g.view, members: [...g.members], phase: 'serving', diagnosis: [],
    memberNodes: Object.fromEntries(g.members.map((m) => [m, `n${m.slice(1)}`])), retired: [], replacement: null, ports: [], added: [],
    cluster: view({ events: [] }), ...over,
  };
}

export const condemned = (target: string, by: string, view: number, atMs = 1_000) =>
  ({ atMs, view, kind: 'condemned', target, by, reason: 'silent', detail: '' });

export const journal = (...texts: [number, string][]) => view({ events: texts.map(([rsn, text]) => ({ atMs: 0, rsn, task: null, vpid: null, text })) });

export function watchdogReplica(id: string, over: Partial<WatchdogReplicaView> = {}): WatchdogReplicaView {
  return {
    id, inc: 1, counter: 5, lastHeartbeatAgeMs: 40, health: 'healthy', role: 'backup', rsn: 20, gssn: 10, view: 0, digest: null,
    heartbeats: 5, replays: 0, diagnosisReports: 0, ...over,
  };
}

export function watchdog(replicas: WatchdogReplicaView[]): Answer<WatchdogStatus> {
  return {
    ok: true, latencyMs: 3,
    status: {
      id: 'scc', role: 'watchdog', inc: 1, replicas, ignored: 0, resets: [], drops: {}, armed: true, silenceDeadlineMs: null,
      diagnosisInWindow: 0, diagnosisReports: [], clusterResets: [], clusterResetCount: 0, shutdown: null, journalsKept: [], restoresPending: [], restores: [],
    },
  };
}

export const ok = (s: ReplicaStatus): Answer<ReplicaStatus> => ({ ok: true, status: s, latencyMs: 5 });
export const missing = (error = 'not reachable within 2000 ms'): Answer<ReplicaStatus> => ({ ok: false, error });

export function answers(replicas: [string, Answer<ReplicaStatus>][], wd: Answer<WatchdogStatus>, running?: string[]): StatusAnswers {
  return { replicas: new Map(replicas), watchdog: wd, ...(running === undefined ? {} : { running }) };
}
