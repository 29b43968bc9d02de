// Byzantine replica behaviours, shared by the simulator and the daemons' fault injection (hence not
// under src/sim: no production file imports the simulator): a wrapper around a correct replica Core that
// rewrites what it sends before its shell signs it, or drops chosen inputs. The replica signs
// the rewritten frames with its own key, exactly as a compromised node would (DESIGN.md §2).
// Also the modes of `trine inject byzantine-replica R MODE` as behaviours, and the state
// corruption of `trine inject corrupt-replica R` (both also used by the simulator's plans).
import type { Core, CoreEffect, CoreInput } from '../core/node.ts';
import type { ProcessId, Signer } from '../core/ports.ts';
import { pack } from '../core/wire/frame.ts';
import type { ReplicatedState } from '../core/replicated-state.ts';
import { unreachable } from '../base/result.ts';
import { orderClaim, type GroupMsgGC, type Item, type PtpPayload, type SignedCG } from '../core/wire/messages.ts';

export type ByzantineBehaviour =
  /** Change the content of the GCs with GSSN in [fromGssn, toGssn] sent to `agents`. Replicas
   *  given different `variant`s send mutually different contents (spec §9.2 A16/A17). */
  | { type: 'gc.alter'; fromGssn: number; toGssn: number; agents: readonly ProcessId[] | 'all'; variant: number }
  /** As primary, number wrappers from `atRsn` on one higher: RSN `atRsn` is skipped (A19). */
  | { type: 'rsn.skip'; atRsn: number }
  /** As primary, tell `backup` a different order than the other backup: the first two requests
   *  ordered back to back from RSN `atRsn` on, swapped (when they come from different clients,
   *  or are operators' requests, so the backup's per-agent CSN checks still pass). A request
   *  whose next RSN is a group input (a tick) has no partner: it goes out as ordered, and the
   *  swap waits for the next pair. Both backups are correct; their states diverge. */
  | { type: 'rsn.swap'; backup: ProcessId; atRsn: number }
  /** Acknowledge CSNs not yet delivered: every `gack` to an agent claims `by` more. An agent
   *  must not drop a request on one replica's word (PROTOCOL §5.5: f+1 acks). */
  | { type: 'ack.inflate'; by: number }
  /** As primary, silently drop `client`'s CGs with CSN in `csns` (all when 'all'); with
   *  `relayed`, also the wrappers of those CGs the backups forward (spec §9.2 A18). */
  | { type: 'cg.drop'; client: ProcessId; csns: readonly number[] | 'all'; relayed: boolean }
  /** As primary, stop ordering: drop every agent's CG, every request a backup forwards
   *  (`wrapper` with RSN 0) and every operator request, while heartbeats, probes and everything
   *  else go on as before (`silent-heartbeating`; spec §9.2 A18 for every request). */
  | { type: 'order.withhold' }
  /** Send nothing at all to `agents` (no group messages, acks, probes or handshakes), and keep
   *  talking to the replicas (`drop-agent-messages`). */
  | { type: 'agents.mute'; agents: readonly ProcessId[] }
  /** As primary, order every `replica.add` with `port` instead of the port the replacement
   *  signed (PROTOCOL §10.6): the backups must not take it. */
  | { type: 'port.alter'; port: number }
  /** As a backup, confirm every order to the other backup with a wrong digest (PROTOCOL §5.8),
   *  signed as a real liar would sign it (when the wrapper has the replica's signer; without,
   *  the claim's signature no longer matches, and the lie is a withheld confirmation). */
  | { type: 'order.lie' }
  /** To a replacement taking the state (PROTOCOL §10.6), send a forged state digest (`digest`)
   *  or forged state chunks (`chunk`): it must install only what two members vouch for. */
  | { type: 'state.forge'; what: 'digest' | 'chunk' };

export function describeBehaviour(b: ByzantineBehaviour): string {
  switch (b.type) {
    case 'gc.alter':
      return `gc.alter gssn ${b.fromGssn}..${b.toGssn} to ${b.agents === 'all' ? 'all' : b.agents.join(',')} v${b.variant}`;
    case 'rsn.skip':
      return `rsn.skip at ${b.atRsn}`;
    case 'ack.inflate':
      return `ack.inflate +${b.by}`;
    case 'rsn.swap':
      return `rsn.swap ${b.atRsn}/${b.atRsn + 1} for ${b.backup}`;
    case 'cg.drop':
      return `cg.drop ${b.client} csn ${b.csns === 'all' ? 'all' : b.csns.join(',')}${b.relayed ? ' +relayed' : ''}`;
    case 'order.withhold':
      return 'order.withhold';
    case 'agents.mute':
      return `agents.mute ${b.agents.join(',')}`;
    case 'port.alter':
      return `port.alter ${b.port}`;
    case 'order.lie':
      return 'order.lie';
    case 'state.forge':
      return `state.forge ${b.what}`;
    default:
      return unreachable(b);
  }
}

