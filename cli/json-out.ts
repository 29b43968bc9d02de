// `--json` on every command (issue 19 item 3; docs/OPERATIONS.md §5.1): the one
// convention the whole CLI follows, so a script reads any command the same way.
//
// - stdout is JSON lines: one compact object per line, nothing else. A command prints one object
//   (`trine up`, `kill`, `down`…) or several (`submit --wait`: accepted, each change, the end;
//   `logs`: one per line of output).
// - Every object names its type and version in `schema` (`trine.submit/1`): a script tells the
//   lines of a stream apart by it, and a new version number is the only way a field changes
//   meaning or goes away (fields may be added within a version).
// - An error still goes to stderr as one line, exactly as without --json, and stdout gets one
//   last object `{"schema":"trine.error/1","ok":false,"exitCode":N,"error":{"code","message"}}`
//   (cli/errors.ts printError). Exit codes are those of cli/errors.ts, --json or not.
// - Warnings (views that differ, a task with no output yet) stay on stderr only.
//
// Whether errors are printed as JSON is decided before commander parses (a usage error comes
// before any action runs) from argv, and again from the parsed options once a command's action
// is about to run (main.ts).

/** Versioned names of every object the CLI prints with --json (docs/OPERATIONS.md
 *  §5.1 documents each field). */
export const SCHEMAS = {
  error: 'trine.error/1',
  up: 'trine.up/1',
  status: 'trine.status/1',
  ps: 'trine.ps/1',
  nodes: 'trine.nodes/1',
  submit: 'trine.submit/1',
  taskChange: 'trine.task-change/1',
  taskEnd: 'trine.task-end/1',
  kill: 'trine.kill/1',
  restart: 'trine.restart/1',
  log: 'trine.log/1',
  inject: 'trine.inject/1',
  shutdown: 'trine.shutdown/1',
  down: 'trine.down/1',
  keygen: 'trine.keygen/1',
  init: 'trine.init/1',
  nodeAdd: 'trine.node-add/1',
  nodeRemove: 'trine.node-remove/1',
  event: 'trine.event/1',
  diagnosis: 'trine.diagnosis/1',
  episode: 'trine.episode/1',
} as const;

export type Schema = (typeof SCHEMAS)[keyof typeof SCHEMAS];

/** One JSON line: `schema` first, then the fields. */
export function jsonLine(schema: Schema, fields: Record<string, unknown>): string {
  return `${JSON.stringify({ schema, ...fields })}\n`;
}

/** Print one JSON line on stdout. */
export function emitJson(schema: Schema, fields: Record<string, unknown>): void {
  process.stdout.write(jsonLine(schema, fields));
}

/** Whether argv asks for JSON: `--json` among the arguments before a `--` (what follows `--`
 *  is a task's command line, whose own flags are not trine's). */
export function argvWantsJson(argv: readonly string[]): boolean {
  const args = argv.slice(2);
  const end = args.indexOf('--');
  return (end < 0 ? args : args.slice(0, end)).includes('--json');
}
