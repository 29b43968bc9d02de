// Rollback tasks through the whole group layer on the in-memory cluster (docs/PROTOCOL.md §11.1,
// §11.2; radic-hmpl A.2.7): the operator's answer when the group refuses a forged request, and
// a replacement decided by the three replicas alike, its spawn and its mapping reaching the
// agent on matching copies, the replicas' digests equal throughout.
import { describe, expect, it } from 'vitest';
import type { ProcessId } from '../../../src/core/ports.ts';
import type { GroupCommand, OperatorRequest, ProcReport, Recovery } from '../../../src/core/wire/messages.ts';
import { makeCluster } from './harness.ts';

type C = ReturnType<typeof makeCluster>;
const nonce = (n: number) => n.toString(16).padStart(32, '0');
const ROLLBACK: Recovery = { kind: 'rollback', logging: 'rbml', checkpoint: 'bsco', intervalMs: 1000, maxStateBytes: 1 << 20 };
const submit = (n: number, size: number, mode: 'plain' | 'linked', recovery: Recovery = ROLLBACK): OperatorRequest => ({
  type: 'task.submit', nonce: nonce(n), name: `job${n}`, size, file: '/bin/heat', args: [], cwd: '/', env: [], mode, recovery, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(n),
});

function report(c: C, agent: ProcessId, r: Pick<ProcReport, 'task' | 'vpid' | 'kind'> & Partial<ProcReport>): void {
  c.input(agent, { type: 'request', nowMs: c.now(), request: { type: 'proc.report', reports: [{ pid: 0, exitCode: null, signal: null, reason: '', endpoint: '', ...r }] } });
}
const commands = (c: C, agent: ProcessId): GroupCommand[] => c.effects('deliver.command', agent).map((o) => o.effect.command);
const agreed = (c: C): boolean => new Set(c.replicas.map((r) => `${r.rsn()}|${r.digestHex()}`)).size === 1;

describe('PROTOCOL §11.1: the group refuses a rollback task it cannot protect, and says why', () => {
  it('a forged unlinked rollback submit and an out-of-range interval are refused by every replica alike; no task is made', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(1, 2, 'plain'));
    c.operate(submit(2, 2, 'linked', { ...ROLLBACK, intervalMs: 99 }));
    c.run(100);
    const answers = new Set(c.opReplies.map((r) => `${r.ok}|${r.text}`));
    expect([...answers].sort()).toEqual([
      'false|checkpoint interval must be 100 to 86400000 ms, got 99',
      'false|rollback recovery needs a linked task: its processes must use the application library (submit it with --linked, mode linked)',
    ]);
    expect(c.opReplies).toHaveLength(6);
    for (const r of c.replicas) expect(r.clusterView().tasks).toEqual([]);
  });
});

describe('PROTOCOL §11.2: a crashed rank is replaced by the whole group (radic-hmpl A.2.7)', () => {
  it('the replacement\'s spawn and its mapping (its rank, recovered) reach the agent; the replicas agree', () => {
    const c = makeCluster(2);
    c.run(100);
    c.operate(submit(3, 2, 'linked'));
    c.run(100);
    const at = new Map<number, ProcessId>();
    for (const a of ['a1', 'a2']) for (const s of commands(c, a)) if (s.type === 'proc.spawn') at.set(s.vpid, a);
    expect([...at.keys()].sort()).toEqual([0, 1]);
    for (const [vpid, a] of at) report(c, a, { task: 't1', vpid, kind: 'spawnSucceeded', pid: 100 + vpid, endpoint: `h:${vpid}` });
    c.run(100);
    const first = [...commands(c, 'a1'), ...commands(c, 'a2')].filter((x) => x.type === 'proc.mapping');
    expect(first.map((m) => m.type === 'proc.mapping' && m.rollback?.ranks)).toEqual([[0, 1], [0, 1]]);

    report(c, at.get(1) as ProcessId, { task: 't1', vpid: 1, kind: 'terminatedAbnormally', pid: 101, signal: 'SIGSEGV', reason: 'crashed' });
    c.run(100);
    const spawn = ['a1', 'a2'].flatMap((a) => commands(c, a).filter((x) => x.type === 'proc.spawn' && x.vpid === 2).map(() => a));
    expect(spawn).toHaveLength(1);
    const agent = spawn[0] as ProcessId;
    report(c, agent, { task: 't1', vpid: 2, kind: 'spawnSucceeded', pid: 102, endpoint: 'h:2' });
    c.run(100);
    const mapping = commands(c, agent).find((x) => x.type === 'proc.mapping' && x.vpids.includes(2));
    expect(mapping).toMatchObject({ recovered: true, rollback: { ranks: [0, 2], logging: 'rbml', checkpoint: 'bsco', intervalMs: 1000, maxStateBytes: 1 << 20 } });
    const view = c.replicas[2]?.clusterView().tasks[0];
    expect(view?.procs.map((p) => [p.vpid, p.rank])).toEqual([[0, 0], [1, null], [2, 1]]);
    expect(view?.state).toBe('running');
    expect(agreed(c)).toBe(true);
  });
});
