// CLI errors and exit codes (STYLE.md 7, docs/OPERATIONS.md §1): every failure is one line on
// stderr that says what went wrong and what to do, and a non-zero exit code.
import { ClusterDirError } from '../src/io/cluster-dir.ts';
import { HostsFileError } from '../src/io/hosts-file.ts';
import { BundleError } from '../src/io/deploy.ts';
import { KeyFileError } from '../src/io/keys.ts';
import { cutMiddle } from '../src/core/quoted.ts';

// Echoed input goes through these (src/core/quoted.ts): an error quotes what it refused, cut short.
export { excerpt, quoted } from '../src/core/quoted.ts';

/** Exit codes: 0 success; 1 the command ran but the cluster is not as asked (not healthy, a
 *  replica did not answer, a process would not stop); 2 bad usage or a bad cluster dir. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(message: string, readonly exitCode: number = EXIT_USAGE) {
    super(message);
  }
}

/** The longest error line printed. Echoed input is already cut to a few dozen characters
 *  (quoted()); this bounds what nothing else did — a path, an OS error quoting one, a library's
 *  message — so no input comes back unbounded. A real message (a list of modes, of replicas'
 *  answers) stays well below it. */
export const MAX_ERROR_LINE_CHARS = 1_000;

/** Print an error as one line and return its exit code. */
export function reportError(e: unknown): number {
  if (e instanceof CliError) return printError(e.message, e.exitCode);
  if (e instanceof ClusterDirError) return printError(e.message, e.code === 'CLUSTER_RUNNING' ? EXIT_FAILED : EXIT_USAGE);
  if (e instanceof KeyFileError) return printError(e.message, EXIT_USAGE);
  if (e instanceof HostsFileError || e instanceof BundleError) return printError(e.message, EXIT_USAGE);
  const msg = e instanceof Error ? e.message : String(e);
  return printError(`internal error: ${msg.split('\n')[0] ?? ''} (please report it with the command you ran)`, EXIT_FAILED);
}

/** The one place the CLI prints an error: `trine: MESSAGE` on one line of stderr, at most
 *  MAX_ERROR_LINE_CHARS (its start and its end kept: what went wrong and what to do). Returns
 *  `code`. */
export function printError(message: string, code: number): number {
  const line = cutMiddle(`trine: ${message}`, MAX_ERROR_LINE_CHARS);
  // Lines joined by splitting, not by a regular expression: /\s*\n\s*/ takes quadratic time
  // on a long run of spaces, which an argument can be.
  process.stderr.write(`${line.split('\n').map((part) => part.trim()).filter((part) => part !== '').join(' ')}\n`);
  return code;
}
