// `trine dashboard [--listen ADDR]`: an HTTP server (node:http) that holds the operator's key,
// asks the cluster for its status every DASHBOARD_POLL_MS as `trine status` does, and pushes
// each snapshot (cli/dashboard-snapshot.ts) to the open pages over Server-Sent Events. The page
// is three static files under dashboard/, served as they are: no build step. Listening beyond
// loopback exposes the operator's view of the cluster to the network, so every request must
// then carry a random access token printed with the URL (docs/OPERATIONS.md §11). Ctrl-C stops
// it with exit 0.
import { randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadCluster, LOOPBACK_HOST } from '../src/io/cluster-dir.ts';
import { isLoopback } from '../src/io/hosts-file.ts';
import { buildSnapshot } from './dashboard-snapshot.ts';
import { CliError, EXIT_OK, EXIT_USAGE, quoted } from './errors.ts';
import { StopSignal } from './stop-signal.ts';
import { OperatorClient } from './status-client.ts';

/** The default port: fixed, so a bookmark keeps working. */
export const DASHBOARD_DEFAULT_PORT = 8470;
/** The cluster is asked this often (after the previous answer): the page is at most this
 *  plus one query behind, under a second. */
export const DASHBOARD_POLL_MS = 400;
/** How long one look waits for the replicas and the watchdog: they answer on loopback in a few
 *  ms, so a member that has not answered by then is shown as not answering (hung, or cut off)
 *  rather than holding the page back; a dead one is not waited for at all (its pid file). */
export const DASHBOARD_QUERY_TIMEOUT_MS = 800;
/** Pages connected at once: each gets every snapshot; more is a mistake or an abuse. */
export const MAX_DASHBOARD_CLIENTS = 32;
/** A page that stopped reading (a suspended laptop, a stalled proxy) is dropped once this much
 *  is queued for it, rather than buffered without bound; its EventSource reconnects. */
export const MAX_STREAM_BACKLOG_BYTES = 4 * 1024 * 1024;
/** The access token's random bytes (hex in the URL). */
const TOKEN_BYTES = 16;
/** The longest request target served: the page's URLs are short. */
const MAX_URL_CHARS = 512;

/** The files of the page, by URL path: nothing else on disk is reachable. */
const STATIC: Record<string, { file: string; type: string }> = {
  '/': { file: 'index.html', type: 'text/html; charset=utf-8' },
  '/dashboard.js': { file: 'dashboard.js', type: 'text/javascript; charset=utf-8' },
  '/dashboard.css': { file: 'dashboard.css', type: 'text/css; charset=utf-8' },
};

export type Listen = { host: string; port: number };

/** `--listen`: `HOST:PORT`, `HOST`, `PORT` or `[V6]:PORT`. */
export function parseListen(addr: string | undefined): Listen {
  if (addr === undefined) return { host: LOOPBACK_HOST, port: DASHBOARD_DEFAULT_PORT };
  const bad = () => new CliError(`--listen ${quoted(addr)}: expected HOST:PORT, HOST or PORT (e.g. ${LOOPBACK_HOST}:${DASHBOARD_DEFAULT_PORT}, 0.0.0.0:${DASHBOARD_DEFAULT_PORT}, 8471)`, EXIT_USAGE);
  const port = (p: string) => {
    const n = /^[0-9]{1,5}$/.test(p) ? Number(p) : NaN;
    if (!Number.isInteger(n) || n > 65_535) throw bad();
    return n;
  };
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([A-Za-z0-9.-]*))(?::([0-9]+))?$/.exec(addr);
  if (m === null) {
    // A bare IPv6 address (`::1`) has colons of its own.
    if (/^[0-9a-fA-F:]+$/.test(addr) && addr.includes('::')) return { host: addr, port: DASHBOARD_DEFAULT_PORT };
    throw bad();
  }
  const host = m[1] ?? m[2] ?? '';
  if (host === '' && m[3] === undefined) throw bad();
  if (host !== '' && /^[0-9]+$/.test(host) && m[3] === undefined) return { host: LOOPBACK_HOST, port: port(host) };
  return { host: host === '' ? LOOPBACK_HOST : host, port: m[3] === undefined ? DASHBOARD_DEFAULT_PORT : port(m[3]) };
}

/** A loopback listener (only this machine can connect: no token) and the Host check use the
 *  hosts file's loopback test: one rule everywhere. */
export { isLoopback };

/** Where the page's files are: dashboard/ beside bin/ in the checkout or package. */
function staticDir(): string {
  const bin = (globalThis as { TRINE_BIN?: string }).TRINE_BIN ?? fileURLToPath(new URL('../bin/trine.js', import.meta.url));
  return join(dirname(bin), '..', 'dashboard');
}

type Server = {
  /** The current snapshot, as JSON; null before the first look. */
  latest: string | null;
  streams: Set<ServerResponse>;
};

/** Whether a request may read the cluster. Beyond loopback: the token printed with the URL. On
 *  loopback, no token, but the Host header must name a loopback address: a web page the operator
 *  visits could otherwise rebind its own host name to 127.0.0.1 and read the snapshot (DNS
 *  rebinding). The page itself (STATIC) holds no data and is served to anyone who can reach it. */
function mayRead(req: IncomingMessage, token: string | null, url: URL): boolean {
  if (token === null) {
    const host = /^(\[[^\]]*\]|[^:]*)(:[0-9]+)?$/.exec(req.headers.host ?? '')?.[1] ?? '';
    return isLoopback(host.replace(/^\[|\]$/g, ''));
  }
  const given = Buffer.from(url.searchParams.get('token') ?? '');
  const want = Buffer.from(token);
  return given.length === want.length && timingSafeEqual(given, want);
}

