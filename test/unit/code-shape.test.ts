// The shape of the code the protocol lives in (STYLE.md 10, issue 16): in src/core, fsm/ and
// src/app no file is longer than FILE_MAX_LINES and no function longer than FUNCTION_MAX_LINES, so
// each can be read at once. Functions are found with the TypeScript parser (declarations, methods,
// arrow functions and function expressions, each measured from its first line to its last); a
// function's length includes the functions nested in it.
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const FILE_MAX_LINES = 400;
const FUNCTION_MAX_LINES = 150;
/** Files still over FILE_MAX_LINES, each with what is left to do (issue 16). The list only
 *  shrinks: a file listed here that comes under the limit fails the test until it is removed. */
const STILL_LONG: Record<string, string> = {
};
const root = fileURLToPath(new URL('../..', import.meta.url));
const DIRS = ['src/core', 'fsm', 'src/app'];

const sources = (dir: string): string[] =>
  readdirSync(`${root}${dir}`, { withFileTypes: true, recursive: true })
    .filter((d) => d.isFile() && d.name.endsWith('.ts'))
    .map((d) => `${d.parentPath.slice(root.length)}/${d.name}`.replace(/\/\/+/g, '/'))
    .sort();

/** Every function of `file` longer than `max` lines, as `file:line name (n lines)`. */
function longFunctions(file: string, text: string, max: number): string[] {
  const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const long: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isArrowFunction(node) || ts.isFunctionExpression(node) ||
      ts.isConstructorDeclaration(node) || ts.isGetAccessor(node) || ts.isSetAccessor(node)) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.getEnd()).line;
      const n = last - first + 1;
      if (n > max) {
        const named = (node as { name?: ts.Node }).name;
        const parent = node.parent;
        const name = named !== undefined ? named.getText(sf)
          : ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) ? parent.name.getText(sf) : '(anonymous)';
        long.push(`${file}:${first + 1} ${name} (${n} lines)`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return long;
}

describe('STYLE.md 10: files and functions short enough to read at once', () => {
  const files = DIRS.flatMap(sources).map((f) => ({ file: f, text: readFileSync(`${root}${f}`, 'utf8') }));

  it(`no file in ${DIRS.join(', ')} is longer than ${FILE_MAX_LINES} lines`, () => {
    expect(files.length).toBeGreaterThan(50);
    const long = files.map((f) => ({ file: f.file, lines: f.text.split('\n').length - (f.text.endsWith('\n') ? 1 : 0) })).filter((f) => f.lines > FILE_MAX_LINES);
    expect(long.filter((f) => STILL_LONG[f.file] === undefined).map((f) => `${f.file} (${f.lines} lines)`)).toEqual([]);
    expect(Object.keys(STILL_LONG).filter((f) => !long.some((l) => l.file === f)).map((f) => `${f} is under ${FILE_MAX_LINES} lines now: take it off STILL_LONG`)).toEqual([]);
  });

  it(`no function in ${DIRS.join(', ')} is longer than ${FUNCTION_MAX_LINES} lines`, () => {
    expect(files.flatMap((f) => longFunctions(f.file, f.text, FUNCTION_MAX_LINES))).toEqual([]);
  });

  it('the measure finds a long function and names it (so an empty list above means something)', () => {
    const body = Array.from({ length: FUNCTION_MAX_LINES }, (_, i) => `  x += ${i};`).join('\n');
    expect(longFunctions('x.ts', `export function tooLong(): number {\n  let x = 0;\n${body}\n  return x;\n}\nconst ok = () => 1;\n`, FUNCTION_MAX_LINES))
      .toEqual([`x.ts:1 tooLong (${FUNCTION_MAX_LINES + 4} lines)`]);
  });
});
