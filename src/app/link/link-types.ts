// The link's public types (what `trine/app` exports with Link) and the check of its options.
// Link (link.ts) holds the state; lifecycle.ts its states and their transitions.
import type { Signal } from '../../core/signals.ts';
import { MAX_ENDPOINT_CHARS } from '../../core/wire/app-wire.ts';
import { LinkError } from './errors.ts';
import { INIT_TIMEOUT_MS } from './limits.ts';

/** A signal as handlers see it: `node` and `data` carry GSIG_REP_SPAWNED's new member (its node
 *  and "host:port"), empty otherwise. */
export type DeliveredSignal = Signal & { readonly node: string; readonly data: string };
/** Spec §4.2's handler(signum, srcpid, destpid, arg), plus the whole signal. Runs on the main
 *  thread, atomically with respect to other handlers; it must not block. */
export type SignalHandler = (signum: number, src: number, dest: number, arg: number, signal: DeliveredSignal) => void;

export type LinkOptions = {
  /** "host:port" of this process's G-MPI listener, sent in the hello. */
  readonly endpoint?: string;
  /** Where TRINE_* come from (default process.env). */
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly initTimeoutMs?: number;
};

export type LinkStats = { readonly delivered: number; readonly droppedSignals: number; readonly queued: number };

/** The options init uses, checked: BAD_OPTION names the one that is wrong. */
export function checkLinkOptions(opts: LinkOptions): { readonly endpoint: string; readonly timeoutMs: number } {
  const endpoint = opts.endpoint ?? '';
  if (typeof endpoint !== 'string' || endpoint.length > MAX_ENDPOINT_CHARS || !/^[\x21-\x7e]*$/.test(endpoint)) {
    throw new LinkError('BAD_OPTION', `endpoint must be a "host:port" string of at most ${MAX_ENDPOINT_CHARS} printable ASCII characters`);
  }
  const timeoutMs = opts.initTimeoutMs ?? INIT_TIMEOUT_MS;
  if (!Number.isSafeInteger(timeoutMs) || timeoutMs < 1) throw new LinkError('BAD_OPTION', `initTimeoutMs must be a positive integer`);
  return { endpoint, timeoutMs };
}
