// Checking what the operator typed for the task commands (`submit`, `ps`, `kill`, `logs`):
// task ids, the command after `--`, `--env K=V`, the recovery options (`--recovery` and the
// rollback ones, docs/PROTOCOL.md §11.1), and the `task.submit` request built from them.
// Pure (no I/O): every problem is a CliError with exit code 2 whose one line says what to type
// instead, and a request that passes is one every correct replica accepts (the same schema and
// limits the replicas decode with, src/core/wire/messages.ts).
import { randomBytes } from 'node:crypto';
import { basename, isAbsolute, resolve } from 'node:path';
import {
  MAX_ARG_CHARS, MAX_ARGS, MAX_ENV_ENTRIES, MAX_ID_CHARS, MAX_PATH_CHARS, MAX_TASK_PROCS, ROLLBACK_DEFAULT_INTERVAL_MS, ROLLBACK_DEFAULT_STATE_BYTES,
  ROLLBACK_MAX_INTERVAL_MS, ROLLBACK_MAX_STATE_BYTES, ROLLBACK_MIN_INTERVAL_MS, TASK_KEY_BYTES,
  DGRP_DEFAULT_FACTOR_PERCENT, DGRP_DEFAULT_INITIAL_THRESHOLD_MS, DGRP_DEFAULT_INTERVAL_MS, DGRP_DEFAULT_MARGIN_MS, DGRP_DEFAULT_ZETA,
  DGRP_MAX_FACTOR_PERCENT, DGRP_MAX_INITIAL_THRESHOLD_MS, DGRP_MAX_INTERVAL_MS, DGRP_MAX_MARGIN_MS, DGRP_MAX_ZETA, DGRP_MIN_FACTOR_PERCENT,
  DGRP_MIN_INTERVAL_MS, STRAGGLER_DEFAULT_AFTER_PERMILLE, STRAGGLER_DEFAULT_FACTOR_HUNDREDTHS, STRAGGLER_MAX_AFTER_PERMILLE,
  STRAGGLER_MAX_FACTOR_HUNDREDTHS, STRAGGLER_MIN_AFTER_PERMILLE, STRAGGLER_MIN_FACTOR_HUNDREDTHS,
} from '../src/core/constants.ts';
import {
  agentRequest, ROLLBACK_CHECKPOINTS, ROLLBACK_LOGGINGS, type DgrpOptions, type EnvEntry, type Recovery, type StragglerOptions, type TaskSubmit,
} from '../src/core/wire/messages.ts';
import { defaultMaxSpawns } from '../src/core/cluster-signals.ts';
import { CliError, EXIT_USAGE, quoted } from './errors.ts';

/** Task ids as the group assigns them (PROTOCOL §8.2; the `taskId` schema). */
export const TASK_ID_PATTERN = /^t[1-9][0-9]*$/;
/** A task name is a label for people; the wire allows this many characters. */
export const MAX_TASK_NAME_CHARS = MAX_ID_CHARS * 2;
const ENV_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const usage = (message: string) => new CliError(message, EXIT_USAGE);

export function parseTaskId(value: string): string {
  if (!TASK_ID_PATTERN.test(value) || value.length > MAX_ID_CHARS) {
    throw usage(`bad task id ${quoted(value)}: task ids look like t1, t2, …; see \`trine ps\``);
  }
  return value;
}

/** The command of `trine submit`: it must follow `--`, so that its options are never taken
 *  for trine's (`trine submit -n 2 -- ./worker --threads 4`). */
export function requireCommand(command: readonly string[], sawDashDash: boolean): string[] {
  const example = 'e.g. `trine submit -n 2 -- sleep 10`';
  if (command.length === 0) throw usage(`submit needs a command after \`--\`: ${example}`);
  if (!sawDashDash) throw usage(`put the command after \`--\` so its options are not taken for trine's: ${example}`);
  return [...command];
}

