// A rank's checkpoints and recovery (src/app/rollback/runtime.ts, rollback-init.ts; PROTOCOL
// §11.3): the bad inputs of issue 17 each get a clear error, and the process never runs on
// unprotected. The channels run over a P2P instance that never connects: nothing here sends.
import { afterEach, describe, expect, it } from 'vitest';
import { CommLayer } from '../../../../src/app/gmpi/comm.ts';
import { P2P } from '../../../../src/app/gmpi/p2p.ts';
import { RankChannels } from '../../../../src/app/rollback/rank-channels.ts';
import { openRollback } from '../../../../src/app/rollback/rollback-init.ts';
import { RollbackError, RollbackRuntime, type RecoverableStore, type RegisteredState, type StoreContents } from '../../../../src/app/rollback/runtime.ts';
import { ChainedStore } from '../../../../src/app/rollback/log-chain.ts';
import type { RollbackMapping } from '../../../../src/core/wire/recovery.ts';

const KEY = new Uint8Array(32).fill(7);
let opened: P2P[] = [];
afterEach(async () => {
  for (const p of opened) await p.close({ bye: false });
  opened = [];
});

class Store implements RecoverableStore {
  checkpoints: { id: number; logPos: number; bytes: Uint8Array }[] = [];
  closed = false;
  async append(): Promise<void> {}
  async putCheckpoint(id: number, logPos: number, bytes: Uint8Array): Promise<void> {
    this.checkpoints.push({ id, logPos, bytes });
  }
  async fetch(): Promise<StoreContents> {
    return { checkpoints: this.checkpoints, log: [], last: this.checkpoints.at(-1)?.logPos ?? 0 };
  }
  async close(): Promise<void> {
    this.closed = true;
  }
}

async function runtime(state: RegisteredState, store: Store, maxStateBytes = 1 << 16): Promise<RollbackRuntime> {
  const p2p = await P2P.open({ taskId: 't1', self: 0, taskKey: KEY });
  opened.push(p2p);
  const chained = new ChainedStore(store);
  const channels = new RankChannels({ p2p, rank: 0, vpids: [0, 1], store: chained, onFatal: () => undefined });
  const layer = new CommLayer(channels);
  return new RollbackRuntime({ channels, layer, world: layer.create(0, [0, 1]), store: chained, state, intervalMs: 10, maxStateBytes, now: () => 0 });
}

const errorOf = (p: Promise<unknown>) => p.then(() => null, (e: unknown) => e as RollbackError);

describe('the registered state (PROTOCOL §11.3; issue 17 Bad input)', () => {
  it('a plain object is restored in place: the same object, its fields replaced', async () => {
    const store = new Store();
    const s: Record<string, unknown> = { step: 4, grid: new Float64Array([1.5, 2.5]) };
    await (await runtime(s, store)).checkpoint();
    const again: Record<string, unknown> = { step: 0, stale: true };
    await (await runtime(again, store)).recover();
    expect(again).toEqual({ step: 4, grid: new Float64Array([1.5, 2.5]) });
  });

  it('a restore that throws: RESTORE_FAILED, naming its error', async () => {
    const store = new Store();
    await (await runtime({ save: () => Uint8Array.of(1), restore: () => undefined }, store)).checkpoint();
    const e = await errorOf((await runtime({ save: () => Uint8Array.of(1), restore: () => { throw new Error('bad bytes'); } }, store)).recover());
    expect(e?.code).toBe('RESTORE_FAILED');
    expect(e?.message).toMatch(/bad bytes/);
  });

  it('a state larger than the task\'s limit: STATE_TOO_LARGE, saying what to do, and nothing is stored', async () => {
    const store = new Store();
    const e = await errorOf((await runtime({ save: () => new Uint8Array(5000), restore: () => undefined }, store, 1000)).checkpoint());
    expect(e?.code).toBe('STATE_TOO_LARGE');
    expect(e?.message).toMatch(/--max-state/);
    expect(store.checkpoints).toEqual([]);
  });

  it('a save that does not return bytes: SAVE_FAILED', async () => {
    const e = await errorOf((await runtime({ save: () => 'x' as unknown as Uint8Array, restore: () => undefined }, new Store())).checkpoint());
    expect(e?.code).toBe('SAVE_FAILED');
  });

  it('snapshot() checkpoints only once the interval has passed', async () => {
    let t = 0;
    const store = new Store();
    const p2p = await P2P.open({ taskId: 't1', self: 0, taskKey: KEY });
    opened.push(p2p);
    const chained = new ChainedStore(store);
    const channels = new RankChannels({ p2p, rank: 0, vpids: [0, 1], store: chained, onFatal: () => undefined });
    const layer = new CommLayer(channels);
    const rt = new RollbackRuntime({ channels, layer, world: layer.create(0, [0, 1]), store: chained, state: { a: 1 }, intervalMs: 10, maxStateBytes: 1 << 16, now: () => t });
    expect(await rt.snapshot()).toBe(false);
    t = 10;
    expect(await rt.snapshot()).toBe(true);
    t = 15;
    expect(await rt.snapshot()).toBe(false);
    expect(store.checkpoints.map((c) => c.id)).toEqual([1]);
  });
});

