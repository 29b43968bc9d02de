// Deployment bundles (src/io/deploy.ts, docs/OPERATIONS.md §8), written from examples/hosts.yaml
// into a fresh temp dir: one bundle per host, each holding the public cluster document and that
// host's private keys only; every listen address on its host's own address; spares bound to the
// agent hosts that hold their keys (PROTOCOL §10.6); and loadBundle refusing a bundle that lost a
// key or mixes two clusters.
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialTargets } from '../../../src/io/dial-targets.ts';
import { ClusterDirError, loadCluster, type ClusterConfig } from '../../../src/io/cluster-dir.ts';
import { BundleError, loadBundle, NODE_UNIT, planDeployment, SCC_UNIT, systemdUnit, writeDeployment, type BundleInfo, type Plan } from '../../../src/io/deploy.ts';
import { readHostsFile, type HostsFile } from '../../../src/io/hosts-file.ts';
import { publicKeyFromSeed } from '../../../src/io/keys.ts';

const EXAMPLE = fileURLToPath(new URL('../../../examples/hosts.yaml', import.meta.url));

let root: string;
let out: string;
let file: HostsFile;
let plan: Plan;
/** Every process's key file as written: id → its host and its seed in base64. */
const keys = new Map<string, { host: string; seed: string; publicKey: string }>();

/** Every file under `dir`, recursively. */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]));
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, 'utf8')) as T;
const bundleJson = (host: string): BundleInfo => readJson<BundleInfo>(join(out, host, 'bundle.json'));
const modeOf = (path: string): number => statSync(path).mode & 0o777;

/** A copy of host `host`'s bundle in a new dir, to damage without touching the original. */
function copyOfBundle(host: string): string {
  const dir = join(mkdtempSync(join(root, 'copy-')), host);
  cpSync(join(out, host), dir, { recursive: true });
  return dir;
}

