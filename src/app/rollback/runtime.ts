// A rank's checkpoints and its recovery (docs/PROTOCOL.md §11.3): the state the application
// registered, saved at snapshot() calls once the task's interval has passed (FTI_Snapshot's
// model) together with the channels' state, put in the rank's store (its protector); and, in a
// replacement, the way back: fetch the store, take the newest checkpoint that decodes (and,
// once the group's marks reach the library, whose digest matches, §11.4), else the one before,
// restore the application's state and the channels', then re-inject the log after it. In a
// checkpoint group (`bsco`/`sco`, §11.7) group-checkpoint.ts says when to checkpoint and with
// which id (the group's epoch), and a replacement restores its group's newest complete one.
//
// The application's state is either hooks it gives (`save()` → bytes, `restore(bytes)`) or a
// plain object, which the library encodes with msgpack and restores in place: the same object,
// its fields replaced, so the references the application holds stay good.
import { createHash } from 'node:crypto';
import { assert } from '../../base/result.ts';
import { Packr } from 'msgpackr';
import { decodeCheckpoint, decodeLogEntry, encodeCheckpoint, type LogEntry } from './codec.ts';
import type { Comm, CommLayer } from '../gmpi/comm.ts';
import type { RankStore } from './channels.ts';
import type { RollbackChannels } from './channels-api.ts';
import { CHAIN_ZERO, verifyLogChain, type ChainedStore } from './log-chain.ts';
import { completeCheckpoint, groupRanks, type GroupCheckpoint } from './group-checkpoint.ts';

export type StateHooks = { save(): Uint8Array; restore(bytes: Uint8Array): void };
/** What an application registers: hooks, or a plain object the library serializes. */
export type RegisteredState = StateHooks | Record<string, unknown>;

export type StoredCheckpoint = { readonly id: number; readonly logPos: number; readonly bytes: Uint8Array };
export type StoreContents = {
  readonly checkpoints: readonly StoredCheckpoint[];
  readonly log: readonly { readonly pos: number; readonly blob: Uint8Array }[];
  /** The last log position the store holds. */
  readonly last: number;
};
export type RecoverableStore = RankStore & { fetch(): Promise<StoreContents> };

export type RollbackErrorCode = 'STATE_TOO_LARGE' | 'SAVE_FAILED' | 'RESTORE_FAILED' | 'NO_CHECKPOINT' | 'LOG_CORRUPT' | 'BAD_STATE';
/** A rollback failure the application sees: its process then fails visibly (§11.3: it never
 *  runs on unprotected). */
export class RollbackError extends Error {
  constructor(readonly code: RollbackErrorCode, message: string, override readonly cause?: unknown) {
    super(message);
    this.name = 'RollbackError';
  }
}

const packr = new Packr({ useRecords: false, moreTypes: true });
/** How long a member waits at the BSCO barrier before it warns that its group is out of step. */
export const BSCO_BARRIER_WARN_MS = 10_000;

/** The log entries after position `from`, decoded, if they are contiguous and all decode. */
function readLog(contents: StoreContents, from: number, size: number): { pos: number; entry: LogEntry }[] | null {
  const entries = contents.log.filter((e) => e.pos > from).sort((a, b) => a.pos - b.pos);
  const out: { pos: number; entry: LogEntry }[] = [];
  for (const e of entries) {
    const d = decodeLogEntry(e.blob, size);
    if (!d.ok || e.pos !== from + out.length + 1) return null;
    out.push({ pos: e.pos, entry: d.value });
  }
  return out;
}
const isHooks = (s: RegisteredState): s is StateHooks => typeof s.save === 'function' && typeof s.restore === 'function';

export function checkRegisteredState(s: unknown): RegisteredState {
  if (typeof s !== 'object' || s === null || Array.isArray(s)) {
    throw new RollbackError('BAD_STATE', 'state must be an object: { save(), restore(bytes) } or a plain object of the values to keep');
  }
  const o = s as Record<string, unknown>;
  if ((typeof o.save === 'function') !== (typeof o.restore === 'function')) {
    throw new RollbackError('BAD_STATE', 'state hooks come in pairs: give both save() and restore(bytes)');
  }
  return o;
}

