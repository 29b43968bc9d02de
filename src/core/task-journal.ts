// The task journal (PROTOCOL §10.9): what a cluster reset must not lose. Each replica keeps on
// its node's disk the tasks the group accepted and that have not finished — for each, the
// operator's own signed `task.submit` — rewritten whenever that set changes. After the watchdog
// power-resets the cluster (spec §1.6 rules 2 and 3), it reads every journal, keeps the entries
// whose operator signature verifies, and has the fresh group start each task again with the
// restarted flag set (`task.restore`). Nothing else survives a reset, and nothing else needs to:
// the processes are gone with their nodes, and the application learns from the flag that it
// starts over.
//
// Since version 2 the journal also carries the membership changes the group made at run time
// (PROTOCOL §10.12), each as the operator's signed `node.add` or `node.remove`: a reset starts
// the replicas from their hosts' cluster.json, and these tell the watchdog which nodes an operator
// added (power-cycle them, and have the fresh group learn them again) and removed (leave them
// off). The same trust rule holds: only an operator's signature counts.
//
// A journal is written by one replica, which may be the faulty one, so the watchdog trusts none
// of it beyond the operator's signature: a faulty journal can name only tasks an operator really
// submitted (at worst one that had finished, started again), never invent one, and the union
// over every replica's journal misses a task only if every replica that journalled it lost it.
import { MAX_CG_BYTES, MAX_LIVE_TASKS, MAX_MEMBER_CG_BYTES, MAX_MEMBER_CHANGES, QUORUM, SIGNATURE_BYTES } from './constants.ts';
import type { ProcessId, Verifier } from './ports.ts';
import { err, ok, type Result } from '../base/result.ts';
import { openCG, pack, unpack } from './wire/frame.ts';
import { nonce, processId, taskId, type NodeAdd, type NodeRemove, type NodeRestore, type TaskRestore, type TaskSubmit } from './wire/messages.ts';
import { bytes, list, struct, uint, type Schema } from './wire/schema.ts';

/** One accepted, unfinished task: its id in the group that accepted it and the operator's signed
 *  submit (the CG's canonical bytes and the operator's signature over them). */
export type JournalEntry = { task: string; nonce: string; submit: Uint8Array; submitSig: Uint8Array };

/** One membership change the group applied (PROTOCOL §10.12): the operator's signed `node.add`
 *  or `node.remove` CG and its nonce. */
export type MemberEntry = { nonce: string; op: Uint8Array; opSig: Uint8Array };

export type TaskJournal = {
  /** The replica that wrote it and the RSN its state was at. */
  replica: ProcessId;
  rsn: number;
  tasks: JournalEntry[];
  /** Every membership change since the group started, in the order it was applied. */
  members: MemberEntry[];
};

/** Journal format version, first in the file: a file of another version is not read. */
export const JOURNAL_VERSION = 2;

const entry: Schema<JournalEntry> = struct<JournalEntry>(['task', 'nonce', 'submit', 'submitSig'], {
  task: taskId, nonce, submit: bytes(MAX_CG_BYTES), submitSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES),
});
const member: Schema<MemberEntry> = struct<MemberEntry>(['nonce', 'op', 'opSig'], {
  nonce, op: bytes(MAX_MEMBER_CG_BYTES), opSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES),
});
const journalSchema: Schema<TaskJournal> = struct<TaskJournal>(['replica', 'rsn', 'tasks', 'members'], {
  replica: processId, rsn: uint, tasks: list(entry, MAX_LIVE_TASKS), members: list(member, MAX_MEMBER_CHANGES),
});

export function encodeJournal(j: TaskJournal): Uint8Array {
  return pack([JOURNAL_VERSION, journalSchema.enc(j)]);
}

/** Total: any byte string gives a journal or a typed reason. */
export function decodeJournal(data: Uint8Array): Result<TaskJournal> {
  const tree = unpack(data);
  if (!tree.ok) return tree;
  const t = tree.value;
  if (!Array.isArray(t) || t.length !== 2) return err('WIRE_MALFORMED', 'journal: expected [version, journal]');
  if (t[0] !== JOURNAL_VERSION) return err('WIRE_VERSION', `journal version ${String(t[0])}, this build reads ${JOURNAL_VERSION}`);
  return journalSchema.dec(t[1], 'journal');
}

/** The operator's submit a restore carries, if it is one: signed by an operator, unsequenced
 *  (csn = inc = 0, PROTOCOL §8.1), a `task.submit` with the restore's nonce. */
