#!/usr/bin/env node
// `npm run dashboard:shot [-- OUT]`: takes the README's screenshot of `trine dashboard`
// (docs/dashboard.png by default) by running the dashboard's browser test
// (test/e2e/dashboard.test.ts) with DASHBOARD_SHOT=OUT: a 4-node cluster, a process and a
// replica killed, the page saved once both are on its timeline. Needs chromium
// (`node tools/ensure-browser.mjs`).
import { spawnSync } from 'node:child_process';
import { resolve } from 'node:path';

const args = process.argv.slice(2);
if (args.includes('--help') || args.includes('-h')) {
  process.stdout.write('usage: npm run dashboard:shot [-- OUT.png]\nWrites a screenshot of the dashboard after a fault (default docs/dashboard.png) by running test/e2e/dashboard.test.ts.\n');
  process.exit(0);
}
const out = resolve(args[0] ?? 'docs/dashboard.png');
const r = spawnSync('npx', ['vitest', 'run', 'test/e2e/dashboard.test.ts'], { stdio: 'inherit', env: { ...process.env, DASHBOARD_SHOT: out } });
if (r.status === 0) process.stdout.write(`dashboard:shot: wrote ${out}\n`);
process.exit(r.status ?? 1);
