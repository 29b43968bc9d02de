// The simulated network: one Transport per process (src/core/shell.ts), carrying signed frames
// between shells through the scheduler with per-link latency and, while the fault window is
// open, loss, duplication, reordering (latency spikes), bit-flip corruption and partitions.
// Crashed processes neither send nor receive. Every decision comes from the seeded generator.
import { SIGNATURE_BYTES } from '../core/constants.ts';
import type { ProcessId } from '../core/ports.ts';
import type { Transport } from '../core/ports.ts';
import { crc32 } from '../core/wire/crc32.ts';
import type { Item } from '../core/wire/messages.ts';
import type { SeededRandom } from './random.ts';
import type { Scheduler } from './scheduler.ts';

/** Bytes flipped by one corruption: enough to defeat a lucky CRC, few enough to stay "noise". */
export const MAX_CORRUPT_BYTES = 3;
/** Extra copies one duplication can make; more would only slow the run. */
export const MAX_DUPLICATES = 2;

/** How a link behaves at all times. */
export type LinkTiming = {
  /** Fixed part of the one-way delay. */
  baseLatencyMs: number;
  /** Mean of the exponential jitter added to every frame. */
  jitterMeanMs: number;
};

/** What goes wrong while the fault window is open. Probabilities are per frame. */
export type NetworkFaults = {
  loss: number;
  duplicate: number;
  corrupt: number;
  /** A latency spike: the frame overtakes or is overtaken by later ones (reordering). */
  spike: number;
  spikeMaxMs: number;
};

export const NO_NETWORK_FAULTS: NetworkFaults = { loss: 0, duplicate: 0, corrupt: 0, spike: 0, spikeMaxMs: 0 };

/** Processes in `isolated` can talk among themselves but not to anyone else in [fromMs, untilMs). */
export type Partition = { fromMs: number; untilMs: number; isolated: readonly ProcessId[] };

/** A frame as the network sees it (the items are the sender's, for scenario rules and traces). */
export type WireFrame = { from: ProcessId; to: ProcessId; bytes: Uint8Array; items: readonly Item[] };

/** A scenario rule: drop a frame, delay it, or let it pass ('pass' falls through to the next
 *  rule and then to the random faults). Rules apply whether or not the fault window is open. */
export type FrameVerdict = 'pass' | 'drop' | { delayMs: number };
export type FrameRule = (frame: WireFrame, nowMs: number) => FrameVerdict;

/** What a process looks like to the network while it is up. */
export interface Endpoint {
  /** `corrupted` says whether (and how) the network damaged this copy: the world checks that
   *  damaged copies, and only they, are dropped by the decoder. */
  receive(bytes: Uint8Array, from: ProcessId, corrupted: CorruptionKind | null): void;
}

export type CorruptionKind = 'flip' | 'flip-recrc' | 'truncate';

export type NetworkStats = {
  sent: number;
  delivered: number;
  lost: number;
  duplicated: number;
  corrupted: number;
  partitioned: number;
  ruleDropped: number;
  /** Sent to a process that is down (or never existed, e.g. the watchdog) at delivery time. */
  undeliverable: number;
  /** Delivered corrupted frames, per kind. */
  corruptions: Record<CorruptionKind, number>;
};

export type NetworkOptions = {
  scheduler: Scheduler;
  rng: SeededRandom;
  /** Link timing; the same for every link unless `timingFor` says otherwise. */
  timing: LinkTiming;
  timingFor?: (from: ProcessId, to: ProcessId) => LinkTiming;
  faults: NetworkFaults;
  /** Told of every delivery before the endpoint sees it (invariant bookkeeping). */
  onDeliver?: (frame: WireFrame, corrupted: CorruptionKind | null) => void;
};

export class SimNetwork {
  readonly stats: NetworkStats = {
    sent: 0, delivered: 0, lost: 0, duplicated: 0, corrupted: 0, partitioned: 0, ruleDropped: 0, undeliverable: 0,
    corruptions: { flip: 0, 'flip-recrc': 0, truncate: 0 },
  };
  private readonly endpoints = new Map<ProcessId, Endpoint>();
  private readonly partitions: Partition[] = [];
  private readonly rules: FrameRule[] = [];
  private faultsOpen = false;

  constructor(private readonly opts: NetworkOptions) {}

  /** Connect (or reconnect after a restart) the endpoint of a process. */
  attach(id: ProcessId, endpoint: Endpoint): void {
    this.endpoints.set(id, endpoint);
  }

  /** A crash: the process stops receiving; frames in flight to it are lost. */
  detach(id: ProcessId): void {
    this.endpoints.delete(id);
  }

  isUp(id: ProcessId): boolean {
    return this.endpoints.has(id);
  }