export const digestOf = (b: Uint8Array): Uint8Array => new Uint8Array(createHash('sha256').update(b).digest());

export type RuntimeOptions = {
  readonly channels: RollbackChannels;
  /** The communicators over the channels, and the world one whose collective count a
   *  checkpoint keeps. */
  readonly layer: CommLayer;
  readonly world: Comm;
  /** The rank's store, chaining its log (log-chain.ts): the channels append through it too. */
  readonly store: ChainedStore;
  readonly state: RegisteredState;
  readonly intervalMs: number;
  readonly maxStateBytes: number;
  readonly now: () => number;
  /** The group's record of this rank's checkpoints (PROTOCOL §11.4), oldest first. */
  readonly marks?: readonly Mark[];
  /** Called when the store holds a new checkpoint: its mark goes through the group. */
  readonly onCheckpoint?: (mark: MarkBody) => void;
  /** A `bsco`/`sco` task (PROTOCOL §11.7): the checkpoint group's coordination, every rank's
   *  group and every rank's recorded checkpoints (a group restores its newest complete one). */
  readonly group?: { readonly coordination: GroupCheckpoint; readonly groups: readonly number[]; readonly marks: readonly (readonly Mark[])[] };
};

/** A checkpoint and the log's extent as the group recorded them (src/core/wire/recovery.ts
 *  RollbackMark). */
export type Mark = {
  readonly id: number; readonly logPos: number; readonly digest: Uint8Array; readonly protector: string;
  readonly base: Uint8Array; readonly extent: number; readonly chain: Uint8Array;
};
/** What a rank says of its newest checkpoint (the rollback-init adds its protector). */
export type MarkBody = Omit<Mark, 'protector'>;
const bodyOf = ({ protector: _p, ...body }: Mark): MarkBody => body;

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

export class RollbackRuntime {
  private lastCheckpointAt: number;
  private nextId = 1;
  /** The newest mark this rank sent or the group holds (id 0 before any checkpoint): an extent
   *  report repeats it with the log's new extent. */
  private newest: MarkBody;
  readonly stats = { checkpoints: 0, checkpointBytes: 0, replayed: 0, restoredFrom: 0, refused: 0, fetchMs: 0, restoreMs: 0 };

  constructor(private readonly o: RuntimeOptions) {
    this.lastCheckpointAt = o.now();
    const m = o.marks?.[o.marks.length - 1];
    this.newest = m === undefined ? { id: 0, logPos: 0, digest: CHAIN_ZERO, base: CHAIN_ZERO, extent: 0, chain: CHAIN_ZERO }
      : bodyOf(m);
  }

  /** The newest mark, with the extent of the log its protector holds now (PROTOCOL §11.4): what
   *  goes to the group at a checkpoint, a move, or an extent report. */
  mark(): MarkBody {
    const e = this.o.store.extent();
    if (e.pos > this.newest.extent) this.newest = { ...this.newest, extent: e.pos, chain: e.chain };
    return this.newest;
  }

  /** The mark to send if the log grew since the last one sent (null: nothing new). */
  extentReport(): MarkBody | null {
    const before = this.newest.extent;
    const m = this.mark();
    return m.extent > before ? m : null;
  }

  /** FTI_Snapshot: checkpoint now if the interval has passed (in a checkpoint group, when the
   *  group's coordination says so, §11.7). Returns whether it did. */
  async snapshot(): Promise<boolean> {
    const due = this.o.now() - this.lastCheckpointAt >= this.o.intervalMs;
    const g = this.o.group?.coordination;
    if (g === undefined) {
      if (!due) return false;
      await this.checkpoint();
      return true;
    }
    g.calls++;
    const id = await g.decide(due);
    if (id === null) return false;
    await this.checkpoint(id);
    // BSCO: the barrier, every member has stored it (radic-hmpl A.2.8 BSCO steps 3-4).
    if (g.mode === 'bsco') await this.barrier(g, id);
    return true;
  }

