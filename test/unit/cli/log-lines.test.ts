// The line reader `trine logs` feeds from local files and from agents alike (cli/log-lines.ts):
// the prefixes, a partial last line held until its end or the final flush, a line beyond the
// read size printed in pieces, and a replaced (shrunk) file read again from its start.
import { describe, expect, it } from 'vitest';
import { LineReader, LOG_READ_BYTES } from '../../../cli/log-lines.ts';

const bytes = (s: string) => new TextEncoder().encode(s);

describe('LineReader', () => {
  it('prefixes stdout `[t3/0] ` and stderr `[t3/0 err] `', () => {
    expect(new LineReader('t3', 0, 'out').take(bytes('a\n'))).toEqual(['[t3/0] a']);
    expect(new LineReader('t12', 7, 'err').take(bytes('b\n'))).toEqual(['[t12/7 err] b']);
  });

  it('holds a partial line until its end, wherever the chunks split it, and advances the offset by what it took', () => {
    const r = new LineReader('t1', 0, 'out');
    expect(r.take(bytes('one\ntw'))).toEqual(['[t1/0] one']);
    expect(r.offset).toBe(6);
    expect(r.take(bytes(''))).toEqual([]);
    expect(r.take(bytes('o\n\nthr'))).toEqual(['[t1/0] two', '[t1/0] ']);
    expect(r.offset).toBe(12);
    expect(r.flush()).toEqual(['[t1/0] thr']);
    expect(r.flush()).toEqual([]);
  });

  it('keeps a UTF-8 character split across two chunks whole', () => {
    const r = new LineReader('t1', 0, 'out');
    const all = bytes('héllo ✓\n');
    expect(r.take(all.subarray(0, 2))).toEqual([]);
    expect(r.take(all.subarray(2, 8))).toEqual([]);
    expect(r.take(all.subarray(8))).toEqual(['[t1/0] héllo ✓']);
  });

  it('prints a line longer than the read size in pieces rather than holding it forever', () => {
    const r = new LineReader('t1', 0, 'out');
    const lines = r.take(new Uint8Array(LOG_READ_BYTES).fill(0x61));
    expect(lines).toHaveLength(1);
    expect(lines[0]?.length).toBe('[t1/0] '.length + LOG_READ_BYTES);
    expect(r.take(bytes('b\n'))).toEqual(['[t1/0] b']);
  });

  it('a file smaller than what was read was replaced: the next chunk starts at 0', () => {
    const r = new LineReader('t1', 0, 'out');
    r.take(bytes('one\ntwo\n'));
    r.resize(8);
    expect(r.offset).toBe(8);
    r.resize(3);
    expect(r.offset).toBe(0);
    expect(r.take(bytes('new\n'))).toEqual(['[t1/0] new']);
  });
});

describe('LineReader with --json (trine.log/1)', () => {
  it('one object per line, the line without prefix, partial lines held as in text; control characters, quotes and bad UTF-8 stay one line', () => {
    const r = new LineReader('t3', 2, 'err', true);
    const out = r.take(bytes('a "q"\tb\r\nsplit'));
    expect(out.map((l) => JSON.parse(l) as unknown)).toEqual([{ schema: 'trine.log/1', task: 't3', vpid: 2, stream: 'err', line: 'a "q"\tb\r' }]);
    expect(r.take(new Uint8Array([0x20, 0xff, 0x0a]))).toEqual([JSON.stringify({ schema: 'trine.log/1', task: 't3', vpid: 2, stream: 'err', line: 'split \uFFFD' })]);
    r.take(bytes('\u2028end'));
    const last = r.flush();
    expect(last).toHaveLength(1);
    expect(last[0]?.includes('\n')).toBe(false);
    expect((JSON.parse(last[0] as string) as { line: string }).line).toBe('\u2028end');
  });
});
