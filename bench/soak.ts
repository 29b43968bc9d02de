// `npm run soak [-- --minutes N]` (issue 14; outside `npm test`, default 60 minutes): a local
// cluster (`trine up --nodes 4 --allow-inject`) under mixed load for N minutes, then a verdict.
// The load, all at once:
//   - tasks: a plain task of 1–4 processes every 10 s, each sleeping 2–11 s;
//   - faults: every 45 s the next of kill-replica (a member), kill-agent (a node's agent), and a
//     task process hung for 2 s then resumed, each recorded with its target and time;
//   - connection churn: `trine status --json` every 2 s, each a new operator connection;
//   - strangers: test/fixtures/flood.ts on one replica's port at a time (50 idle connections every
//     500 ms, 20 upgrades held), the target moved every minute.
// It reports:
//   - false suspicions: a replica condemned, or a node declared lost, with no fault injected on it
//     in the 30 s before (must be 0: the exit code is 1 otherwise);
//   - memory growth: each daemon's resident set at the end against the same process's after a
//     minute of warm-up (processes replaced meanwhile are new, and not compared);
//   - tasks by outcome, faults injected, status calls unanswered.
// Results go to bench/results/soak-<time>.json too. Everything stays on 127.0.0.1.
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { StatusDocument } from '../cli/status-report.ts';
import { up } from '../cli/up.ts';
import type { ClusterView } from '../src/core/status.ts';
import { readPidFiles } from '../src/io/cluster-dir.ts';
import { listKeeperChildPids, listSupervisedPids } from '../src/io/run-records.ts';
import { flood, type Flood } from '../test/fixtures/flood.ts';
import { tearDown } from './cluster-tools.ts';
import { helpFromHeader } from '../examples/common/help.ts';

helpFromHeader(import.meta.url);

const TRINE = fileURLToPath(new URL('../bin/trine.js', import.meta.url));
const here = fileURLToPath(new URL('.', import.meta.url));

/** A suspicion of a target with a fault injected on it this recently is a true one. */
const EXPLAINED_MS = 30_000;
const TASK_EVERY_MS = 10_000;
const FAULT_EVERY_MS = 45_000;
const STATUS_EVERY_MS = 2_000;
const FLOOD_MOVE_MS = 60_000;
const WARM_UP_MS = 60_000;
const FLOOD = { idlePerWave: 50, waveMs: 500, upgraded: 20 };

function parseMinutes(argv: readonly string[]): number {
  const i = argv.indexOf('--minutes');
  if (i < 0) return 60;
  const n = Number(argv[i + 1]);
  if (!Number.isFinite(n) || n <= 0 || n > 24 * 60) {
    process.stderr.write(`soak: --minutes must be a number of minutes from 0 to 1440, got ${JSON.stringify(argv[i + 1] ?? '')}\n`);
    process.exit(2);
  }
  return n;
}

function trine(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => execFile(process.execPath, [TRINE, ...args], { maxBuffer: 64 * 1024 * 1024 }, (e, stdout, stderr) => {
    resolve({ code: e === null ? 0 : typeof e.code === 'number' ? e.code : 1, stdout, stderr });
  }));
}

const json = <T>(text: string): T | null => {
  try {
    return JSON.parse(text) as T;
  } catch {
    return null;
  }
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resident set of `pid` in KiB, or null if it is gone. */
function rssKiB(pid: number): number | null {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? null : Number(m[1]);
  } catch {
    return null;
  }
}

/** Every daemon of the cluster with its pid: replicas, the watchdog and its supervisor, keepers,
 *  agents, standbys. */
function daemons(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const { id, pid } of readPidFiles(dir)) if (pid !== null) out.set(id, pid);
  for (const { id, role, pid } of listKeeperChildPids(dir)) if (pid !== null) out.set(`${id} ${role}`, pid);
  for (const { id, pid } of listSupervisedPids(dir)) if (pid !== null) out.set(`${id} (supervised)`, pid);
  return out;
}

type Fault = { atMs: number; mode: string; target: string };
type Suspicion = { atMs: number; kind: 'condemned' | 'node lost'; target: string; text: string; explained: boolean };

