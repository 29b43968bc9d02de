// Writes docs/MUTATION.md from the results `npm run mutate` keeps (docs/mutation/
// stryker-incremental.json, every file mutated so far; issue 15): the mutation score per file, and
// every mutant that survived, each with the reason it is equivalent (docs/mutation/equivalent.json,
// keyed by file, line, mutator, the code it mutates and what it puts there) or marked unexplained. Score = detected (killed or timed out) /
// (detected + survived + not covered); mutants that do not compile are not counted.
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { helpFromHeader } from '../examples/common/help.ts';

helpFromHeader(import.meta.url);

type Position = { line: number; column: number };
type Mutant = { id: string; mutatorName: string; replacement?: string; status: string; location: { start: Position; end: Position } };
type Report = { files: Record<string, { source: string; mutants: Mutant[] }> };

const root = fileURLToPath(new URL('..', import.meta.url));
const reportFile = `${root}docs/mutation/stryker-incremental.json`;
const equivalentFile = `${root}docs/mutation/equivalent.json`;
const out = `${root}docs/MUTATION.md`;

if (!existsSync(reportFile)) {
  process.stderr.write(`no report at ${reportFile}: run \`npm run mutate\` first\n`);
  process.exit(1);
}
const report = JSON.parse(readFileSync(reportFile, 'utf8')) as Report;
const equivalent = existsSync(equivalentFile) ? (JSON.parse(readFileSync(equivalentFile, 'utf8')) as Record<string, string>) : {};

/** The source a mutant replaces (locations are 1-based, the end exclusive). */
function original(lines: readonly string[], { start, end }: Mutant['location']): string {
  const span = lines.slice(start.line - 1, end.line);
  if (span.length === 0) return '';
  span[span.length - 1] = (span[span.length - 1] as string).slice(0, end.column - 1);
  span[0] = (span[0] as string).slice(start.column - 1);
  return span.join('\n');
}
const keyOf = (file: string, lines: readonly string[], m: Mutant) =>
  `${file}:${m.location.start.line}:${m.mutatorName}:${original(lines, m.location)} → ${m.replacement ?? ''}`;
const DETECTED = new Set(['Killed', 'Timeout']);
const UNDETECTED = new Set(['Survived', 'NoCoverage']);

const rows: string[] = [];
const survivors: string[] = [];
/** Keys of the survivors nobody explained, printed so that equivalent.json can name them. */
const unexplained: string[] = [];
/** Keys of every survivor, to find the explanations none of them uses. */
const used = new Set<string>();
let detected = 0;
let valid = 0;
let equivalents = 0;
/** An explanation that shows the mutant cannot be told from the original by any test: it leaves
 *  the mutation score's denominator (killed / (mutants − equivalent), the textbook score). One
 *  that only says what a test would need ("Not killed: …"), or that the mutant differs in memory
 *  use ("Equivalent but for memory"), stays in it. */
/** `part` of `whole` as a percentage with one decimal, or a dash for none. */
const pct = (part: number, whole: number): string => (whole === 0 ? '—' : `${((100 * part) / whole).toFixed(1)}%`);
const isEquivalent = (why: string | undefined): boolean => why !== undefined && why.startsWith('Equivalent') && !why.startsWith('Equivalent but for memory');
/** Whether the file still has the source its last run saw: its figures and line numbers are that
 *  source's, kept until a run covers the file again. */
function sinceRun(file: string): string {
  const path = `${root}${file}`;
  if (!existsSync(path)) return ' (gone since its run: moved or removed)';
  return readFileSync(path, 'utf8') === report.files[file]?.source ? '' : ' (edited since its run)';
}
for (const file of Object.keys(report.files).sort()) {
  const ms = report.files[file]?.mutants ?? [];
  const d = ms.filter((m) => DETECTED.has(m.status)).length;
  const u = ms.filter((m) => UNDETECTED.has(m.status));
  if (d + u.length === 0) continue;
  detected += d;
  valid += d + u.length;
  const lines = report.files[file]?.source.split('\n') ?? [];
  const explained = u.filter((m) => equivalent[keyOf(file, lines, m)] !== undefined).length;
  const eq = u.filter((m) => isEquivalent(equivalent[keyOf(file, lines, m)])).length;
  equivalents += eq;
  rows.push(`| \`${file}\`${sinceRun(file)} | ${d + u.length} | ${d} | ${u.length} | ${explained} | ${eq} | ${pct(d, d + u.length)} | ${pct(d, d + u.length - eq)} |`);
  for (const m of u.sort((a, b) => a.location.start.line - b.location.start.line)) {
    const key = keyOf(file, lines, m);
    used.add(key);
    const why = equivalent[key];
    if (why === undefined) unexplained.push(key);
    const code = (lines[m.location.start.line - 1] ?? '').trim().slice(0, 100).replaceAll('|', '\\|');
    survivors.push(`| \`${file}:${m.location.start.line}\` | ${m.mutatorName} | \`${(m.replacement ?? '').slice(0, 60).replaceAll('|', '\\|').replaceAll('\n', ' ')}\` | ${m.status} | \`${code}\` | ${why ?? '**unexplained**'} |`);
  }
}