function send(res: ServerResponse, code: number, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store', ...headers });
  res.end(body);
}

/** One request; never throws (a bad request gets its 4xx). */
function handle(s: Server, files: Map<string, Buffer>, token: string | null, req: IncomingMessage, res: ServerResponse): void {
  const raw = req.url ?? '/';
  if (raw.length > MAX_URL_CHARS) return send(res, 414, 'request target too long\n');
  let url: URL;
  try {
    url = new URL(raw, 'http://dashboard.invalid');
  } catch {
    return send(res, 400, 'malformed request target\n');
  }
  const known = url.pathname in STATIC || url.pathname === '/api/snapshot' || url.pathname === '/api/stream';
  if (!known) return send(res, 404, 'not found: the dashboard is at /\n');
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'only GET\n', { allow: 'GET, HEAD' });
  const page = STATIC[url.pathname];
  if (page !== undefined) {
    res.writeHead(200, { 'content-type': page.type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' });
    return void res.end(req.method === 'HEAD' ? undefined : files.get(page.file));
  }
  if (!mayRead(req, token, url)) {
    return send(res, 403, token === null ? 'a loopback dashboard answers only requests addressed to a loopback host name\n' : 'access token missing or wrong: open the URL `trine dashboard` printed\n');
  }
  if (url.pathname === '/api/snapshot') {
    if (s.latest === null) return send(res, 503, 'no answer from the cluster yet\n', { 'retry-after': '1' });
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    return void res.end(req.method === 'HEAD' ? undefined : s.latest);
  }
  // /api/stream: Server-Sent Events, one `snapshot` event per look at the cluster.
  if (s.streams.size >= MAX_DASHBOARD_CLIENTS) return send(res, 503, `more than ${MAX_DASHBOARD_CLIENTS} pages open\n`);
  res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-store', connection: 'keep-alive' });
  if (req.method === 'HEAD') return void res.end();
  // Headers now, not with the first snapshot: the page's EventSource opens at once.
  res.flushHeaders();
  s.streams.add(res);
  res.on('close', () => s.streams.delete(res));
  res.on('error', () => s.streams.delete(res));
  if (s.latest !== null) res.write(`event: snapshot\ndata: ${s.latest}\n\n`);
}

/** The page's HTTP server: the static files, the latest snapshot and its Server-Sent Events. */
export class DashboardServer {
  private constructor(private readonly server: HttpServer, readonly port: number, private readonly s: Server) {}

  /** Listen on `listen` (port 0: any free one); `token` null on loopback (see mayRead). */
  static async listen(listen: Listen, files: Map<string, Buffer>, token: string | null): Promise<DashboardServer> {
    const s: Server = { latest: null, streams: new Set() };
    const server = createServer((req, res) => handle(s, files, token, req, res));
    server.on('clientError', (_e, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) =>
        reject(new CliError(`cannot listen on ${listen.host}:${listen.port} (${e.code ?? e.message}): pass another --listen HOST:PORT`, EXIT_USAGE)));
      server.listen(listen.port, listen.host, () => resolve());
    });
    const address = server.address();
    return new DashboardServer(server, typeof address === 'object' && address !== null ? address.port : listen.port, s);
  }

  /** Pages connected to the stream now. */
  get pages(): number {
    return this.s.streams.size;
  }

  /** A new snapshot (JSON) to every page; a page with more than MAX_STREAM_BACKLOG_BYTES unread
   *  is dropped instead (its EventSource reconnects). */
  publish(json: string): void {
    const s = this.s;
    s.latest = json;
    for (const res of s.streams) {
      if (res.writableLength > MAX_STREAM_BACKLOG_BYTES) {
        s.streams.delete(res);
        res.destroy();
        continue;
      }
      res.write(`event: snapshot\ndata: ${json}\n\n`);
    }
  }

  async close(): Promise<void> {
    for (const res of this.s.streams) res.end();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

export async function dashboard(opts: { listen?: string | undefined; dir?: string | undefined }): Promise<number> {
  const listen = parseListen(opts.listen);
  const cluster = loadCluster(opts.dir);
  const dir = staticDir();
  const files = new Map<string, Buffer>();
  for (const { file } of Object.values(STATIC)) {
    try {
      files.set(file, readFileSync(join(dir, file)));
    } catch (e) {
      throw new CliError(`cannot read the dashboard's page ${join(dir, file)} (${(e as NodeJS.ErrnoException).code ?? String(e)}): reinstall trine`, EXIT_USAGE);
    }
  }
  const token = isLoopback(listen.host) ? null : randomBytes(TOKEN_BYTES).toString('hex');
  const server = await DashboardServer.listen(listen, files, token);
  const port = server.port;
  const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host;
  process.stdout.write(`trine dashboard: http://${host}:${port}/${token === null ? '' : `?token=${token}`}\n`);
  if (token !== null) process.stdout.write('trine dashboard: the token in this URL carries the operator\'s authority to read the cluster: share it as you would the operator key\n');

  const client = await OperatorClient.open(cluster);
  const stop = new StopSignal();
  try {
    while (!stop.requested) {
      const answers = await client.query(DASHBOARD_QUERY_TIMEOUT_MS);
      server.publish(JSON.stringify(buildSnapshot(cluster.config, cluster.dir, answers, new Date())));
      if (!stop.requested) await stop.pause(DASHBOARD_POLL_MS);
    }
    return EXIT_OK;
  } finally {
    stop.release();
    await server.close();
    await client.close();
  }
}
