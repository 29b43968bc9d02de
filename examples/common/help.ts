// `--help` (or `-h`) for the repository's npm scripts (issue 19: `npm run campaign:nqueens --
// --help` started a 100-run campaign): print the script's opening comment, which says what it
// does and takes, and exit 0 before anything starts. One source for the help and the file's own
// documentation, so the two cannot drift apart.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The leading `//` comment of a source file, without the slashes (a `#!` line is skipped). */
export function headerOf(source: string): string {
  const out: string[] = [];
  for (const line of source.split('\n')) {
    if (line.startsWith('#!') && out.length === 0) continue;
    if (!line.startsWith('//')) break;
    out.push(line.replace(/^\/\/ ?/, ''));
  }
  return `${out.join('\n')}\n`;
}

/** Call first in a script: with `--help` or `-h` on its command line, print its header and exit. */
export function helpFromHeader(scriptUrl: string, argv: readonly string[] = process.argv.slice(2)): void {
  if (!argv.includes('--help') && !argv.includes('-h')) return;
  process.stdout.write(headerOf(readFileSync(fileURLToPath(scriptUrl), 'utf8')));
  process.exit(0);
}
