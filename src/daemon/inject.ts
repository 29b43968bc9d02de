// Fault injection inside a daemon (issue 5 item 5; `trine inject`, docs/OPERATIONS.md §7): the
// driver-side handling of the operator's `inject` items and the registry of what each mode does.
//
// A daemon loads this module only when its cluster.json says `allowInject: true`
// (src/daemon/run-core.ts imports it dynamically): without the flag no code of it runs, no hook
// is installed, and an `inject` item reaches the core, which drops it like any item it does not
// expect (NOT_A_MEMBER: the operator is not a link peer). With the flag, the Shell hands every
// verified frame to `intercept` first; `inject` items from an operator of the membership are
// taken out there — a core never sees them — and run by the handler registered for their mode.
// The answer, `inject.reply {nonce, ok, text}`, goes back to the operator; a resend of the same
// nonce gets the same answer without running the handler again.
//
// Modes are registered with `registerInjectHandler(mode, handler)`; src/daemon/inject-handlers.ts
// imports every module that registers some. A handler gets the mode's arguments as the operator
// typed them and a context: the process's id, kind, cluster and core, its link faults
// (src/io/link-faults.ts), named filters over its core's effects, its log, an agent's task
// processes (for `slow`), and a way to undo what it did when the daemon stops.
import { MAX_TEXT_CHARS } from '../core/constants.ts';
import { clipText } from '../core/wire/schema.ts';
import type { Core, CoreEffect, CoreInput, LogLevel } from '../core/node.ts';
import type { ProcessId } from '../core/ports.ts';
import type { Frame, Item } from '../core/wire/messages.ts';
import type { Cluster, ProcessKind } from '../io/cluster-dir.ts';
import { LinkFaults } from '../io/link-faults.ts';
// The simulator's Byzantine behaviours, reused as they are: the same misbehaviour the seeds
// prove the group survives is what `trine inject byzantine-replica` switches on in a daemon.
import { byzantineCore, type ByzantineBehaviour } from '../faults/byzantine.ts';

/** Answers kept for resent nonces: the operator resends every few hundred ms for a few
 *  seconds, one command at a time, so a few dozen cover every resend still on its way. */
export const MAX_INJECT_ANSWERS_KEPT = 64;
/** Handlers still running (asynchronous ones) at once; more are refused with "busy". */
export const MAX_INJECTS_RUNNING = 16;
/** Effect filters installed at once: one per injected misbehaviour, a handful at most. */
export const MAX_EFFECT_FILTERS = 16;

export type InjectOutcome = { ok: boolean; text: string };

/** A task process an agent runs, alive now: `startTime` tells it from a later process that
 *  reuses the pid (src/io/run-records.ts). */
export type LiveTaskProcess = { task: string; vpid: number; pid: number; startTime: string };

/** An agent's task processes, as its process driver knows them (src/daemon/proc-driver.ts). */
export type TaskProcesses = { live(): LiveTaskProcess[] };

/** Rewrites the effects of one core step (drop, alter or add some); `input` is what caused them. */
export type EffectFilter = (effects: CoreEffect[], input: CoreInput) => CoreEffect[];

export type InjectContext = {
  self: ProcessId;
  kind: Exclude<ProcessKind, 'operator'>;
  cluster: Cluster;
  /** The operator that asked. */
  from: ProcessId;
  /** The process's core as built (the daemon runs it behind the effect filters below). */
  core: Core;
  /** Drop or delay frames on this process's links. */
  links: LinkFaults;
  /** Installs (or with null removes) a named filter over every later step's effects; false if
   *  MAX_EFFECT_FILTERS are installed already. */
  setEffectFilter(name: string, filter: EffectFilter | null): boolean;
  /** A replica: misbehave this way from now on (added to what was switched on before). */
  misbehave(behaviours: readonly ByzantineBehaviour[]): void;
  log(level: LogLevel, event: string, fields: Record<string, unknown>): void;
  /** An agent's task processes; null in the other daemons. */
  tasks: TaskProcesses | null;
  /** Runs `undo` once when the daemon stops (SIGTERM, shutdown, exit): what must not outlive it
   *  (a stopped process must be continued). A key already registered is replaced. */
  atClose(key: string, undo: () => void): void;
};

/** Runs one injection. Throwing (or rejecting) answers `ok: false` with the error's message. */
export type InjectHandler = (args: readonly string[], ctx: InjectContext) => InjectOutcome | Promise<InjectOutcome>;

const handlers = new Map<string, InjectHandler>();

/** Makes `mode` available to `trine inject`. A mode is registered once. */
export function registerInjectHandler(mode: string, handler: InjectHandler): void {
  if (handlers.has(mode)) throw new Error(`inject mode ${mode} is registered twice`);
  handlers.set(mode, handler);
}

/** The modes registered so far, sorted. */
export function registeredInjectModes(): string[] {
  return [...handlers.keys()].sort();
}

export type InjectionOptions = {
  self: ProcessId;
  kind: Exclude<ProcessKind, 'operator'>;
  cluster: Cluster;
  core: Core;
  /** Sends one item to `to`, signed, straight to the transport (not through link faults: an
   *  injected drop must not swallow the operator's answer). */
  reply: (to: ProcessId, item: Item) => void;
  log: (level: LogLevel, event: string, fields: Record<string, unknown>) => void;
  /** An agent's task processes (InjectContext.tasks). */
  tasks?: TaskProcesses;
};

