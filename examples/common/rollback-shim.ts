// until issue 17's Gmpi API lands: the two calls of rollback mode the examples use (PROTOCOL
// §11.3), typed here so the examples typecheck against today's Gmpi. Delete this file and
// write `Gmpi.init({ state })` and `g.snapshot()` in their place once Gmpi has them.
//
//   - Gmpi.init({ state }): `state` is either { save(), restore(bytes) } or a plain object the
//     library serializes and restores in place; in rollback mode a replacement process gets its
//     state restored before init returns. Today's init ignores the option (app mode).
//   - g.snapshot(): FTI_Snapshot's model, called once per iteration where the registered state
//     describes everything; a checkpoint is taken there when the task's interval has passed. In
//     app mode (and until the API lands) it returns at once.
import { Gmpi, type GmpiOptions } from 'trine/app';

/** What a process registers: its own codec, or a plain object (msgpack, restored in place). */
export type RegisteredState = { save(): Uint8Array; restore(bytes: Uint8Array): void } | Record<string, unknown>;

/** Gmpi.init({ state }). */
export function initWithState(state: RegisteredState): Promise<Gmpi> {
  const options: GmpiOptions & { readonly state: RegisteredState } = { state };
  return Gmpi.init(options);
}

/** g.snapshot(), if this Gmpi has it. */
export async function snapshot(g: Gmpi): Promise<void> {
  const call = (g as unknown as { snapshot?: () => Promise<void> }).snapshot;
  if (typeof call === 'function') await call.call(g);
}
