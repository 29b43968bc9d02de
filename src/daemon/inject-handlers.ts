// Every inject handler a daemon offers (docs/OPERATIONS.md §7): importing this module registers
// them all with src/daemon/inject.ts. src/daemon/run-core.ts imports it — dynamically, and only
// for a cluster started with --allow-inject. To add modes, write a module that calls
// `registerInjectHandler(mode, handler)` and import it here; list the mode in
// src/io/inject-modes.ts so `trine inject` knows its arguments and whom to ask.
import './inject-link.ts';
import './inject-replica.ts';
import './inject-slow.ts';

export { installInjection } from './inject.ts';
