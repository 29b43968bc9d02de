// The watchdog's part in restoring a cluster (PROTOCOL §10.9, §10.12): it keeps each replica's
// latest task journal for the next cluster reset, and after one it sends every verified
// journalled restore (membership changes first, then tasks) to the restarted group until two
// replicas agree on its outcome. Verbs over WatchdogState (watchdog-state.ts).
import { QUORUM } from './constants.ts';
import type { CoreEffect } from './node.ts';
import type { ProcessId } from './ports.ts';
import { collectRestores, decodeJournal, memberLabel, openRestoredOp, type MembershipChanges } from './task-journal.ts';
import { ignore, MAX_RESTORE_HISTORY, push, RESTORE_RESEND_MS, sinceReset, type WatchdogState } from './watchdog-state.ts';
import { signCG } from './wire/frame.ts';
import type { Item, NodeRestore, TaskRestore } from './wire/messages.ts';

/** A replica's task journal: kept, the latest per replica, for the next cluster reset. Only
 *  from a pool replica, about itself, and after a reset only from the restarted group. */
export function onJournal(s: WatchdogState, from: ProcessId, item: Extract<Item, { type: 'tasks.journal' }>, out: CoreEffect[]): void {
  if (!s.replicaIds.has(from)) return ignore(s, 'NOT_A_MEMBER');
  if (s.clusterResets.length > 0 && !sinceReset(s, from, item.inc)) return ignore(s, 'UNEXPECTED');
  const j = decodeJournal(item.journal);
  if (!j.ok || j.value.replica !== from) {
    out.push({ type: 'log', level: 'warn', event: 'tasks.journal.refused', fields: { from, why: j.ok ? `a journal of ${j.value.replica}` : j.detail } });
    return ignore(s, 'WIRE_MALFORMED');
  }
  const had = s.journalsKept.get(from);
  if (had !== undefined && (item.inc < had.inc || (item.inc === had.inc && j.value.rsn < had.rsn))) return ignore(s, 'REPLAYED');
  s.journalsKept.set(from, { inc: item.inc, rsn: j.value.rsn, tasks: j.value.tasks.length, data: item.journal });
}

/** The journals read from the nodes after a reset: every verified entry is restored, once. */
export function onRestoreLoad(s: WatchdogState, nowMs: number, journals: { source: string; data: Uint8Array }[], out: CoreEffect[]): void {
  const { restores: found, members, membership, refused } = collectRestores(journals, s.verifier, s.operatorIds);
  if (members.length > 0) s.restoringMembership = s.restoringMembership === null ? membership : mergeMembership(s.restoringMembership, membership);
  for (const r of refused) push(s.restores, { atMs: nowMs, kind: 'refused', ...r }, MAX_RESTORE_HISTORY);
  for (const r of refused) out.push({ type: 'log', level: 'error', event: 'restore.entry-refused', fields: { ...r } });
  let added = 0;
  // Membership changes first: a task placed before its node is back would miss it.
  for (const restore of [...members, ...found]) {
    if (s.restoring.has(restore.nonce)) continue;
    const signed = signCG({ csn: 0, gssnAck: 0, inc: 0, client: s.id, payload: restore }, s.signer);
    s.restoring.set(restore.nonce, { label: restoreLabel(s, restore), member: restore.type === 'node.restore', signed, replies: new Map() });
    added++;
  }
  s.restoreAtMs = nowMs;
  out.push({
    type: 'log', level: 'warn', event: 'restore.loaded',
    fields: { journals: journals.length, members: members.map((m) => restoreLabel(s, m)), tasks: found.map((r) => r.task), added, refused: refused.length },
  });
}

/** What a restore is called in the records: a task's old id, or `node.add n5`. */
export function restoreLabel(s: WatchdogState, r: TaskRestore | NodeRestore): string {
  if (r.type === 'task.restore') return r.task;
  const change = openRestoredOp(r, s.verifier, s.operatorIds);
  return change.ok ? memberLabel(change.value) : `membership change ${r.nonce}`;
}

/** Replicas of the restarted group heard lately: where restores go. */
export function freshReplicas(s: WatchdogState, nowMs: number): ProcessId[] {
  return [...s.records].filter(([from, r]) => sinceReset(s, from, r.inc) && nowMs - r.lastAtMs <= s.freshMs).map(([from]) => from);
}

/** Sends every unconfirmed restore to the restarted group once rule 2 is armed again (two
 *  consistent replicas: the group serves), and again every RESTORE_RESEND_MS. */
export function sendRestores(s: WatchdogState, nowMs: number, out: CoreEffect[]): void {
  if (s.restoring.size === 0 || !s.armed || nowMs < s.restoreAtMs) return;
  s.restoreAtMs = nowMs + RESTORE_RESEND_MS;
  // The membership changes, until two replicas confirmed all of them; then the tasks.
  const pending = [...s.restoring.values()];
  const now = pending.some((p) => p.member) ? pending.filter((p) => p.member) : pending;
  for (const to of freshReplicas(s, nowMs)) {
    for (const { signed } of now) out.push({ type: 'send', to, item: { type: 'op.request', signed } });
  }
}

/** A replica's outcome for a restore; two identical ones (f + 1) settle it. */
export function onRestoreReply(s: WatchdogState, from: ProcessId, nowMs: number, item: Extract<Item, { type: 'op.reply' }>, out: CoreEffect[]): void {
  const pending = s.restoring.get(item.nonce);
  const rec = s.records.get(from);
  if (pending === undefined || rec === undefined || !sinceReset(s, from, rec.inc)) {
    ignore(s, 'UNEXPECTED');
    return;
  }
  const outcome = `${item.ok ? 'ok' : 'refused'}\u0000${item.text}`;
  pending.replies.set(from, outcome);
  if ([...pending.replies.values()].filter((o) => o === outcome).length < QUORUM) return;
  s.restoring.delete(item.nonce);
  const task = pending.label;
  // The last membership change confirmed: the tasks go at once, not a resend period later.
  if (pending.member && ![...s.restoring.values()].some((p) => p.member)) {
    s.restoreAtMs = nowMs;
    s.restoringMembership = null;
  }
  push(s.restores, { atMs: nowMs, kind: 'restored', task, ok: item.ok, text: item.text }, MAX_RESTORE_HISTORY);
  out.push({ type: 'log', level: item.ok ? 'warn' : 'error', event: 'restore.done', fields: { task, ok: item.ok, text: item.text, rsn: item.rsn } });
}

/** Two views of the membership changes as one: every added node (the later view's address for a
 *  node in both) not removed in either, and every removal. */
export function mergeMembership(a: MembershipChanges, b: MembershipChanges): MembershipChanges {
  const removed = [...new Set([...a.removed, ...b.removed])].sort();
  const added = new Map([...a.added, ...b.added].map((n) => [n.node, n]));
  return { added: [...added.values()].filter((n) => !removed.includes(n.node)), removed };
}
