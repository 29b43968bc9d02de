// The JSON-lines convention of `--json` (cli/json-out.ts; docs/OPERATIONS.md §5.1): whether argv
// asks for JSON (a `--json` after `--` is the task's), one line per object with `schema` first,
// and every schema name versioned.
import { describe, expect, it } from 'vitest';
import { argvWantsJson, jsonLine, SCHEMAS } from '../../../cli/json-out.ts';

const argv = (...args: string[]) => ['node', 'trine.js', ...args];

describe('--json', () => {
  it('is asked for by a --json before any `--`, wherever it stands among trine\'s own arguments', () => {
    expect(argvWantsJson(argv('ps', '--json'))).toBe(true);
    expect(argvWantsJson(argv('logs', 't3', '--json', '--follow'))).toBe(true);
    expect(argvWantsJson(argv('submit', '--json', '-n', '2', '--', 'app', '--json'))).toBe(true);
    expect(argvWantsJson(argv('submit', '-n', '2', '--', 'app', '--json'))).toBe(false);
    expect(argvWantsJson(argv('ps'))).toBe(false);
    expect(argvWantsJson(argv('ps', '--jsonx'))).toBe(false);
    expect(argvWantsJson(argv())).toBe(false);
  });

  it('prints one line per object, schema first, whatever the strings hold', () => {
    const line = jsonLine(SCHEMAS.log, { task: 't1', vpid: 0, stream: 'out', line: 'a\nb "c"\u2028' });
    expect(line.endsWith('\n')).toBe(true);
    expect(line.slice(0, -1).includes('\n')).toBe(false);
    expect(Object.keys(JSON.parse(line) as object)[0]).toBe('schema');
    expect(JSON.parse(line)).toEqual({ schema: 'trine.log/1', task: 't1', vpid: 0, stream: 'out', line: 'a\nb "c"\u2028' });
  });

  it('names every schema trine.<name>/<version>, each once', () => {
    const names = Object.values(SCHEMAS);
    for (const n of names) expect(n).toMatch(/^trine\.[a-z-]+\/[1-9][0-9]*$/);
    expect(new Set(names).size).toBe(names.length);
  });
});
