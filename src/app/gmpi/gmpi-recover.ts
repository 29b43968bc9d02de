// The mesh side of G_MPI_Recover_comm (spec §5.5, docs/PROTOCOL.md §9.5 `recoverComm`): once the
// barrier has fixed the new membership, take the dead out of the mesh, expect the spawned, replace
// the world communicator, and dial again the members whose connection broke but who live on.
// Gmpi.recoverComm (gmpi.ts) owns the barrier and the flags.
import type { Link } from '../link/link.ts';
import { type Comm, type CommLayer } from './comm.ts';
import { mapError, parseEndpoint } from './gmpi-api.ts';
import type { P2P } from './p2p.ts';

/** The world communicator of `members` (VPIDs, ascending) with id `epoch`, replacing `old`. */
export function adoptMembers(p2p: P2P, layer: CommLayer, old: Comm, members: readonly number[], epoch: number): Comm {
  for (const v of old.members) {
    if (v !== p2p.self && !members.includes(v)) {
      try {
        p2p.removePeer(v);
      } catch {
        // already removed
      }
    }
  }
  try {
    const fresh = members.filter((v) => v > p2p.self && !old.members.includes(v));
    if (fresh.length > 0) p2p.expect(fresh);
    layer.discardComm(old.id);
    return layer.create(epoch, members);
  } catch (e) {
    throw mapError(e); // not a member any more (killed): BAD_ARGUMENT
  }
}

/** A member whose connection broke but who lives on is connected again (P2P.revive). */
export function reviveLost(p2p: P2P, link: Link, members: readonly number[]): void {
  const lost = new Set(p2p.members().filter((m) => m.state === 'lost').map((m) => m.id));
  const again = link.memberList.flatMap((m) => {
    const ep = members.includes(m.vpid) && lost.has(m.vpid) ? parseEndpoint(m) : null;
    return ep === null ? [] : [{ id: m.vpid, ...ep }];
  });
  if (again.length > 0) p2p.revive(again);
}
