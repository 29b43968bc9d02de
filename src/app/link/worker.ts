// The link's worker thread: it owns the Unix socket to the agent (spec §7: the source's two
// named pipes and SIGINT). It sends the hello, decodes the agent's frames, and relays them to
// the main thread in order. For each arriving signal it first applies the shared flag rules
// (flags.ts), so the alert flag is up before the main thread, however busy, handles anything.
import { connect } from 'node:net';
import { workerData } from 'node:worker_threads';
import { agentToProc, AppFrameDecoder, encodeAppFrame, procToAgent } from '../../core/wire/app-wire.ts';
import type { LostCode, MainToWorker, WorkerData, WorkerToMain } from './channel.ts';
import { SharedFlags } from './flags.ts';

const data = workerData as WorkerData;
const port = data.port;
const flags = SharedFlags.attach(data.flags);
const decoder = new AppFrameDecoder(agentToProc);
const socket = connect(data.socketPath);
let finalizing = false;
let lost: { code: LostCode; detail: string } | null = null;
let done = false;

const post = (m: WorkerToMain): void => port.postMessage(m);

function finish(): void {
  if (done) return;
  done = true;
  if (finalizing && lost === null) post({ type: 'closed' });
  else post({ type: 'lost', ...(lost ?? { code: 'AGENT_CLOSED', detail: 'the agent closed the connection' }) });
  port.close();
}

socket.on('connect', () => socket.write(encodeAppFrame(procToAgent, data.hello)));
socket.on('data', (chunk: Buffer) => {
  if (lost !== null) return;
  decoder.feed(chunk);
  for (;;) {
    const r = decoder.next();
    if (!r.ok) {
      lost = { code: 'WIRE', detail: `${r.code}: ${r.detail}` };
      socket.destroy();
      return;
    }
    if (r.value === null) return;
    // The flag goes up here, before the main thread sees the signal (spec §5.2).
    if (r.value.type === 'signal') flags.applyRules(r.value.signum);
    post({ type: 'agent', msg: r.value });
  }
});
socket.on('error', (e: NodeJS.ErrnoException) => {
  if (lost === null && !finalizing) lost = { code: 'SOCKET_ERROR', detail: `${e.code ?? ''} ${e.message}`.trim() };
});
socket.on('close', finish);

port.on('message', (m: MainToWorker) => {
  if (done) return;
  switch (m.type) {
    case 'send':
      if (!finalizing && !socket.destroyed) socket.write(encodeAppFrame(procToAgent, m.msg));
      return;
    case 'finalize':
      if (finalizing) return;
      finalizing = true;
      if (socket.destroyed) return;
      socket.end(encodeAppFrame(procToAgent, { type: 'finalize' }));
      return;
    case 'close':
      if (lost === null && !finalizing) lost = { code: 'AGENT_CLOSED', detail: 'closed by the application' };
      socket.destroy();
      return;
  }
});
