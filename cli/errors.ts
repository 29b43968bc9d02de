// CLI errors and exit codes (STYLE.md 7, docs/OPERATIONS.md §1): every failure is one line on
// stderr that says what went wrong and what to do, and a non-zero exit code.
import { ClusterDirError } from '../src/io/cluster-dir.ts';
import { HostsFileError } from '../src/io/hosts-file.ts';
import { BundleError } from '../src/io/deploy.ts';
import { KeyFileError } from '../src/io/keys.ts';
import { cutMiddle } from '../src/core/quoted.ts';
import { jsonLine, SCHEMAS } from './json-out.ts';

// Echoed input goes through these (src/core/quoted.ts): an error quotes what it refused, cut short.
export { excerpt, quoted } from '../src/core/quoted.ts';

/** Exit codes: 0 success; 1 the command ran but the cluster is not as asked (not healthy, a
 *  replica did not answer, a process would not stop); 2 bad usage or a bad cluster dir. */
export const EXIT_OK = 0;
export const EXIT_FAILED = 1;
export const EXIT_USAGE = 2;

/** The `error.code` of a JSON error object (cli/json-out.ts) when the error names none: what
 *  its exit code says. */
export const defaultErrorCode = (exitCode: number): string => (exitCode === EXIT_USAGE ? 'USAGE' : 'FAILED');

export class CliError extends Error {
  override readonly name = 'CliError';
  /** A stable name for scripts (`NO_TASK`, `REFUSED`, `NO_AGREEMENT`…; docs/OPERATIONS.md
   *  §5.1), by default USAGE (exit 2) or FAILED (exit 1). */
  readonly code: string;
  constructor(message: string, readonly exitCode: number = EXIT_USAGE, code?: string) {
    super(message);
    this.code = code ?? defaultErrorCode(exitCode);
  }
}

/** Whether errors also go to stdout as a JSON error object (`--json`; main.ts sets it). */
let jsonErrors = false;
export function setJsonErrors(on: boolean): void {
  jsonErrors = on;
}

/** The longest error line printed. Echoed input is already cut to a few dozen characters
 *  (quoted()); this bounds what nothing else did — a path, an OS error quoting one, a library's
 *  message — so no input comes back unbounded. A real message (a list of modes, of replicas'
 *  answers) stays well below it. */
export const MAX_ERROR_LINE_CHARS = 1_000;

/** Print an error as one line and return its exit code. */
export function reportError(e: unknown): number {
  if (e instanceof CliError) return printError(e.message, e.exitCode, e.code);
  if (e instanceof ClusterDirError) return printError(e.message, e.code === 'CLUSTER_RUNNING' ? EXIT_FAILED : EXIT_USAGE, e.code);
  if (e instanceof KeyFileError) return printError(e.message, EXIT_USAGE, e.code);
  if (e instanceof HostsFileError || e instanceof BundleError) return printError(e.message, EXIT_USAGE, e.code);
  const msg = e instanceof Error ? e.message : String(e);
  return printError(`internal error: ${msg.split('\n')[0] ?? ''} (please report it with the command you ran)`, EXIT_FAILED, 'INTERNAL');
}

/** The one place the CLI prints an error: `trine: MESSAGE` on one line of stderr, at most
 *  MAX_ERROR_LINE_CHARS (its start and its end kept: what went wrong and what to do); with
 *  --json also the error object on stdout (emitJsonError). Returns `code`. */
export function printError(message: string, code: number, errorCode: string = defaultErrorCode(code)): number {
  const line = oneLine(message);
  process.stderr.write(`trine: ${line}\n`);
  emitJsonError(errorCode, line, code);
  return code;
}

/** `message` as printed: one line, cut to MAX_ERROR_LINE_CHARS with the `trine: ` prefix. */
function oneLine(message: string): string {
  const line = cutMiddle(`trine: ${message}`, MAX_ERROR_LINE_CHARS).slice('trine: '.length);
  // Lines joined by splitting, not by a regular expression: /\s*\n\s*/ takes quadratic time
  // on a long run of spaces, which an argument can be.
  return line.split('\n').map((part) => part.trim()).filter((part) => part !== '').join(' ');
}

/** With --json, the error object on stdout (cli/json-out.ts); nothing otherwise. For a command
 *  that says what went wrong on stderr in its own words (`up` listing what is missing). */
export function emitJsonError(errorCode: string, message: string, exitCode: number): void {
  if (!jsonErrors) return;
  process.stdout.write(jsonLine(SCHEMAS.error, { ok: false, exitCode, error: { code: errorCode, message: oneLine(message) } }));
}
