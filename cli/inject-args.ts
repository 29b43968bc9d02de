// Checking what the operator typed for `trine inject MODE ARGS…` (docs/OPERATIONS.md §7): the
// mode and its argument count (src/io/inject-modes.ts), then the names in the arguments
// against cluster.json, giving a plan: which process-level fault the CLI performs itself, or
// which daemon it asks. Pure (no I/O): every problem is a CliError with exit code 2 whose one
// line says what to type instead. Whether the named processes run is checked when acting.
//
// `slow T` and `heal T` (one argument) go to the agent of T's node: T is a node (`n2`, or its
// agent `a2`), named here, or a task process `t3/0`, whose node the CLI learns from the cluster
// view when acting. Their flags `--share`, `--for` and `--period` are checked here too.
import { MAX_ARG_CHARS } from '../src/core/constants.ts';
import type { ProcessId } from '../src/core/ports.ts';
import type { ClusterConfig, ProcessKind } from '../src/io/cluster-dir.ts';
import { MAX_INJECT_DELAY_MS } from '../src/io/link-faults.ts';
import { INJECT_MODES, injectModeSpec, linked, type InjectModeSpec } from '../src/io/inject-modes.ts';
import {
  DEFAULT_SLOW_PERIOD_MS, MAX_SLOW_FOR_MS, MAX_SLOW_PERIOD_MS, MAX_SLOW_SHARE_PERCENT, MIN_SLOW_PERIOD_MS, MIN_SLOW_SHARE_PERCENT,
  parseSharePercent, parseSlowForMs, parseSlowPeriodMs,
} from '../src/io/duty-cycle.ts';
import { CliError, excerpt, EXIT_USAGE, quoted } from './errors.ts';

export type InjectPlan =
  | { by: 'cli'; mode: 'kill-replica'; replica: ProcessId }
  | { by: 'cli'; mode: 'kill-agent'; agent: ProcessId; node: string }
  | { by: 'cli'; mode: 'kill-node'; node: string }
  /** `target`: a pid, a daemon id, or a task process `t3/0` (resolved against what runs). */
  | { by: 'cli'; mode: 'hang' | 'resume'; target: string }
  /** Sent as `inject {mode, args}` to daemon `target`, which answers with `inject.reply`. */
  | { by: 'daemon'; mode: string; args: string[]; target: ProcessId }
  /** Sent as `inject {mode, args}` to the agent of a node: the one named, or for a task process
   *  `proc` (`t3/0`) the one the cluster view says it runs on. */
  | { by: 'agent'; mode: 'slow' | 'heal'; args: string[]; at: { node: string; agent: ProcessId } | { proc: string } };

/** The flags of `inject slow`, as typed (commander hands them over unchecked). */
export type InjectFlags = { share?: string | undefined; for?: string | undefined; period?: string | undefined };

/** What `hang` and `resume` accept besides a daemon id. */
export const PID_PATTERN = /^[1-9][0-9]{0,9}$/;
export const TASK_PROC_PATTERN = /^t[1-9][0-9]*\/(0|[1-9][0-9]*)$/;

const usage = (message: string) => new CliError(message, EXIT_USAGE);

/** `kill-replica R, kill-agent N, …`: every mode with its arguments. */
export function modeList(): string {
  return INJECT_MODES.map((m) => `${m.mode} ${m.usage}`).join(', ');
}

/** The mode, with the right number of arguments. */
export function requireMode(mode: string, args: readonly string[]): InjectModeSpec {
  const spec = injectModeSpec(mode);
  if (spec === null) throw usage(`unknown inject mode ${quoted(mode)}: use one of ${modeList()}`);
  if (args.length < spec.minArgs || args.length > spec.maxArgs) {
    throw usage(`inject ${mode} takes ${spec.usage} (${spec.summary}), got ${args.length === 0 ? 'no arguments' : excerpt(args.join(' '))}: e.g. \`trine inject ${example(spec)}\``);
  }
  for (const a of args) if (a.length > MAX_ARG_CHARS) throw usage(`an argument of inject ${mode} has ${a.length} characters, at most ${MAX_ARG_CHARS} are allowed`);
  return spec;
}

