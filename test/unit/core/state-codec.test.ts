// State transfer's decoder (src/core/state-codec.ts; docs/PROTOCOL.md §5.4, §10.6): a replacement
// replica must rebuild, from the canonical bytes, a state that is byte-identical and behaves
// identically under every later transition; and no input, however malformed, may make it throw.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { TaskTimers } from '../../../src/core/cluster-state.ts';
import type { Signer } from '../../../src/core/ports.ts';
import { applyGroupInput, applyOperatorRequest, applyRequest } from '../../../src/core/replicated-apply.ts';
import {
  adoptIncarnation, digestState, encodeState, expectedCsn, initialState, type ApplyResult, type ReplicatedState,
} from '../../../src/core/replicated-state.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../../../src/core/signals.ts';
import { decodeState, MAX_STATE_BYTES } from '../../../src/core/state-codec.ts';
import { pack, signAccusation, unpack } from '../../../src/core/wire/frame.ts';
import type { AgentRequest, GroupInput, OperatorRequest, ProcReport, TaskSubmit } from '../../../src/core/wire/messages.ts';

const TIMERS: TaskTimers = {
  startTimeoutTicks: 6, terminateTimeoutTicks: 3, maxStartAttempts: 2, maxTerminateAttempts: 2, groupRequestTimeoutTicks: 4, replicaStartTimeoutTicks: 5,
};
const sha256 = (d: Uint8Array) => new Uint8Array(createHash('sha256').update(d).digest());
const hex = (d: Uint8Array) => Buffer.from(d).toString('hex');
const signer = (id: string): Signer => ({ id, sign: (d) => new Uint8Array(createHmac('sha256', `k-${id}`).update(d).digest()) });

// ---- driving the real transitions ------------------------------------------------------------

type Step =
  | { kind: 'request'; client: string; request: AgentRequest; inc?: number }
  | { kind: 'operator'; request: OperatorRequest; signed?: { bytes: Uint8Array; sig: Uint8Array } }
  | { kind: 'input'; input: GroupInput };

/** What replica.ts does on delivery: next RSN; for an agent, its incarnation and CSN, then the transition. */
function apply(s: ReplicatedState, step: Step): ApplyResult {
  s.rsn++;
  switch (step.kind) {
    case 'request': {
      const inc = step.inc ?? 1;
      const csn = expectedCsn(s, step.client, inc) as number;
      adoptIncarnation(s, step.client, inc);
      s.csnReceived.set(step.client, csn);
      return applyRequest(s, step.client, step.request, inc);
    }
    case 'operator':
      return applyOperatorRequest(s, step.request, step.signed ?? null);
    case 'input':
      return applyGroupInput(s, step.input);
  }
}

let nonces = 0;
const nonce = () => (++nonces).toString(16).padStart(32, '0');
const join = (client: string, slots = 2, inc = 1): Step => ({ kind: 'request', client, inc, request: { type: 'node.join', slots, resync: false } });
const submit = (size: number, extra: Partial<TaskSubmit> = {}): Step => ({
  kind: 'operator',
  request: { type: 'task.submit', nonce: nonce(), name: 'job', size, file: '/bin/job', args: ['-v', 'x'], cwd: '/tmp', env: [['A', '1'], ['B', '2']], mode: 'plain', taskKey: new Uint8Array(32).fill(7), recovery: { kind: 'app' }, dgrp: null, straggler: null, maxSpawns: 32, ...extra },
});
const kill = (task: string, what: 'task.kill' | 'task.restart' = 'task.kill'): Step => ({ kind: 'operator', request: { type: what, nonce: nonce(), task } });
/** A membership change (PROTOCOL §10.12) with stand-in signed bytes: the state keeps them for the
 *  journal and never checks them (replicas do, before ordering). */
const member = (request: OperatorRequest): Step => ({ kind: 'operator', request, signed: { bytes: new Uint8Array([nonces, 1, 2]), sig: new Uint8Array(64).fill(nonces) } });
const addNode = (agent: string, node: string, address: string): Step =>
  member({ type: 'node.add', nonce: nonce(), agent, node, address, port: 7403, publicKey: new Uint8Array(32).fill(3), spares: [] });
const removeNode = (node: string, kill = false): Step => member({ type: 'node.remove', nonce: nonce(), node, kill });
const ticks = (n: number): Step[] => Array.from({ length: n }, () => ({ kind: 'input', input: { type: 'tick' } }));
const failNode = (agent: string, inc = 1): Step => ({ kind: 'input', input: { type: 'node.failed', agent, inc } });

