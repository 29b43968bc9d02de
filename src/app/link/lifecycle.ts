// The link's lifecycle (spec §7 items 1, 2 and 6): connecting → ready (the mapping came) →
// finalizing → finalized, or lost from connecting or ready. Owns the state, the init promise
// and its timeout, the finalize promise and its timeout, and the gate each state sets on calls
// (requireReady). Link (link.ts) does the effects each transition asks for: tearing down the
// agent connection, rejecting waiters, calling the onLost hook.
import { LinkError } from './errors.ts';

export type LinkState = 'connecting' | 'ready' | 'finalizing' | 'finalized' | 'lost';

type InitWaiter<T> = { readonly resolve: (value: T) => void; readonly reject: (e: LinkError) => void };

export type Lifecycle<T> = {
  state: LinkState;
  initWaiter: InitWaiter<T> | null;
  finalizeDone: Promise<void> | null;
  finalizeResolve: (() => void) | null;
};

export type LoseStep = { readonly kind: 'ignored' } | { readonly kind: 'finalizing' } | { readonly kind: 'lost'; readonly wasReady: boolean };

export function createLifecycle<T>(): Lifecycle<T> {
  return { state: 'connecting', initWaiter: null, finalizeDone: null, finalizeResolve: null };
}

/** Calls that need the agent: the error for any state but ready. */
export function requireReady<T>(lc: Lifecycle<T>): void {
  switch (lc.state) {
    case 'ready':
      return;
    case 'connecting':
      throw new LinkError('LINK_LOST', 'the link is not initialised yet: await Link.init()');
    case 'finalizing':
    case 'finalized':
      throw new LinkError('FINALIZED', 'the link was finalized');
    case 'lost':
      throw new LinkError('LINK_LOST', 'the connection to the agent is lost');
  }
}

/** The promise init returns; `onTimeout` runs if no mapping comes within `timeoutMs`. */
export function awaitInit<T>(lc: Lifecycle<T>, timeoutMs: number, onTimeout: () => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(onTimeout, timeoutMs);
    timer.unref();
    lc.initWaiter = {
      resolve: (l) => {
        clearTimeout(timer);
        resolve(l);
      },
      reject: (e) => {
        clearTimeout(timer);
        reject(e);
      },
    };
  });
}

/** The mapping came: ready; the init waiter to resolve once the caller has set up. */
export function becomeReady<T>(lc: Lifecycle<T>): InitWaiter<T> | null {
  lc.state = 'ready';
  const w = lc.initWaiter;
  lc.initWaiter = null;
  return w;
}

/** finalize(): 'begun' the first time from connecting or ready (the caller says finalize to the
 *  agent), else 'done' (already finalizing, ended or lost). `onTimeout` ends it after
 *  `timeoutMs` if the agent never closes. */
export function beginFinalize<T>(lc: Lifecycle<T>, timeoutMs: number, onTimeout: () => void): { readonly kind: 'begun' | 'done'; readonly done: Promise<void> } {
  if (lc.finalizeDone !== null) return { kind: 'done', done: lc.finalizeDone };
  if (lc.state === 'lost' || lc.state === 'finalized') return { kind: 'done', done: Promise.resolve() };
  lc.state = 'finalizing';
  const done = new Promise<void>((resolve) => {
    lc.finalizeResolve = resolve;
  });
  lc.finalizeDone = done;
  const timer = setTimeout(onTimeout, timeoutMs);
  timer.unref();
  void done.then(() => clearTimeout(timer));
  return { kind: 'begun', done };
}

/** The agent closed (or the finalize timeout fired): finalized. The resolver of finalize()'s
 *  promise, to call after tearing down; null if not finalizing. */
export function endFinalize<T>(lc: Lifecycle<T>): (() => void) | null {
  if (lc.state !== 'finalizing') return null;
  lc.state = 'finalized';
  const r = lc.finalizeResolve ?? (() => {});
  lc.finalizeResolve = null;
  return r;
}

/** The link is gone (or never came up), with `e`: 'ignored' once ended, 'finalizing' when
 *  this is the end of a finalize (endFinalize next), else lost, init rejected, and whether it
 *  was ready (only then does the onLost hook run). */
export function loseLink<T>(lc: Lifecycle<T>, e: LinkError): LoseStep {
  if (lc.state === 'lost' || lc.state === 'finalized') return { kind: 'ignored' };
  if (lc.state === 'finalizing') return { kind: 'finalizing' };
  const wasReady = lc.state === 'ready';
  lc.state = 'lost';
  const w = lc.initWaiter;
  lc.initWaiter = null;
  w?.reject(e);
  return { kind: 'lost', wasReady };
}
