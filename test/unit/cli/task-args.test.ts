// What the task commands accept from the operator (cli/task-args.ts): every problem is one line
// with exit code 2 that says what to type instead; what passes is a request replicas accept.
import { describe, expect, it } from 'vitest';
import { CliError, EXIT_USAGE } from '../../../cli/errors.ts';
import { buildSubmit, newTaskKey, parseEnv, parseTaskId, requireCommand, type SubmitInput } from '../../../cli/task-args.ts';
import {
  MAX_ARG_CHARS, MAX_ARGS, MAX_ENV_ENTRIES, MAX_TASK_PROCS, ROLLBACK_DEFAULT_INTERVAL_MS, ROLLBACK_DEFAULT_STATE_BYTES, ROLLBACK_MAX_INTERVAL_MS,
  ROLLBACK_MAX_STATE_BYTES, ROLLBACK_MIN_INTERVAL_MS,
} from '../../../src/core/constants.ts';
import { agentRequest } from '../../../src/core/wire/messages.ts';

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
      mode: 'plain', recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 8 * 3, taskKey: KEY,
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

describe('buildSubmit: the recovery options (PROTOCOL §11.1)', () => {
  const rollback = (more: Record<string, string> = {}) => input({ linked: true, recovery: { recovery: 'rollback', ...more } });

  it('app recovery by default, and with --recovery app', () => {
    expect(buildSubmit(input()).recovery).toEqual({ kind: 'app' });
    expect(buildSubmit(input({ recovery: { recovery: 'app' } })).recovery).toEqual({ kind: 'app' });
  });

  it('--recovery rollback --linked: RADIC\'s logging, uncoordinated checkpoints and the default bounds, each option settable', () => {
    expect(buildSubmit(rollback()).recovery).toEqual({
      kind: 'rollback', logging: 'rbml', checkpoint: 'nco', intervalMs: ROLLBACK_DEFAULT_INTERVAL_MS, maxStateBytes: ROLLBACK_DEFAULT_STATE_BYTES,
    });
    const r = buildSubmit(rollback({ logging: 'hmpl', checkpoint: 'sco', checkpointInterval: '250', maxState: '4096' }));
    expect(r.recovery).toEqual({ kind: 'rollback', logging: 'hmpl', checkpoint: 'sco', intervalMs: 250, maxStateBytes: 4096 });
    expect(agentRequest.dec(agentRequest.enc(r), 'submit')).toEqual({ ok: true, value: r });
    for (const logging of ['rbml', 'hmpl', 'cm']) for (const checkpoint of ['nco', 'bsco', 'sco']) {
      expect(buildSubmit(rollback({ logging, checkpoint })).recovery).toMatchObject({ logging, checkpoint });
    }
    const bounds = rollback({ checkpointInterval: String(ROLLBACK_MIN_INTERVAL_MS), maxState: String(ROLLBACK_MAX_STATE_BYTES) });
    expect(buildSubmit(bounds).recovery).toMatchObject({ intervalMs: ROLLBACK_MIN_INTERVAL_MS, maxStateBytes: ROLLBACK_MAX_STATE_BYTES });
  });

  it('rollback asked for a task that is not linked: the error names --linked', () => {
    expect(usageError(() => buildSubmit(input({ recovery: { recovery: 'rollback' } })))).toBe(
      '--recovery rollback needs a linked task: add --linked (its processes must use the application library)',
    );
  });

  it('a rollback option without --recovery rollback', () => {
    expect(usageError(() => buildSubmit(input({ linked: true, recovery: { logging: 'hmpl' } })))).toBe(
      '--logging applies to rollback recovery only: add --recovery rollback (and --linked), or drop --logging',
    );
    expect(usageError(() => buildSubmit(input({ recovery: { recovery: 'app', maxState: '10' } })))).toMatch(/^--max-state applies to rollback recovery only/);
    expect(usageError(() => buildSubmit(input({ recovery: { checkpointInterval: '500' } })))).toMatch(/^--checkpoint-interval applies/);
    expect(usageError(() => buildSubmit(input({ recovery: { checkpoint: 'sco' } })))).toMatch(/^--checkpoint applies/);
  });

  it('a value that is not one of the choices, or out of range, says which are allowed', () => {
    expect(usageError(() => buildSubmit(input({ recovery: { recovery: 'magic' } })))).toBe('--recovery "magic" is not one of app, rollback: write e.g. --recovery app');
    expect(usageError(() => buildSubmit(rollback({ logging: 'RBML' })))).toBe('--logging "RBML" is not one of rbml, hmpl, cm: write e.g. --logging rbml');
    expect(usageError(() => buildSubmit(rollback({ checkpoint: 'cco' })))).toBe('--checkpoint "cco" is not one of nco, bsco, sco: write e.g. --checkpoint nco');
    const interval = `give a whole number of milliseconds from ${ROLLBACK_MIN_INTERVAL_MS} to ${ROLLBACK_MAX_INTERVAL_MS}`;
    for (const bad of ['99', String(ROLLBACK_MAX_INTERVAL_MS + 1), '1.5e3', '-200', '', '2s', '9'.repeat(30)]) {
      expect(usageError(() => buildSubmit(rollback({ checkpointInterval: bad })))).toContain(interval);
    }
    for (const bad of ['0', String(ROLLBACK_MAX_STATE_BYTES + 1), '1M', ' 5']) {
      expect(usageError(() => buildSubmit(rollback({ maxState: bad })))).toContain(`give a whole number of bytes from 1 to ${ROLLBACK_MAX_STATE_BYTES}`);
    }
  });
});

