// src/io/trace.ts: the latency timeline (TRINE_TRACE_DIR). Off by default: a daemon writes
// nothing; on, each event is one line `<monotonic ms> <event>` in D/<id>.<pid>.trace, in order.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';

const TRACE = fileURLToPath(new URL('../../../src/io/trace.ts', import.meta.url));
const script = `const t = await import(${JSON.stringify(TRACE)}); t.startTrace('r9'); t.trace('rx a1 231'); t.trace('tx r2 233'); console.log(t.tracing());`;
const run = (env: NodeJS.ProcessEnv): string =>
  execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', env }).trim();

let dir: string;
afterEach(() => rmSync(dir, { recursive: true, force: true }));

describe('the trace timeline', () => {
  it('writes nothing without TRINE_TRACE_DIR', () => {
    dir = mkdtempSync(join(tmpdir(), 'trine-trace-'));
    const env = { ...process.env };
    delete env['TRINE_TRACE_DIR'];
    expect(run(env)).toBe('false');
    expect(readdirSync(dir)).toEqual([]);
  });

  it('with TRINE_TRACE_DIR, one line per event in <id>.<pid>.trace, stamped with a rising monotonic clock', () => {
    dir = mkdtempSync(join(tmpdir(), 'trine-trace-'));
    expect(run({ ...process.env, TRINE_TRACE_DIR: dir })).toBe('true');
    const files = readdirSync(dir);
    expect(files).toHaveLength(1);
    expect(files[0]).toMatch(/^r9\.\d+\.trace$/);
    const lines = readFileSync(join(dir, files[0] as string), 'utf8').trim().split('\n');
    expect(lines.map((l) => l.replace(/^\d+\.\d{3} /, ''))).toEqual(['rx a1 231', 'tx r2 233']);
    const [a, b] = lines.map((l) => Number(l.split(' ')[0]));
    expect(b).toBeGreaterThanOrEqual(a as number);
  });
});
