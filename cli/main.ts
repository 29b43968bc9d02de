// The `trine` command line (commander 14): declares every command and its options and turns
// every failure — an unknown command or flag, a bad value, a missing or foreign cluster dir, a
// port in use — into one line on stderr and a non-zero exit (docs/OPERATIONS.md §1).
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { DEFAULT_CLUSTER_DIR, DEFAULT_NODES, MAX_NODES, MIN_NODES } from '../src/io/cluster-dir.ts';
import { startAgent, startManager, startWatchdog } from './daemons.ts';
import { down } from './down.ts';
import { EXIT_OK, EXIT_USAGE, reportError } from './errors.ts';
import { keygen } from './keygen.ts';
import { status, STATUS_TIMEOUT_MS } from './status.ts';
import { up, UP_TIMEOUT_MS } from './up.ts';

function integer(name: string, min: number, max: number): (value: string) => number {
  return (value) => {
    const n = /^[0-9]+$/.test(value) ? Number(value) : NaN;
    if (!Number.isSafeInteger(n) || n < min || n > max) throw new InvalidArgumentError(`${name} must be an integer from ${min} to ${max}`);
    return n;
  };
}

const DIR_HELP = `cluster directory (default ${DEFAULT_CLUSTER_DIR})`;

/** A command's result: an exit code, or null for a daemon that keeps running. */
type Outcome = number | null;

export function buildProgram(setOutcome: (p: Promise<Outcome> | Outcome) => void): Command {
  const program = new Command('trine')
    .description('Trine: a Byzantine-tolerant cluster manager')
    .exitOverride()
    .configureOutput({ outputError: () => {} })
    .showSuggestionAfterError(true)
    .allowExcessArguments(false);

  program.command('up')
    .description('create a local cluster and start it in the background; returns once it is healthy')
    .option('--nodes <n>', `nodes (default ${DEFAULT_NODES}); replicas run on the first three`, integer('--nodes', MIN_NODES, MAX_NODES))
    .option('--dir <dir>', DIR_HELP)
    .option('--base-port <port>', 'listen on consecutive ports from this one (default: free ports)', integer('--base-port', 1024, 65535))
    .option('--timeout <ms>', `how long to wait for a healthy cluster (default ${UP_TIMEOUT_MS})`, integer('--timeout', 1, 3_600_000))
    .action((o: { nodes?: number; dir?: string; basePort?: number; timeout?: number }) =>
      setOutcome(up({ nodes: o.nodes, dir: o.dir, basePort: o.basePort, timeoutMs: o.timeout })));

  program.command('status')
    .description("print each replica's role, RSN, GSSN, digest and health, and each node's health")
    .option('--dir <dir>', DIR_HELP)
    .option('--json', 'print the status document (docs/OPERATIONS.md) instead of a table')
    .option('--timeout <ms>', `how long to wait for answers (default ${STATUS_TIMEOUT_MS})`, integer('--timeout', 1, 600_000))
    .action((o: { dir?: string; json?: boolean; timeout?: number }) => setOutcome(status({ dir: o.dir, json: o.json, timeoutMs: o.timeout })));

  program.command('down')
    .description('stop every process `trine up` started in the cluster dir')
    .option('--dir <dir>', DIR_HELP)
    .action((o: { dir?: string }) => setOutcome(down({ dir: o.dir })));

  program.command('keygen')
    .description('create a key pair per process and the public-key table')
    .option('--dir <dir>', DIR_HELP)
    .option('--ids <ids>', 'comma-separated process ids (default: the cluster\'s, or r1,r2,r3,scc,a1..a4,op)')
    .option('--force', 'replace existing keys')
    .action((o: { dir?: string; ids?: string; force?: boolean }) => setOutcome(keygen({ dir: o.dir, ids: o.ids, force: o.force })));

  program.command('manager')
    .description('run a manager replica in the foreground')
    .option('--dir <dir>', DIR_HELP)
    .requiredOption('--id <id>', 'replica id, e.g. r1')
    .action((o: { dir?: string; id: string }) => setOutcome(startManager(o).then(() => null)));

  program.command('agent')
    .description('run a node agent in the foreground')
    .option('--dir <dir>', DIR_HELP)
    .requiredOption('--id <id>', 'agent id, e.g. a1')
    .action((o: { dir?: string; id: string }) => setOutcome(startAgent(o).then(() => null)));

  program.command('scc')
    .description('run the watchdog in the foreground')
    .option('--dir <dir>', DIR_HELP)
    .action((o: { dir?: string }) => setOutcome(startWatchdog(o).then(() => null)));

  return program;
}

/** The command named in argv, for the hint in a usage error. */
function commandIn(argv: readonly string[], program: Command): string | null {
  const names = new Set(program.commands.map((c) => c.name()));
  return argv.slice(2).find((a) => names.has(a)) ?? null;
}

function usageLine(e: CommanderError, argv: readonly string[], program: Command): string {
  const what = e.message.replace(/^error:\s*/, '').replace(/\s*\n\s*/g, ' ').trim();
  const cmd = commandIn(argv, program);
  const hint = e.code === 'commander.unknownCommand' || cmd === null ? 'run `trine --help` for the commands' : `run \`trine ${cmd} --help\` for its options`;
  return `trine: ${what}: ${hint}\n`;
}

/** Run the CLI; resolves to the exit code, or null while a daemon keeps running. */
export async function main(argv: readonly string[]): Promise<Outcome> {
  let outcome: Promise<Outcome> | Outcome = EXIT_OK;
  const program = buildProgram((p) => {
    outcome = p;
  });
  if (argv.length <= 2) {
    process.stderr.write(program.helpInformation());
    return EXIT_USAGE;
  }
  try {
    await program.parseAsync([...argv]);
    return await outcome;
  } catch (e) {
    if (e instanceof CommanderError) {
      if (e.exitCode === 0) return EXIT_OK; // --help, --version
      process.stderr.write(usageLine(e, argv, program));
      return EXIT_USAGE;
    }
    return reportError(e);
  }
}

const code = await main(process.argv);
if (code !== null) {
  // Commands are done: exit now rather than wait for a stray socket or timer.
  process.exitCode = code;
  setImmediate(() => process.exit(code));
}
