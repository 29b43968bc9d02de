// The digest of a seed's whole trace (issue 16; src/sim/trace-digest.ts): what a redesign that
// changes nothing observable is checked by, so it must be the same for the same run, whatever
// order an effect's fields were built in, and differ for any change a peer or an operator could
// see: one frame, one effect field, another seed.
import { describe, expect, it } from 'vitest';
import type { Core } from '../../src/core/node.ts';
import { realCores } from '../../src/sim/cores.ts';
import { runSeed } from '../../src/sim/run-seed.ts';
import { runTaskSeed } from '../../src/sim/task-seed.ts';
import { canonical, TraceDigest } from '../../src/sim/trace-digest.ts';

describe('canonical text', () => {
  it('sorts object keys, leaves out undefined fields, writes bytes as hex and non-finite numbers by name', () => {
    expect(canonical({ b: 1, a: [true, null, 'x'], c: undefined })).toBe('{"a":[true,null,"x"],"b":1}');
    expect(canonical({ a: 1, b: 2 })).toBe(canonical({ b: 2, a: 1 }));
    expect(canonical(new Uint8Array([0, 255, 16]))).toBe('x00ff10');
    expect(canonical(new Uint8Array([1, 2, 3, 4]).subarray(1, 3))).toBe('x0203');
    expect(canonical([Infinity, -Infinity, NaN, 1.5])).toBe('["Infinity","-Infinity","NaN",1.5]');
    expect(canonical(new Map([['k', 1]]))).toBe('M["k":1]');
    expect(canonical(new Set([2, 1]))).toBe('S[2,1]');
    // Text that looks like bytes or a number stays text.
    expect(canonical('x00')).toBe('"x00"');
    expect(canonical('1')).not.toBe(canonical(1));
  });

  it('a value with no canonical text (a function) is refused, not skipped', () => {
    expect(() => canonical({ f: () => 1 })).toThrow(/no canonical text/);
  });
});

describe('the trace digest', () => {
  it('counts its events and does not consume itself when read', () => {
    const d = new TraceDigest();
    d.add({ type: 'crash', atMs: 1, at: 'r1' });
    const once = d.hex();
    expect(d.hex()).toBe(once);
    expect(once).toMatch(/^[0-9a-f]{64}:1$/);
    d.add({ type: 'restart', atMs: 2, at: 'r1' });
    expect(d.hex()).not.toBe(once);
  });

  it('a group seed run twice has one digest; another seed another', () => {
    const a = runSeed(7, { agents: 3, cores: realCores, digest: true });
    const b = runSeed(7, { agents: 3, cores: realCores, digest: true });
    expect(a.traceDigest).toMatch(/^[0-9a-f]{64}:\d+$/);
    expect(b.traceDigest).toBe(a.traceDigest);
    expect(runSeed(8, { agents: 3, cores: realCores, digest: true }).traceDigest).not.toBe(a.traceDigest);
    expect(runSeed(7, { agents: 3, cores: realCores }).traceDigest).toBeUndefined();
  }, 60_000);

  it('one changed field of one log effect changes the digest; the same effect with its fields in another order does not', () => {
    /** r2's first log effect rewritten by `f`, everything else as it was. */
    const rewriting = (f: (fields: Record<string, unknown>) => Record<string, unknown>) => (id: string, core: Core): Core => {
      if (id !== 'r2') return core;
      let done = false;
      return {
        ...core,
        step: (input) => core.step(input).map((e) => {
          if (done || e.type !== 'log') return e;
          done = true;
          return { ...e, fields: f(e.fields) };
        }),
      };
    };
    const base = runSeed(7, { agents: 3, cores: realCores, digest: true }).traceDigest;
    const reordered = runSeed(7, { agents: 3, cores: realCores, digest: true, wrapCore: rewriting((x) => Object.fromEntries(Object.entries(x).reverse())) });
    expect(reordered.traceDigest).toBe(base);
    const changed = runSeed(7, { agents: 3, cores: realCores, digest: true, wrapCore: rewriting((x) => ({ ...x, extra: 1 })) });
    expect(changed.traceDigest).not.toBe(base);
  }, 60_000);

  it('a task seed run twice has one digest', () => {
    const a = runTaskSeed(3, { agents: 3, cores: realCores, digest: true });
    expect(a.traceDigest).toMatch(/^[0-9a-f]{64}:\d+$/);
    expect(runTaskSeed(3, { agents: 3, cores: realCores, digest: true }).traceDigest).toBe(a.traceDigest);
  }, 60_000);
});
