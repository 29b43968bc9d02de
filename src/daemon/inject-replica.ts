// `trine inject corrupt-replica R [KIND]` and `trine inject byzantine-replica R MODE`, carried
// out by replica R itself (docs/OPERATIONS.md §7): flip a field of its replicated state in place,
// or switch on one of the misbehaviours the simulator proves the group survives
// (src/faults/byzantine.ts). Either makes R faulty; self-diagnosis should condemn and replace it
// (PROTOCOL §10). Registered only in daemons of a cluster started with --allow-inject.
import type { ReplicaCore } from '../core/replica.ts';
import type { ReplicatedState } from '../core/replicated-state.ts';
import { BYZANTINE_MODES, behavioursForMode, CORRUPTIONS, corruptState, type ByzantineMode, type Corruption } from '../faults/byzantine.ts';
import { registerInjectHandler, type InjectContext } from './inject.ts';

function replicaCore(ctx: InjectContext): ReplicaCore {
  if (ctx.kind !== 'replica') throw new Error(`${ctx.self} is a ${ctx.kind}, not a replica`);
  return ctx.core as ReplicaCore;
}

registerInjectHandler('corrupt-replica', (args, ctx) => {
  const r = replicaCore(ctx);
  const kind = (args[1] ?? 'slots') as Corruption;
  if (!CORRUPTIONS.includes(kind)) return { ok: false, text: `unknown corruption ${kind}: use one of ${CORRUPTIONS.join(', ')}` };
  const detail = corruptState(r.state() as ReplicatedState, kind);
  if (detail === null) return { ok: false, text: `${ctx.self} has no ${kind} to corrupt yet (no agent known): try again once the nodes joined` };
  r.forgetDigest();
  ctx.log('error', 'inject.corrupted', { kind, detail });
  return { ok: true, text: `${ctx.self}: corrupted its replicated state (${detail}); the other replicas should condemn it on the digest` };
});

registerInjectHandler('byzantine-replica', (args, ctx) => {
  const r = replicaCore(ctx);
  const mode = args[1] as ByzantineMode;
  if (!BYZANTINE_MODES.includes(mode)) return { ok: false, text: `unknown byzantine mode ${String(mode)}: use one of ${BYZANTINE_MODES.join(', ')}` };
  const s = r.state();
  const behaviours = behavioursForMode(mode, {
    self: ctx.self, replicas: s.replicas, agents: [...s.nodes.keys()].sort(), nextRsn: s.rsn + 1, nextGssn: s.gssn + 1,
  });
  ctx.misbehave(behaviours);
  const role = s.primary === ctx.self ? 'primary' : 'backup';
  ctx.log('error', 'inject.byzantine', { mode, role, behaviours: behaviours.map((b) => b.type) });
  return { ok: true, text: `${ctx.self} (${role}) now misbehaves: ${mode}` };
});
