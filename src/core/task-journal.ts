// The task journal (PROTOCOL §10.9): what a cluster reset must not lose. Each replica keeps on
// its node's disk the tasks the group accepted and that have not finished — for each, the
// operator's own signed `task.submit` — rewritten whenever that set changes. After the watchdog
// power-resets the cluster (spec §1.6 rules 2 and 3), it reads every journal, keeps the entries
// whose operator signature verifies, and has the fresh group start each task again with the
// restarted flag set (`task.restore`). Nothing else survives a reset, and nothing else needs to:
// the processes are gone with their nodes, and the application learns from the flag that it
// starts over.
//
// A journal is written by one replica, which may be the faulty one, so the watchdog trusts none
// of it beyond the operator's signature: a faulty journal can name only tasks an operator really
// submitted (at worst one that had finished, started again), never invent one, and the union
// over every replica's journal misses a task only if every replica that journalled it lost it.
import { MAX_CG_BYTES, MAX_LIVE_TASKS, SIGNATURE_BYTES } from './constants.ts';
import type { ProcessId, Verifier } from './ports.ts';
import { err, ok, type Result } from './result.ts';
import { openCG, pack, unpack } from './wire/frame.ts';
import { nonce, processId, taskId, type TaskRestore, type TaskSubmit } from './wire/messages.ts';
import { bytes, list, struct, uint, type Schema } from './wire/schema.ts';

/** One accepted, unfinished task: its id in the group that accepted it and the operator's signed
 *  submit (the CG's canonical bytes and the operator's signature over them). */
export type JournalEntry = { task: string; nonce: string; submit: Uint8Array; submitSig: Uint8Array };

export type TaskJournal = {
  /** The replica that wrote it and the RSN its state was at. */
  replica: ProcessId;
  rsn: number;
  tasks: JournalEntry[];
};

/** Journal format version, first in the file: a file of another version is not read. */
export const JOURNAL_VERSION = 1;

const entry: Schema<JournalEntry> = struct<JournalEntry>(['task', 'nonce', 'submit', 'submitSig'], {
  task: taskId, nonce, submit: bytes(MAX_CG_BYTES), submitSig: bytes(SIGNATURE_BYTES, SIGNATURE_BYTES),
});
const journalSchema: Schema<TaskJournal> = struct<TaskJournal>(['replica', 'rsn', 'tasks'], {
  replica: processId, rsn: uint, tasks: list(entry, MAX_LIVE_TASKS),
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

/** What the journals ask to restore: every entry whose submit an operator signed, once per
 *  nonce, by the number of its old task id (so the fresh group numbers them in the old order);
 *  and every journal or entry refused, with why.
 *
 *  A journal is the live set at the RSN of its last change, so journals of one group compare by
 *  RSN. An entry absent from two journal files (two replicas: each writes only its own) written
 *  at a later RSN than the latest journal holding it ended in between: at least one of the two
 *  is correct, and a correct replica drops an entry only when its task ends. That is the stale
 *  journal of a replica retired while its node was down (its file outlived it), or an old task a
 *  faulty replica keeps listing; it is not restored (code FINISHED). One journal alone never
 *  cancels an entry: it may be the faulty one, and an accepted task must not be lost. */
export function collectRestores(
  journals: readonly { source: string; data: Uint8Array }[], verifier: Verifier, operators: ReadonlySet<ProcessId>,
): { restores: TaskRestore[]; refused: { source: string; task: string | null; code: string; detail: string }[] } {
  const byNonce = new Map<string, TaskRestore>();
  /** Per nonce, the highest RSN of a journal that holds it (verified entries only). */
  const newestWith = new Map<string, number>();
  const refused: { source: string; task: string | null; code: string; detail: string }[] = [];
  const read: { source: string; rsn: number; nonces: Set<string> }[] = [];
  for (const { source, data } of journals) {
    const j = decodeJournal(data);
    if (!j.ok) {
      refused.push({ source, task: null, code: j.code, detail: j.detail });
      continue;
    }
    read.push({ source, rsn: j.value.rsn, nonces: new Set(j.value.tasks.map((e) => e.nonce)) });
    for (const e of j.value.tasks) {
      const r: TaskRestore = { type: 'task.restore', nonce: e.nonce, task: e.task, submit: e.submit, submitSig: e.submitSig };
      const opened = openRestoredSubmit(r, verifier, operators);
      if (!opened.ok) {
        refused.push({ source, task: e.task, code: opened.code, detail: opened.detail });
        continue;
      }
      newestWith.set(e.nonce, Math.max(newestWith.get(e.nonce) ?? -1, j.value.rsn));
      const seen = byNonce.get(e.nonce);
      // Two journals may know one task under different ids only if one is faulty; the lower id
      // is the one a correct replica gave it first.
      if (seen === undefined || taskNumber(e.task) < taskNumber(seen.task)) byNonce.set(e.nonce, r);
    }
  }
  for (const [nonce, r] of byNonce) {
    const rsn = newestWith.get(nonce) ?? -1;
    const without = new Map<string, number>();
    for (const j of read) if (j.rsn > rsn && !j.nonces.has(nonce)) without.set(j.source, Math.max(without.get(j.source) ?? -1, j.rsn));
    if (without.size < 2) continue;
    byNonce.delete(nonce);
    const later = [...without].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([source, at]) => `${source} (RSN ${at})`).join(' and ');
    refused.push({ source: 'journals', task: r.task, code: 'FINISHED', detail: `last journalled at RSN ${rsn}, absent from ${later}: it ended since` });
  }
  const restores = [...byNonce.values()].sort((a, b) => taskNumber(a.task) - taskNumber(b.task) || (a.nonce < b.nonce ? -1 : 1));
  return { restores, refused };
}

const taskNumber = (id: string): number => Number(id.slice(1));
