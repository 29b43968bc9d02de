// The `trine` command line (commander 14): declares every command and its options and turns
// every failure — an unknown command or flag, a bad value, a missing or foreign cluster dir, a
// port in use — into one line on stderr and a non-zero exit (docs/OPERATIONS.md §1).
import { endQuietlyWhenReaderLeaves, exitWhenFlushed } from './exit.ts';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import {
  DGRP_DEFAULT_FACTOR_PERCENT, DGRP_DEFAULT_INITIAL_THRESHOLD_MS, DGRP_DEFAULT_INTERVAL_MS, DGRP_DEFAULT_MARGIN_MS, DGRP_DEFAULT_ZETA, MAX_ADDED_NODE_SPARES, MAX_TASK_PROCS,
  STRAGGLER_DEFAULT_AFTER_PERMILLE, STRAGGLER_DEFAULT_FACTOR_HUNDREDTHS,
  ROLLBACK_DEFAULT_INTERVAL_MS, ROLLBACK_DEFAULT_STATE_BYTES,
} from '../src/core/constants.ts';
import { INJECT_MODES } from '../src/io/inject-modes.ts';
import {
  DEFAULT_SLOW_PERIOD_MS, MAX_SLOW_PERIOD_MS, MAX_SLOW_SHARE_PERCENT, MIN_SLOW_PERIOD_MS, MIN_SLOW_SHARE_PERCENT,
} from '../src/io/duty-cycle.ts';
import { DEFAULT_SPAWNS_PER_PROCESS, MAX_SPAWNS } from '../src/core/cluster-signals.ts';
import { DEFAULT_AGENT_SLOTS, DEFAULT_CLUSTER_DIR, DEFAULT_NODES, LOOPBACK_HOST, MAX_NODES, MIN_NODES } from '../src/io/cluster-dir.ts';
import { MAX_SLOTS } from '../src/io/hosts-file.ts';
import { dashboard, DASHBOARD_DEFAULT_PORT } from './dashboard.ts';
import { down } from './down.ts';
import { events, EVENTS_POLL_MS } from './events.ts';
import { CliError, excerpt, EXIT_OK, EXIT_USAGE, printError, reportError, setJsonErrors } from './errors.ts';
import { argvWantsJson } from './json-out.ts';
import { inject, INJECT_TIMEOUT_MS } from './inject.ts';
import { keygen } from './keygen.ts';
import { kill, restart } from './kill.ts';
import { shutdown } from './shutdown.ts';
import { logs } from './logs.ts';
import { NODE_REMOVE_WAIT_MS, nodeAdd, nodeRemove } from './node-admin.ts';
import { nodes } from './nodes.ts';
import { OP_TIMEOUT_MS, VIEW_TIMEOUT_MS } from './op-client.ts';
import { ps } from './ps.ts';
import { submit } from './submit.ts';
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
const JSON_HELP = 'print JSON lines instead of text, errors too (docs/OPERATIONS.md §5.1)';

/** `trine submit`'s options as commander hands them over. */
type SubmitFlags = {
  size?: number; name?: string; env?: string[]; cwd?: string; wait?: boolean; linked?: boolean; dir?: string; timeout?: number;
  recovery?: string; logging?: string; checkpoint?: string; checkpointInterval?: string; maxState?: string;
  dgrp?: boolean; dgrpInterval?: string; dgrpZeta?: string; dgrpFactor?: string; dgrpMargin?: string; dgrpInitial?: string;
  straggler?: boolean; stragglerFactor?: string; stragglerAfter?: string; json?: boolean; maxSpawns?: number;
};

/** A command's result: an exit code, or null for a daemon that keeps running. */
type Outcome = number | null;

