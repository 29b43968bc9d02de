// What the operator believes, as data: the replies the CLI receives from the replicas (an
// operation's outcome, a replica's view of the cluster) and the rule that decides between them.
// A replica may be faulty (f = 1, docs/FAULT-MODEL.md F1), so the CLI accepts an outcome or a
// view only when f + 1 = 2 replicas report it identically — one replica alone cannot lie to the
// operator (PROTOCOL §8.1). Pure: no I/O. The operator client (cli/status-client.ts) asks,
// cli/op-client.ts runs the selection over it, cli/replica-group.ts reads the group from the
// same replies.
import type { ProcessId } from '../src/core/ports.ts';
import { EVENT_KINDS, type ClusterEvent, type ClusterView, type NodeView, type ProcView, type ReplicaStatus, type TaskView } from '../src/core/status.ts';
import type { Role } from '../src/core/wire/messages.ts';

/** Faulty replicas tolerated (three replicas, f = 1: docs/FAULT-MODEL.md F1). */
export const FAULTS_TOLERATED = 1;
/** Replicas that must report the same outcome or view before the CLI believes it. */
export const AGREEING_REPLIES = FAULTS_TOLERATED + 1;

/** One replica's `op.reply`: the outcome of a request ordered at `rsn`. */
export type OpReply = { rsn: number; ok: boolean; text: string };

// ---- operator requests ---------------------------------------------------------------------

/** The outcome `quorum` replicas report identically, or null while there is none. */
export function pickOutcome(
  replies: ReadonlyMap<ProcessId, OpReply>,
  quorum: number = AGREEING_REPLIES,
): (OpReply & { agreedBy: ProcessId[] }) | null {
  const groups = new Map<string, { reply: OpReply; from: ProcessId[] }>();
  for (const [from, r] of replies) {
    const key = JSON.stringify([r.rsn, r.ok, r.text]);
    const g = groups.get(key) ?? { reply: r, from: [] };
    g.from.push(from);
    groups.set(key, g);
  }
  let best: { reply: OpReply; from: ProcessId[] } | null = null;
  for (const g of groups.values()) if (g.from.length >= quorum && (best === null || g.from.length > best.from.length)) best = g;
  return best === null ? null : { rsn: best.reply.rsn, ok: best.reply.ok, text: best.reply.text, agreedBy: best.from };
}

/** "r1 said ok "t7" at RSN 5, r2 not reachable": what each replica answered, for errors. */
export function describeReplies(replicas: readonly ProcessId[], replies: ReadonlyMap<ProcessId, OpReply>, unreachable: (id: ProcessId) => boolean): string {
  return replicas
    .map((id) => {
      const r = replies.get(id);
      if (r === undefined) return `${id} ${unreachable(id) ? 'not reachable' : 'no answer'}`;
      return `${id} said ${r.ok ? 'ok' : 'refused'} ${JSON.stringify(r.text)} at RSN ${r.rsn}`;
    })
    .join(', ');
}

// ---- the cluster view ----------------------------------------------------------------------

type Check = (v: unknown) => boolean;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str: Check = (v) => typeof v === 'string';
const num: Check = (v) => typeof v === 'number' && Number.isFinite(v);
const bool: Check = (v) => typeof v === 'boolean';
const orNull = (c: Check): Check => (v) => v === null || c(v);
const oneOf = (values: readonly unknown[]): Check => (v) => values.includes(v);
const listOf = (c: Check): Check => (v) => Array.isArray(v) && v.every(c);
const shape = (fields: Record<string, Check>): Check => (v) => isObject(v) && Object.entries(fields).every(([k, c]) => c(v[k]));