/** One proc.report per process of `task` from the agent of its node (read from the state now). */
function reportAll(s: ReplicatedState, task: string, kind: ProcReport['kind'], extra: (vpid: number) => Partial<ProcReport> = () => ({})): Step[] {
  const rec = s.cluster.tasks.get(task);
  if (rec === undefined) throw new Error(`no ${task}`);
  return [...rec.procs].map(([vpid, d]) => {
    const node = (d.context as { node: string | null }).node;
    const client = [...s.nodes].find(([, n]) => n.node === node)?.[0] ?? 'a1';
    const report: ProcReport = { task, vpid, kind, pid: 100 + vpid, exitCode: null, signal: null, reason: '', endpoint: '', ...extra(vpid) };
    return { kind: 'request', client, inc: s.nodes.get(client)?.inc ?? 1, request: { type: 'proc.report', reports: [report] } };
  });
}

function signal(s: ReplicatedState, task: string, vpid: number, signum: number, dest: number, arg: number): Step {
  const rec = s.cluster.tasks.get(task);
  if (rec === undefined) throw new Error(`no ${task}`);
  const node = (rec.procs.get(vpid)?.context as { node: string }).node;
  const client = [...s.nodes].find(([, n]) => n.node === node)?.[0] ?? 'a1';
  return { kind: 'request', client, request: { type: 'sig.request', task, vpid, signum, dest, arg, epoch: rec.signals.epoch } };
}

/** A progress report (PROTOCOL §13.2) from the agent of the process's node. */
function progress(s: ReplicatedState, task: string, vpid: number, permille: number): Step {
  const rec = s.cluster.tasks.get(task);
  const node = (rec?.procs.get(vpid)?.context as { node: string }).node;
  const client = [...s.nodes].find(([, n]) => n.node === node)?.[0] ?? 'a1';
  return { kind: 'request', client, request: { type: 'proc.progress', task, vpid, permille } };
}

const condemn = (target: string, accusers: [string, string], view: number): Step => ({
  kind: 'input',
  input: { type: 'replica.condemn', evidence: accusers.map((from) => signAccusation({ from, view, target, reason: 'silent' }, signer(from))) },
});

function fresh(): ReplicatedState {
  const agents = ['a1', 'a2', 'a3', 'a4', 'a5'].map((id, i) => ({ id, node: `n${i + 1}` }));
  const s = initialState({ replicas: ['r1', 'r2', 'r3'], replicaNodes: ['n1', 'n2', 'n3'], spareReplicas: ['r4', 'r5', 'r6'], agents });
  s.timers = { ...TIMERS };
  return s;
}

/** Steps that may depend on the state they are applied to are built just before they run. */
type Script = ((s: ReplicatedState) => Step[])[];
const run = (s: ReplicatedState, script: Script): ReplicatedState => {
  for (const make of script) for (const step of make(s)) apply(s, step);
  return s;
};
const all = (steps: Step[]) => () => steps;

// ---- the states --------------------------------------------------------------------------------

type Scenario = { name: string; build: Script; then: Script };

