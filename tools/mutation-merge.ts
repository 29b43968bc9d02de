// How tools/mutate.ts merges a run's results into the earlier ones (issue 15): Stryker writes
// docs/mutation/stryker-incremental.json with only the files (or line ranges) of its run.

export type Mutant = { id?: string; mutatorName: string; replacement?: string; location: { start: { line: number; column: number }; end: { line: number; column: number } } };
export type FileResult = { source: string; mutants: Mutant[] };
export type Incremental = { files: Record<string, FileResult>; testFiles?: Record<string, unknown> };

const mutantKey = (m: Mutant) => `${m.location.start.line}:${m.location.start.column}-${m.location.end.line}:${m.location.end.column}:${m.mutatorName}:${m.replacement ?? ''}`;

/** Where each line of `a` stands in `b` (1-based), for the lines a longest common subsequence
 *  of the two keeps; an edited or removed line has none. */
export function lineMap(a: readonly string[], b: readonly string[]): Map<number, number> {
  const n = a.length;
  const w = b.length + 1;
  const lcs = new Uint32Array((n + 1) * w);
  for (let i = n - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i * w + j] = a[i] === b[j] ? (lcs[(i + 1) * w + j + 1] ?? 0) + 1 : Math.max(lcs[(i + 1) * w + j] ?? 0, lcs[i * w + j + 1] ?? 0);
    }
  }
  const map = new Map<number, number>();
  for (let i = 0, j = 0; i < n && j < b.length; ) {
    if (a[i] === b[j]) map.set(++i, ++j);
    else if ((lcs[(i + 1) * w + j] ?? 0) >= (lcs[i * w + j + 1] ?? 0)) i++;
    else j++;
  }
  return map;
}

/** An earlier result moved to the edited source, or null if the edit touched one of its lines. */
function moved(m: Mutant, map: ReadonlyMap<number, number>): Mutant | null {
  const { start, end } = m.location;
  const to = map.get(start.line);
  if (to === undefined) return null;
  for (let line = start.line; line <= end.line; line++) if (map.get(line) !== to + line - start.line) return null;
  const shift = to - start.line;
  const location = { start: { ...start, line: start.line + shift }, end: { ...end, line: end.line + shift } };
  // Stryker's id names the place 0-based: file@line:column-line:column.
  if (m.id === undefined) return { ...m, location };
  return { ...m, id: m.id.replace(/@\d+:\d+-\d+:\d+/, `@${location.start.line - 1}:${start.column - 1}-${location.end.line - 1}:${end.column - 1}`), location };
}

/** This run's results for a file over the last run's: a run over part of a file (`--mutate
 *  file.ts:15-66`) replaces only the mutants it tested; the rest keep their earlier result, moved
 *  with their lines if the source changed, dropped if their lines did. */
export function mergeFile(before: FileResult | undefined, after: FileResult): FileResult {
  if (before === undefined) return after;
  const map = before.source === after.source ? null : lineMap(before.source.split('\n'), after.source.split('\n'));
  const kept = before.mutants.flatMap((m) => {
    const k = map === null ? m : moved(m, map);
    return k === null ? [] : [k];
  });
  const tested = new Set(after.mutants.map(mutantKey));
  return { ...after, mutants: [...kept.filter((m) => !tested.has(mutantKey(m))), ...after.mutants] };
}