const procView = shape({
  vpid: num, node: orNull(str), pid: orNull(num), state: str, exitCode: orNull(num), signal: orNull(str), reason: orNull(str),
  endpoint: orNull(str), rank: orNull(num), progress: orNull(num), straggler: bool, recommended: orNull(bool),
} satisfies Record<keyof ProcView, Check>);
const taskView = shape({
  id: str, name: str, size: num, state: str, command: listOf(str), cwd: str, submittedRsn: num, startAttempts: num, restarted: bool,
  waitReason: orNull(str), outcome: orNull(oneOf(['normal', 'abnormal'])), reason: orNull(str), failure: orNull(str), procs: listOf(procView),
  mode: oneOf(['plain', 'linked']), epoch: num, quorum: num,
  signals: shape({ broadcasts: num, pointToPoint: num, groupRequests: num, dropped: num }),
} satisfies Record<keyof TaskView, Check>);
const nodeView = shape({
  agent: str, node: str, slots: num, used: num, state: oneOf(['joining', 'up', 'failed', 'draining']), inc: num,
} satisfies Record<keyof NodeView, Check>);
/** Absent (a release before kinds, or an untagged event) or passing `c`. */
const optional = (c: Check): Check => (v) => v === undefined || c(v);
/** A subject is a replica id or a node name: short. */
const MAX_SUBJECT_CHARS = 64;
/** An event kind is `area.what`: one this release does not know (a newer replica's) is read as
 *  an untagged event, told but not paired, rather than making the whole view unreadable. */
const KIND_PATTERN = /^[a-z]{1,16}\.[a-z]{1,16}$/;
const clusterEvent = shape({
  atMs: num, rsn: num, task: orNull(str), vpid: orNull(num), text: str,
  kind: optional((v) => typeof v === 'string' && KIND_PATTERN.test(v)), subject: optional((v) => typeof v === 'string' && v.length <= MAX_SUBJECT_CHARS),
} satisfies Record<keyof ClusterEvent, Check>);
const knownKind = (e: ClusterEvent): ClusterEvent => {
  if (e.kind === undefined || (EVENT_KINDS as readonly string[]).includes(e.kind)) return e;
  const { kind: _unknown, ...told } = e;
  return told;
};
const clusterView = shape({
  tick: num, nodes: listOf(nodeView), tasks: listOf(taskView), omittedTasks: num, events: listOf(clusterEvent),
} satisfies Record<keyof ClusterView, Check>);

/** A replica's `cluster` field, if it is a well-formed ClusterView (a faulty replica may send
 *  anything; a replica that predates tasks sends none). */
export function parseClusterView(v: unknown): ClusterView | null {
  if (!clusterView(v)) return null;
  const view = v as ClusterView;
  return { ...view, events: view.events.map(knownKind) };
}

/** What one replica said, reduced to what view selection needs. */
export type ViewAnswer = { id: ProcessId; role: Role; primary: ProcessId; rsn: number; digest: string; view: ClusterView };

/** Only a replica in service speaks for the group's state: an `installing` replacement has not
 *  received it yet and a `retired` one stopped applying it (PROTOCOL §10.3, §10.6). */
export function toViewAnswer(s: ReplicaStatus): ViewAnswer | null {
  if (s.phase === 'installing' || s.phase === 'retired') return null;
  const view = parseClusterView((s as ReplicaStatus & { cluster?: unknown }).cluster);
  return view === null ? null : { id: s.id, role: s.role, primary: s.primary, rsn: s.rsn, digest: s.digest, view };
}

export type ViewPick = {
  view: ClusterView;
  /** The RSN the view is at. */
  rsn: number;
  /** The replica whose view (and events journal) is shown. */
  from: ProcessId;
  /** Replicas that reported this RSN, digest and view; fewer than AGREEING_REPLIES when none agree. */
  agreedBy: ProcessId[];
  /** Set when no two replicas agree: say so on stderr. */
  warning: string | null;
};

/** Agreement is on the replicated part of the view: the events journal is each replica's own
 *  (its wall-clock times), so it is left out of the comparison. */
const agreementKey = (a: ViewAnswer) => JSON.stringify([a.rsn, a.digest, a.view.tick, a.view.nodes, a.view.tasks, a.view.omittedTasks]);