export function buildProgram(setOutcome: (p: Promise<Outcome> | Outcome) => void, argv: readonly string[] = process.argv): Command {
  const program = new Command('trine')
    .description('Trine: a Byzantine-tolerant cluster manager')
    .exitOverride()
    .configureOutput({ outputError: () => {} })
    .showSuggestionAfterError(true)
    .allowExcessArguments(false)
    // Options belong to the command they follow, so `trine submit -- CMD -x` reaches submit
    // with its `--` and `-x` intact (the program itself has no options but --help).
    .enablePositionalOptions();

  program.command('up')
    .description('create a local cluster and start it in the background; returns once it is healthy')
    .option('--nodes <n>', `nodes (default ${DEFAULT_NODES}); replicas run on the first three`, integer('--nodes', MIN_NODES, MAX_NODES))
    .option('--dir <dir>', DIR_HELP)
    .option('--base-port <port>', 'listen on consecutive ports from this one (default: free ports)', integer('--base-port', 1024, 65535))
    .option('--timeout <ms>', `how long to wait for a healthy cluster (default ${UP_TIMEOUT_MS})`, integer('--timeout', 1, 3_600_000))
    .option('--allow-inject', 'let `trine inject` inject faults into this cluster (tests and demos only)')
    .option('--metrics-port <port>', 'serve Prometheus metrics: daemon i on this port + i, on loopback (docs/OPERATIONS.md "Metrics")', integer('--metrics-port', 1024, 65535))
    .option('--json', JSON_HELP)
    .action((o: { nodes?: number; dir?: string; basePort?: number; timeout?: number; allowInject?: boolean; metricsPort?: number; json?: boolean }) =>
      setOutcome(up({ nodes: o.nodes, dir: o.dir, basePort: o.basePort, timeoutMs: o.timeout, allowInject: o.allowInject, metricsPort: o.metricsPort, json: o.json })));

  program.command('status')
    .description("print each replica's role, RSN, GSSN, digest and health, and each node's health")
    .option('--dir <dir>', DIR_HELP)
    .option('--json', 'print the status document (docs/OPERATIONS.md) instead of a table')
    .option('--timeout <ms>', `how long to wait for answers (default ${STATUS_TIMEOUT_MS})`, integer('--timeout', 1, 600_000))
    .action((o: { dir?: string; json?: boolean; timeout?: number }) => setOutcome(status({ dir: o.dir, json: o.json, timeoutMs: o.timeout })));

  // ---- tasks (issue 3): submit, ps, nodes, kill, logs ----
  const opTimeout = () => integer('--timeout', 1, 600_000);
  program.command('submit')
    .description('start a task of N processes running CMD ARGS… and print its id; with --wait, follow it to its end')
    .usage('[options] -- CMD [ARGS...]')
    .argument('[command...]', 'the command and its arguments, after --')
    .option('-n, --size <n>', `processes in the task (default 1, at most ${MAX_TASK_PROCS})`, integer('-n', 1, MAX_TASK_PROCS))
    .option('--name <name>', 'a label for the task (default: the command\'s base name)')
    .option('--env <K=V>', 'set an environment variable for the processes (repeatable)', (v: string, prev: string[] | undefined) => [...(prev ?? []), v])
    .option('--cwd <dir>', 'working directory of the processes (default: the current one)')
    .option('--wait', "follow the task until it finishes, print each change, and exit with its outcome")
    .option('--json', `${JSON_HELP}; with --wait: accepted, each change, the end`)
    .option('--linked', 'the processes use the application library (trine/app: signals, G-MPI); they must connect to their agent')
    .option('--recovery <kind>', 'app (default: the application recovers itself) or rollback (the group replaces a dead rank, which restores its checkpoint and replays; needs --linked)')
    .option('--logging <mode>', 'rollback: rbml (default, receiver-based pessimistic), hmpl (hybrid) or cm (channel memories)')
    .option('--checkpoint <policy>', 'rollback: nco (default, uncoordinated), bsco or sco (semi-coordinated per node)')
    .option('--checkpoint-interval <ms>', `rollback: least time between two checkpoints of a rank (default ${ROLLBACK_DEFAULT_INTERVAL_MS})`)
    .option('--max-state <bytes>', `rollback: largest checkpoint of one rank (default ${ROLLBACK_DEFAULT_STATE_BYTES})`)
    .option('--dgrp', 'the processes test each other; slow ones leave the dynamic group of recommended processes (needs --linked)')
    .option('--dgrp-interval <ms>', `dgrp: testing interval (default ${DGRP_DEFAULT_INTERVAL_MS})`)
    .option('--dgrp-zeta <n>', `dgrp: consecutive passes before a process may rejoin (default ${DGRP_DEFAULT_ZETA})`)
    .option('--dgrp-factor <x>', `dgrp: the reply threshold is the adaptive timeout times this (default ${DGRP_DEFAULT_FACTOR_PERCENT / 100})`)
    .option('--dgrp-margin <ms>', `dgrp: milliseconds added to the threshold (default ${DGRP_DEFAULT_MARGIN_MS})`)
    .option('--dgrp-initial <ms>', `dgrp: the threshold before the first reply (default ${DGRP_DEFAULT_INITIAL_THRESHOLD_MS})`)
    .option('--straggler', 'flag processes whose progress lags the median (needs --linked; the processes report progress)')
    .option('--straggler-factor <k>', `straggler: flagged at k times behind the median (default ${STRAGGLER_DEFAULT_FACTOR_HUNDREDTHS / 100}; implies --straggler)`)
    .option('--straggler-after <q>', `straggler: judged once the median is this share done (default ${STRAGGLER_DEFAULT_AFTER_PERMILLE / 1000}; implies --straggler)`)
    .option('--max-spawns <n>', `processes the application may SPAWN per start; past it the task is killed with the reason (default ${DEFAULT_SPAWNS_PER_PROCESS} per process)`, integer('--max-spawns', 0, MAX_SPAWNS))
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long to wait for two replicas to agree on the outcome (default ${OP_TIMEOUT_MS})`, opTimeout())
    .passThroughOptions()
    .action((command: string[], o: SubmitFlags) => {
      // Commander drops the `--`: the command came after one if argv ends with `-- command…`.
      const sawDashDash = argv.some((a, i) => a === '--' && argv.length - i - 1 === command.length && command.every((c, j) => argv[i + 1 + j] === c));
      const recovery = { recovery: o.recovery, logging: o.logging, checkpoint: o.checkpoint, checkpointInterval: o.checkpointInterval, maxState: o.maxState };
      const dgrp = { dgrp: o.dgrp, interval: o.dgrpInterval, zeta: o.dgrpZeta, factor: o.dgrpFactor, margin: o.dgrpMargin, initial: o.dgrpInitial };
      const straggler = { straggler: o.straggler, factor: o.stragglerFactor, after: o.stragglerAfter };
      setOutcome(submit({
        dir: o.dir, size: o.size, name: o.name, env: o.env, cwd: o.cwd, wait: o.wait, linked: o.linked, recovery, dgrp, straggler, maxSpawns: o.maxSpawns, timeoutMs: o.timeout, command, sawDashDash, json: o.json,
      }));
    });

  program.command('ps')
    .description('list tasks and their processes (only TASK, if given), as two replicas agree on them')
    .argument('[task]', 'a task id, e.g. t3')
    .option('--json', 'print the cluster view (docs/OPERATIONS.md) instead of a table')
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long to wait for the replicas (default ${VIEW_TIMEOUT_MS})`, opTimeout())
    .action((task: string | undefined, o: { json?: boolean; dir?: string; timeout?: number }) =>
      setOutcome(ps({ task, json: o.json, dir: o.dir, timeoutMs: o.timeout })));

  program.command('nodes')
    .description("list nodes: agent, state, slots used/total, agent incarnation")
    .option('--json', 'print the nodes as JSON')
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long to wait for the replicas (default ${VIEW_TIMEOUT_MS})`, opTimeout())
    .action((o: { json?: boolean; dir?: string; timeout?: number }) => setOutcome(nodes({ json: o.json, dir: o.dir, timeoutMs: o.timeout })));

  const taskOps = [
    ['kill', 'kill a task: terminate all its processes; it ends abnormally', kill],
    ['restart', 'restart a running task: terminate all its processes, then start them again (TRINE_RESTARTED=1)', restart],
  ] as const;
  for (const [name, description, run] of taskOps) {
    program.command(name)
      .description(description)
      .argument('<task>', 'a task id, e.g. t3')
      .option('--dir <dir>', DIR_HELP)
      .option('--timeout <ms>', `how long to wait for two replicas to agree on the outcome (default ${OP_TIMEOUT_MS})`, opTimeout())
      .option('--json', JSON_HELP)
      .action((task: string, o: { dir?: string; timeout?: number; json?: boolean }) => setOutcome(run({ task, dir: o.dir, timeoutMs: o.timeout, json: o.json })));
  }

  program.command('logs')
    .description("print a task's process output, each line prefixed [task/vpid] (stdout) or [task/vpid err] (stderr)")
    .argument('<task>', 'a task id, e.g. t3')
    .option('--vpid <v>', 'only this process', integer('--vpid', 0, MAX_TASK_PROCS - 1))
    .option('--out', 'only standard output')
    .option('--err', 'only standard error')
    .option('--follow', 'keep printing new output until the task has finished')
    .option('--json', 'print one JSON object per line of output (task, vpid, stream, line), errors too (docs/OPERATIONS.md §5.1)')
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long to wait for the replicas (default ${VIEW_TIMEOUT_MS})`, opTimeout())
    .action((task: string, o: { vpid?: number; out?: boolean; err?: boolean; follow?: boolean; json?: boolean; dir?: string; timeout?: number }) =>
      setOutcome(logs({ task, vpid: o.vpid, out: o.out, err: o.err, follow: o.follow, json: o.json, dir: o.dir, timeoutMs: o.timeout })));

  program.command('events')
    .description("print the cluster's event log: what the replicas applied, their self-diagnosis, and each fault's detection and recovery with their latencies")
    .option('--follow', `keep printing new events (asks every ${EVENTS_POLL_MS} ms) until Ctrl-C`)
    .option('--json', 'one JSON object per line (docs/OPERATIONS.md §10)')
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long each look waits for the replicas (default ${STATUS_TIMEOUT_MS})`, opTimeout())
    .action((o: { follow?: boolean; json?: boolean; dir?: string; timeout?: number }) =>
      setOutcome(events({ follow: o.follow, json: o.json, dir: o.dir, timeoutMs: o.timeout })));

  program.command('dashboard')
    .description('serve a live web page of the cluster (group, nodes, tasks, a timeline of faults and recoveries) until Ctrl-C')
    .option('--listen <addr>', `HOST:PORT, HOST or PORT to listen on (default ${LOOPBACK_HOST}:${DASHBOARD_DEFAULT_PORT}); beyond loopback the URL carries an access token`)
    .option('--dir <dir>', DIR_HELP)
    .action((o: { listen?: string; dir?: string }) =>
      setOutcome(dashboard({ listen: o.listen, dir: o.dir })));

  program.command('inject')
    .description('inject a fault into a live cluster started with `trine up --allow-inject` (tests and demos)')
    .argument('<mode>', `what to inject: ${INJECT_MODES.map((m) => m.mode).join(', ')}`)
    .argument('[args...]', "the mode's arguments (see below)")
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long to wait for a daemon's answer (default ${INJECT_TIMEOUT_MS})`, opTimeout())
    .option('--share <p>', `slow: the % of CPU the target keeps (${MIN_SLOW_SHARE_PERCENT} to ${MAX_SLOW_SHARE_PERCENT})`)
    .option('--for <ms>', 'slow: end it by itself after this many ms, at least one period (default: until `trine inject heal T`)')
    .option('--period <ms>', `slow: one run + stop, in ms (${MIN_SLOW_PERIOD_MS} to ${MAX_SLOW_PERIOD_MS}, default ${DEFAULT_SLOW_PERIOD_MS}): short looks uniformly slower, long stops it for stretches`)
    .option('--json', JSON_HELP)
    .addHelpText('after', () => {
      const width = Math.max(...INJECT_MODES.map((m) => m.mode.length + m.usage.length + 1)) + 2;
      return `\nModes (docs/OPERATIONS.md §7):\n${INJECT_MODES.map((m) => `  ${`${m.mode} ${m.usage}`.padEnd(width)}${m.summary}`).join('\n')}\n`;
    })
    .action((mode: string, args: string[], o: { dir?: string; timeout?: number; share?: string; for?: string; period?: string; json?: boolean }) =>
      setOutcome(inject({ mode, args, dir: o.dir, timeoutMs: o.timeout, json: o.json, flags: { share: o.share, for: o.for, period: o.period } })));

  program.command('shutdown')
    .description('stop the whole cluster, on every host: the group kills every task, every node and the watchdog exit, and nothing restarts them')
    .option('--dir <dir>', DIR_HELP)
    .option('--no-wait', 'return once the group has ordered the shutdown, without waiting for the daemons to exit')
    .option('--timeout <ms>', `how long to wait for two replicas to agree on the outcome (default ${OP_TIMEOUT_MS})`, opTimeout())
    .option('--json', JSON_HELP)
    .action((o: { dir?: string; wait?: boolean; timeout?: number; json?: boolean }) => setOutcome(shutdown({ dir: o.dir, wait: o.wait, timeoutMs: o.timeout, json: o.json })));

  program.command('down')
    .description('stop every process `trine up` started in the cluster dir')
    .option('--dir <dir>', DIR_HELP)
    .option('--json', JSON_HELP)
    .action((o: { dir?: string; json?: boolean }) => setOutcome(down({ dir: o.dir, json: o.json })));

  program.command('keygen')
    .description('create a key pair per process and the public-key table')
    .option('--dir <dir>', DIR_HELP)
    .option('--ids <ids>', 'comma-separated process ids (default: the cluster\'s, or r1,r2,r3,scc,a1..a4,op)')
    .option('--force', 'replace existing keys')
    .option('--json', JSON_HELP)
    .action((o: { dir?: string; ids?: string; force?: boolean; json?: boolean }) => setOutcome(keygen({ dir: o.dir, ids: o.ids, force: o.force, json: o.json })));

  program.command('manager')
    .description('run a manager replica in the foreground')
    .option('--dir <dir>', DIR_HELP)
    .option('--id <id>', 'replica id, e.g. r1 (required unless --standby)')
    .option('--join <view:primary:members>', 'start as a replacement joining this group (PROTOCOL §10.6; the agent passes it)')
    .option('--standby <spares...>', 'load and wait, as an agent\'s warm standby, to become one of these spare ids (the agent passes it)')
    .action((o: { dir?: string; id?: string; join?: string; standby?: string[] }) => {
      if (o.standby !== undefined) return setOutcome(daemons().then((d) => d.startStandby({ dir: o.dir, standby: o.standby as string[] })).then(() => null));
      if (o.id === undefined) return setOutcome(Promise.reject(new CliError('trine manager: --id is required (e.g. --id r1)', EXIT_USAGE)));
      return setOutcome(daemons().then((d) => d.startManager({ ...o, id: o.id as string })).then(() => null));
    });

  program.command('agent')
    .description('run a node agent in the foreground')
    .option('--dir <dir>', DIR_HELP)
    .requiredOption('--id <id>', 'agent id, e.g. a1')
    .action((o: { dir?: string; id: string }) => setOutcome(daemons().then((d) => d.startAgent(o)).then(() => null)));

  program.command('keeper')
    .description('run an agent under its keeper in the foreground: replaces the agent with a warm standby when it exits or stops heartbeating')
    .option('--dir <dir>', DIR_HELP)
    .requiredOption('--id <id>', 'agent id, e.g. a1')
    .action((o: { dir?: string; id: string }) =>
      setOutcome(daemons().then((d) => d.startKeeper(o)).then(() => null)));

  program.command('scc')
    .description('run the watchdog in the foreground (`trine scc run --bundle DIR` on the watchdog host of a cluster of several hosts)')
    .argument('[action]', '`run` with --bundle')
    .option('--dir <dir>', DIR_HELP)
    .option('--bundle <dir>', 'the watchdog host\'s bundle, from `trine init`')
    .action((action: string | undefined, o: { dir?: string; bundle?: string }) => {
      if (action === undefined && o.bundle === undefined) return setOutcome(daemons().then((d) => d.startWatchdog(o)).then(() => null));
      if (action !== 'run' || o.bundle === undefined) {
        return setOutcome(Promise.reject(new CliError('trine scc: use `trine scc run --bundle DIR` (a host of several) or `trine scc --dir DIR` (one host)', EXIT_USAGE)));
      }
      return setOutcome(import('./node-run.ts').then((n) => n.sccRun({ bundle: o.bundle as string })));
    });

  // ---- several hosts (docs/OPERATIONS.md §8): init, node run, node add, node remove ----
  program.command('init')
    .description('write one bundle per host (cluster document, that host\'s keys, systemd unit) from a hosts file')
    .requiredOption('--hosts <file>', 'the hosts file (YAML; see examples/hosts.yaml)')
    .requiredOption('--out <dir>', 'where to write the bundles (a new or empty directory)')
    .option('--json', JSON_HELP)
    .action((o: { hosts: string; out: string; json?: boolean }) => setOutcome(import('./node-run.ts').then((n) => n.init(o))));

  const node = program.command('node')
    .description('a host of a cluster of several hosts: run its part (`trine node run`), or add or remove one at run time (`trine node add`, `trine node remove`)')
    // Reached only when no subcommand matched: none named, or an unknown one.
    .usage('<command> [options]')
    .argument('[command]', 'run, add or remove')
    .action((command: string | undefined) => setOutcome(Promise.reject(new CliError(
      `${command === undefined ? '`trine node` needs a command' : `unknown command 'node ${command}'`}: use \`trine node run --bundle DIR\`, ` +
        '`trine node add --id HOST --address ADDR` or `trine node remove HOST` (see `trine node --help`)',
      EXIT_USAGE,
    ))));
  node.command('run')
    .description('run this host\'s part of a cluster of several hosts, in the foreground, from its bundle')
    .requiredOption('--bundle <dir>', 'this host\'s bundle, from `trine init` or `trine node add`')
    .action((o: { bundle: string }) => setOutcome(import('./node-run.ts').then((n) => n.nodeRun(o))));
  node.command('add')
    .description('add an agent host to the running cluster (PROTOCOL §10.12) and write its bundle; run it from the operator bundle')
    .requiredOption('--id <host>', 'the new host\'s id: its node name and bundle directory (e.g. n5)')
    .requiredOption('--address <addr>', 'the new host\'s network address (IP address or DNS name)')
    .option('--slots <n>', `processes the node runs at once (default ${DEFAULT_AGENT_SLOTS})`, integer('--slots', 1, MAX_SLOTS))
    .option('--spares <n>', 'spare replica ids the host holds keys for, so the group can replace a replica there (default: as many as each host of `trine init` has)', integer('--spares', 0, MAX_ADDED_NODE_SPARES))
    .option('--out <dir>', 'where to write the host\'s bundle, as OUT/HOST (default: beside the operator bundle)')
    .option('--dir <dir>', `the operator bundle (default ${DEFAULT_CLUSTER_DIR})`)
    .option('--timeout <ms>', `how long to wait for two replicas to agree on the outcome (default ${OP_TIMEOUT_MS})`, opTimeout())
    .option('--json', JSON_HELP)
    .action((o: { id: string; address: string; slots?: number; spares?: number; out?: string; dir?: string; timeout?: number; json?: boolean }) =>
      setOutcome(nodeAdd({ dir: o.dir, id: o.id, address: o.address, slots: o.slots ?? DEFAULT_AGENT_SLOTS, spares: o.spares, out: o.out, timeoutMs: o.timeout, json: o.json })));
  node.command('remove')
    .description('drain a node and remove it from the running cluster (PROTOCOL §10.12): nothing new is placed there; once no task runs there its node stops')
    .argument('<host>', 'the node, e.g. n5')
    .option('--kill', 'kill the tasks that have processes on the node, instead of waiting for them to end')
    .option('--no-wait', 'return once the group has agreed to drain the node, without waiting for it to leave')
    .option('--dir <dir>', DIR_HELP)
    .option('--timeout <ms>', `how long to wait for the node to leave the group's node list (default ${NODE_REMOVE_WAIT_MS})`, integer('--timeout', 1, 3_600_000))
    .option('--json', JSON_HELP)
    .action((host: string, o: { kill?: boolean; wait?: boolean; dir?: string; timeout?: number; json?: boolean }) =>
      setOutcome(nodeRemove({ dir: o.dir, host, kill: o.kill === true, wait: o.wait !== false, timeoutMs: o.timeout, json: o.json })));

  return program;
}

