// The dashboard's HTTP server (cli/dashboard.ts, DashboardServer) on a real loopback socket, with
// real HTTP clients and no cluster: its bounds. At most MAX_DASHBOARD_CLIENTS pages on the event
// stream (the next is told so with a 503, and a page that leaves makes room), and a page that stops
// reading is dropped once MAX_STREAM_BACKLOG_BYTES are queued for it, while a reading page keeps
// getting every snapshot (issue 19; docs/OPERATIONS.md §11).
import { get, type ClientRequest, type IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DashboardServer, MAX_DASHBOARD_CLIENTS, MAX_STREAM_BACKLOG_BYTES } from '../../cli/dashboard.ts';
import { waitUntil } from '../fixtures/link/harness.ts';

const FILES = new Map([['index.html', Buffer.from('<!doctype html>')], ['dashboard.js', Buffer.from('')], ['dashboard.css', Buffer.from('')]]);
const servers: DashboardServer[] = [];
const requests: ClientRequest[] = [];
const sockets: Socket[] = [];

afterEach(async () => {
  for (const r of requests.splice(0)) r.destroy();
  for (const s of sockets.splice(0)) s.destroy();
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function server(): Promise<DashboardServer> {
  const s = await DashboardServer.listen({ host: '127.0.0.1', port: 0 }, FILES, null);
  servers.push(s);
  return s;
}

/** A page on the event stream: its status, and the snapshots it has read (their `n`). */
type Page = { status: number; body: string; seen: number[]; res: IncomingMessage; req: ClientRequest };

function openPage(port: number): Promise<Page> {
  return new Promise((resolve, reject) => {
    const req = get({ host: '127.0.0.1', port, path: '/api/stream', agent: false }, (res) => {
      const page: Page = { status: res.statusCode ?? 0, body: '', seen: [], res, req };
      let buf = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (page.status !== 200) {
          page.body += chunk;
          return;
        }
        // Events end with a blank line; look for it only where this chunk could have made one.
        let from = Math.max(0, buf.length - 1);
        buf += chunk;
        for (let end = buf.indexOf('\n\n', from); end >= 0; end = buf.indexOf('\n\n', from)) {
          const data = /data: \{"n":(\d+)/.exec(buf.slice(0, Math.min(end, 200)));
          if (data !== null) page.seen.push(Number(data[1]));
          buf = buf.slice(end + 2);
          from = 0;
        }
      });
      res.on('error', () => undefined);
      resolve(page);
    });
    req.on('error', reject);
    requests.push(req);
  });
}

const snapshot = (n: number, padBytes = 0) => JSON.stringify({ n, pad: 'x'.repeat(padBytes) });

describe('the dashboard server\'s bounds (issue 19)', () => {
  it(`at most MAX_DASHBOARD_CLIENTS (${MAX_DASHBOARD_CLIENTS}) pages on the stream: the next gets 503 saying so; a page that leaves makes room`, async () => {
    const s = await server();
    s.publish(snapshot(1));
    const pages: Page[] = [];
    for (let i = 0; i < MAX_DASHBOARD_CLIENTS; i++) pages.push(await openPage(s.port));
    expect(pages.every((p) => p.status === 200)).toBe(true);
    await waitUntil(() => pages.every((p) => p.seen.length === 1), 'every page has the latest snapshot');
    expect(s.pages).toBe(MAX_DASHBOARD_CLIENTS);
    const refused = await openPage(s.port);
    expect(refused.status).toBe(503);
    await waitUntil(() => refused.body.length > 0, 'the refusal\'s text');
    expect(refused.body).toBe(`more than ${MAX_DASHBOARD_CLIENTS} pages open\n`);
    pages[0]?.req.destroy();
    await waitUntil(() => s.pages === MAX_DASHBOARD_CLIENTS - 1, 'the page gone');
    const next = await openPage(s.port);
    expect(next.status).toBe(200);
    s.publish(snapshot(2));
    await waitUntil(() => next.seen.join() === '1,2' && pages.slice(1).every((p) => p.seen.join() === '1,2'), 'the next snapshot everywhere');
  });

  it(`a page that stops reading is dropped once more than MAX_STREAM_BACKLOG_BYTES (${MAX_STREAM_BACKLOG_BYTES}) are queued for it; a reading page gets every snapshot`, async () => {
    const s = await server();
    // No snapshot yet: the stream's headers must come at once (flushHeaders) for this to resolve.
    const reader = await openPage(s.port);
    // The stalled page: a raw connection that asks for the stream and never reads its answer.
    const stalled = connect(s.port, '127.0.0.1');
    sockets.push(stalled);
    await new Promise<void>((resolve) => stalled.once('connect', resolve));
    stalled.pause();
    stalled.write('GET /api/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    await waitUntil(() => s.pages === 2, 'both pages on the stream');
    const SNAPSHOT_BYTES = 1024 * 1024;
    // Kernel buffers on loopback hold a few MiB before Node queues anything; 64 MiB is far past both.
    let n = 0;
    while (s.pages === 2 && n < 64) {
      s.publish(snapshot(++n, SNAPSHOT_BYTES));
      await new Promise((r) => setTimeout(r, 5));
    }
    expect(s.pages).toBe(1);
    // The one dropped is the stalled page, not the reader.
    expect(reader.res.destroyed || reader.res.complete).toBe(false);
    expect(n).toBeGreaterThan(MAX_STREAM_BACKLOG_BYTES / SNAPSHOT_BYTES);
    s.publish(snapshot(++n));
    await waitUntil(() => reader.seen.at(-1) === n, 'the reader has the last snapshot', 20_000);
    expect(reader.seen).toEqual(Array.from({ length: n }, (_, i) => i + 1));
  });
});
