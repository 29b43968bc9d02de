// The node shell: the one place where bytes become core inputs and core effects become
// authenticated frames (docs/ARCHITECTURE.md §2). Daemons give it a WebSocket transport and the system clock;
// the simulator gives it a simulated network and clock. Everything else is identical.
//
// Sends produced by one step are coalesced per destination into as few frames as possible, so
// a burst of group messages costs one signature or MAC per peer rather than one per message
// (PROTOCOL §2.4 says which).
import { MAX_FRAME_BYTES, MAX_ITEMS_PER_FRAME, MAX_SIGNED_ITEMS_PER_FRAME } from './constants.ts';
import type { Core, CoreEffect, CoreInput } from './node.ts';
import type { LinkAuth, ProcessId, Signer, Transport, Verifier } from './ports.ts';
import type { DropCode } from '../base/result.ts';
import { decodeFrame, encodeFrame } from './wire/frame.ts';
import { embeddedSignatures, type Frame, type Item } from './wire/messages.ts';

export type ShellCounters = {
  framesIn: number;
  framesOut: number;
  bytesIn: number;
  bytesOut: number;
  /** Dropped inbound frames by reason. */
  drops: Partial<Record<DropCode, number>>;
};

export type ShellOptions = {
  core: Core;
  cluster: string;
  signer: Signer;
  verifier: Verifier;
  /** Link keys: frames to and from a peer with one are MAC'd (PROTOCOL §2.4) unless an item
   *  needs a signature; without it every frame is signed. */
  linkAuth?: LinkAuth;
  transport: Transport;
  /** Every effect that is not a send: deliveries, suspicions, logs, termination. */
  onEffect?: (effect: Exclude<CoreEffect, { type: 'send' }>) => void;
  /** Every frame after it is signed, before the transport (simulator bookkeeping, traces). */
  onFrameOut?: (to: ProcessId, frame: Uint8Array, items: readonly Item[]) => void;
  /** Every frame once it has verified, before `intercept` and the core (traces). */
  onFrameIn?: (from: ProcessId, items: readonly Item[]) => void;
  /** A driver's look at every verified frame before the core sees it: returns what the core
   *  gets (the frame, or a copy with items taken out), or null for nothing. Only a daemon of a
   *  cluster started with --allow-inject passes one (src/daemon/inject.ts takes the operator's
   *  `inject` items here); without it every frame goes to the core unchanged. */
  intercept?: (frame: Frame, nowMs: number) => Frame | null;
};

export class Shell {
  readonly counters: ShellCounters = { framesIn: 0, framesOut: 0, bytesIn: 0, bytesOut: 0, drops: {} };
  private readonly decodeCtx;
  private readonly encodeCtx;

  constructor(private readonly opts: ShellOptions) {
    const linkAuth = opts.linkAuth === undefined ? {} : { linkAuth: opts.linkAuth };
    this.decodeCtx = { cluster: opts.cluster, self: opts.core.id, verifier: opts.verifier, ...linkAuth };
    this.encodeCtx = { cluster: opts.cluster, signer: opts.signer, ...linkAuth };
  }

  get core(): Core {
    return this.opts.core;
  }

  /** Bytes from the network. Never throws on what a peer sent. */
  receive(data: Uint8Array, nowMs: number, claimedFrom: ProcessId | null = null): void {
    this.counters.framesIn++;
    this.counters.bytesIn += data.length;
    const r = decodeFrame(data, this.decodeCtx);
    if (r.ok) {
      this.opts.onFrameIn?.(r.value.from, r.value.items);
      const frame = this.opts.intercept === undefined ? r.value : this.opts.intercept(r.value, nowMs);
      if (frame !== null) this.input({ type: 'frame', nowMs, frame, raw: data });
    } else {
      this.counters.drops[r.code] = (this.counters.drops[r.code] ?? 0) + 1;
      this.input({ type: 'dropped', nowMs, from: claimedFrom, code: r.code, detail: r.detail });
    }
  }

  tick(nowMs: number): void {
    this.input({ type: 'tick', nowMs });
  }

  input(input: CoreInput): void {
    this.flush(this.opts.core.step(input));
  }

  nextWakeMs(): number | null {
    return this.opts.core.nextWakeMs();
  }

  private flush(effects: CoreEffect[]): void {
    let batches: Map<ProcessId, Item[]> | null = null;
    for (const e of effects) {
      if (e.type === 'send') {
        batches ??= new Map();
        let list = batches.get(e.to);
        if (list === undefined) batches.set(e.to, (list = []));
        list.push(e.item);
      } else {
        this.opts.onEffect?.(e);
      }
    }
    if (batches === null) return;
    for (const [to, items] of batches) {
      // Chunks within both per-frame limits of the receiver (PROTOCOL §2.2).
      let chunk: Item[] = [];
      let signed = 0;
      for (const item of items) {
        const s = embeddedSignatures(item);
        if (chunk.length === MAX_ITEMS_PER_FRAME || signed + s > MAX_SIGNED_ITEMS_PER_FRAME) {
          this.emit(to, chunk);
          chunk = [];
          signed = 0;
        }
        chunk.push(item);
        signed += s;
      }
      if (chunk.length > 0) this.emit(to, chunk);
    }
  }

  private emit(to: ProcessId, items: Item[]): void {
    const frame = encodeFrame({ from: this.opts.core.id, to, items }, this.encodeCtx);
    if (frame.length > MAX_FRAME_BYTES) {
      if (items.length > 1) {
        const half = items.length >> 1;
        this.emit(to, items.slice(0, half));
        this.emit(to, items.slice(half));
        return;
      }
      // Cannot happen within the payload limits of constants.ts; refuse loudly, never truncate.
      this.opts.onEffect?.({ type: 'log', level: 'error', event: 'frame.oversized', fields: { to, bytes: frame.length } });
      return;
    }
    this.counters.framesOut++;
    this.counters.bytesOut += frame.length;
    this.opts.onFrameOut?.(to, frame, items);
    this.opts.transport.send(to, frame);
  }
}
