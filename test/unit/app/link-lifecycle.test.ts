// lifecycle.ts: the link's states stepped by hand (spec §7 items 1, 2, 6): what each transition
// returns to Link and which calls each state refuses.
import { describe, expect, it } from 'vitest';
import { LinkError } from '../../../src/app/link/errors.ts';
import {
  awaitInit, becomeReady, beginFinalize, createLifecycle, endFinalize, loseLink, requireReady,
} from '../../../src/app/link/lifecycle.ts';

const code = (fn: () => void): string | undefined => {
  try {
    fn();
    return undefined;
  } catch (e) {
    return e instanceof LinkError ? e.code : 'other';
  }
};

describe('link lifecycle', () => {
  it('connecting → ready resolves init; calls pass only while ready', async () => {
    const lc = createLifecycle<string>();
    expect(code(() => requireReady(lc))).toBe('LINK_LOST');
    const init = awaitInit(lc, 60_000, () => {});
    const w = becomeReady(lc);
    expect(lc.state).toBe('ready');
    expect(lc.initWaiter).toBeNull();
    expect(code(() => requireReady(lc))).toBeUndefined();
    w?.resolve('linked');
    await expect(init).resolves.toBe('linked');
  });

  it('lost while connecting rejects init and is not "was ready"; a second loss is ignored', async () => {
    const lc = createLifecycle<string>();
    const init = awaitInit(lc, 60_000, () => {});
    const e = new LinkError('REFUSED', 'no');
    expect(loseLink(lc, e)).toEqual({ kind: 'lost', wasReady: false });
    await expect(init).rejects.toBe(e);
    expect(loseLink(lc, e)).toEqual({ kind: 'ignored' });
    expect(code(() => requireReady(lc))).toBe('LINK_LOST');
  });

  it('finalize begins once; a loss while finalizing ends it; the promise settles after endFinalize', async () => {
    const lc = createLifecycle<string>();
    becomeReady(lc);
    const first = beginFinalize(lc, 60_000, () => {});
    expect(first.kind).toBe('begun');
    const again = beginFinalize(lc, 60_000, () => {});
    expect(again.kind).toBe('done');
    expect(again.done).toBe(first.done);
    expect(code(() => requireReady(lc))).toBe('FINALIZED');
    expect(loseLink(lc, new LinkError('LINK_LOST', 'closed'))).toEqual({ kind: 'finalizing' });
    const resolve = endFinalize(lc);
    expect(lc.state).toBe('finalized');
    expect(endFinalize(lc)).toBeNull();
    resolve?.();
    await expect(first.done).resolves.toBeUndefined();
    expect(loseLink(lc, new LinkError('LINK_LOST', 'late'))).toEqual({ kind: 'ignored' });
    expect(beginFinalize(lc, 60_000, () => {}).kind).toBe('done');
  });

  it('finalize after a loss is done at once', async () => {
    const lc = createLifecycle<string>();
    becomeReady(lc);
    expect(loseLink(lc, new LinkError('LINK_LOST', 'gone'))).toEqual({ kind: 'lost', wasReady: true });
    const f = beginFinalize(lc, 60_000, () => {});
    expect(f.kind).toBe('done');
    await expect(f.done).resolves.toBeUndefined();
  });
});
