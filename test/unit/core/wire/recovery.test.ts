// The recovery option and the rank table on the wire (src/core/wire/recovery.ts; PROTOCOL §11.1,
// §11.2): `task.submit`'s recovery, `proc.mapping`'s rank table and the process's mapping round
// trip exactly; anything else decodes to a typed error, never a throw (STYLE.md 5).
import { describe, expect, it } from 'vitest';
import { MAX_TASK_PROCS } from '../../../../src/core/constants.ts';
import { agentToProc, mapping, type AgentToProc } from '../../../../src/core/wire/app-wire.ts';
import { pack, unpack } from '../../../../src/core/wire/frame.ts';
import {
  agentRequest, groupCommand, recovery, rollbackMapping, rollbackTable, type AgentRequest, type GroupCommand, type Recovery,
} from '../../../../src/core/wire/messages.ts';
import type { Schema } from '../../../../src/core/wire/schema.ts';

const OPTIONS = { logging: 'cm', checkpoint: 'bsco', intervalMs: 100, maxStateBytes: 64 * 1024 * 1024 } as const;
const ROLLBACK: Recovery = { kind: 'rollback', ...OPTIONS };

/** Through the canonical bytes and back. */
function roundTrip<T>(schema: Schema<T>, value: T): unknown {
  const tree = unpack(pack(schema.enc(value)));
  if (!tree.ok) throw new Error(tree.detail);
  const r = schema.dec(tree.value, 'x');
  if (!r.ok) throw new Error(r.detail);
  return r.value;
}
const code = (schema: Schema<unknown>, tree: unknown): string => {
  const r = schema.dec(tree, 'x');
  return r.ok ? 'ok' : r.code;
};

describe('PROTOCOL §11.1: task.submit carries its recovery option', () => {
  it('app and rollback round-trip, inside a submit too', () => {
    for (const r of [{ kind: 'app' } as const, ROLLBACK]) expect(roundTrip(recovery, r)).toEqual(r);
    const submit: AgentRequest = {
      type: 'task.submit', nonce: 'ab'.repeat(16), name: 'heat', size: 4, file: '/bin/heat', args: [], cwd: '/', env: [], mode: 'linked',
      recovery: ROLLBACK, dgrp: null, straggler: null, maxSpawns: 32, taskKey: new Uint8Array(32).fill(1),
    };
    const back = roundTrip(agentRequest, submit) as AgentRequest;
    expect(back).toMatchObject({ type: 'task.submit', recovery: ROLLBACK });
    expect(pack(agentRequest.enc(back))).toEqual(pack(agentRequest.enc(submit)));
  });

  it('every malformed option is a typed error', () => {
    const s = recovery as Schema<unknown>;
    expect(code(s, [0])).toBe('ok');
    expect(code(s, [1, 0, 0, 100, 1])).toBe('ok');
    expect(code(s, [2])).toBe('WIRE_UNKNOWN_TYPE');
    expect(code(s, ['app'])).toBe('WIRE_UNKNOWN_TYPE');
    for (const bad of [[], null, 'rollback', {}, [0, 1], [1], [1, 3, 0, 100, 1], [1, 0, 3, 100, 1], [1, 0, 0, -1, 1], [1, 0, 0, 100, 1.5], [1, 0, 0, 100, 1, 9]]) {
      expect(code(s, bad)).toBe('WIRE_MALFORMED');
    }
  });
});