const SCENARIOS: Scenario[] = [
  { name: 'the initial state', build: [], then: [all([join('a1'), join('a2')]), all([submit(2)]), all(ticks(3))] },
  {
    name: 'plain tasks: finished, running, waiting, killed; a node failure and its retry',
    build: [
      all([join('a1'), join('a2'), join('a3'), join('a4')]),
      all([submit(2)]), (s) => reportAll(s, 't1', 'spawnSucceeded'), (s) => reportAll(s, 't1', 'terminatedNormally', () => ({ exitCode: 0 })),
      all([submit(3, { name: 'long' })]), (s) => reportAll(s, 't2', 'spawnSucceeded'),
      all([submit(40, { name: 'huge' })]),
      all([submit(1, { name: 'doomed' }), kill('t4')]),
      all([failNode('a1'), ...ticks(2)]),
      all([{ kind: 'request', client: 'a2', request: { type: 'echo', tag: 'x', fanout: 'all', count: 2, data: new Uint8Array([1, 2]) } }]),
    ],
    then: [
      all(ticks(4)), all([join('a1', 3, 2)]), (s) => reportAll(s, 't2', 'spawnSucceeded'), all(ticks(7)),
      all([kill('t2', 'task.restart'), kill('t3'), submit(1)]), all(ticks(8)), all([failNode('a3')]), all(ticks(10)),
    ],
  },
  {
    name: 'a linked task with group requests pending and point-to-point signals counted',
    build: [
      all([join('a1'), join('a2'), join('a3')]),
      all([submit(3, { mode: 'linked', name: 'mpi' })]),
      (s) => reportAll(s, 't1', 'spawnSucceeded', (v) => ({ endpoint: `10.0.0.${v}:700${v}` })),
      (s) => [signal(s, 't1', 0, 100, GSIG_BROADCAST, 5)],
      (s) => [signal(s, 't1', 1, 101, 2, -3)],
      (s) => [signal(s, 't1', 0, GSIG.REQ_SYNC, GSIG_CM, -7)],
      (s) => [signal(s, 't1', 1, GSIG.REQ_SYNC, GSIG_CM, -7)],
      all(ticks(1)),
    ],
    then: [
      (s) => [signal(s, 't1', 2, GSIG.REQ_SYNC, GSIG_CM, -7)],
      (s) => [signal(s, 't1', 0, GSIG.REQ_SETQUORUM, GSIG_CM, 2)],
      (s) => [signal(s, 't1', 1, GSIG.REQ_SETQUORUM, GSIG_CM, 2)],
      (s) => [signal(s, 't1', 2, GSIG.REQ_KILL, GSIG_CM, 1)],
      all(ticks(6)),
      (s) => [signal(s, 't1', 0, GSIG.REQ_SPAWN, GSIG_CM, 0)],
      (s) => [signal(s, 't1', 2, GSIG.REQ_SPAWN, GSIG_CM, 0)],
      all(ticks(2)), all([failNode('a2')]), all(ticks(12)),
    ],
  },
  {
    name: 'a group view with retired ids, agent reports and a replacement under way',
    build: [
      all([join('a1'), join('a2'), join('a3'), join('a4'), join('a5')]),
      all([submit(2)]), (s) => reportAll(s, 't1', 'spawnSucceeded'),
      all([condemn('r2', ['r1', 'r3'], 0)]),
      all(ticks(TIMERS.replicaStartTimeoutTicks)), // r4 never asks for the state: abandoned, r5 started
      all([
        { kind: 'request', client: 'a1', request: { type: 'error.report', gssn: 3, count: 1, kind: 'replica-timeout', suspects: ['r3'] } },
        { kind: 'request', client: 'a4', request: { type: 'error.report', gssn: 3, count: 2, kind: 'mismatch', suspects: ['r3', 'r1'] } },
      ]),
    ],
    then: [
      all([{ kind: 'input', input: { type: 'replica.add', id: 'r5', port: 41_234, sig: new Uint8Array(64).fill(5) } }]),
      all([condemn('r1', ['r3', 'r5'], 2)]),
      all(ticks(3)), (s) => reportAll(s, 't1', 'terminatedAbnormally', () => ({ signal: 'SIGKILL', reason: 'killed' })),
      all([join('a2', 4, 2)]), all(ticks(TIMERS.replicaStartTimeoutTicks + 1)),
    ],
  },
  {
    name: 'membership changes kept for a cluster reset: a node added and joined, one draining, one removed (PROTOCOL §10.12)',
    build: [
      all([join('a1'), join('a2'), join('a3'), join('a4'), join('a5')]),
      all([addNode('a6', 'n6', '10.0.0.16'), join('a6', 3)]),
      all([submit(6)]), (s) => reportAll(s, 't1', 'spawnSucceeded'),
      all([removeNode('n5'), removeNode('n4', true)]),
    ],
    then: [
      (s) => reportAll(s, 't1', 'terminatedNormally', () => ({ exitCode: 0 })), all(ticks(2)),
      all([removeNode('n6', true), addNode('a7', 'n7', '10.0.0.17'), join('a5', 2, 2)]), all(ticks(2)),
    ],
  },
  {
    name: 'a rollback task with a rank replaced and another being replaced (PROTOCOL §11.2)',
    build: [
      all([join('a1'), join('a2'), join('a3'), join('a4')]),
      all([submit(3, { mode: 'linked', name: 'heat', recovery: { kind: 'rollback', logging: 'hmpl', checkpoint: 'sco', intervalMs: 500, maxStateBytes: 4096 } })]),
      (s) => reportAll(s, 't1', 'spawnSucceeded', (v) => ({ endpoint: `10.0.0.${v}:7000` })),
      all([failNode('a1')]),
      (s) => reportAll(s, 't1', 'spawnSucceeded', (v) => ({ endpoint: `10.0.0.${v}:7000` })).slice(-1),
      all([failNode('a2')]),
    ],
    then: [(s) => reportAll(s, 't1', 'spawnSucceeded').slice(-1), all(ticks(4)), all([kill('t1', 'task.restart')])],
  },
  {
    name: 'a task with a straggler policy: progress reported, one process flagged (PROTOCOL §13)',
    build: [
      all([join('a1'), join('a2')]),
      all([submit(4, { mode: 'linked', name: 'sort', straggler: { factorHundredths: 150, afterPermille: 500 } })]),
      (s) => reportAll(s, 't1', 'spawnSucceeded', (v) => ({ endpoint: `10.0.0.${v}:7000` })),
      (s) => [progress(s, 't1', 0, 700), progress(s, 't1', 1, 650), progress(s, 't1', 2, 600), progress(s, 't1', 3, 100)],
    ],
    then: [(s) => [progress(s, 't1', 3, 600), progress(s, 't1', 2, 10)], all(ticks(2)), all([kill('t1', 'task.restart')])],
  },
];