describe('init refuses what it cannot protect (issue 17 Bad input)', () => {
  const rb = (logging: RollbackMapping['logging'], checkpoint: RollbackMapping['checkpoint'] = 'nco'): RollbackMapping => ({
    rank: 0, protector: 'h:1', ranks: [0, 1], protectors: ['h:1', 'h:0'], marks: [[], []], groups: [0, 1], finished: [false, false], logging, checkpoint, intervalMs: 1000, maxStateBytes: 1 << 20,
  });
  const open = async (m: RollbackMapping, state: RegisteredState | undefined) => {
    const p2p = await P2P.open({ taskId: 't1', self: 0, taskKey: KEY });
    opened.push(p2p);
    const store = new Store();
    const e = await errorOf(openRollback({ p2p, rb: m, state, recovered: false, connectStore: async () => store, onFatal: () => undefined }));
    return { e, store };
  };

  it('no registered state: BAD_STATE, naming Gmpi.init({ state })', async () => {
    const { e } = await open(rb('rbml'), undefined);
    expect(e?.code).toBe('BAD_STATE');
    expect(e?.message).toMatch(/Gmpi\.init\(\{ state \}\)/);
  });

  it('hooks without their pair: BAD_STATE', async () => {
    const { e } = await open(rb('rbml'), { save: () => Uint8Array.of(1) } as unknown as RegisteredState);
    expect(e?.code).toBe('BAD_STATE');
  });

  it('a mode not built yet is refused, with the options that work', async () => {
    for (const m of [rb('cm', 'bsco'), rb('cm', 'sco')]) {
      const { e } = await open(m, { a: 1 });
      expect(e?.message).toMatch(/semi-coordinated checkpoints \((bsco|sco)\) have nothing to save there.*--checkpoint nco/);
    }
  });

  it('PROTOCOL §11.7: rbml and hmpl with bsco and sco open, and a first incarnation puts its group\'s origin, checkpoint 1 at position 0', async () => {
    for (const m of [rb('rbml', 'bsco'), rb('hmpl', 'sco')]) {
      const { e, store } = await open(m, { a: 1 });
      expect(e).toBeNull();
      expect(store.checkpoints.map((c) => [c.id, c.logPos])).toEqual([[1, 0]]);
    }
  });

  it('cm (PROTOCOL §11.6) needs every rank\'s home CM and its own CM connection as the store', async () => {
    const { e } = await open(rb('cm'), { a: 1 });
    expect(e?.code).toBe('BAD_STATE');
    expect(e?.message).toMatch(/channel memories need every rank's home CM/);
  });

  it('rbml and hmpl with nco open, and a first incarnation takes no checkpoint at init', async () => {
    for (const m of [rb('rbml'), rb('hmpl')]) {
      const { e, store } = await open(m, { a: 1 });
      expect(e).toBeNull();
      expect(store.checkpoints).toEqual([]);
    }
  });
});