function agreeingGroups(answers: readonly ViewAnswer[]): ViewAnswer[][] {
  const groups = new Map<string, ViewAnswer[]>();
  for (const a of answers) groups.set(agreementKey(a), [...(groups.get(agreementKey(a)) ?? []), a]);
  return [...groups.values()];
}

/** The group of `quorum` replicas that agree at the highest RSN, or null. */
function bestGroup(answers: readonly ViewAnswer[], quorum: number): ViewAnswer[] | null {
  let best: ViewAnswer[] | null = null;
  for (const g of agreeingGroups(answers)) {
    const rsn = g[0]?.rsn ?? -1;
    if (g.length < quorum) continue;
    if (best === null || rsn > (best[0]?.rsn ?? -1) || (rsn === best[0]?.rsn && g.length > best.length)) best = g;
  }
  return best;
}

/** The primary as the answers name it: most votes, then the one that claims the role. */
function namedPrimary(answers: readonly ViewAnswer[]): ProcessId | null {
  const votes = new Map<ProcessId, number>();
  for (const a of answers) votes.set(a.primary, (votes.get(a.primary) ?? 0) + 1);
  const claims = new Set(answers.filter((a) => a.role === 'primary').map((a) => a.id));
  let best: ProcessId | null = null;
  for (const [id, n] of votes) {
    const b = best === null ? -1 : (votes.get(best) ?? 0);
    if (n > b || (n === b && claims.has(id) && best !== null && !claims.has(best))) best = id;
  }
  return best;
}

/** The view of `quorum` replicas that agree (rsn, digest and replicated view), at the highest
 *  such RSN; if none agree, the primary's (or else the most advanced one) with a warning. */
export function pickClusterView(answers: readonly ViewAnswer[], quorum: number = AGREEING_REPLIES): ViewPick | null {
  if (answers.length === 0) return null;
  const group = bestGroup(answers, quorum);
  // Two replicas past the agreeing pair's RSN mean a correct one has applied more than the
  // pair shows (f = 1): the pair is stale (a condemned replica and a lagging one can agree on
  // an old state while the current members answer a tick apart), so it speaks for nobody.
  const superseded = group !== null && answers.filter((a) => a.rsn > (group[0]?.rsn ?? -1)).length >= quorum;
  if (group !== null && !superseded) {
    const shown = group.find((a) => a.role === 'primary') ?? (group[0] as ViewAnswer);
    return { view: shown.view, rsn: shown.rsn, from: shown.id, agreedBy: group.map((a) => a.id), warning: null };
  }
  const primary = namedPrimary(answers);
  const shown = answers.find((a) => a.id === primary) ?? answers.reduce((a, b) => (b.rsn > a.rsn ? b : a));
  const warning =
    answers.length === 1
      ? `only ${shown.id} answered with a view; showing it unconfirmed by a second replica`
      : `views differ; showing ${shown.id}'s (${answers.map((a) => `${a.id} at RSN ${a.rsn}`).join(', ')})`;
  return { view: shown.view, rsn: shown.rsn, from: shown.id, agreedBy: [shown.id], warning };
}

/** Whether waiting for the `pending` replicas could still change pickClusterView's agreed
 *  answer: stop as soon as it cannot (with three replicas: as soon as two agree). */
export function viewSettled(answers: readonly ViewAnswer[], pending: number, quorum: number = AGREEING_REPLIES): boolean {
  if (pending === 0) return true;
  const best = bestGroup(answers, quorum);
  if (best === null) return false;
  const bestRsn = best[0]?.rsn ?? -1;
  if (pending >= quorum) return false;
  // A higher agreeing group could still form from an answer above the best RSN plus the pending.
  return agreeingGroups(answers).every((g) => (g[0]?.rsn ?? -1) <= bestRsn || g.length + pending < quorum);
}