/** A copy whose command differs from the correct one (a wrong command, spec §2.1). */
function alterGC(gc: GroupMsgGC, variant: number): GroupMsgGC {
  const p = gc.payload;
  switch (p.type) {
    case 'echo.reply': {
      const data = new Uint8Array(p.data.length + 1);
      data.set(p.data, 0);
      data[p.data.length] = variant & 0xff;
      return { ...gc, payload: { ...p, data } };
    }
    case 'proc.spawn':
      return { ...gc, payload: { ...p, args: [...p.args, `x${variant & 0xff}`] } };
    case 'proc.terminate':
      return { ...gc, payload: { ...p, vpid: p.vpid + 1 + (variant & 0xff) } };
    case 'procs.adopt':
      return { ...gc, payload: { ...p, procs: [...p.procs, { task: 't1', vpid: variant & 0xff, pid: 1, linked: false }] } };
    case 'proc.signal':
      return { ...gc, payload: { ...p, arg: (p.arg + 1 + (variant & 0xff)) | 0 } };
    case 'proc.mapping':
      return { ...gc, payload: { ...p, quorum: p.quorum + 1 + (variant & 0xff) } };
    case 'replicas':
    case 'replica.spawn':
      return { ...gc, payload: { ...p, view: p.view + 1 + (variant & 0xff) } };
    case 'replica.kill':
      return { ...gc, payload: { ...p, id: `${p.id}x` } };
    case 'node.shutdown':
      return { ...gc, payload: { ...p, rsn: p.rsn + 1 + (variant & 0xff) } };
    case 'rollback.guard':
      return { ...gc, payload: { ...p, taskKey: flipped(p.taskKey) } };
    case 'rollback.release':
      return { ...gc, payload: { ...p, task: `${p.task}0` } };
    case 'proc.dgrp':
      return { ...gc, payload: { ...p, view: p.view + 1 + (variant & 0xff) } };
    default:
      return unreachable(p);
  }
}

/** `bytes` with its first bit flipped (a copy; empty stays empty, one byte added instead). */
function flipped(bytes: Uint8Array): Uint8Array {
  if (bytes.length === 0) return Uint8Array.of(1);
  const out = Uint8Array.from(bytes);
  out[0] = (out[0] as number) ^ 1;
  return out;
}

/** What a Byzantine replica remembers between steps: the CG it ordered at each RSN, the RSNs it
 *  gave group inputs, and where the swap of `rsn.swap` stands. */
type Memory = { ordered: Map<number, SignedCG>; inputs: Set<number>; swapAt: number | null };

