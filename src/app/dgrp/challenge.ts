// DGRP's pluggable test (spec 2.2.1, 2.5 item 1): the challenge a tester sends, the work the
// tested process does to answer it (the work being timed), and the tester's check of the reply.
// This file owns the DgrpTest interface and the paper's test, PRIMES_TEST. Timing the reply and
// judging it against the threshold are estimator.ts's; sending it is the caller's. Pure: the
// randomness of a challenge is passed in.
//
// The paper's test computes "the prime numbers between 1 and 1000". A fixed window could be
// answered from a cache without doing the work, so PRIMES_TEST draws a random window start n in
// [1, PRIMES_MAX_START] and the answer is the count and the sum (mod 2^32) of the primes in
// [n, n + PRIMES_WINDOW). The work is of the paper's size: trial division of the window's odd
// numbers by the primes up to its square root, tens of µs (a window near 2^24 holds ~60 primes,
// each tried against up to 564 divisors).
//
// Wire shapes (little-endian):
//   challenge: 4 bytes, the window start n (uint32), 1 ≤ n ≤ PRIMES_MAX_START
//   reply:     8 bytes, the count (uint32) then the sum mod 2^32 (uint32)
// Both ends decode totally (STYLE.md 5): the tested process answers a malformed challenge with an
// empty reply, which no check accepts; check() returns false for any malformed challenge or
// reply, never throws.
import { assert } from '../../base/result.ts';

export interface DgrpTest {
  readonly name: string;
  /** A fresh challenge from `random` (a function returning uint32). */
  challenge(random: () => number): Uint8Array;
  /** What the tested process computes (this is the work being timed). */
  answer(challenge: Uint8Array): Uint8Array;
  /** The tester's check that the reply is correct. Total: any bytes → boolean. */
  check(challenge: Uint8Array, reply: Uint8Array): boolean;
}

/** Width of the window of numbers searched for primes: the paper's "between 1 and 1000". */
export const PRIMES_WINDOW = 1000;
/** Largest window start, 2^24: enough starts that a cache of answers is pointless (16 M entries),
 *  small enough that the work stays of the paper's size (divisors up to √(2^24 + 1000) ≈ 4096). */
export const PRIMES_MAX_START = 1 << 24;
export const PRIMES_CHALLENGE_BYTES = 4;
export const PRIMES_REPLY_BYTES = 8;

/** Bound of the divisor table: ≥ √ of the largest number a valid challenge's window holds. */
const DIVISOR_LIMIT = Math.floor(Math.sqrt(PRIMES_MAX_START + PRIMES_WINDOW)) + 1;
/** The primes up to DIVISOR_LIMIT: every divisor trial division needs. Sieved at the first
 *  challenge, not as the library loads: most processes never answer one, and a spawned process's
 *  load is on SPAWN's path (~0.7 ms, docs/PERFORMANCE.md §5). */
let divisors: readonly number[] | null = null;

/** The primes ≤ limit, by a sieve of Eratosthenes. */
function smallPrimes(limit: number): number[] {
  const composite = new Uint8Array(limit + 1);
  const out: number[] = [];
  for (let i = 2; i <= limit; i++) {
    if (composite[i] === 1) continue;
    out.push(i);
    for (let j = i * i; j <= limit; j += i) composite[j] = 1;
  }
  return out;
}

function isPrime(x: number): boolean {
  if (x < 2) return false;
  divisors ??= smallPrimes(DIVISOR_LIMIT);
  for (const p of divisors) {
    if (p * p > x) return true;
    if (x % p === 0) return x === p;
  }
  // No prime ≤ DIVISOR_LIMIT divides x, and DIVISOR_LIMIT ≥ √x for every x a valid window holds.
  assert(x <= DIVISOR_LIMIT * DIVISOR_LIMIT, `primes test: ${x} beyond the divisor table`);
  return true;
}

export type PrimesAnswer = { readonly count: number; readonly sum: number };

/** The count and the sum mod 2^32 of the primes in [start, start + PRIMES_WINDOW). */
export function primesInWindow(start: number): PrimesAnswer {
  assert(Number.isInteger(start) && start >= 1 && start <= PRIMES_MAX_START, `primes test: window start ${start} out of range`);
  let count = 0;
  let sum = 0;
  const end = start + PRIMES_WINDOW;
  if (start <= 2 && end > 2) {
    count = 1;
    sum = 2;
  }
  // Only odd candidates: 2 is the one even prime, counted above.
  for (let x = start % 2 === 0 ? start + 1 : Math.max(start, 3); x < end; x += 2) {
    if (isPrime(x)) {
      count += 1;
      sum = (sum + x) >>> 0;
    }
  }
  return { count, sum };
}

/** The window start of a challenge, or null when it is not a well-formed one. */
export function decodePrimesChallenge(challenge: Uint8Array): number | null {
  if (challenge.length !== PRIMES_CHALLENGE_BYTES) return null;
  const start = new DataView(challenge.buffer, challenge.byteOffset, challenge.byteLength).getUint32(0, true);
  return start >= 1 && start <= PRIMES_MAX_START ? start : null;
}

/** The reply's count and sum, or null when it is not 8 bytes. */
export function decodePrimesReply(reply: Uint8Array): PrimesAnswer | null {
  if (reply.length !== PRIMES_REPLY_BYTES) return null;
  const view = new DataView(reply.buffer, reply.byteOffset, reply.byteLength);
  return { count: view.getUint32(0, true), sum: view.getUint32(4, true) };
}

export function encodePrimesChallenge(start: number): Uint8Array {
  assert(Number.isInteger(start) && start >= 1 && start <= PRIMES_MAX_START, `primes test: window start ${start} out of range`);
  const out = new Uint8Array(PRIMES_CHALLENGE_BYTES);
  new DataView(out.buffer).setUint32(0, start, true);
  return out;
}

export function encodePrimesReply(answer: PrimesAnswer): Uint8Array {
  const out = new Uint8Array(PRIMES_REPLY_BYTES);
  const view = new DataView(out.buffer);
  view.setUint32(0, answer.count, true);
  view.setUint32(4, answer.sum, true);
  return out;
}

/** The paper's test (spec 2.2.1): primes in a random window of 1000 numbers. */
export const PRIMES_TEST: DgrpTest = Object.freeze({
  name: 'primes-1000',
  challenge(random: () => number): Uint8Array {
    const r = random();
    // The generator is ours (passed in by the caller): a value outside uint32 is our bug.
    assert(Number.isInteger(r) && r >= 0 && r <= 0xffffffff, `primes test: random() gave ${r}, not a uint32`);
    return encodePrimesChallenge((r % PRIMES_MAX_START) + 1);
  },
  answer(challenge: Uint8Array): Uint8Array {
    const start = decodePrimesChallenge(challenge);
    if (start === null) return new Uint8Array(0);
    return encodePrimesReply(primesInWindow(start));
  },
  check(challenge: Uint8Array, reply: Uint8Array): boolean {
    const start = decodePrimesChallenge(challenge);
    const got = decodePrimesReply(reply);
    if (start === null || got === null) return false;
    const want = primesInWindow(start);
    return got.count === want.count && got.sum === want.sum;
  },
});