function example(spec: InjectModeSpec): string {
  const sample: Record<string, string> = {
    'kill-replica': 'r2', 'kill-agent': 'n2', 'kill-node': 'n4', hang: '12345', resume: '12345', drop: 'r1 r3', delay: 'r1 r3 200',
    heal: 'r1 r3', 'corrupt-replica': 'r2', 'byzantine-replica': 'r2 MODE', slow: 't3/0 --share 25',
  };
  return `${spec.mode} ${sample[spec.mode] ?? spec.usage}`;
}

const idsOf = (config: ClusterConfig, kinds: readonly ProcessKind[]) => config.processes.filter((p) => kinds.includes(p.kind)).map((p) => p.id);
const nodesOf = (config: ClusterConfig) => config.membership.agents.map((a) => a.node);

function replicaArg(config: ClusterConfig, mode: string, value: string): ProcessId {
  const replicas = idsOf(config, ['replica']);
  if (!replicas.includes(value)) throw usage(`inject ${mode}: ${quoted(value)} is not a replica of this cluster: use one of ${replicas.join(', ')}`);
  return value;
}

/** A node, named `nK` or by its agent `aK`. */
function nodeArg(config: ClusterConfig, mode: string, value: string): { node: string; agent: ProcessId } {
  const a = config.membership.agents.find((x) => x.node === value || x.id === value);
  if (a === undefined) {
    throw usage(`inject ${mode}: ${quoted(value)} is not a node of this cluster: use one of ${nodesOf(config).join(', ')} (or its agent a1, a2, …)`);
  }
  return { node: a.node, agent: a.id };
}

/** A daemon at one end of a link (A or B of drop, delay, heal). */
function daemonArg(config: ClusterConfig, mode: string, value: string): ProcessId {
  const daemons = idsOf(config, ['replica', 'watchdog', 'agent']);
  if (!daemons.includes(value)) throw usage(`inject ${mode}: ${quoted(value)} is not a daemon of this cluster: use one of ${daemons.join(', ')}`);
  return value;
}

/** What `slow` and a one-argument `heal` act on: a node (by `nK` or its agent `aK`) or a task
 *  process `t3/0`. */
function slowTarget(config: ClusterConfig, mode: string, value: string): { node: string; agent: ProcessId } | { proc: string } {
  if (TASK_PROC_PATTERN.test(value)) return { proc: value };
  const a = config.membership.agents.find((x) => x.node === value || x.id === value);
  if (a === undefined) {
    throw usage(`inject ${mode}: ${quoted(value)} is neither a task process (t3/0) nor a node of this cluster (${nodesOf(config).join(', ')}): e.g. \`trine inject ${mode} t3/0${mode === 'slow' ? ' --share 25' : ''}\``);
  }
  return { node: a.node, agent: a.id };
}

/** `inject slow T --share P [--for MS] [--period MS]`: the arguments sent to T's agent, `[T, P]`,
 *  `[T, P, FOR]`, or with --period `[T, P, FOR|'', PERIOD]` (src/daemon/inject-slow.ts reads them):
 *  what was not typed is left off, so the plain forms are what they were before --period. */
function slowArgs(target: string, flags: InjectFlags): string[] {
  const share = flags.share;
  if (share === undefined) {
    throw usage(`inject slow needs --share P, the share of CPU ${target} keeps, an integer from ${MIN_SLOW_SHARE_PERCENT} to ${MAX_SLOW_SHARE_PERCENT}: e.g. \`trine inject slow ${target} --share 25\``);
  }
  const p = parseSharePercent(share);
  if (p === null) {
    throw usage(`inject slow: --share must be an integer from ${MIN_SLOW_SHARE_PERCENT} to ${MAX_SLOW_SHARE_PERCENT} (the % of CPU ${target} keeps), got ${quoted(share)}: e.g. \`--share 25\``);
  }
  let periodMs = DEFAULT_SLOW_PERIOD_MS;
  if (flags.period !== undefined) {
    const parsed = parseSlowPeriodMs(flags.period);
    if (parsed === null) {
      throw usage(`inject slow: --period must be an integer number of ms from ${MIN_SLOW_PERIOD_MS} to ${MAX_SLOW_PERIOD_MS} (one run + stop), got ${quoted(flags.period)}: e.g. \`--period 2000\` to stop ${target} for seconds at a time, or no --period for ${DEFAULT_SLOW_PERIOD_MS}`);
    }
    periodMs = parsed;
  }
  let forMs: number | null = null;
  if (flags.for !== undefined) {
    forMs = parseSlowForMs(flags.for, periodMs);
    if (forMs === null) {
      const from = flags.period === undefined ? `${periodMs}` : `${periodMs} (one --period)`;
      throw usage(`inject slow: --for must be an integer number of ms from ${from} to ${MAX_SLOW_FOR_MS}, got ${quoted(flags.for)}: e.g. \`--for 5000\` for 5 s, or no --for to slow it until \`trine inject heal ${target}\``);
    }
  }
  if (flags.period === undefined) return forMs === null ? [target, String(p)] : [target, String(p), String(forMs)];
  return [target, String(p), forMs === null ? '' : String(forMs), String(periodMs)];
}

