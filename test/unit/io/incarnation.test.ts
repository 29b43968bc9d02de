// Incarnations survive a wall clock stepped back (docs/PROTOCOL.md §3.1).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { nextIncarnation } from '../../../src/io/cluster-dir.ts';

const dir = mkdtempSync(join(tmpdir(), 'trine-inc-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('nextIncarnation', () => {
  it('is the start time, but always above the last one recorded, even if the clock went back', () => {
    expect(nextIncarnation(dir, 'r1', 5_000)).toBe(5_000);
    expect(nextIncarnation(dir, 'r1', 9_000)).toBe(9_000);
    expect(nextIncarnation(dir, 'r1', 1_000)).toBe(9_001); // clock stepped back an hour
    expect(nextIncarnation(dir, 'r2', 1_000)).toBe(1_000); // per process
  });
});