export async function soak(minutes: number): Promise<{ falseSuspicions: number; report: Record<string, unknown> }> {
  const root = mkdtempSync(join(tmpdir(), 'trine-soak-'));
  const dir = join(root, 'cluster');
  const faults: Fault[] = [];
  const seen = new Map<string, Suspicion>();
  const counts = { tasksSubmitted: 0, statusCalls: 0, statusUnanswered: 0, faultsFailed: 0 };
  let current: Flood | null = null;
  const strangers = { idle: 0, upgraded: 0 };
  try {
    await up({ dir, nodes: 4, allowInject: true });
    const startMs = Date.now();
    const endMs = startMs + minutes * 60_000;
    const running = () => Date.now() < endMs;
    let baseline = new Map<number, { id: string; kib: number }>();
    const explained = (target: string, atMs: number) => faults.some((f) => f.target === target && f.atMs <= atMs + 1_000 && atMs - f.atMs <= EXPLAINED_MS);

    /** Reads condemnations and node losses (both bounded histories: read often, kept here). */
    const collect = async (): Promise<StatusDocument | null> => {
      counts.statusCalls++;
      const s = await trine(['status', '--json', '--dir', dir]);
      const doc = json<StatusDocument>(s.stdout);
      if (doc === null) {
        counts.statusUnanswered++;
        return null;
      }
      for (const c of doc.condemnations) {
        const key = `c ${c.target} ${c.view}`;
        if (!seen.has(key)) seen.set(key, { atMs: c.atMs, kind: 'condemned', target: c.target, text: `${c.target} condemned (${c.reason}) by ${c.by.join(',')}`, explained: explained(c.target, c.atMs) });
      }
      return doc;
    };
    const collectEvents = async (): Promise<void> => {
      const ps = json<ClusterView>((await trine(['ps', '--json', '--dir', dir])).stdout);
      for (const e of ps?.events ?? []) {
        const m = /^node (n\d+) lost/.exec(e.text);
        const key = `n ${e.atMs} ${e.text}`;
        if (m !== null && !seen.has(key)) seen.set(key, { atMs: e.atMs, kind: 'node lost', target: m[1] as string, text: e.text, explained: explained(m[1] as string, e.atMs) });
      }
    };

    const tasks = async () => {
      while (running()) {
        const size = 1 + Math.floor(Math.random() * 4);
        const secs = 2 + Math.floor(Math.random() * 10);
        const r = await trine(['submit', '--dir', dir, '-n', String(size), '--name', 'soak', '--', '/bin/sh', '-c', `exec sleep ${secs}`]);
        if (r.code === 0) counts.tasksSubmitted++;
        await sleep(TASK_EVERY_MS);
      }
    };
    const injectFaults = async () => {
      await sleep(WARM_UP_MS);
      for (let i = 0; running(); i++) {
        const doc = await collect();
        const members = doc?.group.members ?? [];
        const which = i % 3;
        let fault: Fault | null = null;
        if (which === 0 && members.length === 3) {
          const r = members[Math.floor(Math.random() * members.length)] as string;
          fault = { atMs: Date.now(), mode: 'kill-replica', target: r };
          if ((await trine(['inject', 'kill-replica', r, '--dir', dir])).code !== 0) counts.faultsFailed++;
        } else if (which === 1) {
          const n = `n${1 + Math.floor(Math.random() * 4)}`;
          fault = { atMs: Date.now(), mode: 'kill-agent', target: n };
          if ((await trine(['inject', 'kill-agent', n, '--dir', dir])).code !== 0) counts.faultsFailed++;
        } else {
          const ps = json<ClusterView>((await trine(['ps', '--json', '--dir', dir])).stdout);
          const p = ps?.tasks.flatMap((t) => t.procs.filter((x) => x.state === 'running').map((x) => ({ t: t.id, v: x.vpid, node: x.node }))).at(0);
          if (p !== undefined) {
            fault = { atMs: Date.now(), mode: 'hang', target: `${p.t}/${p.v}` };
            if ((await trine(['inject', 'hang', `${p.t}/${p.v}`, '--dir', dir])).code !== 0) counts.faultsFailed++;
            await sleep(2_000);
            await trine(['inject', 'resume', `${p.t}/${p.v}`, '--dir', dir]);
          }
        }
        if (fault !== null) faults.push(fault);
        await sleep(FAULT_EVERY_MS);
      }
    };
    const churn = async () => {
      for (let i = 0; running(); i++) {
        await collect();
        if (i % 15 === 0) await collectEvents();
        await sleep(STATUS_EVERY_MS);
      }
    };
    const strangersLoop = async () => {
      const config = json<{ processes: { id: string; kind: string; listen: { port: number } | null }[] }>(readFileSync(join(dir, 'cluster.json'), 'utf8'));
      const ports = (config?.processes ?? []).filter((p) => p.kind === 'replica' && p.listen !== null).map((p) => (p.listen as { port: number }).port);
      for (let i = 0; running() && ports.length > 0; i++) {
        current = flood(ports[i % ports.length] as number, FLOOD);
        await sleep(Math.min(FLOOD_MOVE_MS, Math.max(0, endMs - Date.now())));
        current.stop();
        strangers.idle += current.counts.idle;
        strangers.upgraded += current.counts.upgraded;
        current = null;
      }
    };
    const memory = async () => {
      await sleep(Math.min(WARM_UP_MS, minutes * 30_000));
      baseline = new Map([...daemons(dir)].flatMap(([id, pid]) => {
        const kib = rssKiB(pid);
        return kib === null ? [] : [[pid, { id, kib }] as const];
      }));
    };

    await Promise.all([tasks(), injectFaults(), churn(), strangersLoop(), memory()]);
    await sleep(EXPLAINED_MS / 3);
    await collect();
    await collectEvents();
    const growth = [...daemons(dir)].flatMap(([id, pid]) => {
      const before = baseline.get(pid);
      const now = rssKiB(pid);
      return before === undefined || now === null ? [] : [{ id, beforeMiB: +(before.kib / 1024).toFixed(1), afterMiB: +(now / 1024).toFixed(1), growthMiB: +((now - before.kib) / 1024).toFixed(1) }];
    });
    const ps = json<ClusterView>((await trine(['ps', '--json', '--dir', dir])).stdout);
    const outcomes: Record<string, number> = {};
    for (const t of ps?.tasks ?? []) outcomes[t.state] = (outcomes[t.state] ?? 0) + 1;
    const suspicions = [...seen.values()].sort((a, b) => a.atMs - b.atMs);
    const falseOnes = suspicions.filter((s) => !s.explained);
    const report = {
      minutes, ...counts, strangers, faults, suspicions, falseSuspicions: falseOnes.length, memory: growth, taskStates: outcomes,
    };
    return { falseSuspicions: falseOnes.length, report };
  } finally {
    (current as Flood | null)?.stop();
    await tearDown(root, dir, new Map());
  }
}