/** What run-core wires in when injection is allowed. */
export type Injection = {
  /** The core to run: `opts.core` behind the effect filters. */
  core: Core;
  links: LinkFaults;
  /** The Shell's intercept: takes the operators' `inject` items out of a verified frame. */
  intercept: (frame: Frame, nowMs: number) => Frame | null;
  close: () => void;
};

const clip = (text: string) => clipText(text, MAX_TEXT_CHARS);

export function installInjection(opts: InjectionOptions): Injection {
  const operators = new Set(opts.cluster.config.membership.operators);
  const links = new LinkFaults();
  const filters = new Map<string, EffectFilter>();
  /** By `<operator> <nonce>`: the answer, or null while its handler runs. Oldest first. */
  const answers = new Map<string, InjectOutcome | null>();
  let running = 0;
  /** InjectContext.atClose, by key: run once by close(). */
  const closers = new Map<string, () => void>();

  // A replica runs inside the Byzantine wrapper, with no behaviour until one is injected.
  let misbehaviour: readonly ByzantineBehaviour[] = [];
  const inner: Core = opts.kind === 'replica' ? byzantineCore(opts.core, () => misbehaviour) : opts.core;
  const core: Core = {
    id: opts.core.id,
    step: (input) => {
      const effects = inner.step(input);
      if (filters.size === 0) return effects;
      let out = effects;
      for (const f of filters.values()) out = f(out, input);
      return out;
    },
    nextWakeMs: () => inner.nextWakeMs(),
  };
  const misbehave = (behaviours: readonly ByzantineBehaviour[]): void => {
    misbehaviour = [...misbehaviour, ...behaviours];
  };

  const setEffectFilter = (name: string, filter: EffectFilter | null): boolean => {
    if (filter === null) {
      filters.delete(name);
      return true;
    }
    if (!filters.has(name) && filters.size >= MAX_EFFECT_FILTERS) return false;
    filters.set(name, filter);
    return true;
  };

  const remember = (k: string, outcome: InjectOutcome | null): void => {
    answers.delete(k);
    answers.set(k, outcome);
    while (answers.size > MAX_INJECT_ANSWERS_KEPT) {
      const oldest = answers.keys().next().value as string;
      answers.delete(oldest);
    }
  };

  const onInject = (from: ProcessId, item: Extract<Item, { type: 'inject' }>): void => {
    const k = `${from} ${item.nonce}`;
    if (answers.has(k)) {
      // A resend: answer again if done; a handler still running answers when it ends.
      const prior = answers.get(k);
      if (prior !== null && prior !== undefined) opts.reply(from, { type: 'inject.reply', nonce: item.nonce, ok: prior.ok, text: prior.text });
      return;
    }
    opts.log('warn', 'inject', { from, nonce: item.nonce, mode: item.mode, args: item.args });
    const finish = (outcome: InjectOutcome): void => {
      const answer = { ok: outcome.ok, text: clip(outcome.text) };
      remember(k, answer);
      opts.log(answer.ok ? 'warn' : 'error', 'inject.done', { from, nonce: item.nonce, mode: item.mode, ok: answer.ok, text: answer.text });
      opts.reply(from, { type: 'inject.reply', nonce: item.nonce, ...answer });
    };
    const failed = (e: unknown): void => finish({ ok: false, text: `${opts.self}: inject ${item.mode} failed: ${e instanceof Error ? e.message : String(e)}` });
    const handler = handlers.get(item.mode);
    if (handler === undefined) {
      const modes = registeredInjectModes();
      finish({ ok: false, text: `inject mode ${item.mode} is not available yet in ${opts.self}${modes.length > 0 ? ` (available: ${modes.join(', ')})` : ''}` });
      return;
    }
    if (running >= MAX_INJECTS_RUNNING) {
      finish({ ok: false, text: `${opts.self} is busy with ${running} injections: try again once they are done` });
      return;
    }
    remember(k, null);
    const ctx: InjectContext = {
      self: opts.self, kind: opts.kind, cluster: opts.cluster, from, core: opts.core, links, setEffectFilter, misbehave, log: opts.log,
      tasks: opts.tasks ?? null,
      atClose: (key, undo) => {
        closers.set(key, undo);
      },
    };
    let result: InjectOutcome | Promise<InjectOutcome>;
    try {
      result = handler(item.args, ctx);
    } catch (e) {
      failed(e);
      return;
    }
    if (!(result instanceof Promise)) {
      finish(result);
      return;
    }
    running++;
    result.then(finish, failed).finally(() => {
      running--;
    });
  };

  const intercept = (frame: Frame): Frame | null => {
    // Only an operator of the membership may inject; anyone else's `inject` is the core's to
    // judge (it counts it as evidence against a member, or drops a stranger's).
    if (!operators.has(frame.from)) return frame;
    let rest: Item[] | null = null;
    for (const item of frame.items) {
      if (item.type !== 'inject') continue;
      rest ??= frame.items.filter((i) => i.type !== 'inject');
      onInject(frame.from, item);
    }
    if (rest === null) return frame;
    return rest.length === 0 ? null : { ...frame, items: rest };
  };

  const close = (): void => {
    links.close();
    for (const [key, undo] of [...closers]) {
      closers.delete(key);
      try {
        undo();
      } catch (e) {
        opts.log('error', 'inject.undo.failed', { key, error: (e as Error).message });
      }
    }
  };
  return { core, links, intercept, close };
}