export function openRestoredSubmit(
  r: Pick<TaskRestore, 'nonce' | 'submit' | 'submitSig'>, verifier: Verifier, operators: ReadonlySet<ProcessId>,
): Result<TaskSubmit> {
  const signed = openCG(r.submit, r.submitSig, verifier);
  if (!signed.ok) return signed;
  const cg = signed.value.cg;
  if (!operators.has(cg.client)) return err('NOT_A_MEMBER', `the submit is signed by ${cg.client}, not an operator`);
  if (cg.payload.type !== 'task.submit' || cg.csn !== 0 || cg.inc !== 0) return err('WIRE_MALFORMED', `not an operator's task.submit: ${cg.payload.type}`);
  if (cg.payload.nonce !== r.nonce) return err('WIRE_MALFORMED', `the submit's nonce ${cg.payload.nonce} is not the restore's ${r.nonce}`);
  return ok(cg.payload);
}

/** The membership change a restore carries, if it is one: signed by an operator, unsequenced, a
 *  `node.add` or `node.remove` with the restore's nonce. */
export function openRestoredOp(
  r: Pick<NodeRestore, 'nonce' | 'op' | 'opSig'>, verifier: Verifier, operators: ReadonlySet<ProcessId>,
): Result<NodeAdd | NodeRemove> {
  const signed = openCG(r.op, r.opSig, verifier);
  if (!signed.ok) return signed;
  const cg = signed.value.cg;
  if (!operators.has(cg.client)) return err('NOT_A_MEMBER', `the change is signed by ${cg.client}, not an operator`);
  if ((cg.payload.type !== 'node.add' && cg.payload.type !== 'node.remove') || cg.csn !== 0 || cg.inc !== 0) {
    return err('WIRE_MALFORMED', `not an operator's node.add or node.remove: ${cg.payload.type}`);
  }
  if (cg.payload.nonce !== r.nonce) return err('WIRE_MALFORMED', `the change's nonce ${cg.payload.nonce} is not the restore's ${r.nonce}`);
  return ok(cg.payload);
}

/** The cluster's nodes after the journalled membership changes, as the watchdog power-cycles
 *  them: the nodes an operator added (where they are) and the nodes removed since. */
export type MembershipChanges = { added: { agent: ProcessId; node: string; address: string }[]; removed: string[] };

type Refusal = { source: string; task: string | null; code: string; detail: string };

/** What the journals ask the fresh group to do after a reset: the membership changes (`members`,
 *  applied first), then the tasks; the nodes the watchdog power-cycles besides cluster.json's
 *  and those it leaves off (`membership`); and every journal or entry refused, with why. */
export type Restores = { restores: TaskRestore[]; members: NodeRestore[]; membership: MembershipChanges; refused: Refusal[] };

/** A restore's label in the watchdog's records: a task's old id, or the membership change. */
export const memberLabel = (c: NodeAdd | NodeRemove): string => `${c.type} ${c.node}`;

/** What the journals ask to restore: every entry whose request an operator signed, once per
 *  nonce. Tasks come by the number of their old id (so the fresh group numbers them in the old
 *  order). Membership changes come as their net effect on cluster.json's nodes: a node added and
 *  later removed is neither (its key is forgotten with it); the other additions, by agent id,
 *  then the removals of cluster.json's nodes.
 *
 *  A journal is the live set at the RSN of its last change, so journals of one group compare by
 *  RSN. An entry absent from two journal files (two replicas: each writes only its own) written
 *  at a later RSN than the latest journal holding it ended in between: at least one of the two
 *  is correct, and a correct replica drops a task only when it ends and never drops a membership
 *  change. That is the stale journal of a replica retired while its node was down (its file
 *  outlived it), or an old task (or a change the group refused) a faulty replica keeps listing;
 *  it is not restored (code FINISHED, or REFUSED for a change). One journal alone never cancels
 *  an entry: it may be the faulty one, and an accepted task must not be lost. */
