// Who dials whom (issue 2): the peers a process connects to, read from cluster.json. Shared by
// the daemons (src/daemon/run-core.ts) and the operator's connection (cli/status-client.ts),
// which must agree on it: a peer nobody dials is never reached.
import type { ProcessId } from '../core/ports.ts';
import { processEntry, replicaPool, type Cluster } from './cluster-dir.ts';
import type { Endpoint } from './ws-transport.ts';

/** Peers a process dials (issue 2): agents dial every replica; replica ri dials rj for j > i
 *  and the watchdog; the operator dials the replicas and the watchdog; the watchdog listens.
 *  "Every replica" is the whole pool, spares included (PROTOCOL §10.6); a daemon dials the
 *  spares only on demand (splitSpares). Nobody dials an agent here, even one that listens (a
 *  cluster of several hosts): only the operator does, on demand, when it reads task output
 *  from it (PROTOCOL §7.1, cli/status-client.ts). */
export function dialTargets(cluster: Cluster, id: ProcessId): Record<ProcessId, Endpoint> {
  const c = cluster.config;
  const self = processEntry(cluster, id);
  const listenOf = (peer: ProcessId): Endpoint => {
    const ep = processEntry(cluster, peer).listen;
    if (ep === null) throw new TypeError(`${peer} has no listen address`);
    return ep;
  };
  const replicas = replicaPool(c.membership);
  const out: Record<ProcessId, Endpoint> = {};
  switch (self.kind) {
    case 'agent':
      for (const r of replicas) out[r] = listenOf(r);
      break;
    case 'replica': {
      const i = replicas.indexOf(id);
      for (const r of replicas.slice(i + 1)) out[r] = listenOf(r);
      out[c.membership.scc] = listenOf(c.membership.scc);
      break;
    }
    case 'operator':
      for (const r of replicas) out[r] = listenOf(r);
      out[c.membership.scc] = listenOf(c.membership.scc);
      break;
    case 'watchdog':
      break;
  }
  return out;
}

/** The spare replicas among `targets` (the pool beyond cluster.json's initial replicas) are
 *  dialed only while the core addresses them (ws-transport DIAL_DEMAND_MS): a spare mostly is
 *  not running, and dialing six of them every 500 ms cost each daemon ~12 refused connects a
 *  second. The core's hellos to a replacement make the transport dial it at once. */
export function splitSpares(cluster: Cluster, targets: Record<ProcessId, Endpoint>): { dial: Record<ProcessId, Endpoint>; dialOnDemand: Record<ProcessId, Endpoint> } {
  const initial = new Set(cluster.config.membership.replicas);
  const spares = new Set(replicaPool(cluster.config.membership).filter((r) => !initial.has(r)));
  const out = { dial: {} as Record<ProcessId, Endpoint>, dialOnDemand: {} as Record<ProcessId, Endpoint> };
  for (const [peer, ep] of Object.entries(targets)) (spares.has(peer) ? out.dialOnDemand : out.dial)[peer] = ep;
  return out;
}
