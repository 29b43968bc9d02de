// Ending a CLI command: exit with `code` once stdout and stderr are flushed. On a pipe, writes
// are asynchronous, and exiting at once cut a large `trine ps --json` short at a buffer
// boundary (found by the N-Queens campaign, which parses it). A write's callback runs after
// every earlier write to that stream has been handed to the OS.
export function exitWhenFlushed(code: number): void {
  process.exitCode = code;
  const flushed = (s: NodeJS.WriteStream) => new Promise<void>((resolve) => s.write('', () => resolve()));
  void Promise.all([flushed(process.stdout), flushed(process.stderr)]).then(() => process.exit(code));
}