/** The command named in argv, with its subcommand if it has some (`node add`), for the hint in
 *  a usage error; `group` is set when the command has subcommands and none was named. */
function commandIn(argv: readonly string[], program: Command): { path: string; group: boolean } | null {
  const args = argv.slice(2);
  const at = args.findIndex((a) => program.commands.some((c) => c.name() === a));
  const cmd = program.commands.find((c) => c.name() === args[at]);
  if (cmd === undefined) return null;
  if (cmd.commands.length === 0) return { path: cmd.name(), group: false };
  const sub = cmd.commands.find((c) => c.name() === args[at + 1]);
  return sub === undefined ? { path: cmd.name(), group: true } : { path: `${cmd.name()} ${sub.name()}`, group: false };
}

function usageMessage(e: CommanderError, argv: readonly string[], program: Command): string {
  let what = e.message.replace(/^error:\s*/, '').trim();
  // Commander quotes a refused argument whole (`unknown command '…'`, `argument '…' is invalid`):
  // cut it as our own errors cut what they echo.
  for (const arg of new Set(argv.slice(2))) if (excerpt(arg) !== arg) what = what.split(arg).join(excerpt(arg));
  const cmd = commandIn(argv, program);
  const hint = cmd === null || (e.code === 'commander.unknownCommand' && !cmd.group) ? 'run `trine --help` for the commands'
    : cmd.group ? `run \`trine ${cmd.path} --help\` for its commands`
      : `run \`trine ${cmd.path} --help\` for its options`;
  return `${what}: ${hint}`;
}

