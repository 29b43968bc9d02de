#!/usr/bin/env node
// The `trine` executable: runs the CLI from its prebuilt bundle (bin/cli-bundle.js, rebuilt
// whenever a source changes), or from the TypeScript sources under the tsx loader when no bundle
// can be had. cli/main.ts parses argv and exits with the command's code. Daemons are started
// through this same file (cli/daemons.ts trineCommand), which it names for them here.
import { fileURLToPath } from 'node:url';
import { cliBundle, runCli } from './cli-bundle.js';

globalThis.TRINE_BIN = fileURLToPath(import.meta.url);
const bundle = cliBundle();
if (bundle !== null) {
  runCli(bundle);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import('../cli/main.ts');
}
