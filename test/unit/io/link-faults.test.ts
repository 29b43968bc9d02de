// Injected link faults (src/io/link-faults.ts; `trine inject drop|delay|heal`, docs/OPERATIONS.md
// §7): what a daemon sends to, or receives from, a faulted peer is dropped or held back; other
// peers and unbound connections are untouched; held frames are bounded.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { LinkFaults, MAX_DELAYED_BYTES, MAX_INJECT_DELAY_MS, MAX_LINK_FAULTS } from '../../../src/io/link-faults.ts';

const frame = (n: number, bytes = 8) => new Uint8Array(bytes).fill(n);

describe('LinkFaults', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('without faults every frame goes out at once', () => {
    const f = new LinkFaults();
    const sent: string[] = [];
    f.send('r2', frame(1), (to) => sent.push(to));
    expect(sent).toEqual(['r2']);
    expect(f.receive('r2', frame(1), () => {})).toBe(false);
  });

  it('drop: frames to the faulted peer vanish and are counted; other peers are untouched; heal restores', () => {
    const f = new LinkFaults();
    f.set('out', 'r3', { kind: 'drop' });
    const sent: string[] = [];
    const send = (to: string) => sent.push(to);
    f.send('r3', frame(1), send);
    f.send('r2', frame(2), send);
    expect(sent).toEqual(['r2']);
    expect(f.counters.dropped).toBe(1);
    f.set('out', 'r3', null);
    f.send('r3', frame(3), send);
    expect(sent).toEqual(['r2', 'r3']);
  });

  it('delay: frames to the faulted peer leave after the delay, in order', () => {
    const f = new LinkFaults();
    f.set('out', 'scc', { kind: 'delay', delayMs: 200 });
    const sent: number[] = [];
    for (const n of [1, 2, 3]) f.send('scc', frame(n), (_to, data) => sent.push(data[0] as number));
    vi.advanceTimersByTime(199);
    expect(sent).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(sent).toEqual([1, 2, 3]);
    expect(f.counters.delayed).toBe(3);
  });

  it('inbound faults act only on frames from a bound peer: an unverified header names nobody', () => {
    const f = new LinkFaults();
    f.set('in', 'a1', { kind: 'drop' });
    let delivered = 0;
    expect(f.receive('a1', frame(1), () => delivered++)).toBe(true);
    expect(f.receive(null, frame(1), () => delivered++)).toBe(false);
    expect(f.receive('a2', frame(1), () => delivered++)).toBe(false);
    expect(delivered).toBe(0);
    f.set('in', 'a1', { kind: 'delay', delayMs: 50 });
    expect(f.receive('a1', frame(2), () => delivered++)).toBe(true);
    vi.advanceTimersByTime(50);
    expect(delivered).toBe(1);
  });

  it('held frames are bounded by MAX_DELAYED_BYTES; a closed LinkFaults delivers nothing more', () => {
    const f = new LinkFaults();
    f.set('out', 'r2', { kind: 'delay', delayMs: 10 });
    let sent = 0;
    const big = MAX_DELAYED_BYTES / 4;
    for (let i = 0; i < 5; i++) f.send('r2', new Uint8Array(big), () => sent++);
    expect(f.counters.overflow).toBe(1);
    f.close();
    vi.advanceTimersByTime(10);
    expect(sent).toBe(0);
  });

  it('refuses a delay outside 1…MAX_INJECT_DELAY_MS and more than MAX_LINK_FAULTS faults', () => {
    const f = new LinkFaults();
    expect(() => f.set('out', 'r1', { kind: 'delay', delayMs: 0 })).toThrow(RangeError);
    expect(() => f.set('out', 'r1', { kind: 'delay', delayMs: MAX_INJECT_DELAY_MS + 1 })).toThrow(RangeError);
    for (let i = 0; i < MAX_LINK_FAULTS; i++) expect(f.set('out', `p${i}`, { kind: 'drop' })).toBe(true);
    expect(f.set('out', 'one-more', { kind: 'drop' })).toBe(false);
    expect(f.set('out', 'p0', { kind: 'delay', delayMs: 5 })).toBe(true); // replacing is always possible
  });
});
