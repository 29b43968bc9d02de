// A task's straggler policy on the wire (docs/PROTOCOL.md §13): the option `task.submit` carries
// and the group keeps. The decoder checks the shape; whether the numbers are in range is the
// group's judgement (src/core/straggler.ts stragglerRefusal), so a forged request gets an answer
// that says what is wrong. Part of the schemas that messages.ts gathers.
import { nullable, struct, uint, type Schema } from './schema.ts';

/** §13.1: a live process is a straggler when its progress × factorHundredths / 100 is at most
 *  the median progress, once the median has reached afterPermille. */
export type StragglerOptions = { factorHundredths: number; afterPermille: number };
export const stragglerOptions: Schema<StragglerOptions> = struct<StragglerOptions>(['factorHundredths', 'afterPermille'], {
  factorHundredths: uint, afterPermille: uint,
});
/** Null: the task has no straggler policy. */
export const stragglerOption: Schema<StragglerOptions | null> = nullable(stragglerOptions);
