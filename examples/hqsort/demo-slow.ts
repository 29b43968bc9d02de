// `npm run demo -- --slow [--count N]` (bin/demo.js hands over to this file): HyperQuickSort on the DGRP
// (issue 18 item 3; spec mpichv-dgrp 2.2.7, 2.6) with one slow process, then the same sort that
// waits for the slowest (--no-dgrp), on a local 4-node cluster in a temporary dir.
//
// Each run submits examples/hqsort/hqsort.ts (`--count` numbers, 16 million by default) on 4
// processes and, as soon as they run, makes
// VPID 3 slow with `trine inject slow … --share 10` (and `--period 500` where the CLI has it:
// long stops, which the DGRP's tests see). It prints the group's timeline (who left, who
// rejoined), the collector's one line (its check against the regenerated input) and both runs'
// times side by side. It exits non-zero if a step fails or an answer is wrong, and always stops
// the cluster it started: on Ctrl-C (SIGINT) or SIGTERM it stops it, says so in one line and
// exits 130 (143 for SIGTERM).
import { execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { intOption } from '../common/options.ts';
import { MAX_COUNT } from './hqsort-plan.ts';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const trineJs = join(repo, 'bin', 'trine.js');
const root = mkdtempSync(join(tmpdir(), 'trine-demo-slow-'));
const dir = join(root, 'cluster');
/** 16 M numbers by default: about 2 s of sorting on 4 processes of a 2-core machine, 10 s and
 *  more when one of them keeps 10 % of its CPU. The slow process is slowed from its start, so
 *  the group removes it before sorting begins at any count (`--count`: a shorter run). */
const COUNT = intOption('demo --slow', 'count', 'DEMO_SLOW_COUNT', 16_000_000, MAX_COUNT);
const SIZE = 4;
const SLOW_VPID = 3;
const DGRP_FLAGS = ['--dgrp', '--dgrp-interval', '200', '--dgrp-zeta', '3'];
/** A run longer than this is a failure (the slow baseline takes well under a minute). */
const RUN_TIMEOUT_MS = 180_000;
const POLL_MS = 300;

type Run = { code: number; stdout: string; stderr: string };

/** The exit code of a run stopped by a signal (the shell's 128 + its number). */
const EXIT_ON = { SIGINT: 130, SIGTERM: 143 } as const;
/** The signal that interrupted the demo, once one did (the handlers are at the end). */
let interrupted: keyof typeof EXIT_ON | null = null;
type TaskEvent = { task: string | null; atMs: number; text: string };
type TaskInfo = { id: string; outcome: string | null; reason: string | null };
type View = { tasks: TaskInfo[]; events: TaskEvent[] };

const say = (text: string): void => {
  process.stdout.write(text);
};
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** `trine` commands running now, and their ends: when the demo is interrupted none may outlive
 *  it, and `trine down` waits for a `trine up` in progress (it would miss the daemons started
 *  after it looked). */
const inFlight = new Map<ChildProcess, { command: string; done: Promise<Run> }>();

function trine(args: readonly string[]): Promise<Run> {
  // Once interrupted, only `trine down` runs: the run in progress stops at its next command.
  if (interrupted !== null && args[0] !== 'down') return Promise.resolve({ code: 1, stdout: '', stderr: 'interrupted' });
  let child: ChildProcess | undefined;
  const done = new Promise<Run>((resolve) => {
    child = execFile(process.execPath, [trineJs, ...args], { maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      inFlight.delete(child!);
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
  inFlight.set(child!, { command: args[0] ?? '', done });
  return done;
}

async function must(args: readonly string[]): Promise<string> {
  const r = await trine(args);
  if (r.code !== 0) throw new Error(`trine ${args.join(' ')} failed (exit ${r.code}): ${r.stderr.trim()}`);
  return r.stdout;
}

const view = async (): Promise<View> => JSON.parse(await must(['ps', '--json', '--dir', dir])) as View;

/** The collector's line: whichever process holds virtual rank 0 at the end printed it. */
function answerOf(id: string): string | null {
  for (let vpid = 0; vpid < 16; vpid++) {
    const f = join(dir, 'logs', 'tasks', id, `${vpid}.out`);
    if (!existsSync(f)) continue;
    const line = readFileSync(f, 'utf8').split('\n').find((l) => l.startsWith('hqsort: '));
    if (line !== undefined) return line;
  }
  return null;
}

type Outcome = { id: string; line: string; sortMs: number; wallMs: number };

/** One run: submit, slow VPID 3 as soon as it runs, wait for the end, print the timeline. */
async function run(title: string, appArgs: readonly string[], slowArgs: readonly string[]): Promise<Outcome> {
  const app = ['--import', 'tsx', 'examples/hqsort/hqsort.ts', '--count', String(COUNT), ...appArgs];
  const flags = ['--linked', '-n', String(SIZE), ...DGRP_FLAGS];
  say(`\n## ${title}\n$ trine submit ${flags.join(' ')} -- node ${app.join(' ')}\n`);
  const submittedAt = Date.now();
  const id = (await must(['submit', ...flags, '--cwd', repo, '--dir', dir, '--', process.execPath, ...app])).trim();
  const actions: TaskEvent[] = [];
  // The process may not be spawned yet: try until its agent takes the order.
  for (;;) {
    const r = await trine(['inject', 'slow', `${id}/${SLOW_VPID}`, ...slowArgs, '--dir', dir]);
    if (r.code === 0) {
      actions.push({ task: id, atMs: Date.now(), text: `trine inject slow ${id}/${SLOW_VPID} ${slowArgs.join(' ')}: ${r.stdout.trim()}` });
      break;
    }
    if (Date.now() - submittedAt > RUN_TIMEOUT_MS) throw new Error(`could not slow ${id}/${SLOW_VPID}: ${r.stderr.trim()}`);
    await sleep(100);
  }
  let v = await view();
  while (v.tasks.find((t) => t.id === id)?.outcome == null) {
    if (Date.now() - submittedAt > RUN_TIMEOUT_MS) throw new Error(`${id} did not end within ${RUN_TIMEOUT_MS} ms`);
    await sleep(POLL_MS);
    v = await view();
  }
  const wallMs = Date.now() - submittedAt;
  const task = v.tasks.find((t) => t.id === id);
  say(`\n# timeline of ${id} (ms after \`trine submit\`): what the demo did [demo] and the group's journal [group]\n`);
  const KEEP = /left the DGRP|rejoined the DGRP|running: |finished|terminated/;
  const rows = [
    ...actions.map((e) => ({ ...e, who: '[demo]' })),
    ...v.events.filter((e) => e.task === id && KEEP.test(e.text)).map((e) => ({ ...e, who: '[group]' })),
  ].sort((a, b) => a.atMs - b.atMs);
  for (const r of rows) say(`  +${String(Math.round(r.atMs - submittedAt)).padStart(6)} ms  ${r.who.padEnd(8)} ${r.text}\n`);
  const line = answerOf(id);
  if (line === null) throw new Error(`${id} printed no answer (${task?.outcome}: ${task?.reason}): see \`trine logs\``);
  say(`\n${line}\n`);
  if (!line.endsWith(': correct')) throw new Error(`${id}'s answer is wrong`);
  if (task?.outcome !== 'normal') throw new Error(`${id} ended ${task?.outcome}: ${task?.reason}`);
  return { id, line, sortMs: Number(/ in (\d+) ms/.exec(line)?.[1]), wallMs };
}

async function main(): Promise<void> {
  say(`$ trine up --nodes 4 --allow-inject --dir ${dir}    # a local cluster; fault injection allowed\n`);
  say(await must(['up', '--nodes', '4', '--allow-inject', '--dir', dir]));
  const help = await trine(['inject', '--help']);
  const slowArgs = ['--share', '10', ...(help.stdout.includes('--period') ? ['--period', '500'] : [])];
  const dgrp = await run(`HyperQuickSort of ${COUNT} numbers on the DGRP, ${SIZE} processes, VPID ${SLOW_VPID} slow`, [], slowArgs);
  const base = await run(`the same sort waiting for the slowest (--no-dgrp), VPID ${SLOW_VPID} slow`, ['--no-dgrp'], slowArgs);
  say(`\n# VPID ${SLOW_VPID} at ${slowArgs.join(' ')}:\n`);
  say(`  on the DGRP   sorted in ${String(dgrp.sortMs).padStart(6)} ms, ${String(dgrp.wallMs).padStart(6)} ms from submit to end (${dgrp.id})\n`);
  say(`  --no-dgrp     sorted in ${String(base.sortMs).padStart(6)} ms, ${String(base.wallMs).padStart(6)} ms from submit to end (${base.id})\n`);
  say(`  the DGRP sorted ${(base.sortMs / Math.max(1, dgrp.sortMs)).toFixed(1)}× faster: the others absorbed the slow process's share instead of waiting for it\n`);
}

/** `trine down` once, whoever asks first (the end, or Ctrl-C); both wait for the same. */
let stopped: Promise<boolean> | null = null;
function stop(): Promise<boolean> {
  stopped ??= (async () => {
    say(`\n$ trine down --dir ${dir}    # stop every process the cluster started\n`);
    const r = await trine(['down', '--dir', dir]);
    say(r.stdout);
    if (r.code !== 0) process.stderr.write(r.stderr);
    rmSync(root, { recursive: true, force: true });
    return r.code === 0;
  })();
  return stopped;
}

for (const sig of ['SIGINT', 'SIGTERM'] as const) {
  process.on(sig, () => {
    if (interrupted !== null) return; // a second one (bin/demo.js hands the terminal's on): stopping already
    interrupted = sig;
    process.stderr.write(`\ndemo interrupted (${sig}): stopping the cluster\n`);
    const running = [...inFlight];
    for (const [child, { command }] of running) if (command !== 'up' && command !== 'down') child.kill('SIGTERM');
    void Promise.all(running.map(([, { done }]) => done)).then(stop).then(() => {
      say('demo interrupted\n');
      process.exit(EXIT_ON[sig]);
    });
  });
}

let failed = false;
try {
  await main();
} catch (e) {
  failed = true;
  if (!interrupted) process.stderr.write(`\ndemo failed: ${(e as Error).message}\n`);
}
// Interrupted: the handler stops the cluster (once a `trine up` in progress is done) and exits.
if (interrupted !== null) await new Promise(() => {});
if (!(await stop())) failed = true;
if (interrupted !== null) await new Promise(() => {});
say(failed ? 'demo FAILED\n' : 'demo OK\n');
process.exit(failed ? 1 : 0);
