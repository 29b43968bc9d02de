// tools/mutation-merge.ts: how `npm run mutate` keeps the results of earlier, narrower runs
// (issue 15). A run over lines 10-20 of a file replaces the results of those lines only; after an
// edit, a mutant on a line the edit left alone keeps its result at its new line, and a mutant on
// an edited line loses it until a run tests it again.
import { describe, expect, it } from 'vitest';
import { type FileResult, type Mutant, lineMap, mergeFile } from '../../../tools/mutation-merge.ts';

const mutant = (line: number, column: number, status: string, replacement = 'true'): Mutant & { status: string } => ({
  id: `f.ts@${line - 1}:${column - 1}-${line - 1}:${column + 3}\nConditionalExpression: ${replacement}`,
  mutatorName: 'ConditionalExpression', replacement, status,
  location: { start: { line, column }, end: { line, column: column + 4 } },
});
const where = (r: FileResult) => r.mutants.map((m) => [m.location.start.line, (m as { status?: string }).status]);

describe('tools/mutation-merge.ts: lineMap', () => {
  it('maps the lines an edit left alone, shifted by the lines inserted above them, and no edited line', () => {
    const map = lineMap(['a', 'b', 'c', 'd'], ['a', 'new', 'b', 'C', 'd']);
    expect([...map]).toEqual([[1, 1], [2, 3], [4, 5]]);
  });
});

describe('tools/mutation-merge.ts: mergeFile', () => {
  const source = ['one', 'two', 'three', 'four'].join('\n');
  const before: FileResult = { source, mutants: [mutant(1, 5, 'Killed'), mutant(2, 5, 'Survived'), mutant(4, 5, 'Killed')] };

  it('the same source: this run\'s mutants replace theirs, the others keep their results', () => {
    const after: FileResult = { source, mutants: [mutant(2, 5, 'Killed')] };
    expect(where(mergeFile(before, after))).toEqual([[1, 'Killed'], [4, 'Killed'], [2, 'Killed']]);
  });

  it('an edited source: results move with their lines, a mutant on an edited line is dropped', () => {
    const edited = ['one', 'inserted', 'two', 'THREE', 'four'].join('\n');
    const merged = mergeFile({ ...before, mutants: [...before.mutants, mutant(3, 5, 'Survived')] }, { source: edited, mutants: [] });
    expect(where(merged)).toEqual([[1, 'Killed'], [3, 'Survived'], [5, 'Killed']]);
    // Stryker's id names the new place too (0-based lines and columns).
    expect(merged.mutants[1]?.id).toBe('f.ts@2:4-2:8\nConditionalExpression: true');
  });

  it('a mutant spanning lines keeps its result only if none of them was edited', () => {
    const span: Mutant = { mutatorName: 'BlockStatement', replacement: '{}', location: { start: { line: 2, column: 1 }, end: { line: 3, column: 2 } } };
    const kept = mergeFile({ source, mutants: [span] }, { source: `zero\n${source}`, mutants: [] });
    expect(kept.mutants.map((m) => [m.location.start.line, m.location.end.line])).toEqual([[3, 4]]);
    const dropped = mergeFile({ source, mutants: [span] }, { source: source.replace('three', 'THREE'), mutants: [] });
    expect(dropped.mutants).toEqual([]);
  });

  it('no earlier run: this run\'s results as they are', () => {
    const after: FileResult = { source, mutants: [mutant(1, 5, 'Killed')] };
    expect(mergeFile(undefined, after)).toBe(after);
  });
});
