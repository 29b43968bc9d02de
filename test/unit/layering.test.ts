// The layering rules of issue 16 item 4, checked on the import lines of src/, fsm/, cli/ and bin/.
// The rules are a pure function over an import graph, so the test also feeds it a graph that
// breaks each rule and sees it fail; the real graph is read from disk (static `import`/`export
// … from` lines and dynamic `import('…')` calls with a literal path).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const repo = normalize(join(dirname(fileURLToPath(import.meta.url)), '..', '..'));

type Edge = { readonly to: string; readonly dynamic: boolean };
type Graph = ReadonlyMap<string, readonly Edge[]>;

const STATIC_RE = /^\s*(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|^\s*import\s*['"]([^'"]+)['"]/gm;
const DYNAMIC_RE = /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g;

/** The project files a source imports, as repository paths; packages and `node:*` are left out. */
function importsOf(file: string, text: string): Edge[] {
  const edges: Edge[] = [];
  const add = (spec: string, dynamic: boolean): void => {
    if (!spec.startsWith('.')) return;
    edges.push({ to: normalize(join(dirname(file), spec)).split('\\').join('/'), dynamic });
  };
  // Only the import lines: a path named in a comment or a string is not an edge.
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  for (const m of code.matchAll(STATIC_RE)) add((m[1] ?? m[2])!, false);
  for (const m of code.matchAll(DYNAMIC_RE)) add(m[1]!, true);
  return edges;
}

function sourcesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(join(repo, dir))) {
    const path = `${dir}/${name}`;
    if (statSync(join(repo, path)).isDirectory()) out.push(...sourcesUnder(path));
    else if (/\.(ts|js|mjs)$/.test(name) && name !== 'cli-bundle.js') out.push(path);
  }
  return out;
}

function readGraph(): Graph {
  const graph = new Map<string, Edge[]>();
  for (const dir of ['src', 'fsm', 'cli', 'bin']) {
    for (const file of sourcesUnder(dir)) graph.set(file, importsOf(file, readFileSync(join(repo, file), 'utf8')));
  }
  return graph;
}

const under = (file: string, ...dirs: string[]): boolean => dirs.some((d) => file.startsWith(`${d}/`));

/** Every broken rule, as `from -> to (rule)`. */
function layeringViolations(graph: Graph): string[] {
  const out: string[] = [];
  for (const [from, edges] of graph) {
    for (const { to, dynamic } of edges) {
      const broken = (rule: string): void => { out.push(`${from} -> ${to} (${rule})`); };
      if (under(from, 'src/base') && !under(to, 'src/base')) broken('src/base is a leaf: it imports nothing of the project');
      if (under(from, 'src/core', 'fsm') && under(to, 'src/io', 'src/daemon', 'src/sim', 'src/app', 'cli', 'bin')) {
        broken('the protocol cores and machines import no driver, daemon, simulator or CLI');
      }
      if (under(from, 'fsm') && under(to, 'src/core')) broken('fsm/ does not import src/core (the core imports the machines)');
      if (under(from, 'src', 'cli', 'bin') && !under(from, 'src/sim') && under(to, 'src/sim')) {
        broken('no production file imports the simulator');
      }
      if (under(from, 'cli') && under(to, 'src/daemon') && !dynamic) broken('cli/ takes nothing from src/daemon');
    }
  }
  return out.sort();
}

/** A cycle whose files all sit in one directory below src/core: one core's parts (e.g.
 *  src/core/replica/), which may call each other; never a cycle across directories. */
const onePartsDirectory = (cycle: readonly string[]): boolean =>
  cycle.length > 0 && cycle.every((f) => dirname(f) === dirname(cycle[0] ?? '')) && dirname(cycle[0] ?? '').startsWith('src/core/') && dirname(cycle[0] ?? '') !== 'src/core/wire';

