// What the task commands accept from the operator (cli/task-args.ts): every problem is one line
// with exit code 2 that says what to type instead; what passes is a request replicas accept.
import { describe, expect, it } from 'vitest';
import { CliError, EXIT_USAGE } from '../../../cli/errors.ts';
import { buildSubmit, newTaskKey, parseEnv, parseTaskId, requireCommand, type SubmitInput } from '../../../cli/task-args.ts';
import { MAX_ARG_CHARS, MAX_ARGS, MAX_ENV_ENTRIES, MAX_TASK_PROCS } from '../../../src/core/constants.ts';

const NONCE = '0123456789abcdef0123456789abcdef';
const KEY = new Uint8Array(32).fill(3);
const input = (over: Partial<SubmitInput> = {}): SubmitInput => ({
  command: ['sleep', '10'], size: 1, name: undefined, env: [], cwd: undefined, baseCwd: '/home/op', nonce: NONCE, taskKey: KEY, ...over,
});

/** The CliError `f` throws: exit code 2 and a one-line message. */
function usageError(f: () => unknown): string {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(CliError);
    const c = e as CliError;
    expect(c.exitCode).toBe(EXIT_USAGE);
    expect(c.message).not.toContain('\n');
    return c.message;
  }
  throw new Error('expected a usage error');
}

describe('parseTaskId', () => {
  it('accepts t1, t2, … t12345', () => {
    for (const id of ['t1', 't9', 't10', 't12345']) expect(parseTaskId(id)).toBe(id);
  });

  it('refuses anything else, pointing at trine ps', () => {
    for (const id of ['t0', 't01', '3', 'T3', 't', 't-1', 't3 ', 'x1', `t${'1'.repeat(40)}`]) {
      expect(usageError(() => parseTaskId(id))).toMatch(/^bad task id .*trine ps/);
    }
  });
});

describe('requireCommand: the command comes after --', () => {
  it('passes a command given after --', () => {
    expect(requireCommand(['ls', '-l'], true)).toEqual(['ls', '-l']);
  });

  it('no command at all', () => {
    expect(usageError(() => requireCommand([], true))).toMatch(/submit needs a command after `--`/);
    expect(usageError(() => requireCommand([], false))).toMatch(/submit needs a command after `--`/);
  });

  it('a command without --', () => {
    expect(usageError(() => requireCommand(['sleep', '1'], false))).toMatch(/put the command after `--`/);
  });
});

describe('parseEnv', () => {
  it('sorts by name and keeps values with = and empty values', () => {
    expect(parseEnv(['B=2', 'A=x=y', 'C='])).toEqual([['A', 'x=y'], ['B', '2'], ['C', '']]);
  });

  it('refuses an entry without =, a bad name, a duplicate, too many, a value too long', () => {
    expect(usageError(() => parseEnv(['FOO']))).toMatch(/--env "FOO" has no '='.*NAME=VALUE/);
    expect(usageError(() => parseEnv(['1A=2']))).toMatch(/is not a variable name/);
    expect(usageError(() => parseEnv(['=2']))).toMatch(/is not a variable name/);
    expect(usageError(() => parseEnv(['A=1', 'A=2']))).toMatch(/--env A is given twice/);
    expect(usageError(() => parseEnv(Array.from({ length: MAX_ENV_ENTRIES + 1 }, (_, i) => `V${i}=1`)))).toMatch(/at most 256/);
    expect(usageError(() => parseEnv([`A=${'x'.repeat(MAX_ARG_CHARS + 1)}`]))).toMatch(/at most 4096/);
  });
});

describe('buildSubmit', () => {
  it('builds the task.submit request; a bare command name is passed as given', () => {
    expect(buildSubmit(input({ env: ['Z=1', 'A=2'], size: 3 }))).toEqual({
      type: 'task.submit', nonce: NONCE, name: 'sleep', size: 3, file: 'sleep', args: ['10'], cwd: '/home/op', env: [['A', '2'], ['Z', '1']],
      mode: 'plain', recovery: { kind: 'app' }, taskKey: KEY,
    });
    expect(buildSubmit(input({ linked: true })).mode).toBe('linked');
  });

  it('carries the task key the caller drew; newTaskKey draws 32 fresh random bytes (PROTOCOL §9.5)', () => {
    const a = newTaskKey();
    const b = newTaskKey();
    expect(a).toHaveLength(32);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(false);
    expect(buildSubmit(input({ taskKey: a })).taskKey).toEqual(a);
    expect(usageError(() => buildSubmit(input({ taskKey: new Uint8Array(31) })))).toContain('would be refused');
  });

  it('a relative path with a / is made absolute against --cwd, itself relative to the CLI cwd', () => {
    const r = buildSubmit(input({ command: ['./bin/worker', '-x'], cwd: 'jobs' }));
    expect(r.cwd).toBe('/home/op/jobs');
    expect(r.file).toBe('/home/op/jobs/bin/worker');
    expect(r.name).toBe('worker');
    expect(buildSubmit(input({ command: ['/usr/bin/env'], cwd: '/srv' }))).toMatchObject({ file: '/usr/bin/env', cwd: '/srv' });
  });

  it('does not check that the executable exists (the group reports spawn failed: ENOENT)', () => {
    expect(buildSubmit(input({ command: ['no-such-command-anywhere'] })).file).toBe('no-such-command-anywhere');
  });

  it('--name is kept; an empty or too long name is refused', () => {
    expect(buildSubmit(input({ name: 'my job' })).name).toBe('my job');
    expect(usageError(() => buildSubmit(input({ name: '' })))).toMatch(/--name must have 1 to 64/);
    expect(usageError(() => buildSubmit(input({ name: 'x'.repeat(65) })))).toMatch(/--name must have 1 to 64/);
  });

  it('refuses a bad size, an empty command, too many or too long arguments', () => {
    expect(usageError(() => buildSubmit(input({ size: 0 })))).toMatch(/-n must be an integer from 1 to 1024/);
    expect(usageError(() => buildSubmit(input({ size: MAX_TASK_PROCS + 1 })))).toMatch(/-n must be/);
    expect(usageError(() => buildSubmit(input({ command: [] })))).toMatch(/needs a command/);
    expect(usageError(() => buildSubmit(input({ command: [''] })))).toMatch(/needs a command/);
    expect(usageError(() => buildSubmit(input({ command: ['echo', ...Array.from({ length: MAX_ARGS + 1 }, () => 'a')] })))).toMatch(/257 arguments, at most 256/);
    expect(usageError(() => buildSubmit(input({ command: ['echo', 'ok', 'x'.repeat(MAX_ARG_CHARS + 1)] })))).toMatch(/argument 2 of the command/);
  });

  it('refuses text that is not valid Unicode', () => {
    expect(usageError(() => buildSubmit(input({ command: ['echo', '\uD800'] })))).toMatch(/not valid Unicode/);
  });
});
