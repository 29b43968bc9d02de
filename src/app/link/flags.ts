// Flag words shared between the main thread and the link's worker (spec §5.2: the G-MPI alert
// flag). Words live in a SharedArrayBuffer read with Atomics, so a synchronous compute loop on
// the main thread sees a raise without ever yielding. Rules say which signal numbers raise
// which word: the worker applies them the moment a signal arrives from the agent, before the
// main thread runs any handler. Rules live in shared memory too, so a rule added on the main
// thread is in force for the very next arrival (no message to the worker, no race).
import { MAX_SIGNAL } from '../../core/signals.ts';
import { FLAG_WORDS } from './limits.ts';

/** Word numbers the library and G-MPI use; the others (2..FLAG_WORDS-1) are free. */
export const FLAG = {
  /** G-MPI's alert flag (spec §5.2). */
  ALERT: 0,
  /** G-MPI's "communication context invalid" (spec §5.2: GSIG_NTF_DIED invalidates it). */
  INVALID: 1,
} as const;

export type SharedFlagBuffers = {
  readonly words: SharedArrayBuffer;
  readonly rules: SharedArrayBuffer;
  /** One Int32: the agent's frames since the welcome whose rules were applied (worker.cjs). */
  readonly seq: SharedArrayBuffer;
};

export const isFlagWord = (word: number): boolean => Number.isInteger(word) && word >= 0 && word < FLAG_WORDS;
export const isRuleSignal = (signum: number): boolean => Number.isInteger(signum) && signum >= 1 && signum <= MAX_SIGNAL;

export class SharedFlags {
  private readonly words: Int32Array;
  /** Per signal number, one bit per word it raises. */
  private readonly rules: Uint8Array;

  private constructor(readonly buffers: SharedFlagBuffers) {
    this.words = new Int32Array(buffers.words);
    this.rules = new Uint8Array(buffers.rules);
  }

  static create(): SharedFlags {
    return new SharedFlags({
      words: new SharedArrayBuffer(FLAG_WORDS * Int32Array.BYTES_PER_ELEMENT),
      rules: new SharedArrayBuffer(MAX_SIGNAL + 1),
      seq: new SharedArrayBuffer(Int32Array.BYTES_PER_ELEMENT),
    });
  }

  static attach(buffers: SharedFlagBuffers): SharedFlags {
    return new SharedFlags(buffers);
  }

  /** The words, for a caller that wants to Atomics.wait on one. */
  get view(): Int32Array {
    return this.words;
  }

  raise(word: number): void {
    Atomics.store(this.words, word, 1);
    Atomics.notify(this.words, word);
  }

  clear(word: number): void {
    Atomics.store(this.words, word, 0);
  }

  check(word: number): boolean {
    return Atomics.load(this.words, word) !== 0;
  }

  addRule(word: number, signums: readonly number[]): void {
    for (const s of signums) Atomics.or(this.rules, s, 1 << word);
  }

  removeRule(word: number, signums: readonly number[]): void {
    for (const s of signums) Atomics.and(this.rules, s, ~(1 << word) & 0xff);
  }

  /** Raise every word whose rule names `signum`; returns the mask of words raised. */
  applyRules(signum: number): number {
    if (!isRuleSignal(signum)) return 0;
    const mask = Atomics.load(this.rules, signum);
    for (let word = 0; word < FLAG_WORDS; word++) if ((mask & (1 << word)) !== 0) this.raise(word);
    return mask;
  }
}