/** The item as sent, or null to withhold it for now (the core retransmits it later). */
function rewriteItem(to: ProcessId, item: Item, behaviours: readonly ByzantineBehaviour[], memory: Memory, signer: Signer | null): Item | null {
  let out = item;
  if (out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper' && out.body.rsn > 0) {
    memory.ordered.set(out.body.rsn, out.body.signed);
  }
  if (out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper.input') memory.inputs.add(out.body.rsn);
  for (const b of behaviours) {
    if (b.type === 'agents.mute' && b.agents.includes(to)) return null;
    if (b.type === 'gc.alter' && out.type === 'grp' && out.body.type === 'gc') {
      const gc = out.body.gc;
      if (gc.gssn < b.fromGssn || gc.gssn > b.toGssn) continue;
      if (b.agents !== 'all' && !b.agents.includes(gc.dest)) continue;
      out = { ...out, body: { type: 'gc', gc: alterGC(gc, b.variant) } };
    } else if (b.type === 'port.alter' && out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper.input' && out.body.input.type === 'replica.add') {
      out = { ...out, body: { ...out.body, input: { ...out.body.input, port: b.port } } };
    } else if (b.type === 'order.lie' && out.type === 'ptp' && out.body !== null && out.body.type === 'order') {
      const digest = flipped(out.body.digest);
      const sig = signer === null ? out.body.sig : signer.sign(pack(orderClaim(signer.id, out.body.view, out.body.rsn, digest)));
      out = { ...out, body: { ...out.body, digest, sig } };
    } else if (b.type === 'state.forge' && out.type === 'ptp' && out.body !== null && out.body.type === (b.what === 'digest' ? 'state.digest' : 'state.chunk')) {
      const body = out.body as Extract<PtpPayload, { type: 'state.digest' | 'state.chunk' }>;
      out = { ...out, body: body.type === 'state.digest' ? { ...body, digest: flipped(body.digest) } : { ...body, data: flipped(body.data) } };
    } else if (b.type === 'ack.inflate' && out.type === 'gack') {
      out = { ...out, ack: out.ack + b.by };
    } else if (b.type === 'rsn.skip' && out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper') {
      if (out.body.rsn >= b.atRsn) out = { ...out, body: { ...out.body, rsn: out.body.rsn + 1 } };
    } else if (b.type === 'rsn.swap' && to === b.backup && out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper') {
      const rsn = out.body.rsn;
      // Slide the pair past RSNs that cannot be swapped: group inputs, and one agent's two
      // requests (a swap would fail the CSN check; an operator's, CSN 0, are ordered by nonce).
      let at = memory.swapAt ?? b.atRsn;
      for (;;) {
        const a = memory.ordered.get(at);
        const c = memory.ordered.get(at + 1);
        if (memory.inputs.has(at)) at += 1;
        else if (memory.inputs.has(at + 1)) at += 2;
        else if (a !== undefined && c !== undefined && a.cg.client === c.cg.client && a.cg.csn !== 0) at += 1;
        else break;
      }
      memory.swapAt = at;
      if (rsn !== at && rsn !== at + 1) continue;
      const first = memory.ordered.get(at);
      const second = memory.ordered.get(at + 1);
      // Until the second request is ordered, the first one is withheld from this backup.
      if (first === undefined || second === undefined) return rsn === at ? null : out;
      out = { ...out, body: { ...out.body, signed: rsn === at ? second : first } };
    }
  }
  return out;
}

function dropped(item: Item, behaviours: readonly ByzantineBehaviour[]): boolean {
  for (const b of behaviours) {
    if (b.type === 'order.withhold') {
      if (item.type === 'op.request' || (item.type === 'grp' && item.body.type === 'cg')) return true;
      if (item.type === 'ptp' && item.body !== null && item.body.type === 'wrapper' && item.body.rsn === 0) return true;
      continue;
    }
    if (b.type !== 'cg.drop') continue;
    let cg = null;
    if (item.type === 'grp' && item.body.type === 'cg') cg = item.body.signed.cg;
    else if (b.relayed && item.type === 'ptp' && item.body !== null && item.body.type === 'wrapper') cg = item.body.signed.cg;
    if (cg === null || cg.client !== b.client) continue;
    if (b.csns === 'all' || b.csns.includes(cg.csn)) return true;
  }
  return false;
}

/** `inner` with the given misbehaviours: a list, or a function read at every step (behaviours
 *  switched on while the replica runs, World.misbehave). Rewrites make new objects: the inner
 *  core's own buffers (what it will retransmit) are left as it built them, and rewritten again
 *  on resend. */
export function byzantineCore<C extends Core>(
  inner: C, behaviours: readonly ByzantineBehaviour[] | (() => readonly ByzantineBehaviour[]), signer: Signer | null = null,
): Core {
  const current = typeof behaviours === 'function' ? behaviours : () => behaviours;
  const filterInput = (input: CoreInput, now: readonly ByzantineBehaviour[]): CoreInput | null => {
    if (input.type !== 'frame') return input;
    const items = input.frame.items.filter((i) => !dropped(i, now));
    if (items.length === input.frame.items.length) return input;
    if (items.length === 0) return null;
    return { ...input, frame: { ...input.frame, items } };
  };
  const memory: Memory = { ordered: new Map(), inputs: new Set(), swapAt: null };
  return {
    id: inner.id,
    step(input: CoreInput): CoreEffect[] {
      const now = current();
      if (now.length === 0) return inner.step(input);
      const filtered = filterInput(input, now);
      if (filtered === null) return [];
      const out: CoreEffect[] = [];
      for (const e of inner.step(filtered)) {
        if (e.type !== 'send') {
          out.push(e);
          continue;
        }
        const item = rewriteItem(e.to, e.item, now, memory, signer);
        if (item !== null) out.push(item === e.item ? e : { ...e, item });
      }
      return out;
    },
    nextWakeMs: () => inner.nextWakeMs(),
  };
}

// ---- `trine inject byzantine-replica R MODE` and `trine inject corrupt-replica R` -------------

/** The modes of `trine inject byzantine-replica R MODE` (docs/OPERATIONS.md §7). */
export const BYZANTINE_MODES = ['equivocate', 'wrong-command', 'skip-rsn', 'silent-heartbeating', 'drop-agent-messages'] as const;
export type ByzantineMode = (typeof BYZANTINE_MODES)[number];

/** What a mode needs to know of the cluster: the replica it runs in, the group and the agents,
 *  and where it starts (the next RSN and GSSN, so the misbehaviour begins now, not at 1). */
export type ModeContext = {
  self: ProcessId;
  replicas: readonly ProcessId[];
  agents: readonly ProcessId[];
  nextRsn: number;
  nextGssn: number;
  /** Distinguishes the contents of two liars (A17); any value 1–255. */
  variant?: number;
};

/** The behaviours of one mode:
 *  - `equivocate`: as primary, give one backup the next two requests in the other order
 *    (`rsn.swap`, PROTOCOL §5.8), the last backup of the set;
 *  - `wrong-command`: a different content in every group message to every agent from now on
 *    (`gc.alter` to 'all', spec §9.2 A16);
 *  - `skip-rsn`: as primary, skip the next RSN (`rsn.skip`, A19);
 *  - `silent-heartbeating`: as primary, order nothing more but keep heartbeating and answering
 *    probes (`order.withhold`);
 *  - `drop-agent-messages`: send the agents nothing at all (`agents.mute`). */
export function behavioursForMode(mode: ByzantineMode, c: ModeContext): ByzantineBehaviour[] {
  switch (mode) {
    case 'equivocate': {
      const backup = [...c.replicas].reverse().find((r) => r !== c.self) ?? c.self;
      return [{ type: 'rsn.swap', backup, atRsn: c.nextRsn }];
    }
    case 'wrong-command':
      return [{ type: 'gc.alter', fromGssn: c.nextGssn, toGssn: Number.MAX_SAFE_INTEGER, agents: 'all', variant: c.variant ?? 1 }];
    case 'skip-rsn':
      return [{ type: 'rsn.skip', atRsn: c.nextRsn }];
    case 'silent-heartbeating':
      return [{ type: 'order.withhold' }];
    case 'drop-agent-messages':
      return [{ type: 'agents.mute', agents: [...c.agents] }];
    default:
      return unreachable(mode);
  }
}

/** Ways to corrupt a replica's replicated state in place, each a field the digest covers
 *  (PROTOCOL §5.4):
 *  - `slots`: a node record's slot count (changes nothing the replica sends while no task is
 *    placed; only the digest comparison can find it);
 *  - `csn`: an agent's `csnReceived` one higher (the replica then refuses that agent's next
 *    request as a retransmission);
 *  - `chain`: an agent's `lastGssnTo` one higher (the replica's next group message to it links
 *    to a GSSN that does not exist; that message then repairs the field, so unless the digest
 *    is compared in between, only the agent's mismatch report shows it).
 *  A replica's digest is recomputed when its RSN or GSSN moves: a corruption shows in its
 *  heartbeats from its next ordered input on. */
export const CORRUPTIONS = ['slots', 'csn', 'chain'] as const;
export type Corruption = (typeof CORRUPTIONS)[number];

/** Flip `kind` in `state` (the live object a replica core works on), at the first agent in id
 *  order that has something to flip; returns what was changed, or null when nothing could be
 *  (no agent known yet). */
export function corruptState(state: ReplicatedState, kind: Corruption): string | null {
  const agents = [...state.nodes.keys()].sort();
  switch (kind) {
    case 'slots': {
      // A joined agent's: before its join is applied, the join would overwrite the count.
      const a = agents.find((x) => state.nodes.get(x)?.joined === true) ?? agents[0];
      const rec = a === undefined ? undefined : state.nodes.get(a);
      if (a === undefined || rec === undefined) return null;
      state.nodes.set(a, { ...rec, slots: rec.slots + 1 });
      return `${a} slots ${rec.slots} → ${rec.slots + 1}`;
    }
    case 'csn': {
      const a = agents.find((x) => state.csnReceived.has(x));
      if (a === undefined) return null;
      const csn = state.csnReceived.get(a) as number;
      state.csnReceived.set(a, csn + 1);
      return `${a} csnReceived ${csn} → ${csn + 1}`;
    }
    case 'chain': {
      const a = agents.find((x) => state.lastGssnTo.has(x)) ?? agents[0];
      if (a === undefined) return null;
      const g = state.lastGssnTo.get(a) ?? 0;
      state.lastGssnTo.set(a, g + 1);
      return `${a} lastGssnTo ${g} → ${g + 1}`;
    }
    default:
      return unreachable(kind);
  }
}
