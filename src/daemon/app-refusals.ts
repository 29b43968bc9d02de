// What strangers at the agent's application socket may cost it (issue 14 item 8; PROTOCOL §9.4):
// a token bucket for refusals answered with their reason, and one log line per interval for
// every connection that ended before a hello was accepted (src/daemon/app-socket.ts).
//
// Any local user can connect to the abstract socket. Before this, every wrong token cost a
// refusal frame, a linger timer and two log lines: 3,700 guesses a second filled the agent's
// log. A guess cannot succeed (a token is 128 random bits), so what needs a bound is what a
// guess costs, and no bound may keep out the process whose token is right. That is why the
// socket checks every hello (a map lookup and a comparison: cheaper than anything that could
// come before it) and this file bounds only what follows a refusal. A limit that closed
// connections unchecked could not tell the right process from the guessers: Node gives no
// peer credentials (SO_PEERCRED) on a Unix socket, an abstract socket has no file permissions,
// and the (task, VPID) a hello names is as easy for a guesser to give as for the process. It
// would keep the right process out for as long as the flood lasts.
import { assert } from '../base/result.ts';

/** Refusals answered with their reason in a burst. A task start whose processes are refused
 *  (a predecessor's process with a dead token, a duplicate) is a handful of processes at once;
 *  8 tells each why. A guesser empties the bucket in milliseconds and is then cut off cheaply:
 *  its connection is destroyed, with no frame and no timer. */
export const REFUSAL_BURST = 8;
/** The bucket refills at this rate: one answered refusal a second is plenty for a process that
 *  is misconfigured, and costs nothing under a flood. */
export const REFUSALS_PER_SECOND = 1;
/** Connections that end unidentified (refused, timed out, malformed, dropped as the oldest) are
 *  logged as one line per interval with their counts: a flood of any rate writes 12 lines a
 *  minute, and a lone refusal is still logged at once. */
export const REFUSAL_LOG_INTERVAL_MS = 5_000;

/** One refusal, as the first of an interval's line shows it. */
export type RefusalSample<C extends string> = { readonly code: C; readonly task: string | null; readonly vpid: number | null; readonly reason: string };

/** The line: connections that ended before a hello was accepted since the last one, by code,
 *  how many of them got no answer (past the bucket), the first one, and when it ended (wall
 *  clock, ms since the epoch). */
export type RefusalsLine<C extends string> = {
  readonly count: number;
  readonly codes: Readonly<Partial<Record<C, number>>>;
  readonly unanswered: number;
  readonly first: RefusalSample<C>;
  readonly sinceMs: number;
};

export type RefusalsOptions<C extends string> = {
  readonly burst?: number;
  readonly perSecond?: number;
  readonly logIntervalMs?: number;
  readonly log: (line: RefusalsLine<C>) => void;
};

type Tally<C extends string> = { count: number; codes: Partial<Record<C, number>>; unanswered: number; first: RefusalSample<C>; sinceMs: number };

/** One socket's bucket and tally. Times are monotonic (performance.now): a wall clock stepped
 *  back must not stall the bucket or the next line. */
export class Refusals<C extends string> {
  private readonly burst: number;
  private readonly perSecond: number;
  private readonly logIntervalMs: number;
  private tokens: number;
  private refilledAtMs = performance.now();
  private tally: Tally<C> | null = null;
  private loggedAtMs = -Infinity;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly opts: RefusalsOptions<C>) {
    this.burst = opts.burst ?? REFUSAL_BURST;
    this.perSecond = opts.perSecond ?? REFUSALS_PER_SECOND;
    this.logIntervalMs = opts.logIntervalMs ?? REFUSAL_LOG_INTERVAL_MS;
    assert(this.burst >= 1 && this.perSecond > 0 && this.logIntervalMs > 0, 'refusals: bad limits');
    this.tokens = this.burst;
  }

  /** Whether this refusal may be answered with its reason (a token is taken); false: destroy
   *  the connection without an answer. */
  mayAnswer(): boolean {
    const nowMs = performance.now();
    this.tokens = Math.min(this.burst, this.tokens + Math.max(0, ((nowMs - this.refilledAtMs) / 1000) * this.perSecond));
    this.refilledAtMs = nowMs;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }

  /** Count an unidentified connection's end. The line goes out now if none did for an
   *  interval, else when the interval is over. */
  count(sample: RefusalSample<C>, unanswered: boolean): void {
    const nowMs = performance.now();
    const codes: Partial<Record<C, number>> = {};
    const t = (this.tally ??= { count: 0, codes, unanswered: 0, first: sample, sinceMs: Date.now() });
    t.count++;
    if (unanswered) t.unanswered++;
    t.codes[sample.code] = (t.codes[sample.code] ?? 0) + 1;
    const dueMs = this.loggedAtMs + this.logIntervalMs;
    if (nowMs >= dueMs) return this.flush();
    if (this.timer === null && !this.closed) {
      this.timer = setTimeout(() => {
        this.timer = null;
        this.flush();
      }, dueMs - nowMs);
      this.timer.unref();
    }
  }

  /** Log what is counted and stop the timer: the socket is closing. */
  close(): void {
    this.closed = true;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.flush();
  }

  private flush(): void {
    const t = this.tally;
    if (t === null) return;
    assert(t.count > 0, 'refusals: a tally without a refusal');
    this.tally = null;
    this.loggedAtMs = performance.now();
    this.opts.log({ count: t.count, codes: t.codes, unanswered: t.unanswered, first: t.first, sinceMs: t.sinceMs });
  }
}
