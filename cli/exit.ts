// Ending a CLI command: exit with `code` once stdout and stderr are flushed, and end quietly when
// whoever reads the output goes away.
//
// Flushing: on a pipe, writes are asynchronous, and exiting at once cut a large `trine ps --json`
// short at a buffer boundary (found by the N-Queens campaign, which parses it). A write's
// callback runs after every earlier write to that stream has been handed to the OS.
//
// A reader that goes away (issue 14 item 9): `trine logs t3 | head` closes the pipe after ten
// lines, and the next write fails with EPIPE, which Node emits as an 'error' event on the stream;
// unhandled, it ended the command with a stack trace and exit 1. A C program such as `git log` or
// `seq` is killed by SIGPIPE instead (status 141 in a `set -o pipefail` shell); Node ignores
// SIGPIPE and cannot die by it. A command here exits at once, silently, with the code it had
// already settled on, else 0: the reader had all it wanted, which is not the command's failure,
// and a pipefail script stays green (ripgrep makes the same choice). docs/OPERATIONS.md §1.
// A daemon in the foreground keeps running: its logs are in files, and losing a terminal or a
// log collector must not stop a node.
import { EXIT_FAILED, EXIT_OK } from './errors.ts';

export function exitWhenFlushed(code: number): void {
  process.exitCode = code;
  const flushed = (s: NodeJS.WriteStream) => new Promise<void>((resolve) => s.write('', () => resolve()));
  void Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => process.exit(code));
}

/** Error codes of a write whose reader has gone: EPIPE on a pipe or a socket whose other end is
 *  closed, ECONNRESET on a socket its peer reset. */
const READER_GONE = new Set(['EPIPE', 'ECONNRESET']);

/** Installs, once, what a failed write to stdout or stderr does (see the header). Another write
 *  error (EIO; ENOSPC, as `> /dev/full` gives) ends a command with exit 1 and, when stdout
 *  failed, one line on stderr; a daemon ignores it too. */
export function endQuietlyWhenReaderLeaves(daemon: boolean): void {
  let ending = false;
  const onError = (stream: 'stdout' | 'stderr') => (e: NodeJS.ErrnoException): void => {
    // Exiting fails the writes still queued, each with its own error: say it once.
    if (daemon || ending) return;
    ending = true;
    if (READER_GONE.has(e.code ?? '')) process.exit(typeof process.exitCode === 'number' ? process.exitCode : EXIT_OK);
    if (stream === 'stdout') process.stderr.write(`trine: cannot write the output (${e.code ?? e.message}): check where stdout goes\n`);
    process.exit(EXIT_FAILED);
  };
  process.stdout.on('error', onError('stdout'));
  process.stderr.on('error', onError('stderr'));
}
