// Every message of the CMM wire (docs/PROTOCOL.md §2–§6; spec §3.2 Fig. 4.24) as
// discriminated unions, with their canonical schemas. A frame carries one or more items,
// all from one sender to one receiver, under one signature.
//
// The schemas live in six parts, in the order they build on each other (basics → recovery →
// requests → commands → lanes → items), gathered here so that each message type keeps one import path for
// the ninety-odd modules that speak the wire.
export * from './basics.ts';
export * from './recovery.ts';
export * from './dgrp.ts';
export * from './straggler.ts';
export * from './requests.ts';
export * from './commands.ts';
export * from './lanes.ts';
export * from './items.ts';
