// CLI errors and exit codes (STYLE.md 7, docs/OPERATIONS.md §1): every failure is one line on
// stderr that says what went wrong and what to do, and a non-zero exit code.
import { ClusterDirError } from '../src/io/cluster-dir.ts';
import { HostsFileError } from '../src/io/hosts-file.ts';
import { BundleError } from '../src/io/deploy.ts';
import { KeyFileError } from '../src/io/keys.ts';

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

/** Print an error as one line and return its exit code. */
export function reportError(e: unknown): number {
  if (e instanceof CliError) return printLine(e.message, e.exitCode);
  if (e instanceof ClusterDirError) return printLine(e.message, e.code === 'CLUSTER_RUNNING' ? EXIT_FAILED : EXIT_USAGE);
  if (e instanceof KeyFileError) return printLine(e.message, EXIT_USAGE);
  if (e instanceof HostsFileError || e instanceof BundleError) return printLine(e.message, EXIT_USAGE);
  const msg = e instanceof Error ? e.message : String(e);
  return printLine(`internal error: ${msg.split('\n')[0] ?? ''} (please report it with the command you ran)`, EXIT_FAILED);
}

function printLine(message: string, code: number): number {
  process.stderr.write(`trine: ${message.replace(/\s*\n\s*/g, ' ')}\n`);
  return code;
}
