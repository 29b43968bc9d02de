// What `trine dashboard` sends its page on every look at the cluster: the status document of
// `trine status --json` (group, replicas, health, nodes, watchdog), the nodes, tasks and
// processes two replicas agree on (as `trine ps`), the merged event log and the episodes of
// faults with their latencies (cli/timeline.ts). Pure: answers in, one JSON-ready record out;
// the page (dashboard/dashboard.js) only draws it. docs/OPERATIONS.md §11.
import type { ClusterConfig } from '../src/io/cluster-dir.ts';
import type { ClusterView } from '../src/core/status.ts';
import { parseClusterView, pickClusterView, toViewAnswer, type ViewAnswer } from './replies.ts';
import { answeredStatuses } from './events.ts';
import type { StatusAnswers } from './status-client.ts';
import { buildStatusDocument, type StatusDocument } from './status-report.ts';
import { collectDiagnosis, episodes, journalsOf, mergeEvents, type Episode, type LogDiagnosis, type LogEvent } from './timeline.ts';

/** Events and diagnosis records the page lists (the timeline keeps every episode). */
export const SNAPSHOT_EVENTS = 60;
export const SNAPSHOT_DIAGNOSIS = 30;

export type DashboardSnapshot = {
  version: 1;
  cluster: string;
  at: string;
  atMs: number;
  status: StatusDocument;
  /** Nodes, tasks and processes as two replicas agree on them; null when no replica in
   *  service answered with a view. */
  view: (Omit<ClusterView, 'events'> & { rsn: number; from: string; agreedBy: string[]; warning: string | null }) | null;
  /** The latest events of the merged log, oldest first. */
  events: LogEvent[];
  diagnosis: LogDiagnosis[];
  /** Every fault the journals still hold, oldest first, with a suspicion under way if any. */
  episodes: Episode[];
};

export function buildSnapshot(config: ClusterConfig, dir: string, answers: StatusAnswers, now: Date): DashboardSnapshot {
  const status = buildStatusDocument(config, dir, answers, now);
  const statuses = answeredStatuses(answers);
  const pick = pickClusterView(statuses.map(toViewAnswer).filter((a): a is ViewAnswer => a !== null));
  const journals = journalsOf(statuses, parseClusterView);
  const events = mergeEvents(journals);
  const diagnosis = collectDiagnosis(journals);
  let view: DashboardSnapshot['view'] = null;
  if (pick !== null) {
    const { events: _own, ...rest } = pick.view;
    view = { ...rest, rsn: pick.rsn, from: pick.from, agreedBy: pick.agreedBy, warning: pick.warning };
  }
  return {
    version: 1, cluster: config.cluster, at: now.toISOString(), atMs: now.getTime(), status, view,
    events: events.slice(-SNAPSHOT_EVENTS), diagnosis: diagnosis.slice(-SNAPSHOT_DIAGNOSIS),
    episodes: episodes(events, diagnosis, { members: status.group.members, nowMs: now.getTime() }),
  };
}
