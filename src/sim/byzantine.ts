// Byzantine replica behaviours for the simulator: a wrapper around a correct replica Core that
// rewrites what it sends before its shell signs it, or drops chosen inputs. The replica signs
// the rewritten frames with its own key, exactly as a compromised node would (DESIGN.md §2).
import type { Core, CoreEffect, CoreInput } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import { unreachable } from '../core/result.ts';
import type { GroupMsgGC, Item, SignedCG } from '../core/wire/messages.ts';

export type ByzantineBehaviour =
  /** Change the content of the GCs with GSSN in [fromGssn, toGssn] sent to `agents`. Replicas
   *  given different `variant`s send mutually different contents (spec §9.2 A16/A17). */
  | { type: 'gc.alter'; fromGssn: number; toGssn: number; agents: readonly ProcessId[] | 'all'; variant: number }
  /** As primary, number wrappers from `atRsn` on one higher: RSN `atRsn` is skipped (A19). */
  | { type: 'rsn.skip'; atRsn: number }
  /** As primary, tell `backup` a different order than the other backup: the requests at RSN
   *  `atRsn` and `atRsn + 1` swapped (when they come from different agents, so the backup's
   *  per-agent CSN checks still pass). Both backups are correct; their states diverge. */
  | { type: 'rsn.swap'; backup: ProcessId; atRsn: number }
  /** Acknowledge CSNs not yet delivered: every `gack` to an agent claims `by` more. An agent
   *  must not drop a request on one replica's word (PROTOCOL §5.5: f+1 acks). */
  | { type: 'ack.inflate'; by: number }
  /** As primary, silently drop `client`'s CGs with CSN in `csns` (all when 'all'); with
   *  `relayed`, also the wrappers of those CGs the backups forward (spec §9.2 A18). */
  | { type: 'cg.drop'; client: ProcessId; csns: readonly number[] | 'all'; relayed: boolean };

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
    default:
      return unreachable(p);
  }
}

/** What a Byzantine replica remembers between steps: the CG it ordered at each RSN. */
type Memory = { ordered: Map<number, SignedCG> };

/** The item as sent, or null to withhold it for now (the core retransmits it later). */
function rewriteItem(to: ProcessId, item: Item, behaviours: readonly ByzantineBehaviour[], memory: Memory): Item | null {
  let out = item;
  if (out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper' && out.body.rsn > 0) {
    memory.ordered.set(out.body.rsn, out.body.signed);
  }
  for (const b of behaviours) {
    if (b.type === 'gc.alter' && out.type === 'grp' && out.body.type === 'gc') {
      const gc = out.body.gc;
      if (gc.gssn < b.fromGssn || gc.gssn > b.toGssn) continue;
      if (b.agents !== 'all' && !b.agents.includes(gc.dest)) continue;
      out = { ...out, body: { type: 'gc', gc: alterGC(gc, b.variant) } };
    } else if (b.type === 'ack.inflate' && out.type === 'gack') {
      out = { ...out, ack: out.ack + b.by };
    } else if (b.type === 'rsn.skip' && out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper') {
      if (out.body.rsn >= b.atRsn) out = { ...out, body: { ...out.body, rsn: out.body.rsn + 1 } };
    } else if (b.type === 'rsn.swap' && to === b.backup && out.type === 'ptp' && out.body !== null && out.body.type === 'wrapper') {
      const rsn = out.body.rsn;
      if (rsn !== b.atRsn && rsn !== b.atRsn + 1) continue;
      const first = memory.ordered.get(b.atRsn);
      const second = memory.ordered.get(b.atRsn + 1);
      // Until the second request is ordered, the first one is withheld from this backup.
      if (first === undefined || second === undefined) return rsn === b.atRsn ? null : out;
      if (first.cg.client === second.cg.client) continue; // a swap would fail the CSN check
      out = { ...out, body: { ...out.body, signed: rsn === b.atRsn ? second : first } };
    }
  }
  return out;
}

function dropped(item: Item, behaviours: readonly ByzantineBehaviour[]): boolean {
  for (const b of behaviours) {
    if (b.type !== 'cg.drop') continue;
    let cg = null;
    if (item.type === 'grp' && item.body.type === 'cg') cg = item.body.signed.cg;
    else if (b.relayed && item.type === 'ptp' && item.body !== null && item.body.type === 'wrapper') cg = item.body.signed.cg;
    if (cg === null || cg.client !== b.client) continue;
    if (b.csns === 'all' || b.csns.includes(cg.csn)) return true;
  }
  return false;
}

/** `inner` with the given misbehaviours. Rewrites make new objects: the inner core's own
 *  buffers (what it will retransmit) are left as it built them, and rewritten again on resend. */
export function byzantineCore<C extends Core>(inner: C, behaviours: readonly ByzantineBehaviour[]): Core {
  const filterInput = (input: CoreInput): CoreInput | null => {
    if (input.type !== 'frame') return input;
    const items = input.frame.items.filter((i) => !dropped(i, behaviours));
    if (items.length === input.frame.items.length) return input;
    if (items.length === 0) return null;
    return { ...input, frame: { ...input.frame, items } };
  };
  const memory: Memory = { ordered: new Map() };
  return {
    id: inner.id,
    step(input: CoreInput): CoreEffect[] {
      const filtered = filterInput(input);
      if (filtered === null) return [];
      const out: CoreEffect[] = [];
      for (const e of inner.step(filtered)) {
        if (e.type !== 'send') {
          out.push(e);
          continue;
        }
        const item = rewriteItem(e.to, e.item, behaviours, memory);
        if (item !== null) out.push(item === e.item ? e : { ...e, item });
      }
      return out;
    },
    nextWakeMs: () => inner.nextWakeMs(),
  };
}
