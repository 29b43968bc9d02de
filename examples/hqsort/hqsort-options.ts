// The distributed HyperQuickSort's command line (examples/hqsort/hqsort.ts): a total parse that
// names the fix for anything it refuses, so every rank of a task stops the same way (exit 2).
import { MAX_COUNT, MAX_SEED } from './hqsort-plan.ts';

export type HqsortOptions = {
  /** The input's seed: every process regenerates any list from it. */
  readonly seed: number;
  /** Numbers in all, split evenly over the virtual ranks. */
  readonly count: number;
  /** Ignore the DGRP: every round uses every process, waiting for the slowest (the baseline). */
  readonly noDgrp: boolean;
  /** One JSON line per round on stdout (round, members, held virtual ranks, ms). */
  readonly trace: boolean;
};

export const HQSORT_DEFAULTS: HqsortOptions = { seed: 1, count: 1_000_000, noDgrp: false, trace: false };

export const HQSORT_USAGE = `usage: hqsort [--seed N] [--count N] [--no-dgrp] [--trace]
  HyperQuickSort (spec mpichv-dgrp 2.2.7) on a linked Trine task of 2^d processes, remapped on the
  DGRP's members at every round. Submit with --linked --dgrp, e.g.:
    trine submit --linked --dgrp -n 4 -- node --import tsx examples/hqsort/hqsort.ts --count 2000000
  --seed N     input seed, 0..${MAX_SEED} (default ${HQSORT_DEFAULTS.seed})
  --count N    numbers to sort in all, 0..${MAX_COUNT} (default ${HQSORT_DEFAULTS.count})
  --no-dgrp    ignore the group: every round waits for every process (the baseline)
  --trace      JSON lines on each process's stdout: each round's start and end
  --help       this text`;

export type ParsedArgs =
  | { readonly type: 'run'; readonly options: HqsortOptions }
  | { readonly type: 'help' }
  | { readonly type: 'error'; readonly message: string };

function integer(name: string, text: string | undefined, max: number): number | string {
  if (text === undefined) return `--${name} needs a value: --${name} N`;
  const n = Number(text);
  if (text.trim() === '' || !Number.isSafeInteger(n) || n < 0 || n > max) return `--${name} needs an integer from 0 to ${max}, not ${JSON.stringify(text)}`;
  return n;
}

/** Parses argv (without node and the script). */
export function parseHqsortArgs(argv: readonly string[]): ParsedArgs {
  let options: HqsortOptions = HQSORT_DEFAULTS;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    if (arg === '--help' || arg === '-h') return { type: 'help' };
    if (arg === '--no-dgrp') options = { ...options, noDgrp: true };
    else if (arg === '--trace') options = { ...options, trace: true };
    else if (arg === '--seed' || arg === '--count') {
      const name = arg.slice(2);
      const n = integer(name, argv[++i], name === 'seed' ? MAX_SEED : MAX_COUNT);
      if (typeof n === 'string') return { type: 'error', message: n };
      options = name === 'seed' ? { ...options, seed: n } : { ...options, count: n };
    } else return { type: 'error', message: `unknown option ${JSON.stringify(arg)}: see --help (options: --seed N, --count N, --no-dgrp, --trace)` };
  }
  return { type: 'run', options };
}