/** The BundleError loadBundle throws for `dir` (fails the test if it loads). */
function bundleRejection(dir: string): BundleError {
  try {
    loadBundle(dir);
  } catch (e) {
    expect(e).toBeInstanceOf(BundleError);
    return e as BundleError;
  }
  throw new Error(`expected loadBundle(${dir}) to fail`);
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'trine-deploy-'));
  out = join(root, 'bundles');
  file = readHostsFile(EXAMPLE);
  plan = writeDeployment(file, out);
  for (const b of plan.bundles) {
    for (const id of b.ids) {
      const k = readJson<{ id: string; seed: string; publicKey: string }>(join(out, b.host, 'keys', `${id}.json`));
      keys.set(id, { host: b.host, seed: k.seed, publicKey: k.publicKey });
    }
  }
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('writeDeployment on examples/hosts.yaml', () => {
  it('writes one bundle per host, and the public cluster.json beside them', () => {
    expect(readdirSync(out).sort()).toEqual([...file.hosts.map((h) => h.id), 'cluster.json'].sort());
    for (const h of file.hosts) {
      const b = bundleJson(h.id);
      expect(b).toEqual(plan.bundles.find((p) => p.host === h.id));
      expect(b.format).toBe('trine-bundle/1');
      expect(b.cluster).toBe(plan.config.cluster);
      expect(b.address).toBe(h.address);
      expect(b.roles).toEqual(h.roles);
      expect(b.install).toEqual(file.install);
      // Every bundle holds the same cluster document.
      expect(readFileSync(join(out, h.id, 'cluster.json'), 'utf8')).toBe(readFileSync(join(out, 'cluster.json'), 'utf8'));
    }
    expect(plan.config.cluster).toMatch(/^lab-[0-9a-f]{12}$/);
  });

  it("each bundle's keys/ holds exactly the private keys of the ids its bundle.json lists, each matching cluster.json", () => {
    const config = readJson<ClusterConfig>(join(out, 'cluster.json'));
    for (const h of file.hosts) {
      const b = bundleJson(h.id);
      expect(readdirSync(join(out, h.id, 'keys')).sort()).toEqual(b.ids.map((id) => `${id}.json`).sort());
      for (const id of b.ids) {
        const k = keys.get(id);
        expect(k?.publicKey).toBe(config.publicKeys[id]);
        expect(Buffer.from(publicKeyFromSeed(Buffer.from(k?.seed ?? '', 'base64'))).toString('base64')).toBe(config.publicKeys[id]);
      }
    }
  });

  it("together the bundles hold every process's key exactly once", () => {
    const config = readJson<ClusterConfig>(join(out, 'cluster.json'));
    const held = file.hosts.flatMap((h) => bundleJson(h.id).ids);
    expect(new Set(held).size).toBe(held.length);
    expect([...held].sort()).toEqual(config.processes.map((p) => p.id).sort());
    expect(Object.keys(config.publicKeys).sort()).toEqual([...held].sort());
    // And the bundles are what the hosts run: n1..n3 a replica, a spare per port and an agent.
    expect(bundleJson('n1').ids).toEqual(['r1', 'r4', 'r8', 'a1']);
    expect(bundleJson('n4').ids).toEqual(['r7', 'r11', 'a4']);
    expect(bundleJson('watchdog').ids).toEqual(['scc']);
    expect(bundleJson('ops').ids).toEqual(['op']);
  });

  it("no bundle holds another host's private key: no other host's seed appears in any file of it", () => {
    const encodings = (seed: string): string[] => {
      const bytes = Buffer.from(seed, 'base64');
      return [seed, bytes.toString('base64url'), bytes.toString('hex')];
    };
    for (const h of file.hosts) {
      const files = filesUnder(join(out, h.id));
      expect(files.length).toBeGreaterThan(0);
      const foreign = [...keys.entries()].filter(([, k]) => k.host !== h.id);
      const texts = files.map((path) => readFileSync(path).toString('latin1'));
      // The search works: the host's own seeds are found (in its key files).
      for (const [id, k] of keys) if (k.host === h.id) expect(texts.some((t) => t.includes(k.seed)), `${id}'s own seed`).toBe(true);
      for (const [i, path] of files.entries()) {
        const text = texts[i] as string;
        for (const [id, k] of foreign) {
          for (const s of encodings(k.seed)) expect(text.includes(s), `${path} holds ${id}'s seed (host ${k.host})`).toBe(false);
        }
      }
    }
    // The public document beside the bundles holds no seed at all.
    const top = readFileSync(join(out, 'cluster.json'), 'latin1');
    for (const [id, k] of keys) expect(top.includes(k.seed), `cluster.json holds ${id}'s seed`).toBe(false);
  });

  it('the cluster document names the task user, and loadCluster reads it back (default nobody)', () => {
    expect(readJson<ClusterConfig>(join(out, 'cluster.json')).taskUser).toBe(file.taskUser);
    expect(loadCluster(join(out, 'n1')).config.taskUser).toBe('nobody');
  });

  it('allowInject is in the cluster document only when the hosts file says allow-inject: true', () => {
    expect(readJson<ClusterConfig>(join(out, 'cluster.json')).allowInject).toBeUndefined();
    const keys = (id: string) => new Uint8Array(32).fill(id.length);
    expect(planDeployment({ ...file, allowInject: true }, keys).config.allowInject).toBe(true);
    expect(planDeployment({ ...file, allowInject: false }, keys).config.allowInject).toBeUndefined();
  });

  it('a bundle\'s logs/ and run/ are 0700 like the bundle: nothing in it is open to the task user', () => {
    for (const h of file.hosts) for (const sub of ['logs', 'run']) expect(modeOf(join(out, h.id, sub)), `${h.id}/${sub}`).toBe(0o700);
  });

  it('key files are mode 0600, bundle dirs and their keys/ 0700', () => {
    for (const h of file.hosts) {
      expect(modeOf(join(out, h.id)), h.id).toBe(0o700);
      expect(modeOf(join(out, h.id, 'keys')) & 0o077, `${h.id}/keys`).toBe(0);
      for (const name of readdirSync(join(out, h.id, 'keys'))) expect(modeOf(join(out, h.id, 'keys', name)), `${h.id}/keys/${name}`).toBe(0o600);
    }
  });

  it('spares are bound to the agent hosts that hold their keys, and listen on those hosts (PROTOCOL §10.6)', () => {
    const config = readJson<ClusterConfig>(join(out, 'cluster.json'));
    const m = config.membership;
    const agentHosts = file.hosts.filter((h) => h.roles.includes('agent'));
    expect(m.spareReplicas).toHaveLength(file.sparesPerHost * agentHosts.length);
    expect(Object.keys(m.spareNodes ?? {}).sort()).toEqual([...m.spareReplicas].sort());
    for (const id of m.spareReplicas) {
      const node = m.spareNodes?.[id] as string;
      const host = agentHosts.find((h) => h.id === node);
      expect(host, `${id} is bound to ${node}, an agent host`).toBeDefined();
      expect(keys.get(id)?.host).toBe(node); // its key is in that host's bundle
      const p = config.processes.find((e) => e.id === id);
      expect(p?.node).toBe(node);
      expect(p?.listen?.host).toBe(host?.address);
    }
    for (const h of agentHosts) expect(Object.values(m.spareNodes ?? {}).filter((n) => n === h.id)).toHaveLength(file.sparesPerHost);
    // loadCluster reads the binding back from the process entries.
    expect(loadCluster(join(out, 'n1')).config.membership.spareNodes).toEqual(m.spareNodes);
  });

  it("every listen address is its host's address; no loopback anywhere in cluster.json", () => {
    const text = readFileSync(join(out, 'cluster.json'), 'utf8');
    expect(text).not.toContain('127.0.0.1');
    expect(text).not.toContain('localhost');
    const config = JSON.parse(text) as ClusterConfig;
    const ports = new Set<string>();
    for (const p of config.processes) {
      if (p.listen === null) continue;
      const host = file.hosts.find((h) => h.id === keys.get(p.id)?.host);
      expect(p.listen.host, p.id).toBe(host?.address);
      ports.add(`${p.listen.host}:${p.listen.port}`);
    }
    expect(ports.size).toBe(config.processes.filter((p) => p.listen !== null).length); // no two share one
    expect(config.nodeAddresses).toEqual({ n1: '10.0.0.11', n2: '10.0.0.12', n3: '10.0.0.13', n4: '10.0.0.14' });
    expect(config.resetDriver).toBe('command');
    expect(config.resetCommand).toEqual(['/usr/local/sbin/trine-power-cycle', '{node}', '{address}']);
    expect(config.membership.timing.replicaHeartbeatMs).toBe(75);
  });

  it('every agent listens on its host, on the port after the spares: the operator reads task output from it (PROTOCOL §7.1)', () => {
    const config = readJson<ClusterConfig>(join(out, 'cluster.json'));
    const agents = config.processes.filter((p) => p.kind === 'agent');
    expect(agents).toHaveLength(file.hosts.filter((h) => h.roles.includes('agent')).length);
    for (const a of agents) {
      expect(a.listen, a.id).toEqual({ host: file.hosts.find((h) => h.id === a.node)?.address, port: file.basePort + file.sparesPerHost + 1 });
    }
    // Listening is for the operator's reads only: no daemon, and not the operator's standing
    // connections, dials an agent (the operator dials one on demand, cli/status-client.ts).
    const cluster = loadCluster(join(out, 'n1'));
    for (const p of config.processes) {
      expect(Object.keys(dialTargets(cluster, p.id)).filter((id) => agents.some((a) => a.id === id)), p.id).toEqual([]);
    }
  });

  it('loadCluster accepts each bundle dir', () => {
    for (const h of file.hosts) {
      const c = loadCluster(join(out, h.id));
      expect(c.config.cluster).toBe(plan.config.cluster);
      expect(c.publicKeys.size).toBe(plan.config.processes.length);
    }
  });

  it('loadBundle accepts each bundle', () => {
    for (const h of file.hosts) {
      const { bundle, cluster } = loadBundle(join(out, h.id));
      expect(bundle.host).toBe(h.id);
      expect(bundle.ids).toEqual(plan.bundles.find((b) => b.host === h.id)?.ids);
      expect(cluster.config.cluster).toBe(plan.config.cluster);
      expect(cluster.dir).toBe(join(out, h.id));
    }
  });

  it('refuses a non-empty out dir, and writes nothing into it', () => {
    const dir = join(root, 'taken');
    mkdirSync(dir);
    writeFileSync(join(dir, 'notes.txt'), 'mine\n');
    let err: unknown;
    try {
      writeDeployment(file, dir);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ClusterDirError);
    expect((err as ClusterDirError).code).toBe('BAD_ARGUMENT');
    expect((err as Error).message).toContain('exists and is not empty: pass a new --out');
    expect(readdirSync(dir)).toEqual(['notes.txt']);
    // Nor the dir it already wrote.
    expect(() => writeDeployment(file, out)).toThrow(ClusterDirError);
  });

  it('accepts an existing empty out dir', () => {
    const dir = join(root, 'empty');
    mkdirSync(dir);
    const p = writeDeployment(file, dir);
    expect(readdirSync(dir).sort()).toEqual([...file.hosts.map((h) => h.id), 'cluster.json'].sort());
    expect(p.config.cluster).not.toBe(plan.config.cluster);
  });
});