  /** BSCO's barrier: every member has stored checkpoint `id`. It needs the members to reach the
   *  same snapshot() call (SPMD); one that waits there long says so on stderr, once, since a
   *  member that never gets there (master/worker, or one that finished) holds it forever. */
  private async barrier(g: GroupCheckpoint, id: number): Promise<void> {
    const warn = setTimeout(() => {
      const missing = groupRanks(this.o.group!.groups, this.o.channels.self).filter((r) => r !== this.o.channels.self);
      process.stderr.write(`trine: rollback rank ${this.o.channels.self} has waited ${BSCO_BARRIER_WARN_MS} ms at the bsco barrier of checkpoint ${id} for ranks ${missing.join(', ')} of its node: bsco needs every rank of a node to call snapshot() in step (SPMD); use --checkpoint sco otherwise\n`);
    }, BSCO_BARRIER_WARN_MS);
    warn.unref();
    try {
      await g.until(() => g.allStored(id));
    } finally {
      clearTimeout(warn);
    }
  }

  /** A member of a checkpoint group, first incarnation, at init: checkpoint 1 is the group's
   *  origin, the start (no state, log position 0), so that a group with no later complete
   *  checkpoint restarts from the beginning, and the store keeps its log from position 1 until
   *  the member's second checkpoint (§11.7). */
  async origin(): Promise<void> {
    const g = this.o.group?.coordination;
    assert(g !== undefined && this.o.channels.st.logPos === 0, 'the origin is a group member\'s first checkpoint, at init');
    const ch = this.o.channels;
    const bytes = encodeCheckpoint({ id: 1, logPos: 0, app: new Uint8Array(0), channels: ch.capture(), collectives: 0, origin: true });
    await this.o.store.putCheckpoint(1, 0, bytes);
    this.newest = { id: 1, logPos: 0, digest: digestOf(bytes), base: CHAIN_ZERO, extent: 0, chain: CHAIN_ZERO };
    this.o.onCheckpoint?.(this.mark());
    ch.st.epoch = 1;
    g.epoch = 1;
    g.stored(1);
  }

  /** Take a checkpoint now, with id `groupId` in a checkpoint group (its epoch, §11.7). */
  async checkpoint(groupId?: number): Promise<void> {
    const ch = this.o.channels;
    // Nothing of ours may wait unlogged at a receiver: the sends before a checkpoint are never
    // re-executed (HMPL's sender TB drains first; under RBML it is empty between calls).
    await ch.drained();
    const app = this.saveApp();
    const id = groupId ?? this.nextId++;
    const bytes = encodeCheckpoint({ id, logPos: ch.st.logPos, app, channels: ch.capture(), collectives: this.o.layer.collectivesBegun(this.o.world) });
    // The epoch moves at the capture: what arrives from now on is after this checkpoint's line.
    const g = this.o.group?.coordination;
    if (g !== undefined) ch.st.epoch = g.epoch = id;
    if (bytes.length > this.o.maxStateBytes) {
      throw new RollbackError('STATE_TOO_LARGE', `the checkpoint is ${bytes.length} bytes, above the task's limit of ${this.o.maxStateBytes}: raise --max-state or keep less state`);
    }
    const logPos = ch.st.logPos;
    const base = this.o.store.chainAt(logPos);
    await this.o.store.putCheckpoint(id, logPos, bytes);
    // The protector took it, so it holds the log up to its position at least.
    this.newest = { id, logPos, digest: digestOf(bytes), base, extent: logPos, chain: base };
    this.o.onCheckpoint?.(this.mark());
    g?.stored(id);
    this.lastCheckpointAt = this.o.now();
    this.stats.checkpoints++;
    this.stats.checkpointBytes = bytes.length;
  }

  /** A replacement: restore the newest usable checkpoint and re-inject the log after it. With
   *  no checkpoint yet, the rank starts as a first incarnation does, and the whole log, kept
   *  since position 1, is replayed. */
  async recover(): Promise<void> {
    const t0 = this.o.now();
    const contents = await this.o.store.fetch();
    this.stats.fetchMs = this.o.now() - t0;
    try {
      this.restoreFrom(contents);
    } finally {
      this.stats.restoreMs = this.o.now() - t0 - this.stats.fetchMs;
    }
  }