/** The plan for `mode args` on the cluster `config` (see the header). */
export function planInject(spec: InjectModeSpec, args: readonly string[], config: ClusterConfig, flags: InjectFlags = {}): InjectPlan {
  const mode = spec.mode;
  const arg = (i: number): string => args[i] as string; // arity checked by requireMode
  if (mode !== 'slow' && (flags.share !== undefined || flags.for !== undefined || flags.period !== undefined)) {
    throw usage(`inject ${mode} takes no --share, --for or --period: they go with inject slow, e.g. \`trine inject slow t3/0 --share 25 --for 5000 --period 500\``);
  }
  if (mode === 'slow') {
    const at = slowTarget(config, mode, arg(0));
    return { by: 'agent', mode, args: slowArgs(arg(0), flags), at };
  }
  if (mode === 'heal' && args.length === 1) return { by: 'agent', mode, args: [arg(0)], at: slowTarget(config, mode, arg(0)) };
  switch (mode) {
    case 'kill-replica':
      return { by: 'cli', mode, replica: replicaArg(config, mode, arg(0)) };
    case 'kill-agent': {
      const { node, agent } = nodeArg(config, mode, arg(0));
      return { by: 'cli', mode, agent, node };
    }
    case 'kill-node':
      return { by: 'cli', mode, node: nodeArg(config, mode, arg(0)).node };
    case 'hang':
    case 'resume': {
      const t = arg(0);
      const names = idsOf(config, ['replica', 'watchdog', 'agent']);
      if (!PID_PATTERN.test(t) && !TASK_PROC_PATTERN.test(t) && !names.includes(t)) {
        throw usage(`inject ${mode}: ${quoted(t)} is neither a pid, a daemon (${names.join(', ')}) nor a task process (t3/0)`);
      }
      return { by: 'cli', mode, target: t };
    }
    case 'drop':
    case 'delay':
    case 'heal': {
      const a = daemonArg(config, mode, arg(0));
      const b = daemonArg(config, mode, arg(1));
      if (!linked(config, a, b)) {
        throw usage(`inject ${mode}: ${a} and ${b} exchange no frames: one end must be a replica (replicas talk to each other, to every agent and to the watchdog)`);
      }
      if (mode === 'delay') {
        const ms = arg(2);
        const n = /^[0-9]{1,6}$/.test(ms) ? Number(ms) : NaN;
        if (!(n >= 1 && n <= MAX_INJECT_DELAY_MS)) throw usage(`inject delay: MS must be an integer from 1 to ${MAX_INJECT_DELAY_MS}, got ${quoted(ms)}`);
      }
      // The sender when the operator can reach it; an agent (listening nowhere) is reached
      // through the replica at the other end, which then acts on what arrives from it.
      const reachable = idsOf(config, ['replica', 'watchdog']);
      return { by: 'daemon', mode, args: [...args], target: reachable.includes(a) ? a : b };
    }
    case 'corrupt-replica':
    case 'byzantine-replica':
      return { by: 'daemon', mode, args: [...args], target: replicaArg(config, mode, arg(0)) };
    default: {
      // Any other daemon mode goes to the daemon its first argument names.
      const reachable = idsOf(config, ['replica', 'watchdog']);
      const target = args[0];
      if (spec.by !== 'daemon' || target === undefined || !reachable.includes(target)) {
        throw usage(`inject ${mode}: its first argument must name a replica or the watchdog (${reachable.join(', ')}), got ${quoted(target ?? '')}`);
      }
      return { by: 'daemon', mode, args: [...args], target };
    }
  }
}
