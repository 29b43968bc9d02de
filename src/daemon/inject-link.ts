// The link-fault modes of `trine inject` (docs/OPERATIONS.md §7): `drop A B`, `delay A B MS`,
// `heal A B`, performed by a daemon at one end of the link A → B. The CLI sends them to A when
// the operator can reach A (a replica or the watchdog): A then drops or delays what it sends to
// B. When A is an agent (which listens nowhere) it sends them to B instead, which drops or
// delays what arrives from A: the same loss, seen from the other end. Faults last until `heal`
// or until the daemon restarts.
import { LinkFaults, MAX_INJECT_DELAY_MS, type LinkDirection, type LinkFault } from '../io/link-faults.ts';
import { linked } from '../io/inject-modes.ts';
import { registerInjectHandler, type InjectContext, type InjectOutcome } from './inject.ts';
import { healSlow } from './inject-slow.ts';

type End = { direction: LinkDirection; peer: string };

/** Which side of A → B this process is, or why it is neither. */
function endOf(args: readonly string[], ctx: InjectContext): End | string {
  const [a, b] = args;
  if (a === undefined || b === undefined) return 'needs two processes, A and B';
  if (!linked(ctx.cluster.config, a, b)) return `${a} and ${b} do not exchange frames (a replica must be at one end)`;
  if (a === ctx.self) return { direction: 'out', peer: b };
  if (b === ctx.self) return { direction: 'in', peer: a };
  return `${ctx.self} is neither ${a} nor ${b}`;
}

const describe = (fault: LinkFault | null) => (fault === null ? 'none' : fault.kind === 'drop' ? 'drop' : `delay ${fault.delayMs} ms`);

function setFault(args: readonly string[], ctx: InjectContext, fault: LinkFault | null): InjectOutcome {
  const end = endOf(args, ctx);
  if (typeof end === 'string') return { ok: false, text: `${ctx.self}: ${end}` };
  const [a, b] = args as [string, string];
  const links: LinkFaults = ctx.links;
  const before = links.get(end.direction, end.peer);
  if (!links.set(end.direction, end.peer, fault)) return { ok: false, text: `${ctx.self}: too many link faults set: heal some first` };
  const side = end.direction === 'out' ? `as it sends them to ${b}` : `as they arrive from ${a}`;
  if (fault === null) return { ok: true, text: `${a} → ${b} healed at ${ctx.self} (was: ${describe(before)})` };
  const what = fault.kind === 'drop' ? 'dropped' : `delayed by ${fault.delayMs} ms`;
  return { ok: true, text: `${a} → ${b}: frames ${what} at ${ctx.self}, ${side}, until \`trine inject heal ${a} ${b}\`` };
}

registerInjectHandler('drop', (args, ctx) => setFault(args, ctx, { kind: 'drop' }));

registerInjectHandler('delay', (args, ctx) => {
  const ms = args[2] ?? '';
  const delayMs = /^[0-9]{1,6}$/.test(ms) ? Number(ms) : NaN;
  if (!(delayMs >= 1 && delayMs <= MAX_INJECT_DELAY_MS)) {
    return { ok: false, text: `${ctx.self}: delay needs MS, an integer from 1 to ${MAX_INJECT_DELAY_MS}, got ${JSON.stringify(ms)}` };
  }
  return setFault(args, ctx, { kind: 'delay', delayMs });
});

// `heal A B` ends a link fault; `heal T`, one argument, a slowness (inject-slow.ts).
registerInjectHandler('heal', (args, ctx) => (args.length === 1 ? healSlow(args, ctx) : setFault(args, ctx, null)));