/** The files stryker.config.json mutates (src/core and fsm/, tests aside) that no run has tested yet. */
const sources = (dir: string): string[] =>
  readdirSync(`${root}${dir}`, { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && d.name.endsWith('.ts') && !d.name.endsWith('.test.ts'))
    .map((d) => `${d.parentPath.slice(root.length)}/${d.name}`.replace(/\/\/+/g, '/'));
const untested = [...sources('src/core'), ...sources('fsm')].filter((f) => (report.files[f]?.mutants.length ?? 0) === 0).sort();

const text = `# Mutation testing

Generated by \`npm run mutate\` (StrykerJS over \`src/core\` and \`fsm/\`, stryker.config.json; the
tests it runs are vitest.mutate.config.ts's) through tools/mutation-report.ts. Do not edit by
hand: explain a surviving mutant in docs/mutation/equivalent.json, or kill it with a test, and
run it again. Explanations are keyed by line: after an edit that moves lines, \`npm run
mutate:rekey -- REV\` moves them with their lines (REV: the commit they were written against).
Incremental: a run after a change tests only the mutants the change touched
(docs/mutation/stryker-incremental.json); after a change to tests only, pass \`--force\`, which
Stryker needs to retest under its vitest runner.

A run costs 5–20 s per mutant on a 2-core machine, most of it in the mutants that survive or
time out, which run every covering test (agent-procs.ts:301-585: 454 mutants in 38 min; all of
agent.ts: 483 tested in 2 h 26 min). Run it alone on the machine (a loaded one turns slow runs
into timeouts; a stopped run writes nothing), and narrow it to a file or to lines:
\`npm run mutate -- --force --mutate "src/core/link.ts:265-445"\`; the results of narrower runs
are merged (tools/mutation-merge.ts): after an edit to a file, a result stays, moved with its
line, for each mutant whose lines the edit left as they were, and goes for the others until a run
over their lines tests them again. A mutant times out after 2.5 times its covering tests' dry-run time plus 10 s
(stryker.config.json): at Stryker's default, 1.5 times plus 5 s, two survivors running every
covering test at once on the two cores were taken for timeouts, that is counted as detected.
Two helpers of the mutate config keep it fast and true. The covering test files run in the
order most likely to kill early (tools/mutate-sequencer.ts): the files named after the mutated
file first, then the one that failed last, then the fastest. That is 2.9 times faster than
vitest's slowest-first order, and running the named files first made cluster-state.ts:201-235
(43 mutants) 1.35 times faster again (11 min 53 s → 8 min 49 s). And a test file that fails to
load counts as a failed test (tools/mutate-load-failures.ts), not as no test at all.

Score: **${pct(detected, valid)}** (${detected} of ${valid} mutants detected) over the files mutated so far;
**${pct(detected, valid - equivalents)}** of the ${valid - equivalents} that are not equivalent. An equivalent mutant is
one whose explanation shows that no test can tell it from the original (it starts "Equivalent";
those that differ only in memory use are counted as not equivalent): the second figure is the
textbook mutation score, killed / (mutants − equivalent). The issue's bar (90% per safety file)
is read on it, and every undetected mutant, equivalent or not, is listed below with its reason.

A file marked "edited since its run" or "gone since its run" keeps the figures, line numbers and
reasons of the source its last run saw (stored in the incremental report) until a run covers it
again.

| file | mutants | detected | undetected | of which explained | of which equivalent | score | score without equivalents |
|---|---:|---:|---:|---:|---:|---:|---:|
${rows.join('\n')}

Not mutated yet: ${untested.length === 0 ? 'none' : untested.map((f) => `\`${f}\``).join(', ')}.

## Surviving mutants

| where | mutator | replacement | status | line | why it survives |
|---|---|---|---|---|---|
${survivors.join('\n')}
`;
writeFileSync(out, text);
process.stdout.write(`wrote ${out}: ${detected}/${valid} detected\n`);
for (const k of unexplained) process.stdout.write(`unexplained: ${JSON.stringify(k)}\n`);
// An explanation no survivor uses is stale: its line moved (npm run mutate:rekey REV moves it
// with its line) or a test now kills the mutant (then delete it).
for (const k of Object.keys(equivalent)) if (!used.has(k)) process.stdout.write(`stale explanation: ${JSON.stringify(k)}\n`);
