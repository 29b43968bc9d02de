// The command line the library benches share (bench/lib-load.ts, bench/first-request.ts): `-n N`
// fresh processes per variant, and variants `name=path/to/index.js` (a bare path is its own
// name), run interleaved; without one, this checkout's dist/app/index.js.
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

export type LibVariant = { name: string; url: string };

/** Parses argv (without node and the script); `--help` prints `usage` and exits 0. */
export function parseVariantArgs(argv: readonly string[], bench: string, defaultSamples: number, usage: string): { samples: number; variants: LibVariant[] } {
  let samples = defaultSamples;
  const variants: LibVariant[] = [];
  const variant = (name: string, file: string): LibVariant => {
    const path = resolve(file);
    if (!existsSync(path)) throw new Error(`${bench}: ${path} does not exist (build it: node tools/build-lib.mjs)`);
    return { name, url: pathToFileURL(path).href };
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i] as string;
    if (a === '--help' || a === '-h') {
      console.log(usage);
      process.exit(0);
    }
    if (a === '-n') {
      samples = Number(argv[++i]);
      if (!Number.isInteger(samples) || samples < 1) throw new Error(`${bench}: -n wants a positive integer, got ${argv[i]}`);
      continue;
    }
    const eq = a.indexOf('=');
    variants.push(variant(eq > 0 ? a.slice(0, eq) : a, eq > 0 ? a.slice(eq + 1) : a));
  }
  if (variants.length === 0) variants.push(variant('dist', 'dist/app/index.js'));
  return { samples, variants };
}
