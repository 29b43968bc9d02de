// The daemon side of `trine inject` (src/daemon/inject.ts, inject-link.ts; docs/OPERATIONS.md §7):
// `inject` items from an operator of the membership are taken out of verified frames before the
// core sees them, run by the registered handler and answered with `inject.reply`; anyone else's
// reach the core unchanged; a resent nonce is answered again without injecting twice.
import { describe, expect, it } from 'vitest';
import type { Core, CoreEffect, CoreInput } from '../../../src/core/node.ts';
import type { Frame, Item } from '../../../src/core/wire/messages.ts';
import { clusterIds, planCluster, type Cluster } from '../../../src/io/cluster-dir.ts';
import { installInjection } from '../../../src/daemon/inject-handlers.ts';
import { registerInjectHandler, registeredInjectModes, type InjectContext } from '../../../src/daemon/inject.ts';

const ids = clusterIds(4).all;
const keys = new Map(ids.map((id, i) => [id, new Uint8Array(32).fill(i + 1)]));
const cluster: Cluster = {
  dir: '/nonexistent', config: planCluster({ nodes: 4, ports: clusterIds(4).listeners.map((_, i) => 7001 + i), allowInject: true }, keys), publicKeys: keys,
};

let runs = 0;
registerInjectHandler('test-count', (args) => {
  runs++;
  return { ok: true, text: `ran with ${args.join(' ')}` };
});
registerInjectHandler('test-throw', () => {
  throw new Error('no such thing');
});
let release: () => void = () => {};
registerInjectHandler('test-async', () => new Promise((resolve) => {
  release = () => resolve({ ok: true, text: 'done later' });
}));
let seen: InjectContext | null = null;
registerInjectHandler('test-ctx', (_args, ctx) => {
  seen = ctx;
  return { ok: true, text: 'ok' };
});

function setup(self = 'r2') {
  const inputs: CoreInput[] = [];
  const core: Core = {
    id: self,
    step: (input) => {
      inputs.push(input);
      return [{ type: 'log', level: 'info', event: 'stepped', fields: {} }];
    },
    nextWakeMs: () => 42,
  };
  const replies: { to: string; item: Item }[] = [];
  const injection = installInjection({
    self, kind: 'replica', cluster, core, reply: (to, item) => replies.push({ to, item }), log: () => {},
  });
  return { injection, inputs, replies };
}

const injectItem = (nonce: number, mode: string, ...args: string[]): Item => ({ type: 'inject', nonce, mode, args });
const frame = (from: string, ...items: Item[]): Frame => ({ from, to: 'r2', items });

