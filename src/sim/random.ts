// The simulator's one source of randomness: a seeded sfc32 generator implementing the core's
// `Random` port (src/core/ports.ts). Every choice the simulator makes — latency, loss, faults,
// workload — comes from a generator derived from the seed, so a seed replays exactly.
import type { Random } from '../core/ports.ts';

const TWO_POW_32 = 4294967296;

/** splitmix32: spreads a small integer seed over all 32 bits (sfc32 needs a well-mixed state). */
function splitmix32(state: { s: number }): number {
  state.s = (state.s + 0x9e3779b9) | 0;
  let z = state.s;
  z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
  z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
  return (z ^ (z >>> 16)) >>> 0;
}

/** sfc32 (Chris Doty-Humphrey's Small Fast Counting generator): 128-bit state, passes
 *  PractRand, and costs a handful of 32-bit operations per draw. */
export class SeededRandom implements Random {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number, stream = 0) {
    const st = { s: (seed ^ Math.imul(stream + 1, 0x27d4eb2d)) | 0 };
    this.a = splitmix32(st);
    this.b = splitmix32(st);
    this.c = splitmix32(st);
    this.d = splitmix32(st) | 1;
    // Discard the first outputs: sfc32's authors recommend a short warm-up.
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** Next raw 32-bit unsigned value. */
  u32(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }

  next(): number {
    return this.u32() / TWO_POW_32;
  }

  int(bound: number): number {
    if (!(bound >= 1)) return 0;
    return Math.floor(this.next() * Math.floor(bound));
  }

  /** Integer in [lo, hi] inclusive. */
  range(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  /** Float in [lo, hi). */
  uniform(lo: number, hi: number): number {
    return lo + this.next() * (hi - lo);
  }

  chance(p: number): boolean {
    return p > 0 && this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[this.int(items.length)] as T;
  }

  /** Exponentially distributed value with the given mean (network jitter tails). */
  exponential(mean: number): number {
    return -Math.log(1 - this.next()) * mean;
  }

  /** An independent generator for one purpose (network, faults, workload), so adding draws to
   *  one purpose does not shift every other decision of the same seed. */
  fork(stream: number): SeededRandom {
    return new SeededRandom(this.u32() | 0, stream);
  }

  bytes(length: number): Uint8Array {
    const out = new Uint8Array(length);
    for (let i = 0; i < length; i++) out[i] = this.u32() & 0xff;
    return out;
  }
}

/** The generator of one purpose of one seed, independent of every other purpose. */
export function streamFor(seed: number, purpose: SimStream): SeededRandom {
  return new SeededRandom(seed, SIM_STREAMS[purpose]);
}

/** Named random streams of a seed (see `streamFor`). */
const SIM_STREAMS = { plan: 1, network: 2, workload: 3, keys: 4, os: 5, tasks: 6, apps: 7, a21: 8, 'app-faults': 9, 'app-fault-moves': 10 } as const;
export type SimStream = keyof typeof SIM_STREAMS;
