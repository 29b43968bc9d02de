// A SPAWN's path step by step, from a traced run of bench/signals.ts (docs/PERFORMANCE.md §5):
//
//   rm -rf /tmp/tr && mkdir /tmp/tr
//   TRINE_TRACE_DIR=/tmp/tr TRINE_BENCH_KEEP=1 TRINE_BENCH_KILLS=10 TRINE_BENCH_CRASHES=10 \
//     TRINE_BENCH_BROADCASTS=0 TRINE_BENCH_SYNCS=0 TRINE_BENCH_NODE_FAILURES=0 TRINE_BENCH_BARE_KILLS=0 \
//     node --import tsx bench/signals.ts
//   node tools/trace-spawns.mjs /tmp/tr <the cluster dir the bench printed as kept> [TASK, default t1]
//
// It lines up, on CLOCK_MONOTONIC, the daemons' traces (src/io/trace.ts: frames in and out with
// their items, the agent's spawn(), the hellos it accepted and what it wrote to which process)
// with the bench processes' stamped lines (test/fixtures/apps/bench-app.mjs, in
// logs/tasks/<task>/<vpid>.out), and prints each step's p50 and p90 over the replacements. The
// task's first start (no requests before it) and the bench's first replacement (its warm-up, not
// among its samples) are left out; so is a SPAWN whose marks are incomplete (a trace cut short),
// counted in the output. A trace dir holds one run: empty it between runs.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const USAGE = 'usage: node tools/trace-spawns.mjs TRACE_DIR CLUSTER_DIR [TASK]   (TASK: t1 by default; the header shows the bench run that makes the two dirs)';
if (process.argv.includes('--help') || process.argv.includes('-h')) {
  console.log(USAGE);
  process.exit(0);
}
const [traceDir, clusterDir, task = 't1'] = process.argv.slice(2);
if (traceDir === undefined || clusterDir === undefined) {
  console.error(USAGE);
  process.exit(2);
}
const logs = join(clusterDir, 'logs', 'tasks', task);
for (const [what, dir] of [['trace dir', traceDir], [`task ${task}'s logs`, logs]]) {
  if (!existsSync(dir)) {
    console.error(`trace-spawns: no ${what} at ${dir}: run the bench as the header says (TRINE_TRACE_DIR, TRINE_BENCH_KEEP), then name its dirs`);
    process.exit(2);
  }
}

/** @type {{ t: number, who: string, what: string }[]} */
const events = [];
for (const file of readdirSync(traceDir).filter((f) => f.endsWith('.trace'))) {
  const who = file.split('.')[0]; // <id>.<pid>.trace: a restarted agent's two files are one id
  for (const line of readFileSync(join(traceDir, file), 'utf8').split('\n')) {
    const at = line.indexOf(' ');
    if (at > 0) events.push({ t: Number(line.slice(0, at)), who, what: line.slice(at + 1) });
  }
}
for (const file of readdirSync(logs).filter((f) => f.endsWith('.out'))) {
  const vpid = file.slice(0, -'.out'.length);
  for (const line of readFileSync(join(logs, file), 'utf8').split('\n')) {
    const m = /^(\w+) .*mono=([\d.]+)$/.exec(line);
    if (m !== null) events.push({ t: Number(m[2]), who: `p${vpid}`, what: m[1] });
  }
}
events.sort((a, b) => a.t - b.t);

const STEPS = [
  ['last request → the first copy of the spawn command at the agent', 'send', 'copy1'],
  ['last request → the second matching copy', 'send', 'copy2'],
  ['second copy → spawn() called', 'copy2', 'spawn'],
  ['spawn() called → returned (the fork)', 'spawn', 'spawned'],
  ['spawn() called → the process\'s first line', 'spawn', 'start'],
  ['first line → trine/app loaded', 'start', 'loaded'],
  ['loaded → the hello accepted by the agent', 'loaded', 'hello'],
  ['hello → the connect report sent to the primary', 'hello', 'report'],
  ['report → the first copy of the mapping back', 'report', 'back1'],
  ['report → the second matching copy', 'report', 'back2'],
  ['second copy → the mapping written to the process', 'back2', 'mapping'],
  ['mapping written → Link.init() resolved', 'mapping', 'ready'],
  ['last request → Link.init() resolved', 'send', 'ready'],
  ['hello accepted (the welcome) → the worker attached (the A27 window)', 'hello', 'attached'],
  ['Link.init() resolved → the worker attached', 'ready', 'attached'],
];

const samples = [];
let incomplete = 0;
let replacements = 0;
for (let i = 0; i < events.length; i++) {
  const e = events[i];
  const m = /^spawn\.call ([^/]+)\/(\d+)$/.exec(e.what);
  if (m === null || m[1] !== task) continue;
  const proc = `${task}/${m[2]}`;
  const agent = e.who;
  const before = events.slice(0, i).filter((x) => e.t - x.t < 100);
  const after = events.slice(i).filter((x) => x.t - e.t < 1000);
  const copies = before.filter((x) => x.who === agent && x.what.startsWith('rx.items r') && x.what.includes('grp:gc:proc.spawn'));
  const sends = before.filter((x) => x.what === 'send' && x.who !== `p${m[2]}`);
  if (sends.length === 0) continue; // the task's first start: nothing asked for it
  // The bench's warm-up replacement comes first (bench/signals.ts): not one of its samples.
  if (++replacements === 1) continue;
  const first = (who, test, from = e.t) => after.find((x) => x.who === who && x.t >= from && test(x.what))?.t;
  const s = { spawn: e.t, send: sends.at(-1).t, copy1: copies.at(-2)?.t, copy2: copies.at(-1)?.t };
  s.spawned = first(agent, (w) => w.startsWith('spawn.done'));
  s.start = first(`p${m[2]}`, (w) => w === 'start');
  s.loaded = first(`p${m[2]}`, (w) => w === 'loaded');
  s.ready = first(`p${m[2]}`, (w) => w === 'ready');
  s.hello = first(agent, (w) => w === `agent.connected ${proc}`);
  s.report = s.hello === undefined ? undefined : first(agent, (w) => w.startsWith('tx r') && w.includes('grp:cg:proc.report'), s.hello);
  const back = s.report === undefined ? [] : after.filter((x) => x.who === agent && x.t > s.report && x.what.startsWith('rx.items r') && x.what.includes('grp:gc:proc.mapping')).slice(0, 2);
  s.back1 = back[0]?.t;
  s.back2 = back[1]?.t;
  s.mapping = first(agent, (w) => w === `app.tx mapping ${proc}`);
  s.attached = first(agent, (w) => w === `app.tx attached ${proc}`);
  if (Object.values(s).some((v) => v === undefined)) {
    incomplete++;
    continue;
  }
  samples.push(s);
}
if (samples.length === 0) {
  console.error(`trace-spawns: no complete replacement SPAWN of task ${task} in ${traceDir} and ${logs}: was the bench run with TRINE_TRACE_DIR and kills or crashes?`);
  process.exit(1);
}

const pct = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];
console.log(`${samples.length} SPAWNs of ${task} (the warm-up and ${incomplete} with marks missing left out); ms, p50 (p90)`);
for (const [name, a, b] of STEPS) {
  const xs = samples.map((s) => s[b] - s[a]).sort((x, y) => x - y);
  console.log(`  ${name.padEnd(66)} ${pct(xs, 0.5).toFixed(1)} (${pct(xs, 0.9).toFixed(1)})`);
}
