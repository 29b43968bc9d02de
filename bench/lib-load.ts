// How long a new process takes to load the compiled `trine/app` (issue 19 item 4;
// docs/PERFORMANCE.md §5, SPAWN with the compiled library): the figures for that step come from
// here. Each sample is a fresh `node` (no loader, no TRINE_* environment, so no link worker is
// started) that takes process.cpuUsage() and performance.now() just before
// `await import(entry)` and just after, and prints them. Variants run interleaved (A B A B …), so
// a change in the machine's load falls on all of them alike. Not part of `npm run bench`.
//
//   node --import tsx bench/lib-load.ts [-n N] [name=path/to/index.js …]
//
// Without a variant it loads this checkout's dist/app/index.js (`node tools/build-lib.mjs`
// first). To compare with another build, build it in a copy (`git archive REV | tar -x -C DIR`,
// a node_modules symlink, `node tools/build-lib.mjs` there) and name both:
// `base=DIR/dist/app/index.js now=dist/app/index.js`.
import { execFile } from 'node:child_process';
import { loadavg } from 'node:os';
import { quantile } from './stats.ts';
import { parseVariantArgs } from './variants.ts';

/** Samples per variant unless -n says otherwise. */
const DEFAULT_SAMPLES = 20;
/** A child that takes longer than this is stuck, not slow. */
const CHILD_TIMEOUT_MS = 30_000;

/** What the child runs: time the import alone (Node's own start is not the library's). */
const CHILD = `
const url = process.argv[1];
const c0 = process.cpuUsage();
const w0 = performance.now();
const m = await import(url);
const w1 = performance.now();
const c = process.cpuUsage(c0);
process.stdout.write(JSON.stringify({ cpuMs: (c.user + c.system) / 1000, wallMs: w1 - w0, exports: Object.keys(m).length }) + '\\n');
`;

type Sample = { cpuMs: number; wallMs: number; exports: number };
type Variant = { name: string; url: string; samples: Sample[] };

const USAGE = 'usage: node --import tsx bench/lib-load.ts [-n N] [name=path/to/index.js …]\n' +
  `  N fresh node processes per variant (default ${DEFAULT_SAMPLES}), interleaved; prints p50/p90 CPU and wall ms of\n` +
  '  `await import(entry)` in each, and the load average. Default variant: dist=dist/app/index.js.';

function parseArgs(argv: string[]): { samples: number; variants: Variant[] } {
  const { samples, variants } = parseVariantArgs(argv, 'lib-load', DEFAULT_SAMPLES, USAGE);
  return { samples, variants: variants.map((v) => ({ ...v, samples: [] })) };
}

function sampleOnce(url: string): Promise<Sample> {
  // An environment without TRINE_*: the library must not think it was started as a linked task.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TRINE_') && k !== 'NODE_OPTIONS'));
  return new Promise((res, rej) => {
    execFile(process.execPath, ['--input-type=module', '-e', CHILD, url], { env, timeout: CHILD_TIMEOUT_MS }, (error, stdout, stderr) => {
      if (error !== null) {
        rej(new Error(`lib-load: child for ${url} failed: ${error.message}\n${stderr}`));
        return;
      }
      res(JSON.parse(stdout.trim().split('\n').at(-1) ?? '') as Sample);
    });
  });
}

const fmt = (x: number): string => x.toFixed(1);

const { samples, variants } = parseArgs(process.argv.slice(2));
const loadBefore = loadavg();
for (let i = 0; i < samples; i++) {
  // One child at a time: two would share the 2 cores with each other as well.
  for (const v of variants) v.samples.push(await sampleOnce(v.url));
}
const loadAfter = loadavg();
console.log(`node ${process.version}, ${samples} processes per variant, interleaved; load average ` +
  `${loadBefore.map(fmt).join(' ')} before, ${loadAfter.map(fmt).join(' ')} after`);
console.log('ms of `await import(entry)` in a fresh node');
const width = Math.max(12, ...variants.map((v) => v.name.length + 2));
console.log('variant'.padEnd(width) + 'CPU p50   p90   wall p50   p90   exports');
for (const v of variants) {
  const cpu = v.samples.map((s) => s.cpuMs);
  const wall = v.samples.map((s) => s.wallMs);
  const exportCounts = [...new Set(v.samples.map((s) => s.exports))].join('/');
  console.log(v.name.padEnd(width) +
    `${fmt(quantile(cpu, 0.5)).padStart(7)} ${fmt(quantile(cpu, 0.9)).padStart(5)}   ${fmt(quantile(wall, 0.5)).padStart(7)} ${fmt(quantile(wall, 0.9)).padStart(5)}` +
    `   ${exportCounts}`);
}
