// A rank's store that survives its protector's node (RADIC's reconfiguration, radic-hmpl A.2.7:
// "the observers on Node_z redirect their logs and checkpoints to T_x"; docs/PROTOCOL.md §11.4).
// This file owns the choice of the next protector and the move: the process keeps, in its own
// memory, its last stored checkpoint and the log entries since it (what a protector would need
// to go on), and when its protector's connection fails it connects to the next protector of the
// ring it knows, puts that checkpoint there, appends the entries again in order, tells the group
// where its data now is (the same mark, another protector), and then completes the operations
// that were waiting. A refusal (a bound, a fence) is no transport failure: it stays an error.
import { PROTECTOR_MAX_LOG_BYTES } from '../../core/constants.ts';
import { ProtectorError } from './protector-client.ts';
import type { RecoverableStore, StoreContents, StoredCheckpoint } from './runtime.ts';

/** What the store needs of a protector connection (ProtectorClient). */
export type StoreClient = RecoverableStore & { close(): Promise<void> };

/** Failures of the connection, not of the request: the protector (or its node) is gone, or is
 *  stopping (SHUTDOWN: its node leaves). */
const TRANSPORT: readonly string[] = ['CONNECT_FAILED', 'TIMEOUT', 'CONNECTION_LOST', 'PROTOCOL', 'SHUTDOWN'];
const isTransport = (e: unknown): boolean => e instanceof ProtectorError && TRANSPORT.includes(e.code);

export type FailoverOptions = {
  /** The protectors to try, the first being the rank's own; the others in ring order. */
  readonly endpoints: readonly string[];
  readonly connect: (endpoint: string) => Promise<StoreClient>;
  /** The data moved to `endpoint`, its base being `checkpoint` (null: none yet, the log from 1). */
  readonly onMoved: (endpoint: string, checkpoint: StoredCheckpoint | null) => void;
};

export class FailoverStore implements StoreClient {
  private client: StoreClient | null = null;
  private at = 0;
  private checkpoint: StoredCheckpoint | null = null;
  /** Entries since `checkpoint` (all of them before the first), by position. */
  private readonly entries = new Map<number, Uint8Array>();
  private entryBytes = 0;
  private moving: Promise<void> | null = null;
  readonly stats = { moves: 0 };

  constructor(private readonly o: FailoverOptions) {}

  /** The protector that holds the data now. */
  get endpoint(): string {
    return this.o.endpoints[this.at] ?? '';
  }

  /** Connect. `holding`: the first protector holds this rank's data (a replacement's
   *  checkpoints and log), so no other will do; otherwise (nothing stored yet) the first of the
   *  ring that answers takes the rank. */
  async open(holding: boolean): Promise<void> {
    if (holding) {
      try {
        this.client = await this.o.connect(this.endpoint);
      } catch (e) {
        if (!isTransport(e)) throw e;
        throw new ProtectorError('CONNECT_FAILED', `the protector at ${this.endpoint}, which holds this rank's checkpoints and log, does not answer (${(e as Error).message}): its node failed as well as the rank's, and a rank survives the failure of its node or of its protector's, not of both (radic-hmpl A.2.7): it cannot be restored`);
      }
      return;
    }
    for (let tries = 0; tries < this.o.endpoints.length; tries++) {
      try {
        this.client = await this.o.connect(this.endpoint);
        return;
      } catch (e) {
        if (!isTransport(e)) throw e;
        this.at = (this.at + 1) % this.o.endpoints.length;
      }
    }
    throw new ProtectorError('CONNECT_FAILED', `no protector of the ring answers (tried ${this.o.endpoints.length})`);
  }

  async append(pos: number, blob: Uint8Array): Promise<void> {
    this.entries.set(pos, blob);
    this.entryBytes += blob.length;
    if (this.entryBytes > PROTECTOR_MAX_LOG_BYTES) {
      throw new ProtectorError('LOG_FULL', `the log since the last checkpoint holds ${this.entryBytes} bytes: checkpoint more often (--checkpoint-interval)`);
    }
    await this.retrying((c) => c.append(pos, blob));
  }

  async putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    await this.retrying((c) => c.putCheckpoint(id, logPos, bytes));
    this.checkpoint = { id, logPos, bytes };
    for (const [pos, blob] of this.entries) {
      if (pos > logPos) continue;
      this.entries.delete(pos);
      this.entryBytes -= blob.length;
    }
  }

  fetch(): Promise<StoreContents> {
    return this.retrying((c) => c.fetch(), false);
  }

  async close(): Promise<void> {
    await this.client?.close();
  }

  /** Run `op` on the current protector; when its connection fails, move and run it again (an
   *  append already recorded is moved with the rest, and the repeat is acknowledged as such). */
  private async retrying<T>(op: (c: StoreClient) => Promise<T>, move = true): Promise<T> {
    for (;;) {
      if (this.moving !== null) await this.moving;
      const c = this.client;
      if (c === null) throw new ProtectorError('CLOSED', 'the store is not open');
      try {
        return await op(c);
      } catch (e) {
        if (!move || !isTransport(e)) throw e;
        if (this.client === c) this.moving ??= this.moveOn().finally(() => (this.moving = null));
      }
    }
  }

  /** Connect to the next protector that answers and give it what the old one held. */
  private async moveOn(): Promise<void> {
    const old = this.client;
    this.client = null;
    void old?.close().catch(() => undefined);
    for (let tries = 1; tries < this.o.endpoints.length; tries++) {
      this.at = (this.at + 1) % this.o.endpoints.length;
      let c: StoreClient;
      try {
        c = await this.o.connect(this.endpoint);
      } catch (e) {
        if (isTransport(e)) continue;
        throw e;
      }
      if (this.checkpoint !== null) await c.putCheckpoint(this.checkpoint.id, this.checkpoint.logPos, this.checkpoint.bytes);
      for (const pos of [...this.entries.keys()].sort((a, b) => a - b)) await c.append(pos, this.entries.get(pos)!);
      this.client = c;
      this.stats.moves++;
      this.o.onMoved(this.endpoint, this.checkpoint);
      return;
    }
    throw new ProtectorError('CONNECT_FAILED', `no protector of the ring answers (tried ${this.o.endpoints.length})`);
  }
}