/** The import cycles among `files` (each strongly connected set of two or more), sorted. */
function importCycles(graph: Graph, files: (file: string) => boolean): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const visit = (v: string): void => {
    index.set(v, index.size);
    low.set(v, index.get(v)!);
    stack.push(v);
    onStack.add(v);
    for (const { to, dynamic } of graph.get(v) ?? []) {
      if (dynamic || !files(to) || !graph.has(to)) continue;
      if (!index.has(to)) { visit(to); low.set(v, Math.min(low.get(v)!, low.get(to)!)); }
      else if (onStack.has(to)) low.set(v, Math.min(low.get(v)!, index.get(to)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const set: string[] = [];
    for (;;) { const w = stack.pop()!; onStack.delete(w); set.push(w); if (w === v) break; }
    if (set.length > 1) cycles.push(set.sort());
  };
  for (const v of [...graph.keys()].sort()) if (files(v) && !index.has(v)) visit(v);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

describe('layering (issue 16 item 4)', () => {
  const graph = readGraph();

  it('reads the import lines of every source file', () => {
    expect(graph.size).toBeGreaterThan(100);
    expect(graph.get('fsm/plain-data.ts')?.map((e) => e.to)).toContain('src/base/result.ts');
    expect(graph.get('bin/trine.js')?.find((e) => e.to === 'cli/main.ts')?.dynamic).toBe(true);
  });

  it('src/, fsm/, cli/ and bin/ keep every layering rule', () => {
    expect(layeringViolations(graph)).toEqual([]);
  });

  it('no import cycle between src/core and fsm/, and none inside src/core, fsm/ or src/base but among one core\'s own parts', () => {
    expect(importCycles(graph, (f) => under(f, 'src/core', 'fsm', 'src/base')).filter((c) => !onePartsDirectory(c))).toEqual([]);
    // The replica's parts call each other as the protocol does (an executed input may change the
    // view, which orders the requests forwarded meanwhile: src/core/replica/record.ts), and only
    // they: its step (src/core/replica.ts) is outside the cycle.
    expect(importCycles(graph, (f) => under(f, 'src/core')).filter(onePartsDirectory).map((c) => dirname(c[0] ?? ''))).toEqual(['src/core/replica']);
  });

  it('no import cycle inside cli/ (the reply shapes and the f + 1 rule are cli/replies.ts)', () => {
    expect(importCycles(graph, (f) => under(f, 'cli'))).toEqual([]);
  });

  it('a graph that breaks each rule fails it', () => {
    const edge = (to: string, dynamic = false): Edge => ({ to, dynamic });
    const bad: Graph = new Map([
      ['src/base/result.ts', [edge('src/core/constants.ts')]],
      ['src/core/replica.ts', [edge('src/io/log.ts'), edge('src/base/result.ts')]],
      ['fsm/fsm-task.ts', [edge('src/core/result.ts')]],
      ['src/daemon/agent.ts', [edge('src/sim/tasks.ts')]],
      ['cli/main.ts', [edge('src/daemon/manager.ts'), edge('src/daemon/main.ts', true)]],
      ['src/sim/world.ts', [edge('src/sim/tasks.ts')]],
    ]);
    expect(layeringViolations(bad)).toEqual([
      'cli/main.ts -> src/daemon/manager.ts (cli/ takes nothing from src/daemon)',
      'fsm/fsm-task.ts -> src/core/result.ts (fsm/ does not import src/core (the core imports the machines))',
      'src/base/result.ts -> src/core/constants.ts (src/base is a leaf: it imports nothing of the project)',
      'src/core/replica.ts -> src/io/log.ts (the protocol cores and machines import no driver, daemon, simulator or CLI)',
      'src/daemon/agent.ts -> src/sim/tasks.ts (no production file imports the simulator)',
    ]);
    const circle: Graph = new Map([
      ['src/core/a.ts', [edge('fsm/b.ts')]],
      ['fsm/b.ts', [edge('src/core/a.ts')]],
      ['src/core/c.ts', [edge('src/core/a.ts')]],
    ]);
    expect(importCycles(circle, () => true)).toEqual([['fsm/b.ts', 'src/core/a.ts']]);
    const parts: Graph = new Map([
      ['src/core/x/a.ts', [edge('src/core/x/b.ts')]],
      ['src/core/x/b.ts', [edge('src/core/x/a.ts')]],
      ['src/core/x.ts', [edge('src/core/x/a.ts')]],
      ['src/core/y.ts', [edge('src/core/x/c.ts')]],
      ['src/core/x/c.ts', [edge('src/core/y.ts')]],
    ]);
    expect(importCycles(parts, () => true).map((c) => [c, onePartsDirectory(c)])).toEqual([
      [['src/core/x/a.ts', 'src/core/x/b.ts'], true],
      [['src/core/x/c.ts', 'src/core/y.ts'], false],
    ]);
  });
});