const built = () => SCENARIOS.map((sc) => ({ ...sc, state: run(fresh(), sc.build) }));
const config = (s: ReplicatedState) => ({ timers: TIMERS, pool: s.pool });

describe('decodeState: round trip', () => {
  it('the scenarios reach the states they are meant to', () => {
    const [, plain, linked, group, , rollback] = built().map((b) => b.state) as ReplicatedState[];
    expect((rollback as ReplicatedState).cluster.tasks.get('t1')?.rollback).toEqual({
      ranks: [3, 1, 2], vacant: [], replacements: [1, 1, 0], spawning: { rank: 1, vpid: 4 }, marks: [[], [], []], groups: [0, 1, 2],
    });
    const plainTasks = [...(plain as ReplicatedState).cluster.tasks.values()];
    expect(plainTasks.map((t) => t.outcome)).toEqual(['normal', null, null, null]);
    expect(plainTasks.map((t) => t.fsm.value)).toEqual(['terminatedNormally', 'running', 'waitForResource', 'terminating']);
    expect(plainTasks[2]?.waitReason).toMatch(/needs 40 slots/);
    expect([...(plain as ReplicatedState).nodes.values()].filter((n) => n.failed)).toHaveLength(1);
    const t1 = (linked as ReplicatedState).cluster.tasks.get('t1');
    expect(t1?.signals.pending?.entries).toEqual([{ vpid: 0, signum: GSIG.REQ_SYNC, arg: -7 }, { vpid: 1, signum: GSIG.REQ_SYNC, arg: -7 }]);
    expect(t1?.sigStats).toMatchObject({ broadcasts: 1, pointToPoint: 1, groupRequests: 2 });
    expect(t1?.endpoints.size).toBe(3);
    const g = (group as ReplicatedState).group;
    expect(g.retired).toEqual(['r2', 'r4']);
    expect(g.recovery).toMatchObject({ id: 'r5', tried: ['n2', 'n4', 'n5'] });
    expect(g.reports.size).toBe(2);
    const sorting = (built().at(-1)?.state as ReplicatedState).cluster.tasks.get('t1');
    expect([...(sorting?.stragglerState?.entries ?? [])]).toEqual([
      [0, { permille: 700, flagged: false }], [1, { permille: 650, flagged: false }], [2, { permille: 600, flagged: false }], [3, { permille: 100, flagged: true }],
    ]);
  });

  for (const sc of SCENARIOS) {
    it(`${sc.name}: decodes to an equal state that re-encodes byte for byte and evolves identically`, () => {
      const original = run(fresh(), sc.build);
      const bytes = encodeState(original);
      const decoded = decodeState(bytes, config(original));
      if (!decoded.ok) throw new Error(`${decoded.code}: ${decoded.detail}`);
      const copy = decoded.value;
      expect(hex(encodeState(copy))).toBe(hex(bytes));
      expect(copy).toStrictEqual(original);
      // Continuing the same inputs on both gives the same effects and the same digest at every RSN.
      for (const make of sc.then) {
        const steps = make(original);
        expect(make(copy)).toEqual(steps);
        for (const step of steps) {
          expect(apply(copy, step)).toEqual(apply(original, step));
          expect(hex(digestState(copy, sha256))).toBe(hex(digestState(original, sha256)));
        }
      }
      // The continuation did real work, and the decoded copy shares nothing with the original.
      expect(hex(encodeState(copy))).not.toBe(hex(bytes));
      const before = hex(encodeState(original));
      for (const step of [join('a5', 1, 7), ...ticks(2), submit(1)]) apply(copy, step);
      expect(hex(encodeState(original))).toBe(before);
    });
  }

  it('takes timers and pool from the caller, not from the bytes', () => {
    const s = run(fresh(), SCENARIOS[3]?.build ?? []);
    const timers = { ...TIMERS, startTimeoutTicks: 99 };
    const r = decodeState(encodeState(s), { timers, pool: ['r1', 'r9'] });
    expect(r.ok && r.value.timers).toEqual(timers);
    expect(r.ok && r.value.pool).toEqual(['r1', 'r9']);
  });
});

