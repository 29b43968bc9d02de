#!/usr/bin/env node
// The test bed's power controller: what the watchdog's `command` reset driver runs for a node of
// a namespace cluster (src/io/reset-driver.ts CommandResetDriver), as an IPMI call would on a real
// cluster. `power-cycle.mjs NODE ADDRESS`: SIGKILL every process in the node's network namespace
// (the power goes off: nothing gets to clean up), then boot it: start `trine node run` from the
// node's own bundle inside the namespace again, detached, as systemd would at boot. The node →
// namespace → bundle map is the JSON file named by TRINE_TESTBED_MAP, written by
// test/hosts/cluster.ts. Plain JavaScript so that it starts in milliseconds; exits 0 once the
// node is booting, non-zero with one line on stderr if it could not be reset.
import { execFileSync, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';

const [node, address] = process.argv.slice(2);
const fail = (why) => {
  process.stderr.write(`power-cycle ${node ?? '?'}: ${why}\n`);
  process.exit(1);
};
if (node === undefined || address === undefined) fail('usage: power-cycle.mjs NODE ADDRESS');
const mapFile = process.env.TRINE_TESTBED_MAP;
if (mapFile === undefined) fail('TRINE_TESTBED_MAP is not set');
const map = JSON.parse(readFileSync(mapFile, 'utf8'));
const host = map.nodes[node];
if (host === undefined) fail(`unknown node (known: ${Object.keys(map.nodes).join(', ')})`);
if (host.address !== address) fail(`address ${address} is not ${node}'s (${host.address})`);

const pids = () => execFileSync('ip', ['netns', 'pids', host.ns], { encoding: 'utf8' }).split('\n').filter((l) => /^[0-9]+$/.test(l)).map(Number);
for (const pid of pids()) {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // gone already
  }
}
const deadline = Date.now() + 5_000;
while (pids().length > 0) {
  if (Date.now() > deadline) fail(`processes ${pids().join(' ')} still running 5 s after SIGKILL`);
  execFileSync('sleep', ['0.05']);
}
const out = openSync(host.log, 'a');
const child = spawn('ip', ['netns', 'exec', host.ns, process.execPath, map.trine, 'node', 'run', '--bundle', host.bundle], {
  detached: true, stdio: ['ignore', out, out],
});
closeSync(out);
child.unref();
process.stdout.write(`power-cycle ${node}: ${host.ns} powered off and booting (pid ${child.pid})\n`);
