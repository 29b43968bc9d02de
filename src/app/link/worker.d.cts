// The types of worker.cjs's one export, for the main thread's pump (connection.ts imports it).
import type { MessagePort } from 'node:worker_threads';
import type { WorkerData } from './channel.ts';

/** Run the socket pump of `workerData` on this thread, talking to the link over `port`. */
export declare function run(workerData: WorkerData, port: MessagePort): void;
