// Shared by the G-MPI integration tests (gmpi-p2p, gmpi-comm, gmpi-collectives): waiting on
// I/O by event-loop turns (never by wall time), tracking a promise's settlement, and checking a
// P2PError's code.
import { expect } from 'vitest';
import { P2PError } from '../../src/app/gmpi/p2p.ts';

/** Let I/O run until `cond` holds: a bounded count of event-loop turns, not a time limit. */
export async function until(cond: () => boolean, what: string): Promise<void> {
  for (let turn = 0; turn < 200_000; turn++) {
    if (cond()) return;
    await new Promise((r) => setImmediate(r));
  }
  throw new Error(`never happened: ${what}`);
}

export async function turns(n: number): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

/** Track a promise's settlement without awaiting it. */
export function track<T>(p: Promise<T>): { settled: () => boolean; promise: Promise<T> } {
  let done = false;
  p.then(() => (done = true), () => (done = true));
  return { settled: () => done, promise: p };
}

export async function expectCode(p: Promise<unknown>, code: string): Promise<P2PError> {
  const e = await p.then(() => null, (x: unknown) => x);
  expect(e).toBeInstanceOf(P2PError);
  expect((e as P2PError).code).toBe(code);
  return e as P2PError;
}
