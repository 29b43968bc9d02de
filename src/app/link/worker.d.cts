// The types of worker.cjs's one export, for the main thread's pump (connection.ts imports it).
import type { MessagePort } from 'node:worker_threads';
import type { PumpData, RawWorkerToMain } from './channel.ts';

/** The pump's writes, called directly by the thread that runs it: send and finalize return false
 *  once the pump has ended for good (its socket closed), when the caller must send another way;
 *  close drops the socket at once; ref(on): whether the main thread's pump keeps the process
 *  alive (the worker's always may). */
export type PumpWrites = { send(bytes: Uint8Array): boolean; finalize(bytes: Uint8Array): boolean; close(): void; ref(on: boolean): void };

/** Where a pump relays what it reads: the worker's MessagePort, or on the main thread an
 *  in-thread queue (connection.ts InThreadPort), which needs only these two. */
export type PumpPort = { postMessage(m: RawWorkerToMain, transfer?: ArrayBuffer[]): void; close(): void };

/** Run the socket pump of `data` on this thread, relaying to `port`. */
export declare function run(data: PumpData, port: PumpPort | MessagePort): PumpWrites;
