#!/usr/bin/env node
// `npm run demo`: the main job end to end — start a local 4-node cluster in a temporary dir,
// print its status, stop it — printing each step. Exits non-zero if any step fails, and always
// stops what it started.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const trine = fileURLToPath(new URL('./trine.js', import.meta.url));
const root = mkdtempSync(join(tmpdir(), 'trine-demo-'));
const dir = join(root, 'cluster');

function step(title, args) {
  process.stdout.write(`\n$ trine ${args.join(' ')}    # ${title}\n`);
  const started = Date.now();
  const r = spawnSync(process.execPath, [trine, ...args], { stdio: 'inherit' });
  const code = r.status ?? 1;
  process.stdout.write(`(exit ${code}, ${((Date.now() - started) / 1000).toFixed(1)} s)\n`);
  return code;
}

let failed = false;
if (step('start a local cluster: 3 replicas, an agent per node, the watchdog', ['up', '--nodes', '4', '--dir', dir]) !== 0) failed = true;
if (!failed && step('ask every replica and the watchdog for their status', ['status', '--dir', dir]) !== 0) failed = true;
if (step('stop everything that was started', ['down', '--dir', dir]) !== 0) failed = true;
if (failed) {
  process.stdout.write(`\ndemo FAILED: logs kept in ${join(dir, 'logs')}\n`);
  process.exit(1);
}
rmSync(root, { recursive: true, force: true });
process.stdout.write('\ndemo OK\n');