/** `--env K=V` entries → sorted, unique [name, value] pairs (the canonical wire form). */
export function parseEnv(entries: readonly string[]): EnvEntry[] {
  if (entries.length > MAX_ENV_ENTRIES) throw usage(`${entries.length} --env entries, at most ${MAX_ENV_ENTRIES} are allowed`);
  const byName = new Map<string, string>();
  for (const e of entries) {
    const eq = e.indexOf('=');
    if (eq < 0) throw usage(`--env ${quoted(e)} has no '=': write --env NAME=VALUE`);
    const name = e.slice(0, eq);
    const value = e.slice(eq + 1);
    if (!ENV_NAME_PATTERN.test(name)) throw usage(`--env ${quoted(e)}: ${quoted(name)} is not a variable name (letters, digits and _, not starting with a digit)`);
    if (byName.has(name)) throw usage(`--env ${name} is given twice: give each variable once`);
    if (value.length > MAX_ARG_CHARS) throw usage(`--env ${name}: the value has ${value.length} characters, at most ${MAX_ARG_CHARS} are allowed`);
    byName.set(name, value);
  }
  return [...byName.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

export type SubmitInput = {
  command: readonly string[];
  size: number;
  name: string | undefined;
  env: readonly string[];
  /** `--cwd` as typed (relative to `baseCwd`), or undefined for `baseCwd` itself. */
  cwd: string | undefined;
  /** The CLI's own working directory. */
  baseCwd: string;
  nonce: string;
  /** The task's G-MPI key, drawn at random by the caller like the nonce (PROTOCOL §9.5). */
  taskKey: Uint8Array;
  /** `--linked`: the processes link the application library (PROTOCOL §9). */
  linked?: boolean | undefined;
  /** The recovery options as typed (PROTOCOL §11.1); see parseRecovery. */
  recovery?: RecoveryInput | undefined;
  /** The DGRP options as typed (PROTOCOL §12.1); see parseDgrp. */
  dgrp?: DgrpInput | undefined;
  /** The straggler policy as typed (PROTOCOL §13.1); see parseStraggler. */
  straggler?: StragglerInput | undefined;
  /** `--max-spawns`: SPAWNs allowed per start; default DEFAULT_SPAWNS_PER_PROCESS per process. */
  maxSpawns?: number | undefined;
};

/** `--straggler`, `--straggler-factor`, `--straggler-after`, as typed. */
export type StragglerInput = {
  straggler?: boolean | undefined;
  factor?: string | undefined;
  after?: string | undefined;
};

/** `--dgrp` and `--dgrp-interval`, `--dgrp-zeta`, `--dgrp-factor`, `--dgrp-margin`, `--dgrp-initial`, as typed. */
export type DgrpInput = {
  dgrp?: boolean | undefined;
  interval?: string | undefined;
  zeta?: string | undefined;
  factor?: string | undefined;
  margin?: string | undefined;
  initial?: string | undefined;
};

/** `--recovery`, `--logging`, `--checkpoint`, `--checkpoint-interval`, `--max-state`, as typed. */
export type RecoveryInput = {
  recovery?: string | undefined;
  logging?: string | undefined;
  checkpoint?: string | undefined;
  checkpointInterval?: string | undefined;
  maxState?: string | undefined;
};

/** A whole number of at most 2^53 − 1 typed in decimal, or NaN. */
const wholeNumber = (value: string): number => (/^[0-9]{1,16}$/.test(value) ? Number(value) : NaN);

function pick<const V extends string>(flag: string, value: string, values: readonly V[]): V {
  if ((values as readonly string[]).includes(value)) return value as V;
  throw usage(`${flag} ${quoted(value)} is not one of ${values.join(', ')}: write e.g. ${flag} ${values[0] ?? ''}`);
}

function bounded(flag: string, value: string, min: number, max: number, unit: string): number {
  const n = wholeNumber(value);
  if (!Number.isSafeInteger(n) || n < min || n > max) {
    throw usage(`${flag} ${quoted(value)}: give a whole number of ${unit} from ${min} to ${max}`);
  }
  return n;
}

/** The task's recovery (PROTOCOL §11.1): `app` unless `--recovery rollback`, whose options
 *  default to RADIC's receiver-based logging, uncoordinated checkpoints, every
 *  ROLLBACK_DEFAULT_INTERVAL_MS, and ROLLBACK_DEFAULT_STATE_BYTES of state per rank. Rollback
 *  needs `--linked`; the rollback options need `--recovery rollback`. */
export function parseRecovery(input: RecoveryInput, linked: boolean): Recovery {
  const kind = pick('--recovery', input.recovery ?? 'app', ['app', 'rollback'] as const);
  if (kind === 'app') {
    const stray = (['logging', 'checkpoint', 'checkpointInterval', 'maxState'] as const).find((k) => input[k] !== undefined);
    if (stray !== undefined) {
      const flag = { logging: '--logging', checkpoint: '--checkpoint', checkpointInterval: '--checkpoint-interval', maxState: '--max-state' }[stray];
      throw usage(`${flag} applies to rollback recovery only: add --recovery rollback (and --linked), or drop ${flag}`);
    }
    return { kind: 'app' };
  }
  if (!linked) throw usage('--recovery rollback needs a linked task: add --linked (its processes must use the application library)');
  return {
    kind: 'rollback',
    logging: pick('--logging', input.logging ?? 'rbml', ROLLBACK_LOGGINGS),
    checkpoint: pick('--checkpoint', input.checkpoint ?? 'nco', ROLLBACK_CHECKPOINTS),
    intervalMs: input.checkpointInterval === undefined
      ? ROLLBACK_DEFAULT_INTERVAL_MS
      : bounded('--checkpoint-interval', input.checkpointInterval, ROLLBACK_MIN_INTERVAL_MS, ROLLBACK_MAX_INTERVAL_MS, 'milliseconds'),
    maxStateBytes: input.maxState === undefined
      ? ROLLBACK_DEFAULT_STATE_BYTES
      : bounded('--max-state', input.maxState, 1, ROLLBACK_MAX_STATE_BYTES, 'bytes'),
  };
}

/** The task's dynamic group of recommended processes (PROTOCOL §12.1), or null without
 *  `--dgrp`. The defaults are the paper's (spec 2.2): tests every 1 s, ζ = 5, the timeout × 2.5,
 *  8 s before the first reply; plus DGRP_DEFAULT_MARGIN_MS. `--dgrp-factor` is a decimal
 *  (2.5), kept in hundredths. */
export function parseDgrp(input: DgrpInput, linked: boolean): DgrpOptions | null {
  if (input.dgrp !== true) {
    const stray = (['interval', 'zeta', 'factor', 'margin', 'initial'] as const).find((k) => input[k] !== undefined);
    if (stray !== undefined) throw usage(`--dgrp-${stray} applies to a DGRP task only: add --dgrp (and --linked), or drop --dgrp-${stray}`);
    return null;
  }
  if (!linked) throw usage('--dgrp needs a linked task: add --linked (its processes test each other through the application library)');
  let factorPercent = DGRP_DEFAULT_FACTOR_PERCENT;
  if (input.factor !== undefined) {
    const f = /^[0-9]{1,3}(\.[0-9]{1,2})?$/.test(input.factor) ? Math.round(Number(input.factor) * 100) : NaN;
    if (!(f >= DGRP_MIN_FACTOR_PERCENT && f <= DGRP_MAX_FACTOR_PERCENT)) {
      throw usage(`--dgrp-factor ${quoted(input.factor)}: give a number from ${DGRP_MIN_FACTOR_PERCENT / 100} to ${DGRP_MAX_FACTOR_PERCENT / 100} with at most two decimals, e.g. 2.5`);
    }
    factorPercent = f;
  }
  const opt = (flag: string, value: string | undefined, dflt: number, min: number, max: number, unit: string) =>
    (value === undefined ? dflt : bounded(flag, value, min, max, unit));
  return {
    intervalMs: opt('--dgrp-interval', input.interval, DGRP_DEFAULT_INTERVAL_MS, DGRP_MIN_INTERVAL_MS, DGRP_MAX_INTERVAL_MS, 'milliseconds'),
    zeta: opt('--dgrp-zeta', input.zeta, DGRP_DEFAULT_ZETA, 1, DGRP_MAX_ZETA, 'testing intervals'),
    factorPercent,
    marginMs: opt('--dgrp-margin', input.margin, DGRP_DEFAULT_MARGIN_MS, 0, DGRP_MAX_MARGIN_MS, 'milliseconds'),
    initialThresholdMs: opt('--dgrp-initial', input.initial, DGRP_DEFAULT_INITIAL_THRESHOLD_MS, 1, DGRP_MAX_INITIAL_THRESHOLD_MS, 'milliseconds'),
  };
}

/** A decimal with at most `decimals` decimals, scaled to an integer (1.5 → 150 for 2), or NaN. */
function scaledDecimal(value: string, decimals: number): number {
  const m = /^([0-9]{1,6})(?:\.([0-9]+))?$/.exec(value);
  if (m === null || (m[2] ?? '').length > decimals) return NaN;
  return Number(m[1]) * 10 ** decimals + Number((m[2] ?? '').padEnd(decimals, '0'));
}

/** The task's straggler policy (PROTOCOL §13.1), or null. `--straggler` asks for it with the
 *  defaults (Spark's multiplier 1.5; judged once the median process is half done);
 *  `--straggler-factor K` and `--straggler-after Q` ask for it too, with their value. Kept as
 *  integers: the factor in hundredths, the share in permille. Needs `--linked`. */
export function parseStraggler(input: StragglerInput, linked: boolean): StragglerOptions | null {
  if (input.straggler !== true && input.factor === undefined && input.after === undefined) return null;
  if (!linked) throw usage('a straggler policy needs a linked task: add --linked (its processes report their progress through the application library)');
  let factorHundredths = STRAGGLER_DEFAULT_FACTOR_HUNDREDTHS;
  if (input.factor !== undefined) {
    const f = scaledDecimal(input.factor, 2);
    if (!(f >= STRAGGLER_MIN_FACTOR_HUNDREDTHS && f <= STRAGGLER_MAX_FACTOR_HUNDREDTHS)) {
      throw usage(`--straggler-factor ${quoted(input.factor)}: give a number from ${STRAGGLER_MIN_FACTOR_HUNDREDTHS / 100} to ${STRAGGLER_MAX_FACTOR_HUNDREDTHS / 100} with at most two decimals, e.g. 1.5`);
    }
    factorHundredths = f;
  }
  let afterPermille = STRAGGLER_DEFAULT_AFTER_PERMILLE;
  if (input.after !== undefined) {
    const a = scaledDecimal(input.after, 3);
    if (!(a >= STRAGGLER_MIN_AFTER_PERMILLE && a <= STRAGGLER_MAX_AFTER_PERMILLE)) {
      throw usage(`--straggler-after ${quoted(input.after)}: give the share of the work as a fraction from ${STRAGGLER_MIN_AFTER_PERMILLE / 1000} to ${STRAGGLER_MAX_AFTER_PERMILLE / 1000} with at most three decimals, e.g. 0.5`);
    }
    afterPermille = a;
  }
  return { factorHundredths, afterPermille };
}

/** A fresh task key (PROTOCOL §9.5): 256 random bits only the submitting operator draws. */
export function newTaskKey(): Uint8Array {
  return new Uint8Array(randomBytes(TASK_KEY_BYTES));
}

/** The `task.submit` request: `cwd` absolute; a relative executable path with a '/' made
 *  absolute against it; a bare name passed as given (the agent resolves it on PATH, and a
 *  missing one fails the start with "spawn failed: ENOENT …" — the group's report, not ours). */
export function buildSubmit(input: SubmitInput): TaskSubmit {
  const [first, ...args] = input.command;
  if (first === undefined || first === '') throw usage('submit needs a command after `--`: e.g. `trine submit -n 2 -- sleep 10`');
  if (!Number.isSafeInteger(input.size) || input.size < 1 || input.size > MAX_TASK_PROCS) {
    throw usage(`-n must be an integer from 1 to ${MAX_TASK_PROCS}, got ${input.size}`);
  }
  const cwd = resolve(input.baseCwd, input.cwd ?? '.');
  const file = first.includes('/') && !isAbsolute(first) ? resolve(cwd, first) : first;
  if (cwd.length > MAX_PATH_CHARS) throw usage(`--cwd has ${cwd.length} characters, at most ${MAX_PATH_CHARS} are allowed`);
  if (file.length > MAX_PATH_CHARS) throw usage(`the command path has ${file.length} characters, at most ${MAX_PATH_CHARS} are allowed`);
  if (args.length > MAX_ARGS) throw usage(`the command has ${args.length} arguments, at most ${MAX_ARGS} are allowed`);
  const long = args.findIndex((a) => a.length > MAX_ARG_CHARS);
  if (long >= 0) throw usage(`argument ${long + 1} of the command has ${args[long]?.length} characters, at most ${MAX_ARG_CHARS} are allowed`);
  if (input.name !== undefined && (input.name.length === 0 || input.name.length > MAX_TASK_NAME_CHARS)) {
    throw usage(`--name must have 1 to ${MAX_TASK_NAME_CHARS} characters`);
  }
  const name = input.name ?? basename(file).slice(0, MAX_TASK_NAME_CHARS);
  const linked = input.linked === true;
  const request: TaskSubmit = { type: 'task.submit', nonce: input.nonce, name, size: input.size, file, args, cwd, env: parseEnv(input.env),
    mode: linked ? 'linked' : 'plain', recovery: parseRecovery(input.recovery ?? {}, linked),
    dgrp: parseDgrp(input.dgrp ?? {}, linked), straggler: parseStraggler(input.straggler ?? {}, linked),
    maxSpawns: input.maxSpawns ?? defaultMaxSpawns(input.size), taskKey: input.taskKey,
  };
  // Safety net: the replicas' own decoder, so nothing they would refuse leaves the CLI.
  const texts = [name, file, cwd, ...args, ...request.env.flat()];
  if (texts.some((t) => LONE_SURROGATE.test(t))) throw usage('the command, --name, --cwd or --env holds text that is not valid Unicode: fix the encoding');
  const checked = agentRequest.dec(agentRequest.enc(request), 'submit');
  if (!checked.ok) throw usage(`the request would be refused (${checked.detail}): fix that argument`);
  return request;
}
