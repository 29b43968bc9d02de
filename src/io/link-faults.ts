// Injected link faults (`trine inject drop|delay|heal A B`, docs/OPERATIONS.md §7): frames this
// process sends to a peer, or receives on a connection bound to a peer, are dropped or held back
// for a while. A daemon of a cluster started with --allow-inject puts one of these between its
// Shell and its WebSocket transport (src/daemon/run-core.ts); without the flag none exists and
// frames go straight through. The transport (src/io/ws-transport.ts) is not touched: a fault
// sits at one end of the link, as a faulty NIC or a congested path would, so the protocol sees
// exactly what a real loss or delay shows it.
//
// Faults are kept per (direction, peer): `out` acts on what this process sends to the peer (the
// sending side, where `trine inject` puts a fault when it can reach the sender), `in` on what
// arrives from it (used when the sender is an agent, which the operator cannot reach). Only
// frames on a bound connection count as from a peer: an unverified header names nobody.
import type { ProcessId } from '../core/ports.ts';

/** The longest delay one may inject: beyond a minute a link is as good as cut; use drop. */
export const MAX_INJECT_DELAY_MS = 60_000;
/** Bytes of delayed frames held at once; above it further frames are dropped (and counted):
 *  a delayed busy link must not exhaust the daemon's memory. 64 maximum-size frames. */
export const MAX_DELAYED_BYTES = 64 * 1024 * 1024;
/** Faults held at once: two directions to every peer of a large cluster, with room to spare. */
export const MAX_LINK_FAULTS = 256;

export type LinkDirection = 'out' | 'in';
export type LinkFault = { kind: 'drop' } | { kind: 'delay'; delayMs: number };

export type LinkFaultCounters = {
  dropped: number;
  delayed: number;
  /** Frames dropped because MAX_DELAYED_BYTES were already held. */
  overflow: number;
};

const key = (direction: LinkDirection, peer: ProcessId) => `${direction} ${peer}`;

export class LinkFaults {
  readonly counters: LinkFaultCounters = { dropped: 0, delayed: 0, overflow: 0 };
  private readonly faults = new Map<string, { direction: LinkDirection; peer: ProcessId; fault: LinkFault }>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private heldBytes = 0;
  private closed = false;

  /** Sets (or with null clears) the fault on one direction of the link to `peer`. Returns
   *  false only when MAX_LINK_FAULTS are already set. */
  set(direction: LinkDirection, peer: ProcessId, fault: LinkFault | null): boolean {
    const k = key(direction, peer);
    if (fault === null) {
      this.faults.delete(k);
      return true;
    }
    if (!this.faults.has(k) && this.faults.size >= MAX_LINK_FAULTS) return false;
    if (fault.kind === 'delay' && !(Number.isInteger(fault.delayMs) && fault.delayMs > 0 && fault.delayMs <= MAX_INJECT_DELAY_MS)) {
      throw new RangeError(`delay must be an integer from 1 to ${MAX_INJECT_DELAY_MS} ms, got ${fault.delayMs}`);
    }
    this.faults.set(k, { direction, peer, fault });
    return true;
  }

  get(direction: LinkDirection, peer: ProcessId): LinkFault | null {
    return this.faults.get(key(direction, peer))?.fault ?? null;
  }

  list(): { direction: LinkDirection; peer: ProcessId; fault: LinkFault }[] {
    return [...this.faults.values()].map((f) => ({ ...f }));
  }

  /** A frame this process sends to `to`: `send` it now, later, or never. */
  send(to: ProcessId, frame: Uint8Array, send: (to: ProcessId, frame: Uint8Array) => void): void {
    const fault = this.faults.size === 0 ? null : this.get('out', to);
    if (fault === null) {
      send(to, frame);
      return;
    }
    this.apply(fault, frame.length, () => send(to, frame));
  }

  /** A frame that arrived on a connection bound to `from` (null: unbound, passed as is).
   *  Returns true if the fault took it (dropped, or held and `deliver`ed later). */
  receive(from: ProcessId | null, frame: Uint8Array, deliver: () => void): boolean {
    if (from === null || this.faults.size === 0) return false;
    const fault = this.get('in', from);
    if (fault === null) return false;
    this.apply(fault, frame.length, deliver);
    return true;
  }

  /** Forgets every held frame (the process is stopping). */
  close(): void {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.heldBytes = 0;
  }

  private apply(fault: LinkFault, bytes: number, go: () => void): void {
    if (fault.kind === 'drop' || this.closed) {
      this.counters.dropped++;
      return;
    }
    if (this.heldBytes + bytes > MAX_DELAYED_BYTES) {
      this.counters.overflow++;
      return;
    }
    this.counters.delayed++;
    this.heldBytes += bytes;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.heldBytes -= bytes;
      go();
    }, fault.delayMs);
    // A held frame must not keep a stopping daemon alive.
    timer.unref();
    this.timers.add(timer);
  }
}