describe('inject items in a daemon', () => {
  it('an operator inject is taken out of the frame, run, and answered; the rest goes on to the core', () => {
    const { injection, replies } = setup();
    const query: Item = { type: 'challenge.ask', nonce: 7 };
    expect(injection.intercept(frame('op', injectItem(1, 'test-count', 'a', 'b')), 0)).toBeNull();
    expect(injection.intercept(frame('op', injectItem(2, 'test-count'), query), 0)).toEqual(frame('op', query));
    expect(replies).toEqual([
      { to: 'op', item: { type: 'inject.reply', nonce: 1, ok: true, text: 'ran with a b' } },
      { to: 'op', item: { type: 'inject.reply', nonce: 2, ok: true, text: 'ran with ' } },
    ]);
  });

  it('an inject from anyone but an operator reaches the core unchanged (the core judges it)', () => {
    const { injection, replies } = setup();
    const f = frame('r1', injectItem(3, 'test-count'));
    expect(injection.intercept(f, 0)).toBe(f);
    expect(injection.intercept(frame('a1', injectItem(4, 'drop', 'r2', 'r3')), 0)?.items).toHaveLength(1);
    expect(replies).toEqual([]);
  });

  it('frames without inject items pass untouched', () => {
    const { injection } = setup();
    const f = frame('op', { type: 'challenge.ask', nonce: 1 });
    expect(injection.intercept(f, 0)).toBe(f);
  });

  it('a resent nonce is answered again without running the handler twice', () => {
    const { injection, replies } = setup();
    const before = runs;
    injection.intercept(frame('op', injectItem(9, 'test-count', 'x')), 0);
    injection.intercept(frame('op', injectItem(9, 'test-count', 'x')), 0);
    expect(runs - before).toBe(1);
    expect(replies.map((r) => r.item)).toEqual([
      { type: 'inject.reply', nonce: 9, ok: true, text: 'ran with x' },
      { type: 'inject.reply', nonce: 9, ok: true, text: 'ran with x' },
    ]);
  });

  it('an unregistered mode is answered "not available yet" with the modes there are; a failing handler answers its error', () => {
    const { injection, replies } = setup();
    injection.intercept(frame('op', injectItem(1, 'melt-replica', 'r2')), 0);
    injection.intercept(frame('op', injectItem(2, 'test-throw')), 0);
    expect(replies[0]?.item).toEqual({
      type: 'inject.reply', nonce: 1, ok: false,
      text: `inject mode melt-replica is not available yet in r2 (available: ${registeredInjectModes().join(', ')})`,
    });
    expect(registeredInjectModes()).toEqual(expect.arrayContaining(['byzantine-replica', 'corrupt-replica', 'delay', 'drop', 'heal']));
    expect(replies[1]?.item).toEqual({ type: 'inject.reply', nonce: 2, ok: false, text: 'r2: inject test-throw failed: no such thing' });
  });

  it('an asynchronous handler answers when it ends; a resend meanwhile is not run again', async () => {
    const { injection, replies } = setup();
    injection.intercept(frame('op', injectItem(5, 'test-async')), 0);
    injection.intercept(frame('op', injectItem(5, 'test-async')), 0);
    expect(replies).toEqual([]);
    release();
    await new Promise((r) => setTimeout(r, 0));
    expect(replies).toEqual([{ to: 'op', item: { type: 'inject.reply', nonce: 5, ok: true, text: 'done later' } }]);
  });

  it('handlers get the process, its core and links, and can filter the core\'s effects', () => {
    const { injection, inputs } = setup();
    injection.intercept(frame('op', injectItem(1, 'test-ctx')), 0);
    const ctx = seen as unknown as InjectContext;
    expect(ctx).toMatchObject({ self: 'r2', kind: 'replica', from: 'op' });
    expect(ctx.links).toBe(injection.links);
    expect(injection.core.step({ type: 'tick', nowMs: 1 })).toHaveLength(1);
    const extra: CoreEffect = { type: 'log', level: 'warn', event: 'lie', fields: {} };
    expect(ctx.setEffectFilter('lie', (effects) => [...effects, extra])).toBe(true);
    expect(injection.core.step({ type: 'tick', nowMs: 2 })).toEqual([{ type: 'log', level: 'info', event: 'stepped', fields: {} }, extra]);
    ctx.setEffectFilter('lie', null);
    expect(injection.core.step({ type: 'tick', nowMs: 3 })).toHaveLength(1);
    expect(inputs).toHaveLength(3);
    expect(injection.core.nextWakeMs()).toBe(42);
  });
});

describe('drop, delay and heal in a daemon', () => {
  const run = (self: string, nonce: number, mode: string, ...args: string[]) => {
    const s = setup(self);
    s.injection.intercept({ from: 'op', to: self, items: [injectItem(nonce, mode, ...args)] }, 0);
    return { ...s, reply: s.replies[0]?.item as Extract<Item, { type: 'inject.reply' }> };
  };

  it('the sender drops what it sends to B', () => {
    const { injection, reply } = run('r2', 1, 'drop', 'r2', 'scc');
    expect(reply).toMatchObject({ ok: true, text: 'r2 → scc: frames dropped at r2, as it sends them to scc, until `trine inject heal r2 scc`' });
    expect(injection.links.list()).toEqual([{ direction: 'out', peer: 'scc', fault: { kind: 'drop' } }]);
  });

  it('the receiver delays what arrives from an agent A', () => {
    const { injection, reply } = run('r3', 1, 'delay', 'a2', 'r3', '150');
    expect(reply).toMatchObject({ ok: true, text: 'a2 → r3: frames delayed by 150 ms at r3, as they arrive from a2, until `trine inject heal a2 r3`' });
    expect(injection.links.get('in', 'a2')).toEqual({ kind: 'delay', delayMs: 150 });
  });

  it('heal undoes it and says what it was', () => {
    const s = setup('r1');
    s.injection.intercept({ from: 'op', to: 'r1', items: [injectItem(1, 'drop', 'r1', 'r3'), injectItem(2, 'heal', 'r1', 'r3')] }, 0);
    expect(s.replies[1]?.item).toMatchObject({ ok: true, text: 'r1 → r3 healed at r1 (was: drop)' });
    expect(s.injection.links.list()).toEqual([]);
  });

  it('a daemon at neither end, a pair without a link, or a bad delay is refused', () => {
    expect(run('r1', 1, 'drop', 'r2', 'r3').reply).toMatchObject({ ok: false, text: 'r1: r1 is neither r2 nor r3' });
    expect(run('r1', 1, 'drop', 'a1', 'a2').reply).toMatchObject({ ok: false, text: 'r1: a1 and a2 do not exchange frames (a replica must be at one end)' });
    expect(run('r1', 1, 'delay', 'r1', 'r2', 'soon').reply).toMatchObject({ ok: false, text: 'r1: delay needs MS, an integer from 1 to 60000, got "soon"' });
  });
});