  private restoreFrom(contents: StoreContents): void {
    if (this.o.group !== undefined) return this.restoreGroup(contents, this.o.group);
    const all = this.o.marks ?? [];
    // Marks of id 0 only say where a rank's data moved before its first checkpoint, and how far
    // its log reached.
    const recorded = all.filter((m) => m.id > 0);
    if (contents.checkpoints.length === 0 && recorded.length > 0) {
      throw new RollbackError('NO_CHECKPOINT', `the group recorded checkpoint ${recorded[recorded.length - 1]!.id} of this rank, and the protector holds none`);
    }
    if (contents.checkpoints.length === 0) {
      const log = readLog(contents, 0, this.o.channels.size());
      if (log === null) throw new RollbackError('LOG_CORRUPT', 'the log of this rank is broken and it has no checkpoint');
      const chained = verifyLogChain(contents, 0, CHAIN_ZERO, all);
      if (!chained.ok) throw new RollbackError('LOG_CORRUPT', `the log of this rank is refused: ${chained.reason}`);
      for (const { pos, entry } of log) this.o.channels.replay(pos, entry);
      this.stats.replayed = log.length;
      this.goOn(chained.head, contents);
      return;
    }
    const byNewest = [...contents.checkpoints].sort((a, b) => b.id - a.id);
    const marks = recorded;
    let lastError: RollbackError | null = null;
    for (const c of byNewest) {
      const size = this.o.channels.size();
      // Byzantine care (§11.4): once the group holds marks for this rank, only a checkpoint
      // whose id, position and digest one of them names is taken; the protector may be faulty.
      const mark = marks.find((m) => m.id === c.id && m.logPos === c.logPos && sameBytes(m.digest, digestOf(c.bytes)));
      if (marks.length > 0 && mark === undefined) {
        this.stats.refused++;
        lastError = new RollbackError('NO_CHECKPOINT', `checkpoint ${c.id} from the protector does not match the group's record: refused`);
        continue;
      }
      const body = decodeCheckpoint(c.bytes, size, this.o.maxStateBytes);
      if (!body.ok || body.value.id !== c.id || body.value.logPos !== c.logPos) {
        this.stats.refused++;
        lastError = new RollbackError('NO_CHECKPOINT', `checkpoint ${c.id} is unreadable: ${body.ok ? 'its header disagrees with the store' : body.detail}`);
        continue;
      }
      const decoded = readLog(contents, c.logPos, size);
      if (decoded === null) {
        this.stats.refused++;
        lastError = new RollbackError('LOG_CORRUPT', `the log after checkpoint ${c.id} is broken`);
        continue;
      }
      // The log after it must meet every extent the group recorded (log-chain.ts). A checkpoint
      // the group has no mark of yet (its process died before the mark was ordered, §11.4's
      // window) gives no base: its log's chain starts again from it.
      const chained = verifyLogChain(contents, c.logPos, mark?.base ?? CHAIN_ZERO, mark === undefined ? [] : all);
      if (!chained.ok) {
        this.stats.refused++;
        lastError = new RollbackError('LOG_CORRUPT', `the log after checkpoint ${c.id} is refused: ${chained.reason}`);
        continue;
      }
      this.restoreApp(body.value.app);
      this.o.channels.restore(body.value.channels, c.logPos);
      this.o.layer.restoreCollectivesBegun(this.o.world, body.value.collectives);
      for (const { pos, entry } of decoded) this.o.channels.replay(pos, entry);
      this.stats.replayed = decoded.length;
      this.stats.restoredFrom = c.id;
      // Ids and positions go on past everything stored, a refused checkpoint or entry included:
      // the store takes no id or position twice (protector-store.ts).
      this.nextId = Math.max(...contents.checkpoints.map((x) => x.id)) + 1;
      this.goOn(chained.head, contents);
      if (mark !== undefined) this.newest = bodyOf(mark);
      this.lastCheckpointAt = this.o.now();
      return;
    }
    throw lastError ?? new RollbackError('NO_CHECKPOINT', 'the protector holds no checkpoint of this rank');
  }

