// Who awaits what from the link: waitSignal() callers (the next delivered signal, spec §5.4
// G_MPI_Signal_wait) and requestOutcome() callers (the next outcome of our requests, spec
// §4.4), plus outcomes that arrived before anyone asked. All bounded (limits.ts).
import { LinkError } from './errors.ts';
import { MAX_UNREAD_OUTCOMES, MAX_WAITERS } from './limits.ts';
import type { RequestOutcome } from './requests.ts';

type Waiter<T> = { resolve: (v: T) => void; reject: (e: LinkError) => void };

export class Waiters<S> {
  private signals: Waiter<S>[] = [];
  private outcomes: Waiter<RequestOutcome>[] = [];
  private unread: RequestOutcome[] = [];

  /** Someone awaits the agent (keeps the process alive). */
  get pending(): boolean {
    return this.signals.length > 0 || this.outcomes.length > 0;
  }

  nextSignal(): Promise<S> {
    if (this.signals.length >= MAX_WAITERS) throw new LinkError('LIMIT', `more than ${MAX_WAITERS} pending waitSignal() calls`);
    return new Promise<S>((resolve, reject) => this.signals.push({ resolve, reject }));
  }

  /** An unread outcome at once, else the next one; `busy`: a request is outstanding or acked. */
  nextOutcome(busy: boolean): Promise<RequestOutcome> | null {
    const first = this.unread.shift();
    if (first !== undefined) return Promise.resolve(first);
    if (!busy) return null;
    if (this.outcomes.length >= MAX_WAITERS) throw new LinkError('LIMIT', `more than ${MAX_WAITERS} pending requestOutcome() calls`);
    return new Promise<RequestOutcome>((resolve, reject) => this.outcomes.push({ resolve, reject }));
  }

  /** A new request: unread outcomes of older ones are stale. */
  newRequest(): void {
    this.unread = [];
  }

  /** Returns whether anyone was waiting. */
  signalDelivered(s: S): boolean {
    const waiters = this.signals;
    if (waiters.length === 0) return false;
    this.signals = [];
    for (const w of waiters) w.resolve(s);
    return true;
  }

  /** Resolve the waiters, or keep it unread; returns whether anyone was waiting. */
  outcome(o: RequestOutcome): boolean {
    const waiters = this.outcomes;
    if (waiters.length === 0) {
      this.unread.push(o);
      if (this.unread.length > MAX_UNREAD_OUTCOMES) this.unread.shift();
      return false;
    }
    this.outcomes = [];
    for (const w of waiters) w.resolve(o);
    return true;
  }

  rejectAll(e: LinkError): void {
    const all = [...this.signals, ...this.outcomes];
    this.signals = [];
    this.outcomes = [];
    for (const w of all) w.reject(e);
  }
}
