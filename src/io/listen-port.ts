// Where a replacement replica listens (PROTOCOL §10.6; issue 14 item 3). cluster.json lists every
// spare replica's port, so any local user can take one first, and a replacement that insisted on
// it could never start. A replacement whose port is taken listens on a free one of the same host
// instead and tells the group which (its state request); everyone dials it there from the view
// that adds it on.
import { createServer } from 'node:net';
import type { Endpoint } from './ws-transport.ts';

/** Whether `ep` can be listened on now, or the free port the kernel gives on its host. */
export async function listenableEndpoint(ep: Endpoint): Promise<{ endpoint: Endpoint; moved: boolean }> {
  const tryListen = (port: number) =>
    new Promise<number | null>((resolve, reject) => {
      const server = createServer();
      server.once('error', (e: NodeJS.ErrnoException) => (e.code === 'EADDRINUSE' ? resolve(null) : reject(e)));
      server.listen({ host: ep.host, port, exclusive: true }, () => {
        const a = server.address();
        const got = a !== null && typeof a === 'object' ? a.port : null;
        server.close(() => resolve(got));
      });
    });
  if ((await tryListen(ep.port)) !== null) return { endpoint: ep, moved: false };
  const port = await tryListen(0);
  if (port === null) throw new Error(`no free port on ${ep.host}`);
  return { endpoint: { host: ep.host, port }, moved: true };
}