describe('loadBundle refuses a damaged bundle', () => {
  let other: string;
  beforeAll(() => {
    other = join(root, 'other');
    writeDeployment(file, other);
  });

  it('a key file removed: BUNDLE_KEY_MISSING, naming the id', () => {
    const dir = copyOfBundle('n4');
    rmSync(join(dir, 'keys', 'r11.json'));
    const e = bundleRejection(dir);
    expect(e.code).toBe('BUNDLE_KEY_MISSING');
    expect(e.message).toContain('has no key for r11');
    expect(e.message).toContain("copy the host's keys/ from `trine init`'s output again");
  });

  it("a key file replaced by another cluster's key for the same id: BUNDLE_KEY_MISSING, naming the id", () => {
    const dir = copyOfBundle('n4');
    cpSync(join(other, 'n4', 'keys', 'a4.json'), join(dir, 'keys', 'a4.json'));
    const e = bundleRejection(dir);
    expect(e.code).toBe('BUNDLE_KEY_MISSING');
    expect(e.message).toContain("is not a4's key in this cluster's cluster.json");
    expect(e.message).toContain('mixes two clusters');
  });

  it("a key file replaced by another id's key of the same cluster: BUNDLE_KEY_MISSING", () => {
    const dir = copyOfBundle('n4');
    cpSync(join(dir, 'keys', 'r7.json'), join(dir, 'keys', 'a4.json'));
    expect(bundleRejection(dir).code).toBe('BUNDLE_KEY_MISSING');
  });

  it('a cluster.json from another cluster: BUNDLE_INVALID, saying the bundle mixes two clusters', () => {
    const dir = copyOfBundle('n4');
    cpSync(join(other, 'n4', 'cluster.json'), join(dir, 'cluster.json'));
    const e = bundleRejection(dir);
    expect(e.code).toBe('BUNDLE_INVALID');
    expect(e.message).toContain('the bundle mixes two clusters');
  });

  it('a dir without bundle.json: BUNDLE_INVALID, saying to pass the dir `trine init` wrote', () => {
    const dir = copyOfBundle('n4');
    rmSync(join(dir, 'bundle.json'));
    const e = bundleRejection(dir);
    expect(e.code).toBe('BUNDLE_INVALID');
    expect(e.message).toContain('is not a Trine bundle (no bundle.json)');
    // Nor is the output dir itself a bundle.
    expect(bundleRejection(out).code).toBe('BUNDLE_INVALID');
  });

  it('a bundle.json that is not JSON, or of another format: BUNDLE_INVALID', () => {
    const dir = copyOfBundle('n4');
    writeFileSync(join(dir, 'bundle.json'), '{ not json');
    expect(bundleRejection(dir).code).toBe('BUNDLE_INVALID');
    writeFileSync(join(dir, 'bundle.json'), JSON.stringify({ ...bundleJson('n4'), format: 'trine-bundle/0' }));
    expect(bundleRejection(dir).code).toBe('BUNDLE_INVALID');
  });
});

