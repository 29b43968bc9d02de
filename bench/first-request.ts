// How soon a linked process's first request leaves once `Link.init()` has resolved (the handover,
// PROTOCOL §9.4.1; docs/PERFORMANCE.md §5): what an application that recovers at once (a
// replacement's recoverComm, a SYNC) waits for before the group sees anything. Each sample is a
// fresh `node` linking the compiled library against the real agent socket
// (src/daemon/app-socket.ts), which answers the hello with the mapping MAPPING_DELAY_MS later, as
// a group's ordered step would; the process sends one signal the moment init() resolves, and
// the time is from there to the agent reading it (both stamp CLOCK_MONOTONIC). The same samples
// give the library's whole part of a spawned process's start: its first line → init() resolved
// (the import, the hello, the agent's MAPPING_DELAY_MS, the mapping read), and the mapping
// written → init() resolved. Variants run interleaved. Not part of `npm run bench`.
//
//   node --import tsx bench/first-request.ts [-n N] [name=path/to/index.js …]
//
// Without a variant it uses this checkout's dist/app/index.js (`node tools/build-lib.mjs` first).
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { AppSocketServer } from '../src/daemon/app-socket.ts';
import { quantile } from './stats.ts';
import { parseVariantArgs } from './variants.ts';

const DEFAULT_SAMPLES = 15;
/** The group's ordered step between the hello and the mapping, about a SYNC here (§5). */
const MAPPING_DELAY_MS = 12;
const CHILD_TIMEOUT_MS = 30_000;
const TASK = 't1';

const CHILD = `
const mono = () => Number(process.hrtime.bigint()) / 1e6;
const start = mono();
const m = await import(process.argv[1]);
const link = await m.Link.init();
const at = mono();
link.signal(100, m.GSIG_BROADCAST, 1);
process.stdout.write(JSON.stringify({ start, at }) + '\\n');
await new Promise((r) => setTimeout(r, 100));
await link.finalize();
process.exit(0);
`;

const mono = (): number => Number(process.hrtime.bigint()) / 1e6;

type Sample = { request: number; startToReady: number; mappingToReady: number };

async function sample(entryUrl: string, n: number): Promise<Sample> {
  const token = randomBytes(16).toString('hex');
  const path = `@trine-bench-first-request/${process.pid}/${n}`;
  let readAt: number | null = null;
  let mappingAt: number | null = null;
  const server: AppSocketServer = await AppSocketServer.listen(path, {
    authenticate: (_task, _vpid, t) => (t === token ? null : 'not the bench process'),
    taskKey: () => new Uint8Array(32),
    onConnected: () => {
      setTimeout(() => {
        server.send(TASK, 0, {
          type: 'mapping', task: TASK, vpid: 0, size: 1, restarted: false, recovered: false, epoch: 0, quorum: 1,
          members: [{ vpid: 0, node: 'n1', endpoint: '' }], rollback: null, dgrp: null, straggler: null,
        });
        mappingAt = mono();
      }, MAPPING_DELAY_MS);
    },
    onSignal: () => {
      readAt ??= mono();
    },
  });
  try {
    const env = { ...process.env, TRINE_AGENT_SOCKET: path, TRINE_TASK: TASK, TRINE_VPID: '0', TRINE_TOKEN: token };
    const child = spawn(process.execPath, ['--input-type=module', '-e', CHILD, entryUrl], { env, stdio: ['ignore', 'pipe', 'inherit'], timeout: CHILD_TIMEOUT_MS });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    const code = await new Promise<number | null>((r) => child.on('exit', r));
    if (code !== 0 || readAt === null || mappingAt === null) throw new Error(`sample ${n}: the child exited ${String(code)}${readAt === null ? ', no request read' : ''}`);
    const { start, at } = JSON.parse(out) as { start: number; at: number };
    return { request: readAt - at, startToReady: at - start, mappingToReady: at - mappingAt };
  } finally {
    await server.close();
  }
}

const { samples, variants } = parseVariantArgs(process.argv.slice(2), 'first-request', DEFAULT_SAMPLES,
  'usage: node --import tsx bench/first-request.ts [-n N] [name=path/to/index.js …]');
const times = new Map(variants.map((v) => [v.name, [] as Sample[]]));
for (let i = 0; i < samples; i++) for (const v of variants) times.get(v.name)?.push(await sample(v.url, i));
console.log(`node ${process.version}, ${samples} processes per variant, interleaved; the mapping ${MAPPING_DELAY_MS} ms after the hello`);
const rows: [string, (s: Sample) => number][] = [
  ['Link.init() resolved → the first request read by the agent', (s) => s.request],
  ['the first line → Link.init() resolved', (s) => s.startToReady],
  ['the mapping written → Link.init() resolved', (s) => s.mappingToReady],
];
for (const [title, of] of rows) {
  console.log(`ms, ${title}`);
  for (const [name, ss] of times) {
    const xs = ss.map(of);
    console.log(`  ${name.padEnd(10)} min ${Math.min(...xs).toFixed(2)}  p50 ${quantile(xs, 0.5).toFixed(2)}  p90 ${quantile(xs, 0.9).toFixed(2)}  max ${Math.max(...xs).toFixed(2)}`);
  }
}
