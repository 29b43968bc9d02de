// A task's recovery option and its rank table on the wire (docs/PROTOCOL.md §11.1, §11.2): what
// `task.submit` asks for (app-specific recovery, or rollback with its logging, checkpoint policy
// and bounds), and what a rollback task's mapping tells its processes (the ranks and the
// options). The decoders only check shapes and lengths; whether the numbers are in range is the
// group's judgement (src/core/cluster-rollback.ts rollbackRefusal), so a forged request gets an
// operator answer that says what is wrong, not a silent drop. Part of the schemas that
// messages.ts gathers.
import { MAX_TASK_PROCS } from '../constants.ts';
import { err, ok } from '../../base/result.ts';
import { bool, bytes, list, nullable, oneOf, struct, uint, type Schema } from './schema.ts';
import { endpointText } from './basics.ts';

/** RADIC's receiver-based pessimistic logging, HMPL's hybrid logging, MPICH-V's channel memories. */
export const ROLLBACK_LOGGINGS = ['rbml', 'hmpl', 'cm'] as const;
export type RollbackLogging = (typeof ROLLBACK_LOGGINGS)[number];
/** Uncoordinated, or RADIC's semi-coordinated BSCO / SCO (per node). */
export const ROLLBACK_CHECKPOINTS = ['nco', 'bsco', 'sco'] as const;
export type RollbackCheckpoint = (typeof ROLLBACK_CHECKPOINTS)[number];

/** §11.1: `intervalMs` is the least time between two checkpoints of a rank, `maxStateBytes` the
 *  largest checkpoint of one rank. */
export type RollbackOptions = { logging: RollbackLogging; checkpoint: RollbackCheckpoint; intervalMs: number; maxStateBytes: number };
/** `app`: Ghidrah's app-specific recovery, the default; `rollback`: §11. */
export type Recovery = { kind: 'app' } | ({ kind: 'rollback' } & RollbackOptions);
/** The default, and what every task submitted before §11 was. */
export const APP_RECOVERY: Recovery = { kind: 'app' };

const OPTION_FIELDS = ['logging', 'checkpoint', 'intervalMs', 'maxStateBytes'] as const;
export const rollbackOptions: Schema<RollbackOptions> = struct<RollbackOptions>(OPTION_FIELDS, {
  logging: oneOf(ROLLBACK_LOGGINGS), checkpoint: oneOf(ROLLBACK_CHECKPOINTS), intervalMs: uint, maxStateBytes: uint,
});

const APP_CODE = 0;
const ROLLBACK_CODE = 1;

/** Tagged on `kind` as [code, ...fields], the way `union` tags on `type`. */
export const recovery: Schema<Recovery> = {
  enc: (v) => (v.kind === 'app' ? [APP_CODE] : [ROLLBACK_CODE, ...(rollbackOptions.enc(v) as unknown[])]),
  dec: (t, p) => {
    if (!Array.isArray(t) || t.length === 0) return err('WIRE_MALFORMED', `${p}: expected tagged recovery`);
    if (t[0] === APP_CODE) return t.length === 1 ? ok({ kind: 'app' }) : err('WIRE_MALFORMED', `${p}<app>: expected no fields`);
    if (t[0] !== ROLLBACK_CODE) return err('WIRE_UNKNOWN_TYPE', `${p}: unknown recovery code ${String(t[0])}`);
    const r = rollbackOptions.dec(t.slice(1), `${p}<rollback>`);
    return r.ok ? ok({ kind: 'rollback', ...r.value }) : r;
  },
};

/** A rank's checkpoint as recorded through the group (PROTOCOL §11.4): its id and log position,
 *  the SHA-256 of its bytes, and the protector that holds it; and the extent of the rank's log
 *  by its chain digest (src/app/rollback/log-chain.ts): `base` is the chain at `logPos`, `chain`
 *  the chain at `extent` (≥ logPos), the last position the protector held when the mark was
 *  sent. A replacement takes only a checkpoint that matches one, and only log entries whose
 *  chain meets every recorded extent. */
export type RollbackMark = { id: number; logPos: number; digest: Uint8Array; protector: string; base: Uint8Array; extent: number; chain: Uint8Array };
/** Marks kept per rank: the last two, as the protector keeps the last two checkpoints. */
export const ROLLBACK_MARKS_KEPT = 2;
export const DIGEST_BYTES = 32;
const digest32 = bytes(DIGEST_BYTES, DIGEST_BYTES);
export const markFields = { id: uint, logPos: uint, digest: digest32, protector: endpointText, base: digest32, extent: uint, chain: digest32 };
export const MARK_ORDER = ['id', 'logPos', 'digest', 'protector', 'base', 'extent', 'chain'] as const;
const markStruct = struct<RollbackMark>(MARK_ORDER, markFields);
/** The extent is never before the checkpoint's position. */
export const rollbackMark: Schema<RollbackMark> = {
  enc: markStruct.enc,
  dec: (t, p) => {
    const r = markStruct.dec(t, p);
    if (!r.ok) return r;
    return r.value.extent >= r.value.logPos ? r : err('WIRE_MALFORMED', `${p}.extent: ${r.value.extent} is before the checkpoint's position ${r.value.logPos}`);
  },
};
const marksList = list(rollbackMark, ROLLBACK_MARKS_KEPT);