// ---- totality ----------------------------------------------------------------------------------

/** Seeded PRNG (mulberry32): the same flips on every run. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Never throws; when it accepts, what it accepted is exactly the input. */
function total(bytes: Uint8Array, cfg: ReturnType<typeof config>): boolean {
  const r = decodeState(bytes, cfg);
  if (r.ok) expect(hex(encodeState(r.value))).toBe(hex(bytes));
  // A refusal comes from a check, never from an exception the decoder caught.
  else expect([r.code, r.detail]).toEqual([expect.stringMatching(/^WIRE_/), expect.not.stringMatching(/decoder fault/)]);
  return r.ok;
}

type Path = number[];
function leaves(t: unknown, path: Path = [], out: Path[] = []): Path[] {
  out.push(path);
  if (Array.isArray(t)) t.forEach((x, i) => leaves(x, [...path, i], out));
  return out;
}
function replaced(t: unknown, path: Path, value: unknown): unknown {
  if (path.length === 0) return value;
  const [i, ...rest] = path as [number, ...number[]];
  const copy = [...(t as unknown[])];
  copy[i] = replaced(copy[i], rest, value);
  return copy;
}
/** Machine data (a task's fsm, a process's data) is opaque plain data: any plain value fits. */
const inMachineData = (p: Path) => p[0] === 8 && p[1] === 2 && (p[3] === 8 || (p[3] === 9 && p[5] === 1)) && p.length > 4;