describe('systemd units', () => {
  it('an agent host runs `trine node run --bundle <install.dir>` as install.user', () => {
    for (const host of ['n1', 'n4']) {
      const text = readFileSync(join(out, host, NODE_UNIT), 'utf8');
      expect(text).toContain(`User=${file.install.user}\n`);
      expect(text).toContain(`ExecStart=${file.install.trine} node run --bundle ${file.install.dir}\n`);
      expect(text).toContain('KillMode=control-group\n');
      expect(text).toContain('WantedBy=multi-user.target\n');
      expect(text).toContain(plan.config.cluster);
      expect(readdirSync(join(out, host))).not.toContain(SCC_UNIT);
    }
  });

  it('the watchdog host gets trine-scc.service running `trine scc run`, and no node unit', () => {
    const names = readdirSync(join(out, 'watchdog'));
    expect(names).toContain(SCC_UNIT);
    expect(names).not.toContain(NODE_UNIT);
    const text = readFileSync(join(out, 'watchdog', SCC_UNIT), 'utf8');
    expect(text).toContain(`User=${file.install.user}\n`);
    expect(text).toContain(`ExecStart=${file.install.trine} scc run --bundle ${file.install.dir}\n`);
  });

  it('the operator-only host gets no unit', () => {
    expect(readdirSync(join(out, 'ops')).filter((n) => n.endsWith('.service'))).toEqual([]);
    expect(systemdUnit(bundleJson('ops'))).toBeNull();
  });

  it('the unit follows the hosts file install settings', () => {
    const b: BundleInfo = { ...bundleJson('n2'), install: { dir: '/srv/trine', trine: '/opt/trine/bin/trine', user: 'svc' } };
    const unit = systemdUnit(b);
    expect(unit?.name).toBe(NODE_UNIT);
    expect(unit?.text).toContain('User=svc\n');
    expect(unit?.text).toContain('ExecStart=/opt/trine/bin/trine node run --bundle /srv/trine\n');
  });
});