/** What the `proc.mapping` command carries for a rollback task (§11.2): rank r is held now by
 *  VPID ranks[r]; the agent gives each process it delivers to its own rank. */
export type RollbackTable = RollbackOptions & {
  ranks: number[];
  /** Per rank, its protector's endpoint (PROTOCOL §11.4): the next live node of the ring after
   *  the node holding the rank; '' when there is none. */
  protectors: string[];
  /** Per rank, its recorded checkpoints (§11.4), oldest first. */
  marks: RollbackMark[][];
  /** Per rank, its checkpoint group (§11.7): the lowest rank placed on its node when the task
   *  started, fixed for the task's life; every rank its own group under `nco`. */
  groups: number[];
  /** Per rank, whether its holder ended normally (§11.3): it finalized, so every message it was
   *  sent is logged and every one it sent acknowledged; a replacement sends it nothing again. */
  finished: boolean[];
};
/** What a rollback task's process receives in its mapping: its own rank, protector and marks. */
export type RollbackMapping = RollbackTable & { rank: number; protector: string };

const ranks = list(uint, MAX_TASK_PROCS);
const protectors = list(endpointText, MAX_TASK_PROCS);
const marks = list(marksList, MAX_TASK_PROCS);
const groups = list(uint, MAX_TASK_PROCS);
const finished = list(bool, MAX_TASK_PROCS);
const tableStruct = struct<RollbackTable>(['ranks', 'protectors', 'marks', 'groups', 'finished', ...OPTION_FIELDS], {
  ranks, protectors, marks, groups, finished, logging: oneOf(ROLLBACK_LOGGINGS), checkpoint: oneOf(ROLLBACK_CHECKPOINTS), intervalMs: uint, maxStateBytes: uint,
});

/** Why `t`'s per-rank lists disagree with its ranks, or null: every list has one entry per rank,
 *  and a rank's group is a rank of the table (§11.7). */
function tableRefusal(t: RollbackTable): string | null {
  const n = t.ranks.length;
  if (t.protectors.length !== n || t.marks.length !== n || t.groups.length !== n || t.finished.length !== n) {
    return `per-rank lists of ${t.protectors.length}/${t.marks.length}/${t.groups.length}/${t.finished.length} for ${n} ranks`;
  }
  const bad = t.groups.findIndex((g) => g >= n);
  return bad < 0 ? null : `rank ${bad}'s group ${t.groups[bad]!} is not one of ${n} ranks`;
}
export const rollbackTable: Schema<RollbackTable | null> = nullable({
  enc: tableStruct.enc,
  dec: (t, p) => {
    const r = tableStruct.dec(t, p);
    if (!r.ok) return r;
    const why = tableRefusal(r.value);
    return why === null ? r : err('WIRE_MALFORMED', `${p}: ${why}`);
  },
});

const mappingStruct = struct<RollbackMapping>(['rank', 'protector', 'ranks', 'protectors', 'marks', 'groups', 'finished', ...OPTION_FIELDS], {
  rank: uint, protector: endpointText, ranks, protectors, marks, groups, finished, logging: oneOf(ROLLBACK_LOGGINGS), checkpoint: oneOf(ROLLBACK_CHECKPOINTS), intervalMs: uint, maxStateBytes: uint,
});
/** A process's rank is one of the table's. */
export const rollbackMapping: Schema<RollbackMapping | null> = nullable({
  enc: mappingStruct.enc,
  dec: (t, p) => {
    const r = mappingStruct.dec(t, p);
    if (!r.ok) return r;
    if (r.value.rank >= r.value.ranks.length) return err('WIRE_MALFORMED', `${p}.rank: ${r.value.rank} is not one of ${r.value.ranks.length} ranks`);
    const why = tableRefusal(r.value);
    return why === null ? r : err('WIRE_MALFORMED', `${p}: ${why}`);
  },
});

/** The rank `vpid` holds in `table`, or null. */
export function rankOf(table: RollbackTable, vpid: number): number | null {
  const rank = table.ranks.indexOf(vpid);
  return rank < 0 ? null : rank;
}