/** The daemons' entry point, loaded only by the commands that run one (the CLI itself takes
 *  nothing from src/daemon). */
const daemons = () => import('../src/daemon/main.ts');

/** The exit code of a command that never settled (Node's for an unsettled top-level await). */
const EXIT_UNSETTLED = 13;

/** Commands that run a daemon in the foreground: they keep running when nobody reads their
 *  output (cli/exit.ts). */
const DAEMON_COMMANDS = new Set(['manager', 'agent', 'keeper', 'scc', 'node run']);

/** Run the CLI; resolves to the exit code, or null while a daemon keeps running. */
export async function main(argv: readonly string[]): Promise<Outcome> {
  let outcome: Promise<Outcome> | Outcome = EXIT_OK;
  const program = buildProgram((p) => {
    outcome = p;
  }, argv);
  endQuietlyWhenReaderLeaves(DAEMON_COMMANDS.has(commandIn(argv, program)?.path ?? ''));
  // --json errors (cli/json-out.ts): from argv for a usage error commander finds while parsing,
  // then from the parsed options of the command about to run.
  setJsonErrors(argvWantsJson(argv));
  program.hook('preAction', (_program, command) => setJsonErrors(command.opts()['json'] === true));
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
      return printError(usageMessage(e, argv, program), EXIT_USAGE);
    }
    return reportError(e);
  }
}

// No top-level await: the bundle this runs from is a CommonJS-style body (bin/cli-bundle.js).
// A command whose promise never settled when nothing is left to run has not succeeded: exit 13,
// as Node does for a top-level await that never settles.
let settled = false;
process.once('beforeExit', () => {
  if (settled) return;
  process.exitCode = EXIT_UNSETTLED;
  process.stderr.write('trine: the command stopped before it finished, with nothing left to wait for: a bug, please report it\n');
});
void main(process.argv).then((code) => {
  settled = true;
  // Commands are done: exit now rather than wait for a stray socket or timer, once the output
  // is out (cli/exit.ts).
  if (code !== null) exitWhenFlushed(code);
});
