// `npm run mutate:rekey -- REV` (issue 15): moves the explanations of docs/mutation/equivalent.json
// with their lines. An explanation is keyed by file and line (tools/mutation-report.ts), so an
// edit above an equivalent mutant leaves its explanation pointing at the old line. For each key
// of a file that changed since REV (a git revision, the one the keys were written against), this
// finds the key's line text in the file at REV and moves the key to the line of the same text in
// the file now; of several such lines, the one nearest the old line whose text also holds the
// mutated code. A line whose text is gone, or a file that moved, is left as it is and named:
// explain that mutant again when a run shows it surviving.
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { helpFromHeader } from '../examples/common/help.ts';

helpFromHeader(import.meta.url);

const root = fileURLToPath(new URL('..', import.meta.url));
const equivalentFile = `${root}docs/mutation/equivalent.json`;
const rev = process.argv[2];
if (rev === undefined || rev.startsWith('-')) {
  process.stderr.write('usage: npm run mutate:rekey -- REV   (REV: the git revision the keys of docs/mutation/equivalent.json were written against)\n');
  process.exit(2);
}

/** The lines of `file` at `rev`, or null if it did not exist there. */
function linesAt(file: string, at: string): string[] | null {
  try {
    return execFileSync('git', ['show', `${at}:${file}`], { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).split('\n');
  } catch {
    return null;
  }
}
try {
  execFileSync('git', ['rev-parse', '--verify', `${rev}^{commit}`], { cwd: root, stdio: 'ignore' });
} catch {
  process.stderr.write(`${rev} is not a commit of this repository: pass the revision the keys were written against (git log docs/mutation/equivalent.json)\n`);
  process.exit(2);
}

const KEY = /^(?<file>[^:]+):(?<line>\d+):(?<mutator>[A-Za-z]+):(?<rest>[\s\S]*)$/;
/** The code a key's mutant replaces: what stands before ' → ' (the mutated code is on its line). */
const mutatedCode = (rest: string): string => rest.slice(0, rest.lastIndexOf(' → ')).split('\n')[0] ?? '';

const equivalent = JSON.parse(readFileSync(equivalentFile, 'utf8')) as Record<string, string>;
const out: Record<string, string> = {};
/** Each file's lines at REV and now, read once. */
const old = new Map<string, string[] | null>();
const current = new Map<string, string[]>();
let moved = 0;
const unmoved: string[] = [];
for (const [key, why] of Object.entries(equivalent)) {
  const m = KEY.exec(key);
  const g = m?.groups;
  if (g === undefined || g.file === undefined || g.line === undefined || g.rest === undefined || !existsSync(`${root}${g.file}`)) {
    out[key] = why;
    unmoved.push(`${key.slice(0, 100)} (no such file now)`);
    continue;
  }
  if (!old.has(g.file)) old.set(g.file, linesAt(g.file, rev));
  const before = old.get(g.file);
  if (!current.has(g.file)) current.set(g.file, readFileSync(`${root}${g.file}`, 'utf8').split('\n'));
  const now = current.get(g.file) ?? [];
  const line = Number(g.line);
  const text = before?.[line - 1];
  if (text === undefined) {
    out[key] = why;
    unmoved.push(`${key.slice(0, 100)} (no line ${line} in ${g.file} at ${rev})`);
    continue;
  }
  const code = mutatedCode(g.rest);
  const candidates = now.flatMap((l, i) => (l === text && l.includes(code) ? [i + 1] : []));
  if (candidates.length === 0) {
    out[key] = why;
    unmoved.push(`${key.slice(0, 100)} (its line changed)`);
    continue;
  }
  const best = candidates.reduce((a, b) => (Math.abs(b - line) < Math.abs(a - line) ? b : a));
  if (best !== line) moved++;
  out[`${g.file}:${best}:${g.mutator}:${g.rest}`] = why;
}
writeFileSync(equivalentFile, `${JSON.stringify(out, null, 2)}\n`);
process.stdout.write(`moved ${moved} of ${Object.keys(equivalent).length} explanations with their lines\n`);
for (const u of unmoved) process.stdout.write(`left: ${u}\n`);
