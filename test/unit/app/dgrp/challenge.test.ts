// DGRP's pluggable test (src/app/dgrp/challenge.ts, spec 2.2.1, 2.5 item 1): the paper's primes
// test over a random window, its answers on known windows, and a check that is total.
import { describe, expect, it } from 'vitest';
import { seededRandom } from '../../../../examples/common/seeded-random.ts';
import {
  decodePrimesChallenge, encodePrimesChallenge, encodePrimesReply, PRIMES_MAX_START, PRIMES_TEST, PRIMES_WINDOW, primesInWindow,
} from '../../../../src/app/dgrp/challenge.ts';

/** A uint32 generator from the examples' seeded generator. */
const uint32s = (seed: number): (() => number) => {
  const random = seededRandom(seed);
  return () => Math.floor(random() * 0x1_0000_0000);
};

/** The obvious reference: every number of the window tried against every odd divisor. */
function naivePrimes(start: number): { count: number; sum: number } {
  let count = 0;
  let sum = 0;
  for (let x = start; x < start + PRIMES_WINDOW; x++) {
    let prime = x >= 2;
    for (let d = 2; d * d <= x && prime; d++) if (x % d === 0) prime = false;
    if (prime) {
      count += 1;
      sum = (sum + x) >>> 0;
    }
  }
  return { count, sum };
}

describe('spec 2.2.1: the primes test on known windows', () => {
  it('[1, 1001) holds the paper\'s 168 primes below 1000, summing to 76127', () => {
    expect(primesInWindow(1)).toEqual({ count: 168, sum: 76127 });
    expect(primesInWindow(2)).toEqual({ count: 168, sum: 76127 });
    expect(primesInWindow(3)).toEqual({ count: 167, sum: 76125 });
    expect(primesInWindow(1000)).toEqual({ count: 135, sum: naivePrimes(1000).sum }); // π(2000) − π(1000)
  });

  it('agrees with a naive reference on random windows, the first and the last', () => {
    const random = uint32s(18);
    const starts = [1, 2, 997, PRIMES_MAX_START, PRIMES_MAX_START - 1, ...Array.from({ length: 40 }, () => (random() % PRIMES_MAX_START) + 1)];
    for (const start of starts) expect(primesInWindow(start), `window at ${start}`).toEqual(naivePrimes(start));
  });

  it('refuses a window start out of range (our own call, an invariant)', () => {
    for (const bad of [0, -1, 1.5, PRIMES_MAX_START + 1]) expect(() => primesInWindow(bad)).toThrow(/out of range/);
  });
});

describe('spec 2.5 item 1: challenge, answer, check', () => {
  it('a challenge is a fresh random window start in [1, 2^24], 4 bytes little-endian', () => {
    const random = uint32s(7);
    const starts = new Set<number>();
    for (let i = 0; i < 200; i++) {
      const c = PRIMES_TEST.challenge(random);
      expect(c.length).toBe(4);
      const start = decodePrimesChallenge(c);
      expect(start).not.toBeNull();
      expect(start!).toBeGreaterThanOrEqual(1);
      expect(start!).toBeLessThanOrEqual(PRIMES_MAX_START);
      starts.add(start!);
    }
    expect(starts.size).toBe(200);
    expect(PRIMES_TEST.challenge(() => 0)).toEqual(Uint8Array.of(1, 0, 0, 0));
    expect(decodePrimesChallenge(PRIMES_TEST.challenge(() => 0xffffffff))).toBe(PRIMES_MAX_START);
    expect(() => PRIMES_TEST.challenge(() => 0.5)).toThrow(/uint32/);
    expect(PRIMES_TEST.name).toBe('primes-1000');
  });

  it('the tested process\'s answer passes the tester\'s check', () => {
    const random = uint32s(9);
    for (let i = 0; i < 50; i++) {
      const c = PRIMES_TEST.challenge(random);
      const reply = PRIMES_TEST.answer(c);
      expect(reply.length).toBe(8);
      expect(PRIMES_TEST.check(c, reply)).toBe(true);
    }
    const c = encodePrimesChallenge(1);
    expect(PRIMES_TEST.answer(c)).toEqual(encodePrimesReply({ count: 168, sum: 76127 }));
  });

  it('a wrong, short or oversized reply fails the check', () => {
    const c = encodePrimesChallenge(1);
    const right = PRIMES_TEST.answer(c);
    expect(PRIMES_TEST.check(c, encodePrimesReply({ count: 167, sum: 76127 }))).toBe(false);
    expect(PRIMES_TEST.check(c, encodePrimesReply({ count: 168, sum: 76128 }))).toBe(false);
    expect(PRIMES_TEST.check(c, right.subarray(0, 7))).toBe(false);
    expect(PRIMES_TEST.check(c, new Uint8Array(0))).toBe(false);
    expect(PRIMES_TEST.check(c, Uint8Array.of(...right, 0))).toBe(false);
    // Another window's right answer is a wrong answer here (no replay of an old reply).
    expect(PRIMES_TEST.check(encodePrimesChallenge(5000), right)).toBe(false);
    // A reply in a larger buffer, at an offset, is read from its own bytes.
    const framed = new Uint8Array(20);
    framed.set(right, 5);
    expect(PRIMES_TEST.check(c, framed.subarray(5, 13))).toBe(true);
  });

  it('is total on malformed challenges: the answer is empty, the check false, nothing throws', () => {
    const right = PRIMES_TEST.answer(encodePrimesChallenge(1));
    const bad = [new Uint8Array(0), Uint8Array.of(1, 0, 0), Uint8Array.of(1, 0, 0, 0, 0), Uint8Array.of(0, 0, 0, 0), Uint8Array.of(1, 0, 0, 1), Uint8Array.of(255, 255, 255, 255)];
    for (const c of bad) {
      expect(PRIMES_TEST.answer(c)).toEqual(new Uint8Array(0));
      expect(PRIMES_TEST.check(c, right)).toBe(false);
      expect(PRIMES_TEST.check(c, new Uint8Array(0))).toBe(false);
    }
    const random = uint32s(21);
    for (let i = 0; i < 300; i++) {
      const c = Uint8Array.from({ length: random() % 7 }, () => random() & 0xff);
      const r = Uint8Array.from({ length: random() % 10 }, () => random() & 0xff);
      expect(() => PRIMES_TEST.answer(c)).not.toThrow();
      expect(typeof PRIMES_TEST.check(c, r)).toBe('boolean');
    }
  });
});