describe('PROTOCOL §11.2: the mapping carries the rank table', () => {
  it('proc.mapping and the process\'s mapping round-trip with and without one', () => {
    const members = [{ vpid: 4, node: 'n1', endpoint: 'h:4' }];
    for (const rollback of [null, { ranks: [4, 1], protectors: ['h:9', ''], marks: [[{ id: 3, logPos: 7, digest: Buffer.alloc(32, 1), protector: 'h:9', base: Buffer.alloc(32, 2), extent: 9, chain: Buffer.alloc(32, 3) }], []], groups: [0, 0], finished: [false, false], ...OPTIONS }]) {
      const cmd: GroupCommand = { type: 'proc.mapping', task: 't1', vpids: [4], restarted: false, recovered: true, epoch: 2, quorum: 2, members, rollback, dgrp: null, straggler: null };
      expect(roundTrip(groupCommand, cmd)).toEqual(cmd);
    }
    for (const rollback of [null, { rank: 0, protector: 'h:9', ranks: [4, 1], protectors: ['h:9', ''], marks: [[], []], groups: [0, 1], finished: [false, false], ...OPTIONS }]) {
      const m: AgentToProc = { type: 'mapping', task: 't1', vpid: 4, size: 2, restarted: false, recovered: true, epoch: 2, quorum: 2, members, rollback, dgrp: null, straggler: null };
      expect(roundTrip(agentToProc, m)).toEqual(m);
      const { type: _type, ...plain } = m;
      expect(roundTrip(mapping, plain)).toEqual(plain);
    }
  });

  it(`a rank table is bounded by MAX_TASK_PROCS (${MAX_TASK_PROCS}); a rank outside it is refused`, () => {
    const full = Array.from({ length: MAX_TASK_PROCS }, (_, r) => r);
    const table = (ranks: number[]) => rollbackTable.enc({ ranks, protectors: ranks.map(() => ''), marks: ranks.map(() => []), groups: ranks.map((_, r) => r), finished: ranks.map(() => false), ...OPTIONS });
    expect(code(rollbackTable as Schema<unknown>, table(full))).toBe('ok');
    expect(code(rollbackTable as Schema<unknown>, table([...full, MAX_TASK_PROCS]))).toBe('WIRE_LIMIT');
    const own = (rank: number, ranks: number[]) => rollbackMapping.enc({ rank, protector: '', ranks, protectors: ranks.map(() => ''), marks: ranks.map(() => []), groups: ranks.map(() => 0), finished: ranks.map(() => false), ...OPTIONS });
    expect(code(rollbackMapping as Schema<unknown>, own(1, [4, 1]))).toBe('ok');
    expect(code(rollbackMapping as Schema<unknown>, own(2, [4, 1]))).toBe('WIRE_MALFORMED');
    expect(code(rollbackMapping as Schema<unknown>, own(0, []))).toBe('WIRE_MALFORMED');
    expect(code(rollbackMapping as Schema<unknown>, own(0, [...full, 0]))).toBe('WIRE_LIMIT');
    expect(code(rollbackMapping as Schema<unknown>, null)).toBe('ok');
  });

  it('a mark whose log extent lies before its checkpoint\'s position, or whose chain is not 32 bytes, is refused (PROTOCOL §11.4)', () => {
    const mark = (extent: number, chain = Buffer.alloc(32)) => ({ id: 1, logPos: 5, digest: Buffer.alloc(32), protector: 'h:9', base: Buffer.alloc(32), extent, chain });
    const table = (m: ReturnType<typeof mark>) => rollbackTable.enc({ ranks: [0], protectors: [''], marks: [[m]], groups: [0], finished: [false], ...OPTIONS });
    expect(code(rollbackTable as Schema<unknown>, table(mark(5)))).toBe('ok');
    expect(code(rollbackTable as Schema<unknown>, table(mark(4)))).toBe('WIRE_MALFORMED');
    expect(code(rollbackTable as Schema<unknown>, table(mark(6, Buffer.alloc(31))))).not.toBe('ok');
  });

  it('PROTOCOL §11.7 (radic-hmpl A.2.8): every rank names a checkpoint group among the ranks, one per rank; a table that disagrees is refused', () => {
    const enc = (groups: number[], ranks = [4, 1, 7]) => rollbackTable.enc({ ranks, protectors: ranks.map(() => ''), marks: ranks.map(() => []), groups, finished: ranks.map(() => false), ...OPTIONS });
    expect(code(rollbackTable as Schema<unknown>, enc([0, 1, 0]))).toBe('ok');
    expect(code(rollbackTable as Schema<unknown>, enc([0, 3, 0]))).toBe('WIRE_MALFORMED');
    expect(code(rollbackTable as Schema<unknown>, enc([0, 1]))).toBe('WIRE_MALFORMED');
    const own = (groups: number[]) => rollbackMapping.enc({ rank: 0, protector: '', ranks: [4, 1], protectors: ['', ''], marks: [[], []], groups, finished: [false, false], ...OPTIONS });
    expect(code(rollbackMapping as Schema<unknown>, own([0, 0]))).toBe('ok');
    expect(code(rollbackMapping as Schema<unknown>, own([0, 2]))).toBe('WIRE_MALFORMED');
    expect(code(rollbackMapping as Schema<unknown>, own([0, 0, 0]))).toBe('WIRE_MALFORMED');
  });

  it('PROTOCOL §11.3: the ranks whose holder ended normally travel with the table, one flag per rank; a list of another length is refused', () => {
    const enc = (finished: boolean[]) => rollbackTable.enc({ ranks: [4, 1], protectors: ['', ''], marks: [[], []], groups: [0, 1], finished, ...OPTIONS });
    expect(code(rollbackTable as Schema<unknown>, enc([true, false]))).toBe('ok');
    expect(roundTrip(rollbackTable, { ranks: [4, 1], protectors: ['', ''], marks: [[], []], groups: [0, 1], finished: [true, false], ...OPTIONS })).toMatchObject({ finished: [true, false] });
    expect(code(rollbackTable as Schema<unknown>, enc([true]))).toBe('WIRE_MALFORMED');
    expect(code(rollbackTable as Schema<unknown>, enc([true, false, false]))).toBe('WIRE_MALFORMED');
  });
});
