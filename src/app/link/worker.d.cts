// The types of worker.cjs's one export, for the main thread's pump (connection.ts imports it).
import type { MessagePort } from 'node:worker_threads';
import type { WorkerData } from './channel.ts';

/** The pump's writes, called directly by the thread that runs it: send and finalize return false
 *  once the pump has ended for good (its socket closed), when the caller must send another way;
 *  close drops the socket at once. */
export type PumpWrites = { send(bytes: Uint8Array): boolean; finalize(bytes: Uint8Array): boolean; close(): void };

/** Run the socket pump of `workerData` on this thread, talking to the link over `port`. */
export declare function run(workerData: WorkerData, port: MessagePort): PumpWrites;
