// The main thread's delivery queue (src/app/link/dispatcher.ts; spec §4.2, §5.4): in order,
// one at a time, never re-entered; a critical section holds deliveries and exiting delivers
// them (A27); the queue is bounded and overflow is counted.
import { describe, expect, it } from 'vitest';
import { Dispatcher } from '../../../src/app/link/dispatcher.ts';

describe('Dispatcher', () => {
  it('delivers in order; an item pushed during a delivery runs after it, not inside it', () => {
    const log: string[] = [];
    const d: Dispatcher<number> = new Dispatcher((n) => {
      log.push(`start ${n}`);
      if (n === 1) {
        d.push(10);
        d.drain();
      }
      log.push(`end ${n}`);
    }, 100);
    d.push(1);
    d.push(2);
    d.drain();
    expect(log).toEqual(['start 1', 'end 1', 'start 2', 'end 2', 'start 10', 'end 10']);
  });

  it('A27: holds deliveries inside a critical section and delivers them on exit, nesting included', () => {
    const got: number[] = [];
    const d = new Dispatcher<number>((n) => got.push(n), 100);
    d.enter();
    d.enter();
    d.push(1);
    d.push(2);
    d.drain();
    d.exit();
    d.drain();
    expect(got).toEqual([]);
    d.exit();
    d.drain();
    expect(got).toEqual([1, 2]);
  });

  it('a delivery that enters a critical section stops the rest until it exits', () => {
    const got: number[] = [];
    const d: Dispatcher<number> = new Dispatcher((n) => {
      got.push(n);
      if (n === 1) d.enter();
    }, 100);
    d.push(1);
    d.push(2);
    d.drain();
    expect(got).toEqual([1]);
    d.exit();
    d.drain();
    expect(got).toEqual([1, 2]);
  });

  it('is bounded: items beyond the limit are dropped and counted', () => {
    const d = new Dispatcher<number>(() => undefined, 3);
    d.enter();
    for (let i = 0; i < 5; i++) d.push(i);
    expect(d.queued).toBe(3);
    expect(d.dropped).toBe(2);
  });
});