  /** The replacement's own entries go after everything its protector holds, and chain on from
   *  the last of them. */
  private goOn(head: { pos: number; chain: Uint8Array }, contents: StoreContents): void {
    if (contents.last > head.pos) {
      throw new RollbackError('LOG_CORRUPT', `the protector's log ends at position ${head.pos}, before its checkpoint's position ${contents.last}`);
    }
    if (head.pos > this.o.channels.st.logPos) this.o.channels.skipLogTo(head.pos);
    this.o.store.reset(head);
  }

  /** A member of a restarting checkpoint group (§11.7; radic-hmpl A.2.8 "the protector restarts
   *  the failed group from its last checkpoint files"): the newest checkpoint complete in every
   *  member's record, or none. No member falls back alone to an older one: its group would not
   *  restart from the same line (a refused checkpoint fails visibly instead). */
  private restoreGroup(contents: StoreContents, group: NonNullable<RuntimeOptions['group']>): void {
    const self = this.o.channels.self;
    const members = groupRanks(group.groups, self);
    const k = completeCheckpoint(group.marks, [self, ...members.filter((r) => r !== self)]);
    if (k === null) throw new RollbackError('NO_CHECKPOINT', `no checkpoint of group ${members.join(',')} is in every member's record yet`);
    const mark = (group.marks[self] ?? []).find((m) => m.id === k)!;
    const c = contents.checkpoints.find((x) => x.id === k);
    if (c === undefined || c.logPos !== mark.logPos || !sameBytes(mark.digest, digestOf(c.bytes))) {
      this.stats.refused++;
      throw new RollbackError('NO_CHECKPOINT', `the protector holds no checkpoint ${k} matching the group's record: refused`);
    }
    const size = this.o.channels.size();
    const body = decodeCheckpoint(c.bytes, size, this.o.maxStateBytes);
    if (!body.ok || body.value.id !== c.id || body.value.logPos !== c.logPos) throw new RollbackError('NO_CHECKPOINT', `checkpoint ${k} is unreadable`);
    const log = readLog(contents, c.logPos, size);
    if (log === null) throw new RollbackError('LOG_CORRUPT', `the log after checkpoint ${k} is broken`);
    const chained = verifyLogChain(contents, c.logPos, mark.base, group.marks[self] ?? []);
    if (!chained.ok) throw new RollbackError('LOG_CORRUPT', `the log after checkpoint ${k} is refused: ${chained.reason}`);
    // The origin (checkpoint 1 at init) restores nothing: the program builds its state again.
    if (body.value.origin !== true) {
      this.restoreApp(body.value.app);
      this.o.channels.restore(body.value.channels, c.logPos);
      this.o.layer.restoreCollectivesBegun(this.o.world, body.value.collectives);
    }
    for (const { pos, entry } of log) this.o.channels.replay(pos, entry);
    this.stats.replayed = log.length;
    this.stats.restoredFrom = k;
    this.o.channels.st.epoch = k;
    const floor = Math.max(...contents.checkpoints.map((x) => x.id), ...(group.marks[self] ?? []).map((m) => m.id));
    group.coordination.restored(k, floor);
    this.goOn(chained.head, contents);
    this.newest = bodyOf(mark);
    this.lastCheckpointAt = this.o.now();
  }

  private saveApp(): Uint8Array {
    const s = this.o.state;
    try {
      if (!isHooks(s)) return packr.pack(s);
      const b = s.save();
      if (!(b instanceof Uint8Array)) throw new Error('save() must return a Uint8Array');
      return b;
    } catch (e) {
      throw new RollbackError('SAVE_FAILED', `saving the application's state failed: ${(e as Error).message}`, e);
    }
  }

  private restoreApp(bytes: Uint8Array): void {
    const s = this.o.state;
    try {
      if (isHooks(s)) {
        s.restore(bytes);
        return;
      }
      const v: unknown = packr.unpack(bytes);
      if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('the saved state is not an object');
      for (const k of Object.keys(s)) delete s[k];
      Object.assign(s, v);
    } catch (e) {
      throw new RollbackError('RESTORE_FAILED', `restoring the application's state failed: ${(e as Error).message}`, e);
    }
  }
}
