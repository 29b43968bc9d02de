// The agent that the build's code-cache child talks to (tools/build-lib.mjs). It is the real agent
// socket (src/daemon/app-socket.ts) on an abstract name of its own, and it answers one linked
// process as a node's agent would: the welcome, the mapping, the worker thread's attach, one
// signal, the finalize. The library's V8 cache, made after that, then holds the functions a
// spawned process runs from Link.init() to its first signal, not only its top level's.
// Bundled by esbuild into a temporary file at build time; never shipped.
import { randomBytes } from 'node:crypto';
import { AppSocketServer } from '../src/daemon/app-socket.ts';
import { GSIG_BROADCAST } from '../src/core/signals.ts';

const TASK = 't1';
/** The signal the agent sends once the worker has attached (an application signal). */
export const WARMUP_SIGNAL = 100;

export type WarmupAgent = {
  /** The environment a spawned process of this agent gets (LinkOptions.env). */
  readonly env: Record<string, string>;
  /** Resolves once the process's worker thread has attached (PROTOCOL §9.4.1). */
  readonly attached: Promise<void>;
  /** Send WARMUP_SIGNAL as a broadcast of epoch 1. */
  signal(): void;
  close(): Promise<void>;
};

export async function startWarmupAgent(): Promise<WarmupAgent> {
  const token = randomBytes(16).toString('hex');
  const path = `@trine-build-warmup/${process.pid}/${randomBytes(4).toString('hex')}`;
  let attachedNow: () => void = () => {};
  const attached = new Promise<void>((resolve) => {
    attachedNow = resolve;
  });
  const server: AppSocketServer = await AppSocketServer.listen(path, {
    authenticate: (task, vpid, t) => (task === TASK && vpid === 0 && t === token ? null : 'not the warm-up process'),
    taskKey: () => new Uint8Array(32),
    onConnected: () => {
      server.send(TASK, 0, {
        type: 'mapping', task: TASK, vpid: 0, size: 1, restarted: false, recovered: false, epoch: 0, quorum: 1,
        members: [{ vpid: 0, node: 'n1', endpoint: '' }], rollback: null, dgrp: null, straggler: null,
      });
    },
    log: (e) => {
      if (e.type === 'app.attached') attachedNow();
    },
  });
  return {
    env: { TRINE_AGENT_SOCKET: path, TRINE_TASK: TASK, TRINE_VPID: '0', TRINE_TOKEN: token },
    attached,
    signal: () => {
      server.send(TASK, 0, { type: 'signal', signum: WARMUP_SIGNAL, src: 0, dest: GSIG_BROADCAST, arg: 1, epoch: 1, node: 'n1', data: '' });
    },
    close: () => server.close(),
  };
}
