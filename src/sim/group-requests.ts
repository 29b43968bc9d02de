// t.group-request (issue 15 item 2; spec §4.5–4.6; PROTOCOL §9.2): every group request the manager
// acted on had a quorum of matching requests, from members of the task, in the epoch it was acted
// in; a request sent in any other epoch (stale) counted for nothing.
//
// The check models none of the manager's code. It sees what the task's processes saw and did:
//   - the requests each process sent, with the epoch its library attached (TaskSim.appSend);
//   - the replies of the atomic services, REP_SYNC and REP_QUORUMSET, which the manager
//     broadcasts the moment it accepts (spec §4.5): accepting a request of epoch E ends E (E+1)
//     and the reply's broadcast carries E+2, so a reply of epoch X answers requests of X−2;
//   - the quorum as the processes were told it: each mapping carries it, and so does every
//     REP_QUORUMSET; the latest of those by epoch is the quorum of a later epoch;
//   - who was surely a member when the reply was accepted: a process of the task whose mapping
//     was sent in the epoch asked or before (so the manager had it running before it accepted,
//     which ends that epoch), was still alive on its node's OS when the first
//     process heard the reply, whose death no NTF_DIED had announced (a node declared failed
//     loses its members while they still run), on a node with no fault injected since it
//     started, and of a task no one had asked to kill.
// Acting on a value needs min(quorum, members) matching requests (PROTOCOL §9.2); members can
// only be more than the sure ones, so `matching ≥ min(quorum, sure members)` holds for a correct
// manager, and a manager that counts a stale request, a duplicate, a non-member or a
// mismatched value shows as a reply with too few.
import type { ProcessId } from '../core/ports.ts';
import { GSIG, GSIG_BROADCAST, GSIG_CM } from '../core/signals.ts';

/** A request as a linked process's library sent it. */
export type SentRequest = {
  era: number; task: string; vpid: number; pid: number; signum: number; dest: number; arg: number; epoch: number; atMs: number;
};

/** Quorum as a process was told it: by its mapping, or by a REP_QUORUMSET broadcast. */
export type QuorumHeard = { era: number; task: string; epoch: number; quorum: number; atMs: number };

/** A linked process as the check needs it. */
export type RequestingApp = {
  era: number; task: string; vpid: number; pid: number; agent: ProcessId;
  /** The epoch its first mapping carried (null: none came): the manager had it running from then on. */
  mappedEpoch: number | null;
  received: readonly { signum: number; src: number; dest: number; arg: number; epoch: number; atMs: number }[];
};

export type GroupRequestFacts = {
  requests: readonly SentRequest[];
  quorums: readonly QuorumHeard[];
  apps: readonly RequestingApp[];
  /** When process `pid` on `agent`'s node started and ended on its OS (ended null: runs). */
  lifetime: (agent: ProcessId, pid: number) => { startedAtMs: number; exitedAtMs: number | null } | null;
  /** Whether `agent`'s node had a fault (its agent died, it lost power, it was cut off) in [fromMs, toMs]. */
  troubled: (agent: ProcessId, fromMs: number, toMs: number) => boolean;
  /** When the operator first asked to kill task `task` of era `era` (null: never). */
  killAskedAtMs: (era: number, task: string) => number | null;
};

/** The atomic services: their reply goes out the moment the request is accepted. */
const ATOMIC: ReadonlyMap<number, number> = new Map([[GSIG.REP_SYNC, GSIG.REQ_SYNC], [GSIG.REP_QUORUMSET, GSIG.REQ_SETQUORUM]]);

/** Checks every reply; `fail` gets each violation. Returns how many replies it judged. */
export function checkGroupRequests(f: GroupRequestFacts, fail: (message: string) => void): number {
  // The first delivery of each reply, by era, task and epoch (t.atomic-broadcast checks the rest agree).
  const replies = new Map<string, { era: number; task: string; epoch: number; signum: number; arg: number; atMs: number }>();
  for (const app of f.apps) {
    for (const r of app.received) {
      if (r.src !== GSIG_CM || r.dest !== GSIG_BROADCAST || !ATOMIC.has(r.signum)) continue;
      const key = `${app.era}|${app.task}|${r.epoch}`;
      const seen = replies.get(key);
      if (seen === undefined || r.atMs < seen.atMs) replies.set(key, { era: app.era, task: app.task, epoch: r.epoch, signum: r.signum, arg: r.arg, atMs: r.atMs });
    }
  }
  for (const rep of replies.values()) {
    const asked = rep.epoch - 2;
    const requestSignum = ATOMIC.get(rep.signum) as number;
    const matching = new Set(f.requests.filter((q) => q.era === rep.era && q.task === rep.task && q.epoch === asked
      && q.dest === GSIG_CM && q.signum === requestSignum && q.arg === rep.arg).map((q) => q.vpid));
    const what = `${rep.task} (era ${rep.era}): ${rep.signum === GSIG.REP_SYNC ? 'REP_SYNC' : 'REP_QUORUMSET'}(${rep.arg}) of epoch ${rep.epoch}`;
    if (matching.size === 0) {
      fail(`${what} answers no request: none of epoch ${asked} asked for it`);
      continue;
    }
    const quorum = quorumOf(f.quorums, rep.era, rep.task, asked);
    if (quorum === null) continue;
    const members = sureMembers(f, rep.era, rep.task, asked, rep.atMs);
    const needed = Math.max(1, Math.min(quorum, members));
    if (matching.size < needed) {
      fail(`${what} was acted on with ${matching.size} matching request(s) of epoch ${asked} (VPIDs ${[...matching].sort((a, b) => a - b).join(',')}), but the quorum was ${quorum} and ${members} member(s) surely counted`);
    }
  }
  return replies.size;
}

/** The quorum in force for requests of `epoch`: the latest the processes were told at or before it. */
function quorumOf(quorums: readonly QuorumHeard[], era: number, task: string, epoch: number): number | null {
  let best: QuorumHeard | null = null;
  for (const q of quorums) {
    if (q.era !== era || q.task !== task || q.epoch > epoch) continue;
    if (best === null || q.epoch > best.epoch || (q.epoch === best.epoch && q.atMs >= best.atMs)) best = q;
  }
  return best === null ? null : best.quorum;
}

/** The distinct VPIDs surely running members when requests of `epoch` were accepted, at or
 *  before `atMs` (see the header). */
function sureMembers(f: GroupRequestFacts, era: number, task: string, epoch: number, atMs: number): number {
  const killAsked = f.killAskedAtMs(era, task);
  if (killAsked !== null && killAsked <= atMs) return 0;
  const announcedDead = (vpid: number, from: number): boolean => f.apps.some((a) => a.era === era && a.task === task
    && a.received.some((r) => r.src === GSIG_CM && r.dest === GSIG_BROADCAST && r.signum === GSIG.NTF_DIED && r.arg === vpid && r.epoch >= from && r.epoch <= epoch + 1));
  const vpids = new Set<number>();
  for (const app of f.apps) {
    if (app.era !== era || app.task !== task || app.mappedEpoch === null || app.mappedEpoch > epoch) continue;
    const life = f.lifetime(app.agent, app.pid);
    if (life === null || (life.exitedAtMs !== null && life.exitedAtMs <= atMs)) continue;
    if (f.troubled(app.agent, life.startedAtMs, atMs) || announcedDead(app.vpid, app.mappedEpoch)) continue;
    vpids.add(app.vpid);
  }
  return vpids.size;
}