describe('decodeState: totality', () => {
  const rich = built().map((b) => b.state);
  // The plain-task scenario: finished and live tasks, outcomes, a failed node.
  const richest = rich[1] as ReplicatedState;
  const bytes = encodeState(richest);
  const tree = (() => {
    const r = unpack(bytes);
    if (!r.ok) throw new Error(r.detail);
    return r.value as unknown[];
  })();

  it('the canonical encoding has no msgpack maps: it parses strictly (PROTOCOL §5.4)', () => {
    for (const s of rich) expect(unpack(encodeState(s)).ok).toBe(true);
  });

  it('every truncation of a valid encoding is refused', () => {
    for (const s of rich) {
      const b = encodeState(s);
      for (let n = 0; n < b.length; n++) expect(decodeState(b.subarray(0, n), config(s)).ok).toBe(false);
    }
  });

  it('trailing bytes are refused', () => {
    for (const extra of [[0x00], [0xc0], [...bytes]]) {
      const b = new Uint8Array([...bytes, ...extra]);
      expect(decodeState(b, config(richest))).toMatchObject({ ok: false, code: 'WIRE_MALFORMED' });
    }
  });

  it('random byte flips never throw; any flip accepted is a different valid state encoded exactly', () => {
    const random = prng(20240607);
    let accepted = 0;
    for (let i = 0; i < 3000; i++) {
      const b = new Uint8Array(bytes);
      const flips = 1 + Math.floor(random() * 3);
      for (let k = 0; k < flips; k++) {
        const at = Math.floor(random() * b.length);
        b[at] = (b[at] as number) ^ (1 + Math.floor(random() * 255));
      }
      if (total(b, config(richest))) accepted++;
    }
    // Most flips break the msgpack or a type; a few only change a counter or a character.
    expect(accepted).toBeLessThan(3000 / 2);
  });

  it('a wrong type in any top-level field is refused', () => {
    const WRONG: unknown[] = ['x', -1, 0.5, null, true, new Uint8Array([1]), [], [['bad']], [[1, 2, 3, 4, 5, 6, 7]]];
    expect(tree).toHaveLength(14);
    for (let i = 0; i < tree.length; i++) {
      for (const w of WRONG) {
        const field = tree[i];
        // An empty list is a valid empty map or list where the field is one.
        if (Array.isArray(field) && Array.isArray(w) && w.length === 0 && ![0, 1, 2, 3, 8, 10].includes(i)) continue;
        // shutdownAt: null is the valid "no shutdown" (PROTOCOL §10.11).
        if (i === 11 && w === null) continue;
        const b = pack(replaced(tree, [i], w));
        const r = decodeState(b, config(richest));
        expect(r.ok, `field ${i} = ${JSON.stringify(w)}`).toBe(false);
      }
    }
  });

  it('every node of the tree replaced by a wrong value: never a throw; bytes and fractions refused outside machine data', () => {
    const random = prng(7);
    // Every node of the linked and group states; a seeded sample of the larger plain one.
    for (const [s, share] of [[rich[2], 1], [rich[3], 1], [richest, 0.2]] as const) {
      const t = (unpack(encodeState(s as ReplicatedState)) as { value: unknown }).value;
      for (const path of leaves(t).filter((p) => p.length > 0 && random() < share)) {
        for (const w of [new Uint8Array([7]), 0.5, -1, 'x', null, [0]]) {
          const ok = total(pack(replaced(t, path, w)), config(s as ReplicatedState));
          if (w instanceof Uint8Array || (w === 0.5 && !inMachineData(path))) expect(ok, `at ${path.join('.')}`).toBe(false);
        }
      }
    }
  });

  it('refuses what a Map would merge or the code never creates', () => {
    const decode = (t: unknown) => decodeState(pack(t), config(richest));
    const cluster = tree[8] as unknown[];
    const outcomes = tree[9] as unknown[];
    expect(outcomes.length).toBeGreaterThan(0);
    // A repeated operator nonce (the order list would keep it, the Map would merge it).
    expect(decode(replaced(tree, [9], [...outcomes, outcomes[0]]))).toMatchObject({ ok: false, detail: expect.stringMatching(/repeated/) });
    // A finished list that disagrees with the tasks' outcomes.
    expect(decode(replaced(tree, [8, 3], []))).toMatchObject({ ok: false, detail: expect.stringMatching(/disagree/) });
    // Unsorted or repeated map keys; a primary outside the replica set.
    const csn = tree[5] as unknown[];
    expect(csn.length).toBeGreaterThan(1);
    expect(decode(replaced(tree, [5], [...csn].reverse())).ok).toBe(false);
    expect(decode(replaced(tree, [5], [csn[0], csn[0]])).ok).toBe(false);
    expect(decode(replaced(tree, [3], 'r9'))).toMatchObject({ ok: false, detail: expect.stringMatching(/not a replica/) });
    // A task id that is not `t` and its number, or beyond nextTask.
    expect(decode(replaced(tree, [8, 2, 0, 0], 't01')).ok).toBe(false);
    expect(decode(replaced(tree, [8, 1], 1)).ok).toBe(false);
    // Machine data: an unknown tag, keys out of order, __proto__.
    const fsm = (cluster[2] as unknown[][])[0]?.[8] as unknown[];
    expect(decode(replaced(tree, [8, 2, 0, 8], [fsm[0], [2]])).ok).toBe(false);
    expect(decode(replaced(tree, [8, 2, 0, 8], [fsm[0], [1, 'b', 1, 'a', 2]])).ok).toBe(false);
    expect(decode(replaced(tree, [8, 2, 0, 8], [fsm[0], [1, '__proto__', 1]])).ok).toBe(false);
  });

  it('refuses a non-canonical msgpack encoding of a valid tree, and oversized or non-byte input', () => {
    const s = fresh();
    const b = encodeState(s); // 0x9e (a fixarray of 14) then rsn 0 as a positive fixint
    expect(b[0]).toBe(0x9e);
    expect(b[1]).toBe(0x00);
    const longer = new Uint8Array([0x9e, 0xcc, 0x00, ...b.subarray(2)]); // rsn 0 as a uint8
    expect(decodeState(longer, config(s))).toMatchObject({ ok: false, code: 'WIRE_MALFORMED' });
    expect(decodeState(new Uint8Array(MAX_STATE_BYTES + 1), config(s))).toMatchObject({ ok: false, code: 'WIRE_TOO_LARGE' });
    expect(decodeState('x' as unknown as Uint8Array, config(s)).ok).toBe(false);
    expect(decodeState(new Uint8Array(), config(s)).ok).toBe(false);
  });
});
