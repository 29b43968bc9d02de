// The namespace test bed (test/hosts/testbed.ts) with real processes and sockets: hosts reach each
// other over the bed's switch and only there, a host's loopback stays its own, cut/restore and
// killHost act as a pulled cable and a power-off, and destroy(), a failed creation and
// removeStaleTestBeds() leave no namespace behind. Every connection goes to an address inside a
// namespace the bed made, or to loopback. No wall-clock threshold: waits are vi.waitFor with the
// file's generous budget, and the only timeout that shapes a result is the client's ~1 s connect
// bound while the cable is cut.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { NAMESPACE_PREFIX, createTestBed, removeStaleTestBeds, testBedSupported, type TestBed } from '../hosts/testbed.ts';

const NODE = process.execPath;
const WAIT = { timeout: 20_000, interval: 25 };
const PORT = 7000;
const LOOPBACK_PORT = 7001;
/** The client's own bound on a connect and its echo; what "fails or times out" means here. */
const CONNECT_TIMEOUT_MS = 1_000;

/** node -e: an echo server on argv[1]:argv[2] that prints 'listening' once bound. */
const ECHO_SERVER = `const net = require('net'); const [host, port] = process.argv.slice(1);
net.createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(Number(port), host, () => console.log('listening'));`;
/** node -e: send argv[3] to argv[1]:argv[2], print 'ECHO <reply>', 'ERROR <code>' or 'TIMEOUT'. */
const CLIENT = `const net = require('net'); const [host, port, message, timeoutMs] = process.argv.slice(1);
const timer = setTimeout(() => { console.log('TIMEOUT'); process.exit(3); }, Number(timeoutMs));
const s = net.connect({ host, port: Number(port) }); let got = '';
s.on('connect', () => s.end(message)); s.on('data', (d) => { got += d; });
s.on('end', () => { clearTimeout(timer); console.log('ECHO ' + got); process.exit(0); });
s.on('error', (e) => { clearTimeout(timer); console.log('ERROR ' + e.code); process.exit(2); });`;
/** node -e: sleep forever, after starting a grandchild that leaves our process group (setsid), as
 *  a daemon would; argv[1] is a marker that lets the test find both in /proc. */
const SLEEPER_WITH_DAEMON = `const { spawn } = require('child_process');
spawn(process.execPath, ['-e', 'setInterval(() => {}, 1 << 30)', process.argv[1]], { detached: true, stdio: 'ignore' }).unref();
setInterval(() => {}, 1 << 30);`;

const support = testBedSupported();
if (!support.ok) console.warn(`test bed tests skipped: ${support.why}`);

function namespaces(): string[] {
  return execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' }).split('\n').map((line) => line.split(' ')[0] ?? '').filter((ns) => ns !== '');
}

function namespacePids(ns: string): number[] {
  return execFileSync('ip', ['netns', 'pids', ns], { encoding: 'utf8' }).split('\n').filter((line) => line.trim() !== '').map(Number);
}

/** Pids of live (non-zombie) processes whose command line contains `marker`. */
function processesWithMarker(marker: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.[0];
      if (cmdline.includes(marker) && state !== 'Z') found.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return found;
}