describe('buildSubmit: the DGRP options (PROTOCOL §12.1)', () => {
  const dgrp = (more: Record<string, string> = {}) => input({ linked: true, dgrp: { dgrp: true, ...more } });

  it('none by default; --dgrp --linked gives the paper\'s numbers, each settable; the factor is kept in hundredths', () => {
    expect(buildSubmit(input()).dgrp).toBeNull();
    expect(buildSubmit(dgrp()).dgrp).toEqual({ intervalMs: 1000, zeta: 5, factorPercent: 250, marginMs: 20, initialThresholdMs: 8000 });
    const r = buildSubmit(dgrp({ interval: '200', zeta: '3', factor: '1.75', margin: '0', initial: '500' }));
    expect(r.dgrp).toEqual({ intervalMs: 200, zeta: 3, factorPercent: 175, marginMs: 0, initialThresholdMs: 500 });
    expect(agentRequest.dec(agentRequest.enc(r), 'submit')).toEqual({ ok: true, value: r });
  });

  it('bad input: out of range, not a number, not linked, or a --dgrp-* flag without --dgrp, each says what to type', () => {
    expect(usageError(() => buildSubmit(input({ dgrp: { dgrp: true } })))).toMatch(/^--dgrp needs a linked task: add --linked/);
    expect(usageError(() => buildSubmit(dgrp({ interval: '10' })))).toBe('--dgrp-interval "10": give a whole number of milliseconds from 50 to 60000');
    expect(usageError(() => buildSubmit(dgrp({ zeta: '0' })))).toMatch(/^--dgrp-zeta "0": give a whole number of testing intervals from 1 to 100/);
    expect(usageError(() => buildSubmit(dgrp({ factor: '0.5' })))).toMatch(/^--dgrp-factor "0.5": give a number from 1 to 100 with at most two decimals/);
    expect(usageError(() => buildSubmit(dgrp({ factor: '2.555' })))).toMatch(/^--dgrp-factor/);
    expect(usageError(() => buildSubmit(dgrp({ margin: '-1' })))).toMatch(/^--dgrp-margin/);
    expect(usageError(() => buildSubmit(input({ linked: true, dgrp: { interval: '200' } })))).toBe(
      '--dgrp-interval applies to a DGRP task only: add --dgrp (and --linked), or drop --dgrp-interval',
    );
  });
});

describe('buildSubmit: the straggler policy (PROTOCOL §13.1)', () => {
  const linked = (straggler: SubmitInput['straggler']) => input({ linked: true, straggler });

  it('none unless asked; --straggler gives the defaults (factor 1.5, after half the work), kept as integers', () => {
    expect(buildSubmit(input()).straggler).toBeNull();
    expect(buildSubmit(input({ linked: true })).straggler).toBeNull();
    expect(buildSubmit(linked({ straggler: true })).straggler).toEqual({ factorHundredths: 150, afterPermille: 500 });
  });

  it('--straggler-factor K and --straggler-after Q ask for it too: K in hundredths, Q in permille; the request decodes as sent', () => {
    const r = buildSubmit(linked({ factor: '2.25', after: '0.35' }));
    expect(r.straggler).toEqual({ factorHundredths: 225, afterPermille: 350 });
    expect(agentRequest.dec(agentRequest.enc(r), 'submit')).toEqual({ ok: true, value: r });
    expect(buildSubmit(linked({ factor: '1.1' })).straggler).toEqual({ factorHundredths: 110, afterPermille: 500 });
    expect(buildSubmit(linked({ factor: '100' })).straggler).toMatchObject({ factorHundredths: 10_000 });
    expect(buildSubmit(linked({ after: '0.05' })).straggler).toEqual({ factorHundredths: 150, afterPermille: 50 });
    expect(buildSubmit(linked({ after: '0.95' })).straggler).toMatchObject({ afterPermille: 950 });
    expect(buildSubmit(linked({ after: '0.125' })).straggler).toMatchObject({ afterPermille: 125 });
  });

  it('a task that is not linked: the error names --linked', () => {
    expect(usageError(() => buildSubmit(input({ straggler: { straggler: true } })))).toBe(
      'a straggler policy needs a linked task: add --linked (its processes report their progress through the application library)',
    );
    expect(usageError(() => buildSubmit(input({ straggler: { factor: '2' } })))).toMatch(/add --linked/);
  });

  it('out of range or not a plain decimal: a usage error (exit 2) saying what to give', () => {
    for (const bad of ['1.09', '1', '0', '100.01', '1.555', '-2', '1e1', '', 'x', ' 1.5', '1,5']) {
      expect(usageError(() => buildSubmit(linked({ factor: bad })))).toContain('--straggler-factor');
      expect(usageError(() => buildSubmit(linked({ factor: bad })))).toContain('give a number from 1.1 to 100 with at most two decimals, e.g. 1.5');
    }
    for (const bad of ['0.049', '0.951', '1', '0', '0.1234', '50%', '.5', '']) {
      expect(usageError(() => buildSubmit(linked({ after: bad })))).toContain('give the share of the work as a fraction from 0.05 to 0.95 with at most three decimals, e.g. 0.5');
    }
  });
});
