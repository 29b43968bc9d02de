// Shared flag words and their arrival rules (src/app/link/flags.ts; spec §5.2): a rule added on
// one thread raises the word when another thread applies it, through shared memory.
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { FLAG, SharedFlags } from '../../../src/app/link/flags.ts';
import { GSIG } from '../../../src/core/signals.ts';

describe('SharedFlags', () => {
  it('rules raise only the words they name; removing a rule stops it', () => {
    const f = SharedFlags.create();
    f.addRule(FLAG.ALERT, [100, 101]);
    f.addRule(FLAG.INVALID, [GSIG.NTF_DIED, 100]);
    expect(f.applyRules(102)).toBe(0);
    expect(f.check(FLAG.ALERT)).toBe(false);
    expect(f.applyRules(GSIG.NTF_DIED)).toBe(1 << FLAG.INVALID);
    expect([f.check(FLAG.ALERT), f.check(FLAG.INVALID)]).toEqual([false, true]);
    f.clear(FLAG.INVALID);
    expect(f.applyRules(100)).toBe((1 << FLAG.ALERT) | (1 << FLAG.INVALID));
    f.clear(FLAG.ALERT);
    f.removeRule(FLAG.ALERT, [100]);
    expect(f.applyRules(100)).toBe(1 << FLAG.INVALID);
    expect(f.check(FLAG.ALERT)).toBe(false);
    expect(f.applyRules(0x10000)).toBe(0);
  });

  it('a raise on another thread is seen by a loop on this one that never yields', async () => {
    const f = SharedFlags.create();
    f.addRule(FLAG.ALERT, [100]);
    // Plain JS worker: the same layout as SharedFlags (Int32 words, one rule byte per signal).
    const src = `
      const { workerData } = require('node:worker_threads');
      const words = new Int32Array(workerData.words), rules = new Uint8Array(workerData.rules);
      setTimeout(() => { if (Atomics.load(rules, 100) & 1) { Atomics.store(words, 0, 1); Atomics.notify(words, 0); } }, 50);`;
    const w = new Worker(src, { eval: true, workerData: f.buffers });
    try {
      const end = Date.now() + 5000;
      while (!f.check(FLAG.ALERT) && Date.now() < end) {
        // spin
      }
      expect(f.check(FLAG.ALERT)).toBe(true);
    } finally {
      await w.terminate();
    }
  });
});