  setFaultWindow(open: boolean): void {
    this.faultsOpen = open;
  }

  get faultWindowOpen(): boolean {
    return this.faultsOpen;
  }

  addPartition(p: Partition): void {
    this.partitions.push(p);
  }

  addRule(rule: FrameRule): void {
    this.rules.push(rule);
  }

  /** The Transport a process's shell is given. `itemsOf` tells the network what the frame
   *  carries (the shell reports it through `onFrameOut` just before it sends). */
  transport(from: ProcessId, itemsOf: () => readonly Item[]): Transport {
    return { send: (to, bytes) => this.send({ from, to, bytes, items: itemsOf() }) };
  }

  cutOff(a: ProcessId, b: ProcessId, nowMs: number): boolean {
    for (const p of this.partitions) {
      if (nowMs < p.fromMs || nowMs >= p.untilMs) continue;
      if (p.isolated.includes(a) !== p.isolated.includes(b)) return true;
    }
    return false;
  }

  send(frame: WireFrame): void {
    const { scheduler, rng } = this.opts;
    const now = scheduler.nowMs;
    this.stats.sent++;
    // A crashed process sends nothing (its shell may still be mid-step when it is cut).
    if (!this.endpoints.has(frame.from)) {
      this.stats.undeliverable++;
      return;
    }
    let extraDelayMs = 0;
    for (const rule of this.rules) {
      const v = rule(frame, now);
      if (v === 'pass') continue;
      if (v === 'drop') {
        this.stats.ruleDropped++;
        return;
      }
      extraDelayMs += v.delayMs;
    }
    if (this.cutOff(frame.from, frame.to, now)) {
      this.stats.partitioned++;
      return;
    }
    const f = this.faultsOpen ? this.opts.faults : NO_NETWORK_FAULTS;
    if (rng.chance(f.loss)) {
      this.stats.lost++;
      return;
    }
    let copies = 1;
    if (rng.chance(f.duplicate)) {
      const extra = rng.range(1, MAX_DUPLICATES);
      copies += extra;
      this.stats.duplicated += extra;
    }
    const timing = this.opts.timingFor?.(frame.from, frame.to) ?? this.opts.timing;
    for (let i = 0; i < copies; i++) {
      let delay = timing.baseLatencyMs + rng.exponential(timing.jitterMeanMs) + extraDelayMs;
      if (rng.chance(f.spike)) delay += rng.uniform(0, f.spikeMaxMs);
      let bytes = frame.bytes;
      let corrupted: CorruptionKind | null = null;
      if (rng.chance(f.corrupt)) {
        corrupted = rng.pick(['flip', 'flip-recrc', 'truncate'] as const);
        bytes = corruptFrame(bytes, corrupted, rng);
        this.stats.corrupted++;
      }
      const delivered: WireFrame = { from: frame.from, to: frame.to, bytes, items: frame.items };
      scheduler.at(now + delay, () => this.deliver(delivered, corrupted));
    }
  }

  private deliver(frame: WireFrame, corrupted: CorruptionKind | null): void {
    const endpoint = this.endpoints.get(frame.to);
    if (endpoint === undefined) {
      this.stats.undeliverable++;
      return;
    }
    this.stats.delivered++;
    if (corrupted !== null) this.stats.corruptions[corrupted]++;
    this.opts.onDeliver?.(frame, corrupted);
    endpoint.receive(frame.bytes, frame.from, corrupted);
  }
}

/** A damaged copy of a frame, never equal to the original.
 *  - flip: 1..3 bytes anywhere (the CRC, the decoder or the signature must catch it);
 *  - flip-recrc: 1..3 bytes of the signed body with the CRC recomputed, as a forger or a
 *    CRC collision would leave it — only the signature check stands in the way;
 *  - truncate: the frame cut short. */
export function corruptFrame(original: Uint8Array, kind: CorruptionKind, rng: SeededRandom): Uint8Array {
  if (kind === 'truncate') {
    return original.slice(0, rng.int(original.length));
  }
  const bytes = original.slice();
  const bodyEnd = bytes.length - 4 - SIGNATURE_BYTES;
  const span = kind === 'flip' || bodyEnd <= 0 ? bytes.length : bodyEnd;
  const flips = rng.range(1, MAX_CORRUPT_BYTES);
  const touched = new Set<number>();
  for (let i = 0; i < flips; i++) {
    const at = rng.int(span);
    if (touched.has(at)) continue;
    touched.add(at);
    bytes[at] = (bytes[at] as number) ^ rng.range(1, 255);
  }
  if (kind === 'flip-recrc' && bodyEnd > 0) {
    new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).setUint32(bodyEnd, crc32(bytes, bodyEnd), false);
  }
  return bytes;
}