export function collectRestores(
  journals: readonly { source: string; data: Uint8Array }[], verifier: Verifier, operators: ReadonlySet<ProcessId>,
): Restores {
  const tasks = new Map<string, TaskRestore>();
  const changes = new Map<string, { restore: NodeRestore; change: NodeAdd | NodeRemove }>();
  /** Per nonce, the highest RSN of a journal that holds it (verified entries only). */
  const newestWith = new Map<string, number>();
  const refused: Refusal[] = [];
  const read: { source: string; rsn: number; nonces: Set<string> }[] = [];
  const holds = (nonce: string, rsn: number) => newestWith.set(nonce, Math.max(newestWith.get(nonce) ?? -1, rsn));
  for (const { source, data } of journals) {
    const j = decodeJournal(data);
    if (!j.ok) {
      refused.push({ source, task: null, code: j.code, detail: j.detail });
      continue;
    }
    const { rsn } = j.value;
    read.push({ source, rsn, nonces: new Set([...j.value.tasks, ...j.value.members].map((e) => e.nonce)) });
    for (const e of j.value.tasks) {
      const r: TaskRestore = { type: 'task.restore', nonce: e.nonce, task: e.task, submit: e.submit, submitSig: e.submitSig };
      const opened = openRestoredSubmit(r, verifier, operators);
      if (!opened.ok) {
        refused.push({ source, task: e.task, code: opened.code, detail: opened.detail });
        continue;
      }
      holds(e.nonce, rsn);
      const seen = tasks.get(e.nonce);
      // Two journals may know one task under different ids only if one is faulty; the lower id
      // is the one a correct replica gave it first.
      if (seen === undefined || taskNumber(e.task) < taskNumber(seen.task)) tasks.set(e.nonce, r);
    }
    for (const e of j.value.members) {
      const restore: NodeRestore = { type: 'node.restore', nonce: e.nonce, op: e.op, opSig: e.opSig };
      const opened = openRestoredOp(restore, verifier, operators);
      if (!opened.ok) {
        refused.push({ source, task: null, code: opened.code, detail: `membership change ${e.nonce}: ${opened.detail}` });
        continue;
      }
      holds(e.nonce, rsn);
      changes.set(e.nonce, { restore, change: opened.value });
    }
  }
  /** Journals written after the latest that holds `nonce` and without it, or null if fewer than QUORUM. */
  const endedSince = (nonce: string): string | null => {
    const rsn = newestWith.get(nonce) ?? -1;
    const without = new Map<string, number>();
    for (const j of read) if (j.rsn > rsn && !j.nonces.has(nonce)) without.set(j.source, Math.max(without.get(j.source) ?? -1, j.rsn));
    if (without.size < QUORUM) return null;
    const later = [...without].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([source, at]) => `${source} (RSN ${at})`).join(' and ');
    return `last journalled at RSN ${rsn}, absent from ${later}`;
  };
  for (const [nonce, r] of tasks) {
    const why = endedSince(nonce);
    if (why === null) continue;
    tasks.delete(nonce);
    refused.push({ source: 'journals', task: r.task, code: 'FINISHED', detail: `${why}: it ended since` });
  }
  for (const [nonce, c] of changes) {
    const why = endedSince(nonce);
    if (why === null) continue;
    changes.delete(nonce);
    refused.push({ source: 'journals', task: memberLabel(c.change), code: 'REFUSED', detail: `${why}: the group never applied it` });
  }
  const restores = [...tasks.values()].sort((a, b) => taskNumber(a.task) - taskNumber(b.task) || (a.nonce < b.nonce ? -1 : 1));
  return { restores, ...netMembership([...changes.values()]), refused };
}

/** The net effect of the membership changes (see collectRestores). */
function netMembership(changes: { restore: NodeRestore; change: NodeAdd | NodeRemove }[]): Pick<Restores, 'members' | 'membership'> {
  const removed = new Set(changes.flatMap(({ change }) => (change.type === 'node.remove' ? [change.node] : [])));
  const adds = changes.flatMap((c) => (c.change.type === 'node.add' && !removed.has(c.change.node) ? [{ ...c, change: c.change }] : []))
    .sort((a, b) => byId(a.change.agent, b.change.agent) || (a.restore.nonce < b.restore.nonce ? -1 : 1));
  const addedNodes = new Set(changes.flatMap(({ change }) => (change.type === 'node.add' ? [change.node] : [])));
  const removals = changes.filter((c) => c.change.type === 'node.remove' && !addedNodes.has(c.change.node))
    .sort((a, b) => (a.change.node < b.change.node ? -1 : a.change.node > b.change.node ? 1 : a.restore.nonce < b.restore.nonce ? -1 : 1));
  // One restore per node and kind: two signed removals of one node (a second `--kill`) are one.
  const once = new Set<string>();
  const members = [...adds, ...removals].filter((c) => !once.has(memberLabel(c.change)) && once.add(memberLabel(c.change))).map((c) => c.restore);
  return {
    members,
    membership: {
      added: adds.map(({ change }) => ({ agent: change.agent, node: change.node, address: change.address })),
      removed: [...removed].sort(),
    },
  };
}

/** Agent ids (`a5`, `a12`) by their number, then as text. */
const byId = (a: string, b: string): number => (Number(a.replace(/^\D+/, '')) - Number(b.replace(/^\D+/, ''))) || (a < b ? -1 : a > b ? 1 : 0);

const taskNumber = (id: string): number => Number(id.slice(1));
