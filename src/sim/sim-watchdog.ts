// The watchdog in the simulator (spec §1.6; PROTOCOL §10.8): the real watchdog core in a real
// Shell on its own trusted computer ('scc'), as `trine scc` runs it — fed every frame the
// replicas send it, ticked at its wake-ups as the daemon runtime's timer would, its frames
// signed with its key and put on the simulated network. It never crashes or restarts. The
// invariant checker sees both directions: what it emits (for the replicas' admission check) and
// what it accepts (it may act only on frames their sender's shell emitted).
import type { CoreEffect, CoreInput } from '../core/node.ts';
import { Shell } from '../core/shell.ts';
import { createWatchdog } from '../core/watchdog.ts';
import type { WatchdogStatus } from '../core/watchdog-state.ts';
import type { Item } from '../core/wire/messages.ts';
import { MAX_TICKS_AT_SAME_MS, type World } from './world.ts';

/** The watchdog's id in the simulated membership. */
export const SIM_WATCHDOG_ID = 'scc';

export class SimWatchdog {
  private readonly core;
  private readonly shell: Shell;
  private items: readonly Item[] = [];
  private tickAtMs = Infinity;
  private tickToken = 0;
  private lastTickMs = -1;
  private sameTimeTicks = 0;

  /** `onEffect` gets every effect but sends (node and cluster resets, logs), after the trace. */
  constructor(private readonly world: World, onEffect: (e: Exclude<CoreEffect, { type: 'send' }>) => void) {
    const id = SIM_WATCHDOG_ID;
    this.core = createWatchdog({ id, membership: world.membership, inc: 1, signer: world.keyring.signerFor(id), verifier: world.keyring.verifier });
    let delivering: Uint8Array | null = null;
    this.shell = new Shell({
      core: this.core,
      cluster: world.membership.cluster,
      signer: world.keyring.signerFor(id),
      verifier: world.keyring.verifier,
      linkAuth: world.keyring.linkAuthFor(id),
      transport: world.network.transport(id, () => this.items),
      onEffect: (e) => {
        world.recordEffect(id, e);
        onEffect(e);
      },
      onFrameOut: (_to, frame, items) => {
        this.items = items;
        world.checker.onFrameOut(id, frame, items);
      },
      intercept: (frame) => {
        if (delivering !== null) world.checker.onAccepted(id, delivering, frame);
        return frame;
      },
    });
    world.network.attach(id, {
      receive: (bytes, from) => {
        delivering = bytes;
        try {
          this.guard(() => this.shell.receive(bytes, world.now, from));
        } finally {
          delivering = null;
        }
        this.arm();
      },
    });
    this.arm();
  }

  /** What the watchdog answers an operator's `trine status`. */
  status(): WatchdogStatus {
    return this.core.status(this.world.now);
  }

  /** An input from the watchdog's own computer (the journals read after a cluster reset). */
  input(input: CoreInput): void {
    this.guard(() => this.shell.input(input));
    this.arm();
  }

  /** A core that throws has a bug: reported with the seed; the watchdog goes on. */
  private guard(run: () => void): void {
    this.world.checker.setTime(this.world.now);
    try {
      run();
    } catch (e) {
      const err = e as Error;
      this.world.checker.fail('e.core', `${SIM_WATCHDOG_ID} threw ${err.name}: ${err.message}`);
    }
  }

  /** Its next wake-up: the silence deadline of rule 2, the next restore round. */
  private arm(): void {
    const now = this.world.now;
    let wake: number | null;
    try {
      wake = this.shell.nextWakeMs();
    } catch (e) {
      this.world.checker.fail('e.core', `${SIM_WATCHDOG_ID} nextWakeMs() threw ${(e as Error).message}`);
      return;
    }
    if (wake === null) return;
    let at = Math.max(wake, now);
    if (at === now && this.lastTickMs === now && this.sameTimeTicks >= MAX_TICKS_AT_SAME_MS) {
      this.world.checker.fail('e.core', `${SIM_WATCHDOG_ID} nextWakeMs() stays at ${now} after ${this.sameTimeTicks} ticks (livelock)`);
      at = now + 1;
    }
    if (this.tickAtMs <= at) return;
    const token = ++this.tickToken;
    this.tickAtMs = at;
    this.world.scheduler.at(at, () => {
      if (token !== this.tickToken) return;
      this.tickAtMs = Infinity;
      this.sameTimeTicks = this.lastTickMs === this.world.now ? this.sameTimeTicks + 1 : 0;
      this.lastTickMs = this.world.now;
      this.input({ type: 'tick', nowMs: this.world.now });
    });
  }
}
