// `trine keygen`: an Ed25519 key pair per process (`<dir>/keys/<id>.json`, mode 0600) and the
// cluster's public-key table (`<dir>/keys/public.json`); with an existing cluster.json, its
// public keys are updated too so the daemons accept the new keys. --json: a `trine.keygen/1`
// object (cli/json-out.ts) with the ids and their public keys.
import { existsSync } from 'node:fs';
import type { ProcessId } from '../src/core/ports.ts';
import {
  clusterIds, DEFAULT_NODES, generateClusterKeys, loadCluster, paths, resolveClusterDir, writeClusterConfig,
} from '../src/io/cluster-dir.ts';
import { CliError, EXIT_OK, EXIT_USAGE } from './errors.ts';
import { emitJson, SCHEMAS } from './json-out.ts';

export type KeygenOptions = { dir?: string | undefined; ids?: string | undefined; force?: boolean | undefined; json?: boolean | undefined };

export function keygen(opts: KeygenOptions): number {
  const dir = resolveClusterDir(opts.dir);
  const hasConfig = existsSync(paths.config(dir));
  const cluster = hasConfig ? loadCluster(dir) : null;
  let ids: ProcessId[];
  if (opts.ids !== undefined) ids = opts.ids.split(',').map((s) => s.trim()).filter((s) => s.length > 0);
  else if (cluster !== null) ids = cluster.config.processes.map((p) => p.id);
  else ids = clusterIds(DEFAULT_NODES).all;
  if (ids.length === 0) throw new CliError('--ids lists no process ids: pass e.g. --ids r1,r2,r3,scc,op');
  const existing = ids.filter((id) => existsSync(paths.keyFile(dir, id)));
  if (existing.length > 0 && opts.force !== true) {
    throw new CliError(`keys already exist in ${paths.keys(dir)} for ${existing.join(', ')}: pass --force to replace them (running daemons must then be restarted)`, EXIT_USAGE, 'KEYS_EXIST');
  }
  const table = generateClusterKeys(dir, ids, true);
  if (cluster !== null) {
    const publicKeys = { ...cluster.config.publicKeys };
    for (const [id, key] of table) publicKeys[id] = Buffer.from(key).toString('base64');
    writeClusterConfig(dir, { ...cluster.config, publicKeys });
  }
  if (opts.json === true) {
    emitJson(SCHEMAS.keygen, {
      dir, ids, keysDir: paths.keys(dir), publicKeysFile: paths.publicKeys(dir), clusterJsonUpdated: cluster !== null,
      publicKeys: Object.fromEntries([...table].map(([id, key]) => [id, Buffer.from(key).toString('base64')])),
    });
    return EXIT_OK;
  }
  process.stdout.write(`wrote ${ids.length} key pair${ids.length === 1 ? '' : 's'} to ${paths.keys(dir)} (${ids.join(', ')}); public keys in ${paths.publicKeys(dir)}${cluster !== null ? ' and cluster.json' : ''}\n`);
  return EXIT_OK;
}
