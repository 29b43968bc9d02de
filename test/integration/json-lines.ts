// Reading a `trine … --json` command's stdout as a script does (docs/OPERATIONS.md §5.1): one
// JSON object per line, each naming its schema.
import { expect } from 'vitest';

export type Obj = Record<string, unknown> & { schema: string };
type Output = { code: number | string | null; stdout: string; stderr: string };

/** Every stdout line as a JSON object with a `trine.<name>/<version>` schema. */
export function lines(r: Output): Obj[] {
  const out = r.stdout.split('\n').filter((l) => l !== '').map((l) => JSON.parse(l) as Obj);
  for (const o of out) expect(o.schema).toMatch(/^trine\.[a-z-]+\/[1-9][0-9]*$/);
  return out;
}

/** The one object of a command that succeeded, of `schema`: exit 0 and nothing on stderr. */
export function one(r: Output, schema: string): Obj {
  expect(r.stderr).toBe('');
  expect(r.code).toBe(0);
  const out = lines(r);
  expect(out).toHaveLength(1);
  expect(out[0]?.schema).toBe(schema);
  return out[0] as Obj;
}