if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  const minutes = parseMinutes(process.argv.slice(2));
  const started = new Date();
  console.log(`soak: ${minutes} min on a local cluster of 4 nodes; tasks, faults, connection churn and strangers`);
  const { falseSuspicions, report } = await soak(minutes);
  const r = report as { faults: Fault[]; suspicions: Suspicion[]; memory: { id: string; growthMiB: number; afterMiB: number }[] } & Record<string, unknown>;
  for (const s of r.suspicions) console.log(`  ${new Date(s.atMs).toISOString()}  ${s.kind} ${s.target}: ${s.explained ? 'after an injected fault' : 'FALSE'} (${s.text})`);
  const worst = [...r.memory].sort((a, b) => b.growthMiB - a.growthMiB).slice(0, 5);
  console.log(`tasks submitted ${String(r['tasksSubmitted'])}, final states ${JSON.stringify(r['taskStates'])}; faults injected ${r.faults.length}; ` +
    `status calls ${String(r['statusCalls'])} (${String(r['statusUnanswered'])} unanswered); strangers ${JSON.stringify(r['strangers'])}`);
  console.log(`memory growth (largest): ${worst.map((m) => `${m.id} ${m.growthMiB >= 0 ? '+' : ''}${m.growthMiB} MiB (now ${m.afterMiB})`).join(', ') || 'none compared'}`);
  console.log(`false suspicions: ${falseSuspicions}`);
  const out = join(here, 'results');
  mkdirSync(out, { recursive: true });
  writeFileSync(join(out, `soak-${started.toISOString().replace(/[:.]/g, '-')}.json`), JSON.stringify(report, null, 2));
  process.exit(falseSuspicions === 0 ? 0 : 1);
}
