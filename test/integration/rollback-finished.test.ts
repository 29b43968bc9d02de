// A rank whose holder ended normally takes nothing more (PROTOCOL §11.3): it finalized, so every
// message it was sent is logged and every one it sent acknowledged. A replacement that re-executes
// towards it must not wait for a `have` it will never send (its process has left): the group's
// GSIG_NTF_FINISHED, or the mapping's `finished` flags, end that wait. Real P2P sockets; the
// finished peer simply does not exist any more.
import { afterEach, describe, expect, it } from 'vitest';
import { RankChannels } from '../../src/app/rollback/rank-channels.ts';
import { closeMeshes, MemStore, openMesh, peersOf } from './rollback-harness.ts';

afterEach(closeMeshes);

const settled = async (p: Promise<unknown>): Promise<boolean> => {
  let done = false;
  void p.then(() => (done = true), () => (done = true));
  await new Promise((r) => setTimeout(r, 50));
  return done;
};

describe('PROTOCOL §11.3: sends to a rank that finished complete without it', () => {
  for (const logging of ['rbml', 'hmpl'] as const) {
    it(`${logging}: a send waiting for the finished rank's have completes at GSIG_NTF_FINISHED, and later ones at once, transmitting nothing`, async () => {
      const p2p = await openMesh(7);
      const ch = new RankChannels({ p2p, rank: 0, vpids: [7, 3], store: new MemStore(), onFatal: () => undefined, logging });
      ch.start();
      const waiting = ch.send(1, 5, Uint8Array.of(1));
      expect(await settled(waiting)).toBe(false); // no `have` from rank 1: its holder is gone
      ch.onFinished(3);
      await waiting;
      await ch.send(1, 5, Uint8Array.of(2));
      expect(ch.counters.skipped).toBe(2);
      expect(ch.retainedCount()).toBe(0);
      await ch.drained();
      ch.close(new Error('done'));
    });
  }

  it('PROTOCOL §11.7: a new holder of a finished rank (it runs again with its checkpoint group) is a peer again: its `have` is answered, and our messages to it go and are acknowledged', async () => {
    const [pa, pb] = [await openMesh(7), await openMesh(9)];
    const all = [{ rank: 0, vpid: 7, p2p: pa }, { rank: 1, vpid: 9, p2p: pb }];
    await Promise.all(all.map((r) => r.p2p.connect(peersOf(r, all))));
    const a = new RankChannels({ p2p: pa, rank: 0, vpids: [7, 3], store: new MemStore(), onFatal: () => undefined });
    a.start();
    a.onFinished(3); // rank 1's holder, VPID 3, finished
    const b = new RankChannels({ p2p: pb, rank: 1, vpids: [7, 9], store: new MemStore(), onFatal: () => undefined });
    b.start(); // VPID 9 holds rank 1 now: its `have` reaches rank 0
    await b.send(0, 5, Uint8Array.of(1)); // answered: rank 0 said what it holds
    expect((await a.recv(1, 5)).data).toEqual(Uint8Array.of(1));
    await a.send(1, 6, Uint8Array.of(2)); // not skipped: RBML completes at rank 1's acknowledgement
    expect(a.counters.skipped).toBe(0);
    expect((await b.recv(0, 6)).data).toEqual(Uint8Array.of(2));
    a.close(new Error('done'));
    b.close(new Error('done'));
  }, 10_000); // without the new holder's `have` answered, the sends above wait forever

  it('another VPID, or our own, finishing changes nothing', async () => {
    const p2p = await openMesh(7);
    const ch = new RankChannels({ p2p, rank: 0, vpids: [7, 3], store: new MemStore(), onFatal: () => undefined });
    ch.start();
    ch.onFinished(4);
    ch.onFinished(7);
    const waiting = ch.send(1, 5, Uint8Array.of(1));
    expect(await settled(waiting)).toBe(false);
    ch.close(new Error('done'));
    await expect(waiting).rejects.toThrow('done');
  });
});