describe.skipIf(!support.ok)(`test bed of network namespaces${support.ok ? '' : ` (skipped: ${support.why})`}`, () => {
  let bed: TestBed;
  let dir: string;

  beforeAll(async () => {
    await removeStaleTestBeds();
    dir = mkdtempSync(join(tmpdir(), 'trine-testbed-'));
    bed = await createTestBed([{ name: 'n1' }, { name: 'n2' }]);
  });

  afterAll(async () => {
    await bed?.destroy();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  let servers = 0;
  /** Start an echo server in `host` bound to `address` and wait until it listens (each server has
   *  a fresh log, so an earlier server's 'listening' cannot pass for this one's). */
  async function startEcho(host: string, address: string, port: number): Promise<ChildProcess> {
    servers += 1;
    const logFile = join(dir, `${bed.tag}-${host}-${port}-${servers}.log`);
    const child = bed.spawn(host, NODE, ['-e', ECHO_SERVER, address, String(port)], { logFile });
    await vi.waitFor(() => expect(existsSync(logFile) ? readFileSync(logFile, 'utf8') : '').toContain('listening'), WAIT);
    return child;
  }

  /** What the client in `from` saw connecting to address:port: 'ECHO …', 'ERROR …' or 'TIMEOUT'. */
  async function connectFrom(from: string, address: string, port: number, on: TestBed = bed): Promise<string> {
    const result = await on.run(from, NODE, ['-e', CLIENT, address, String(port), `hello-${port}`, String(CONNECT_TIMEOUT_MS)], { timeoutMs: 15_000 });
    return result.stdout.trim();
  }

  it('gives each host its own namespace and an address in one /24, in spec order', () => {
    const n1 = bed.host('n1');
    const n2 = bed.host('n2');
    expect(n1.ns).toBe(`${NAMESPACE_PREFIX}${bed.tag}-n1`);
    expect(n1.address).toMatch(/^10\.77\.\d+\.1$/);
    expect(n2.address).toBe(n1.address.replace(/\.1$/, '.2'));
    expect(namespaces()).toEqual(expect.arrayContaining([n1.ns, n2.ns, `${NAMESPACE_PREFIX}${bed.tag}-sw`]));
    expect(() => bed.host('n3')).toThrow(/n3.*hosts: n1, n2/);
    // The root namespace holds no end of the bed's links.
    expect(execFileSync('ip', ['-o', 'link'], { encoding: 'utf8' })).not.toContain(bed.tag.slice(2));
  });

  it('two hosts reach each other: an echo server in n1 answers a client in n2', async () => {
    await startEcho('n1', bed.host('n1').address, PORT);
    expect(await connectFrom('n2', bed.host('n1').address, PORT)).toBe(`ECHO hello-${PORT}`);
  });

  it("a host cannot reach another host's loopback services", async () => {
    await startEcho('n1', '127.0.0.1', LOOPBACK_PORT);
    // The server is up: n1 itself reaches it on its loopback …
    expect(await connectFrom('n1', '127.0.0.1', LOOPBACK_PORT)).toBe(`ECHO hello-${LOOPBACK_PORT}`);
    // … but n2 reaches neither it at n1's address nor through its own loopback.
    expect(await connectFrom('n2', bed.host('n1').address, LOOPBACK_PORT)).toBe('ERROR ECONNREFUSED');
    expect(await connectFrom('n2', '127.0.0.1', LOOPBACK_PORT)).toBe('ERROR ECONNREFUSED');
  });

  it('cut(n1) makes a connect from n2 fail or time out; restore(n1) makes it work again', async () => {
    const address = bed.host('n1').address;
    expect(await connectFrom('n2', address, PORT)).toBe(`ECHO hello-${PORT}`);
    await bed.cut('n1');
    expect(await connectFrom('n2', address, PORT)).toMatch(/^(TIMEOUT|ERROR E\w+)$/);
    // n1 is cut, not dead: its own processes still answer on its loopback.
    expect(await connectFrom('n1', '127.0.0.1', LOOPBACK_PORT)).toBe(`ECHO hello-${LOOPBACK_PORT}`);
    await bed.restore('n1');
    await vi.waitFor(async () => expect(await connectFrom('n2', address, PORT)).toBe(`ECHO hello-${PORT}`), WAIT);
  });

  it('killHost(n1) leaves no process in n1, even a daemon that left its group, and spares n2', async () => {
    const marker = `marker-${bed.tag}-kill`;
    const sleeper = bed.spawn('n1', NODE, ['-e', SLEEPER_WITH_DAEMON, marker]);
    const bystander = bed.spawn('n2', NODE, ['-e', 'setInterval(() => {}, 1 << 30)']);
    await vi.waitFor(() => expect(processesWithMarker(marker)).toHaveLength(2), WAIT);
    expect(namespacePids(bed.host('n1').ns).length).toBeGreaterThanOrEqual(4); // two echo servers, sleeper, daemon
    await bed.killHost('n1');
    expect(namespacePids(bed.host('n1').ns)).toEqual([]);
    expect(processesWithMarker(marker)).toEqual([]);
    await vi.waitFor(() => expect(sleeper.signalCode).toBe('SIGKILL'), WAIT);
    expect(namespacePids(bed.host('n2').ns)).toContain(bystander.pid);
    // Its network is intact: a server started after the power-off is reachable again.
    await startEcho('n1', bed.host('n1').address, PORT);
    expect(await connectFrom('n2', bed.host('n1').address, PORT)).toBe(`ECHO hello-${PORT}`);
  });

  it('a second bed alive at once gets another subnet and cannot be reached from the first', async () => {
    const other = await createTestBed([{ name: 'w1' }]);
    try {
      expect(other.host('w1').address.split('.')[2]).not.toBe(bed.host('n1').address.split('.')[2]);
      const reply = await connectFrom('n2', other.host('w1').address, PORT);
      expect(reply).toMatch(/^(TIMEOUT|ERROR E\w+)$/);
    } finally {
      await other.destroy();
    }
  });

  it('destroy() leaves no namespace, link or process of the bed; a second destroy() is harmless', async () => {
    const doomed = await createTestBed([{ name: 'w1' }, { name: 'w2' }]);
    const marker = `marker-${doomed.tag}-destroy`;
    doomed.spawn('w1', NODE, ['-e', SLEEPER_WITH_DAEMON, marker]);
    await vi.waitFor(() => expect(processesWithMarker(marker)).toHaveLength(2), WAIT);
    expect(namespaces().filter((ns) => ns.includes(doomed.tag))).toHaveLength(3);
    await doomed.destroy();
    expect(namespaces().filter((ns) => ns.includes(doomed.tag))).toEqual([]);
    expect(execFileSync('ip', ['-o', 'link'], { encoding: 'utf8' })).not.toContain(doomed.tag.slice(2));
    expect(processesWithMarker(marker)).toEqual([]);
    await expect(doomed.destroy()).resolves.toBeUndefined();
    expect(() => doomed.host('w1')).toThrow(/destroyed/);
  });

  it('an invalid spec is refused up front, naming the problem, and creates nothing', async () => {
    const before = namespaces();
    await expect(createTestBed([{ name: 'BAD NAME' }])).rejects.toThrow(/"BAD NAME" must be/);
    await expect(createTestBed([{ name: 'w1' }, { name: 'w1' }])).rejects.toThrow(/"w1" appears twice/);
    await expect(createTestBed([{ name: 'sw' }])).rejects.toThrow(/switch/);
    await expect(createTestBed([])).rejects.toThrow(/1\.\.254 hosts/);
    expect(namespaces()).toEqual(before);
  });

  it('a bed whose creation fails half-way throws naming the ip command and its stderr, and removes what it made', async () => {
    const tag = `tb${randomBytes(3).toString('hex')}`;
    const blocker = `${NAMESPACE_PREFIX}${tag}-w2`;
    execFileSync('ip', ['netns', 'add', blocker]);
    try {
      // The switch and w1 are made before `ip netns add` of w2 collides with the blocker.
      await expect(createTestBed([{ name: 'w1' }, { name: 'w2' }, { name: 'w3' }], { tag }))
        .rejects.toThrow(new RegExp(`\`ip netns add ${blocker}\` failed \\(exit \\d+\\): .*File exists`));
      expect(namespaces().filter((ns) => ns.includes(tag))).toEqual([blocker]);
    } finally {
      execFileSync('ip', ['netns', 'del', blocker]);
    }
  });

  it('removeStaleTestBeds() deletes the namespaces of a crashed run, killing their processes, and spares live beds', async () => {
    const tag = `tb${randomBytes(3).toString('hex')}`;
    const left = [`${NAMESPACE_PREFIX}${tag}-w1`, `${NAMESPACE_PREFIX}${tag}-sw`];
    for (const ns of left) execFileSync('ip', ['netns', 'add', ns]);
    const orphan = spawn('ip', ['netns', 'exec', left[0] ?? '', NODE, '-e', 'setInterval(() => {}, 1 << 30)'], { detached: true, stdio: 'ignore' });
    try {
      await vi.waitFor(() => expect(namespacePids(left[0] ?? '')).toHaveLength(1), WAIT);
      const removed = await removeStaleTestBeds();
      expect(removed).toEqual(expect.arrayContaining(left));
      expect(namespaces().filter((ns) => ns.includes(tag))).toEqual([]);
      await vi.waitFor(() => expect(orphan.signalCode).toBe('SIGKILL'), WAIT);
      expect(namespaces()).toEqual(expect.arrayContaining([bed.host('n1').ns, bed.host('n2').ns, `${NAMESPACE_PREFIX}${bed.tag}-sw`]));
      expect(await connectFrom('n2', bed.host('n1').address, PORT)).toBe(`ECHO hello-${PORT}`);
    } finally {
      if (orphan.pid !== undefined) try { process.kill(-orphan.pid, 'SIGKILL'); } catch { /* gone */ }
      for (const ns of left) if (namespaces().includes(ns)) execFileSync('ip', ['netns', 'del', ns]);
    }
  });
});
