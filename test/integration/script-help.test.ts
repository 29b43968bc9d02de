// `--help` on every npm script (issue 19: `npm run campaign:nqueens -- --help` started a 100-run
// campaign): each prints what it does and exits 0, starting nothing. The scripts are read from
// package.json, so a script added later is held to it too. `test`, `typecheck` and `trine` are
// the tools' own (vitest, tsc, the CLI), and `sim:dgrp` is vitest.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { headerOf } from '../../examples/common/help.ts';

const REPO = new URL('../..', import.meta.url).pathname;
const scripts = Object.entries((JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts)
  .filter(([name]) => !['test', 'typecheck', 'trine', 'sim:dgrp'].includes(name));

const run = (command: string): Promise<{ code: number; stdout: string }> => new Promise((resolve) => {
  // The script's own command line, as npm would run it, with --help after it.
  execFile('sh', ['-c', `${command} --help`], { cwd: REPO, timeout: 30_000 }, (e, stdout) => resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : 1, stdout }));
});

describe('--help on every npm script (issue 19)', () => {
  it('headerOf: the opening comment, past a #! line, without the slashes', () => {
    expect(headerOf('#!/usr/bin/env node\n// `npm run x`: does x.\n//\n// More.\nimport a from "b";\n// not this')).toBe('`npm run x`: does x.\n\nMore.\n');
  });

  for (const [name, command] of scripts) {
    it(`npm run ${name} -- --help prints its usage and exits 0`, async () => {
      const r = await run(command);
      expect(r.code, r.stdout).toBe(0);
      expect(r.stdout).toMatch(/npm run|usage|Writes/);
    }, 40_000);
  }
});
