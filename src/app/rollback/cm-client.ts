// The library's side of a channel memory (docs/PROTOCOL.md §11.6; mpichv-dgrp 1.1, 1.2.1): a
// connection to a protector in its channel-memory role. Over it a rank deposits the messages it
// sends to the ranks homed there (each resolves once the CM holds it: the send is logged before
// its receiver can get it) and, at its own home CM, subscribes to its log, whose entries arrive
// in the CM's order. The connection is a ProtectorClient (one per (task, rank) at a protector):
// at the rank's home CM the same connection also carries its checkpoints and its fetch, so this
// class is the rank's store there too.
import { PROTECTOR_MAX_ENTRY_BYTES } from '../../core/constants.ts';
import type { CmAnswer, FetchedStore, ProtectorConnectOptions } from './protector-client.ts';
import { ProtectorClient, ProtectorError } from './protector-client.ts';
import type { RecoverableStore } from './runtime.ts';

/** Deposits awaiting the CM's answer on one connection: a rank has at most one per send in
 *  flight (a send completes at its answer), so this caps concurrent isends; beyond it, LIMIT. */
export const CM_MAX_PENDING_DEPOSITS = 65_536;

type Pending = { resolve: () => void; reject: (e: ProtectorError) => void };
export type PushHandler = (first: number, blobs: readonly Uint8Array[]) => void;

export class CmClient implements RecoverableStore {
  /** `${dest}/${ssn}` → the send waiting for it. */
  private readonly pending = new Map<string, Pending>();
  private onPush: PushHandler | null = null;
  /** The last position pushed (contiguity is checked here). */
  private pushedTo = 0;
  private failure: ProtectorError | null = null;
  private readonly lost: ((e: ProtectorError) => void)[] = [];

  private constructor(readonly endpoint: string, private readonly client: ProtectorClient) {
    client.attachCm({ onAnswer: (m) => this.onAnswer(m), onFail: (e) => this.fail(e) });
  }

  static async connect(endpoint: string, opts: ProtectorConnectOptions): Promise<CmClient> {
    return new CmClient(endpoint, await ProtectorClient.connect(opts));
  }

  /** The rank's last log position the CM held at the welcome. */
  get last(): number {
    return this.client.last;
  }

  /** Called once if the connection fails (not after close()). */
  onLost(f: (e: ProtectorError) => void): void {
    if (this.failure !== null && this.failure.code !== 'CLOSED') f(this.failure);
    else this.lost.push(f);
  }

  /** Log message `ssn` to `dest` (its entry `blob`, or its fragments' entries in order) at this
   *  CM: resolves once the CM holds it, now or from an earlier incarnation's deposit (a
   *  duplicate, silent re-execution). */
  deposit(dest: number, ssn: number, blob: Uint8Array | readonly Uint8Array[]): Promise<void> {
    if (this.failure !== null) return Promise.reject(this.failure);
    const blobs = blob instanceof Uint8Array ? [blob] : blob;
    const big = blobs.find((b) => b.length > PROTECTOR_MAX_ENTRY_BYTES);
    if (big !== undefined || blobs.length === 0) return Promise.reject(new ProtectorError('BAD_ARGUMENT', `an entry of ${big?.length ?? 0} bytes (at most ${PROTECTOR_MAX_ENTRY_BYTES}), ${blobs.length} entries`));
    const key = `${dest}/${ssn}`;
    if (this.pending.has(key)) return Promise.reject(new ProtectorError('BAD_ARGUMENT', `message ${ssn} to rank ${dest} is being deposited already`));
    if (this.pending.size >= CM_MAX_PENDING_DEPOSITS) return Promise.reject(new ProtectorError('LIMIT', `${this.pending.size} deposits await their answer`));
    return new Promise<void>((resolve, reject) => {
      this.pending.set(key, { resolve, reject });
      for (const b of blobs) {
        const e = this.client.sendCm({ type: 'deposit', dest, ssn, blob: b });
        if (e !== null) return this.fail(e);
      }
    });
  }

  /** Receive this rank's log entries after position `from`, and each one appended later, in the
   *  CM's order (mpichv-dgrp 1.2.1). */
  subscribe(from: number, onPush: PushHandler): void {
    if (this.onPush !== null) throw new ProtectorError('BAD_ARGUMENT', 'subscribed already');
    this.onPush = onPush;
    this.pushedTo = from;
    const e = this.client.sendCm({ type: 'subscribe', from });
    if (e !== null) this.fail(e);
  }

  append(): Promise<void> {
    // Under channel memories the senders fill the log (deposit); the rank never appends.
    return Promise.reject(new ProtectorError('BAD_ARGUMENT', 'a rank under channel memories does not append to its own log'));
  }

  putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    return this.client.putCheckpoint(id, logPos, bytes);
  }

  fetch(): Promise<FetchedStore> {
    return this.client.fetch();
  }

  async close(): Promise<void> {
    this.fail(new ProtectorError('CLOSED', 'the client was closed'));
    await this.client.close();
  }

  private onAnswer(m: CmAnswer): void {
    if (m.type === 'deposited') {
      const key = `${m.dest}/${m.ssn}`;
      const p = this.pending.get(key);
      if (p === undefined) return this.fail(new ProtectorError('PROTOCOL', `deposited ${m.ssn} to rank ${m.dest}: no such deposit was sent`));
      this.pending.delete(key);
      return p.resolve();
    }
    if (m.type === 'pushed') {
      if (this.onPush === null || m.first !== this.pushedTo + 1) {
        return this.fail(new ProtectorError('PROTOCOL', `entries pushed from ${m.first}, expected ${this.pushedTo + 1}`));
      }
      this.pushedTo += m.blobs.length;
      return this.onPush(m.first, m.blobs);
    }
    // A refused deposit or subscription: this rank cannot go on protected (the caller fails).
    const e = new ProtectorError(m.code, `${m.op} ${m.ref} refused: ${m.reason}`);
    if (m.op === 'subscribe') return this.fail(e);
    for (const [key, p] of this.pending) {
      if (!key.endsWith(`/${m.ref}`)) continue;
      this.pending.delete(key);
      p.reject(e);
    }
  }

  private fail(e: ProtectorError): void {
    if (this.failure !== null) return;
    this.failure = e;
    for (const p of this.pending.values()) p.reject(e);
    this.pending.clear();
    if (e.code === 'CLOSED') return;
    void this.client.close();
    for (const f of this.lost.splice(0)) f(e);
  }
}
