// A rank's checkpoints and its recovery (docs/PROTOCOL.md §11.3): the state the application
// registered, saved at snapshot() calls once the task's interval has passed (FTI_Snapshot's
// model) together with the channels' state, put in the rank's store (its protector); and, in a
// replacement, the way back: fetch the store, take the newest checkpoint that decodes (and,
// once the group's marks reach the library, whose digest matches, §11.4), else the one before,
// restore the application's state and the channels', then re-inject the log after it.
//
// The application's state is either hooks it gives (`save()` → bytes, `restore(bytes)`) or a
// plain object, which the library encodes with msgpack and restores in place: the same object,
// its fields replaced, so the references the application holds stay good.
import { createHash } from 'node:crypto';
import { Packr } from 'msgpackr';
import { decodeCheckpoint, decodeLogEntry, encodeCheckpoint, type LogEntry } from './codec.ts';
import type { Comm, CommLayer } from '../gmpi/comm.ts';
import type { RankStore } from './channels.ts';
import type { RollbackChannels } from './channels-api.ts';

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
  readonly store: RecoverableStore;
  readonly state: RegisteredState;
  readonly intervalMs: number;
  readonly maxStateBytes: number;
  readonly now: () => number;
  /** The group's record of this rank's checkpoints (PROTOCOL §11.4), oldest first. */
  readonly marks?: readonly Mark[];
  /** Called when the store holds a new checkpoint: its mark goes through the group. */
  readonly onCheckpoint?: (mark: Omit<Mark, 'protector'>) => void;
};

/** A checkpoint as the group recorded it (src/core/wire/recovery.ts RollbackMark). */
export type Mark = { readonly id: number; readonly logPos: number; readonly digest: Uint8Array; readonly protector: string };

const sameBytes = (a: Uint8Array, b: Uint8Array): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

export class RollbackRuntime {
  private lastCheckpointAt: number;
  private nextId = 1;
  readonly stats = { checkpoints: 0, checkpointBytes: 0, replayed: 0, restoredFrom: 0, refused: 0, fetchMs: 0, restoreMs: 0 };

  constructor(private readonly o: RuntimeOptions) {
    this.lastCheckpointAt = o.now();
  }

  /** FTI_Snapshot: checkpoint now if the interval has passed. Returns whether it did. */
  async snapshot(): Promise<boolean> {
    if (this.o.now() - this.lastCheckpointAt < this.o.intervalMs) return false;
    await this.checkpoint();
    return true;
  }

  /** Take a checkpoint now (the first one is taken at init: a replacement always has one). */
  async checkpoint(): Promise<void> {
    const ch = this.o.channels;
    // Nothing of ours may wait unlogged at a receiver: the sends before a checkpoint are never
    // re-executed (HMPL's sender TB drains first; under RBML it is empty between calls).
    await ch.drained();
    const app = this.saveApp();
    const id = this.nextId++;
    const bytes = encodeCheckpoint({ id, logPos: ch.st.logPos, app, channels: ch.capture(), collectives: this.o.layer.collectivesBegun(this.o.world) });
    if (bytes.length > this.o.maxStateBytes) {
      throw new RollbackError('STATE_TOO_LARGE', `the checkpoint is ${bytes.length} bytes, above the task's limit of ${this.o.maxStateBytes}: raise --max-state or keep less state`);
    }
    const logPos = ch.st.logPos;
    await this.o.store.putCheckpoint(id, logPos, bytes);
    this.o.onCheckpoint?.({ id, logPos, digest: digestOf(bytes) });
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
    // Marks of id 0 only say where a rank's data moved before its first checkpoint.
    const recorded = (this.o.marks ?? []).filter((m) => m.id > 0);
    if (contents.checkpoints.length === 0 && recorded.length > 0) {
      throw new RollbackError('NO_CHECKPOINT', `the group recorded checkpoint ${recorded[recorded.length - 1]!.id} of this rank, and the protector holds none`);
    }
    if (contents.checkpoints.length === 0) {
      const log = readLog(contents, 0, this.o.channels.size());
      if (log === null) throw new RollbackError('LOG_CORRUPT', 'the log of this rank is broken and it has no checkpoint');
      for (const { pos, entry } of log) this.o.channels.replay(pos, entry);
      this.stats.replayed = log.length;
      return;
    }
    const byNewest = [...contents.checkpoints].sort((a, b) => b.id - a.id);
    const marks = recorded;
    let lastError: RollbackError | null = null;
    for (const c of byNewest) {
      const size = this.o.channels.size();
      // Byzantine care (§11.4): once the group holds marks for this rank, only a checkpoint
      // whose id, position and digest one of them names is taken; the protector may be faulty.
      if (marks.length > 0 && !marks.some((m) => m.id === c.id && m.logPos === c.logPos && sameBytes(m.digest, digestOf(c.bytes)))) {
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
      this.restoreApp(body.value.app);
      this.o.channels.restore(body.value.channels, c.logPos);
      this.o.layer.restoreCollectivesBegun(this.o.world, body.value.collectives);
      for (const { pos, entry } of decoded) this.o.channels.replay(pos, entry);
      this.stats.replayed = decoded.length;
      this.stats.restoredFrom = c.id;
      // Ids and positions go on past everything stored, a refused checkpoint or entry included:
      // the store takes no id or position twice (protector-store.ts).
      this.nextId = Math.max(...contents.checkpoints.map((x) => x.id)) + 1;
      if (contents.last > this.o.channels.st.logPos) this.o.channels.skipLogTo(contents.last);
      this.lastCheckpointAt = this.o.now();
      return;
    }
    throw lastError ?? new RollbackError('NO_CHECKPOINT', 'the protector holds no checkpoint of this rank');
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
