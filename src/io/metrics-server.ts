// A daemon's Prometheus endpoint (docs/OPERATIONS.md "Metrics"): one plain HTTP server that
// answers `GET /metrics` (and HEAD) with its registry's exposition, 404 to any other path, 405 to
// other methods. It binds the daemon's own address (loopback on a one-host cluster), never all
// interfaces. Requests are tiny and read nothing: a scraper sends no body, and the headers are
// capped by node's own limit (and ours below); a slow or idle client is cut off by the timeouts.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { MetricsError } from './metrics-ports.ts';

/** A scrape's request headers are a few hundred bytes; anything this large is not a scraper. */
export const METRICS_MAX_HEADER_BYTES = 8 * 1024;
/** A client that has not sent its request within this long is disconnected (slowloris). */
export const METRICS_REQUEST_TIMEOUT_MS = 5_000;
/** Concurrent connections: Prometheus keeps one per target; a few more for an operator's curl. */
export const METRICS_MAX_CONNECTIONS = 16;

export type MetricsServer = { readonly host: string; readonly port: number; close(): Promise<void> };

/** What is served: a daemon's DaemonMetrics (one fresh sample per scrape), or any prom-client
 *  Registry as `{ contentType, exposition: () => registry.metrics() }`. */
export type MetricsSource = { readonly contentType: string; exposition(): Promise<string> };

/** Serves `source` on host:port (port 0: a free one). A taken port rejects with
 *  MetricsError METRICS_PORT_IN_USE; other listen errors reject as they are. */
export function serveMetrics(source: MetricsSource, host: string, port: number, onError?: (e: Error) => void): Promise<MetricsServer> {
  const server: Server = createServer({ maxHeaderSize: METRICS_MAX_HEADER_BYTES, requestTimeout: METRICS_REQUEST_TIMEOUT_MS }, (req, res) => {
    void answer(source, req, res, onError);
  });
  server.maxConnections = METRICS_MAX_CONNECTIONS;
  server.headersTimeout = METRICS_REQUEST_TIMEOUT_MS;
  return new Promise((resolve, reject) => {
    server.once('error', (e: NodeJS.ErrnoException) => {
      reject(e.code === 'EADDRINUSE'
        ? new MetricsError('METRICS_PORT_IN_USE', `metrics port ${port} on ${host} is in use: stop what holds it, or pick another --metrics-port`)
        : e);
    });
    server.listen({ host, port, exclusive: true }, () => {
      server.removeAllListeners('error');
      server.on('error', (e) => onError?.(e));
      const a = server.address();
      const bound = a !== null && typeof a === 'object' ? a.port : port;
      resolve({
        host,
        port: bound,
        close: () => new Promise<void>((done) => {
          server.closeAllConnections();
          server.close(() => done());
        }),
      });
    });
  });
}

async function answer(source: MetricsSource, req: IncomingMessage, res: ServerResponse, onError?: (e: Error) => void): Promise<void> {
  const path = (req.url ?? '').split('?')[0];
  if (path !== '/metrics') return plain(res, 404, 'not found: metrics are at /metrics\n');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.setHeader('Allow', 'GET, HEAD');
    return plain(res, 405, 'method not allowed: GET /metrics\n');
  }
  try {
    const body = await source.exposition();
    res.writeHead(200, { 'Content-Type': source.contentType, 'Content-Length': Buffer.byteLength(body) });
    res.end(req.method === 'HEAD' ? undefined : body);
  } catch (e) {
    // A collector that throws is our bug: say so to the scraper and the log, keep serving.
    onError?.(e as Error);
    plain(res, 500, 'metrics collection failed: see the daemon log\n');
  }
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'Content-Length': Buffer.byteLength(text) });
  res.end(text);
}
