// `npm run bench`: every benchmark, printed as named figures with units and written to
// bench/results/<date>.json (STYLE.md 17). Figures land in docs/PERFORMANCE.md by hand, beside
// the source paper's; nothing here is asserted by `npm test`.
import { mkdirSync, writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { benchCrypto, type Figure } from './crypto.ts';
import { benchDgrp } from './dgrp.ts';
import { benchFlood } from './flood.ts';
import { benchGmpi } from './gmpi.ts';
import { benchGroup } from './group.ts';
import { benchHops } from './hops.ts';
import { benchRecovery } from './recovery.ts';
import { benchRollback } from './rollback.ts';
import { benchSignals, benchSignalsSideBySide } from './signals.ts';
import { testBedSupported } from '../test/hosts/testbed.ts';
import { benchTasks } from './tasks.ts';
import { helpFromHeader } from '../examples/common/help.ts';

helpFromHeader(import.meta.url);

const here = fileURLToPath(new URL('.', import.meta.url));

function print(section: string, figures: Figure[]): void {
  console.log(`\n## ${section}`);
  for (const f of figures) {
    const v = Math.abs(f.value) >= 100 ? f.value.toFixed(0) : f.value.toFixed(3);
    console.log(`${f.name}: ${v} ${f.unit}`);
  }
}

const started = new Date();
const results: Record<string, Figure[]> = {};
console.log(`trine bench: node ${process.version}, ${cpus().length} cpus (${cpus()[0]?.model ?? '?'}), load ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
results['crypto'] = await benchCrypto();
print('signatures and frames', results['crypto']);
results['hops'] = await benchHops();
print('the floor: a small message through a chain of bare, idle Node processes on loopback TCP (nothing but forwarding)', results['hops']);
results['group'] = await benchGroup();
print('group messages on a local cluster (3 replicas, 4 agents, ws on loopback, Ed25519)', results['group']);
results['gmpi'] = await benchGmpi();
print('G-MPI point-to-point between two processes on loopback (ping-pong; bandwidth = size / half the p50 round trip)', results['gmpi']);
results['tasks'] = await benchTasks();
print('tasks and processes on a local cluster (trine up --nodes 4; raw samples in bench/results/tasks.json)', results['tasks']);
if (testBedSupported().ok) {
  results['tasks-hosts'] = await benchTasks({ hosts: true });
  print('the same on namespace hosts from trine init bundles, a node failure being its link cut (raw samples in bench/results/tasks-hosts.json)', results['tasks-hosts']);
}
// Loopback and namespace hosts side by side where this machine can make namespaces (root).
const hostsBed = testBedSupported();
results['signals'] = hostsBed.ok ? await benchSignalsSideBySide() : await benchSignals({ printTables: false });
if (!hostsBed.ok) console.log(`(signals on namespace hosts skipped: ${hostsBed.why})`);
print('signals and group requests of a linked task on a local cluster, then (hosts:) on namespace hosts (Tables 5.3/5.4; raw samples in bench/results/signals.json, signals-hosts.json)', results['signals']);
results['recovery'] = await benchRecovery();
print('replica faults on a local cluster: injection → condemned, new group, three replicas again (PROTOCOL §10)', results['recovery']);
results['rollback'] = await benchRollback();
print('rollback recovery of G-MPI tasks on a local cluster, RBML with NCO checkpoints against app mode; a crashed rank\'s recovery (issue 17; raw samples in bench/results/rollback.json)', results['rollback']);
results['dgrp'] = await benchDgrp();
print('the dynamic group of recommended processes on a local cluster: rounds of CPU-bound units on 4 processes, plain against DGRP, no fault and one process slowed (issue 18)', results['dgrp']);
results['flood'] = await benchFlood();
print('a stranger\'s connection flood on replica r3 of a local cluster, quiet then flooded (issue 14)', results['flood']);

const dir = join(here, 'results');
mkdirSync(dir, { recursive: true });
const file = join(dir, `${started.toISOString().replace(/[:.]/g, '-')}.json`);
writeFileSync(file, JSON.stringify({ started: started.toISOString(), node: process.version, cpus: cpus().length, loadavg: loadavg(), results }, null, 2));
console.log(`\nwritten ${file}`);
process.exit(0);
