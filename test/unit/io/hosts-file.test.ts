// The hosts file of a cluster of several machines (src/io/hosts-file.ts, docs/OPERATIONS.md §8):
// the shipped example parses as written, and every mistake an operator can make is one
// HostsFileError whose message names the file, the entry at fault and what to do, so that
// `trine init` prints it as one line.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_TIMING } from '../../../src/core/constants.ts';
import { DEFAULT_AGENT_SLOTS } from '../../../src/io/cluster-dir.ts';
import {
  DEFAULT_BASE_PORT, DEFAULT_INSTALL, DEFAULT_SPARES_PER_HOST, DEFAULT_TASK_USER, HostsFileError, MAX_HOSTS_FILE_BYTES, parseHostsFile,
  readHostsFile,
} from '../../../src/io/hosts-file.ts';
import { HOST_LINES as HOSTS } from '../../fixtures/hosts/host-lines.ts';

const EXAMPLE = fileURLToPath(new URL('../../../examples/hosts.yaml', import.meta.url));
const PATH = 'hosts.yaml';


/** A hosts file: `head` settings, then `hosts` (HOSTS unless given). */
const fileWith = (opts: { head?: string[]; hosts?: string[] } = {}): string =>
  [...(opts.head ?? ['cluster: lab']), 'hosts:', ...(opts.hosts ?? HOSTS)].join('\n') + '\n';

/** HOSTS with line `i` replaced (or removed, for null). */
const hostsWith = (changes: Record<number, string | null>): string[] =>
  HOSTS.flatMap((line, i) => (i in changes ? (changes[i] === null ? [] : [changes[i] as string]) : [line]));

/** The HostsFileError that parsing `text` throws (fails the test if it parses). */
function rejection(text: string): HostsFileError {
  try {
    parseHostsFile(text, PATH);
  } catch (e) {
    expect(e).toBeInstanceOf(HostsFileError);
    const err = e as HostsFileError;
    expect(err.code).toBe('HOSTS_FILE_INVALID');
    expect(err.message.startsWith(`${PATH}: `)).toBe(true); // names the file
    expect(err.message).not.toContain('\n'); // one line on the CLI
    return err;
  }
  throw new Error(`expected a HostsFileError for:\n${text}`);
}

describe('examples/hosts.yaml', () => {
  it('parses as written: 6 hosts with their roles and slots, the reset command, the install settings', () => {
    const f = readHostsFile(EXAMPLE);
    expect(f.name).toBe('lab');
    expect(f.basePort).toBe(7400);
    expect(f.sparesPerHost).toBe(2);
    expect(f.hosts).toEqual([
      { id: 'n1', address: '10.0.0.11', roles: ['replica', 'agent'], slots: 4 },
      { id: 'n2', address: '10.0.0.12', roles: ['replica', 'agent'], slots: 4 },
      { id: 'n3', address: '10.0.0.13', roles: ['replica', 'agent'], slots: 4 },
      { id: 'n4', address: '10.0.0.14', roles: ['agent'], slots: 8 },
      { id: 'watchdog', address: '10.0.0.2', roles: ['watchdog'], slots: DEFAULT_AGENT_SLOTS },
      { id: 'ops', address: '10.0.0.3', roles: ['operator'], slots: DEFAULT_AGENT_SLOTS },
    ]);
    expect(f.reset).toEqual({ driver: 'command', command: ['/usr/local/sbin/trine-power-cycle', '{node}', '{address}'] });
    expect(f.timing).toEqual({ replicaHeartbeatMs: 75 });
    // The example spells out the defaults, so it documents them.
    expect(f.install).toEqual(DEFAULT_INSTALL);
    expect(f.install).toEqual({ dir: '/var/lib/trine', trine: '/usr/local/bin/trine', user: 'root' });
  });

  it('a file with only hosts gets the defaults: port, spares, install, log reset driver, no timing', () => {
    const f = parseHostsFile(`hosts:\n${HOSTS.join('\n')}\n`, PATH);
    expect(f.name).toBe('trine');
    expect(f.basePort).toBe(DEFAULT_BASE_PORT);
    expect(f.sparesPerHost).toBe(DEFAULT_SPARES_PER_HOST);
    expect(f.install).toEqual(DEFAULT_INSTALL);
    expect(f.reset).toEqual({ driver: 'log' });
    expect(f.timing).toEqual({});
    expect(f.hosts.map((h) => h.slots)).toEqual(HOSTS.map(() => DEFAULT_AGENT_SLOTS));
  });

  it('a partial install mapping keeps the defaults of the settings it leaves out', () => {
    const f = parseHostsFile(fileWith({ head: ['install: { user: svc-trine }', 'task-user: svc-trine'] }), PATH);
    expect(f.install).toEqual({ ...DEFAULT_INSTALL, user: 'svc-trine' });
  });

  it('task-user: tasks run as nobody unless the file names another user (FAULT-MODEL "Tasks and Trine\'s secrets")', () => {
    expect(DEFAULT_TASK_USER).toBe('nobody');
    expect(parseHostsFile(fileWith(), PATH).taskUser).toBe('nobody');
    expect(parseHostsFile(fileWith({ head: ['task-user: trine-jobs'] }), PATH).taskUser).toBe('trine-jobs');
    expect(rejection(fileWith({ head: ['task-user: "Bad User"'] })).message).toContain('"task-user" must be a user name');
    expect(rejection(fileWith({ head: ['task-user: 12'] })).message).toContain('"task-user" must be a user name');
  });

  it('allow-inject: false unless the file says true (then cluster.json allowInject, for trine inject); anything but a boolean is refused', () => {
    expect(parseHostsFile(fileWith(), PATH).allowInject).toBe(false);
    expect(parseHostsFile(fileWith({ head: ['allow-inject: true'] }), PATH).allowInject).toBe(true);
    expect(rejection(fileWith({ head: ['allow-inject: yes-please'] })).message).toContain('"allow-inject" must be true or false');
  });

  it('daemons that are not root cannot start tasks as another user: init says so, naming both ways out', () => {
    const e = rejection(fileWith({ head: ['install: { user: trine }'] }));
    expect(e.message).toContain('install.user trine cannot start tasks as task-user nobody');
    expect(e.message).toContain('install.user: root');
    expect(e.message).toContain('task-user: trine');
  });
});

describe('hosts: each entry', () => {
  it('duplicate address: names the second entry and the host that has it, asks for its own', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 1: '  - { id: n2, address: 10.0.0.11, roles: [replica, agent] }' }) }));
    expect(e.message).toContain('hosts[1] (n2)');
    expect(e.message).toContain('10.0.0.11');
    expect(e.message).toContain('already used by n1');
    expect(e.message).toContain('every host needs its own');
  });

  it('duplicate id: names the second entry and the first one with that id', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: n1, address: 10.0.0.14, roles: [agent] }' }) }));
    expect(e.message).toContain('hosts[3] (n1)');
    expect(e.message).toContain('id n1 is already used by hosts[0]');
  });

  it('unknown role: names the entry and the role, lists the roles to use', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: n4, address: 10.0.0.14, roles: [agent, worker] }' }) }));
    expect(e.message).toContain('hosts[3] (n4)');
    expect(e.message).toContain('unknown role "worker"');
    expect(e.message).toContain('use replica, agent, watchdog, operator');
  });

  it('watchdog sharing a host with an agent: names the entry, asks to remove agent and replica', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 4: '  - { id: watchdog, address: 10.0.0.2, roles: [watchdog, agent] }' }) }));
    expect(e.message).toContain('hosts[4] (watchdog)');
    expect(e.message).toContain('needs a host of its own');
    expect(e.message).toContain('remove agent and replica from its roles');
  });

  it('replica without agent: names the entry, asks to add "agent"', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 2: '  - { id: n3, address: 10.0.0.13, roles: [replica] }' }) }));
    expect(e.message).toContain('hosts[2] (n3)');
    expect(e.message).toContain('add "agent" to its roles');
  });

  it('unknown host key (a misspelt `slot:`): names the entry and the key, lists the keys to use', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: n4, address: 10.0.0.14, roles: [agent], slot: 8 }' }) }));
    expect(e.message).toContain('hosts[3] (n4)');
    expect(e.message).toContain('unknown setting "slot"');
    expect(e.message).toContain('use id, address, roles, slots');
  });

  for (const slots of ['0', '1.5', '"4"', '-1', '1025']) {
    it(`bad slots (${slots}): names the entry and the range`, () => {
      const e = rejection(fileWith({ hosts: hostsWith({ 3: `  - { id: n4, address: 10.0.0.14, roles: [agent], slots: ${slots} }` }) }));
      expect(e.message).toContain('hosts[3] (n4)');
      expect(e.message).toContain('slots must be an integer from 1 to 1024');
    });
  }

  it('slots on a host without the agent role: names the entry', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 4: '  - { id: watchdog, address: 10.0.0.2, roles: [watchdog], slots: 4 }' }) }));
    expect(e.message).toContain('hosts[4] (watchdog)');
    expect(e.message).toContain('slots are for agent hosts only');
  });

  it('bad address (`not an address!`): names the entry, says what an address is', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: n4, address: "not an address!", roles: [agent] }' }) }));
    expect(e.message).toContain('hosts[3] (n4)');
    expect(e.message).toContain('address must be an IP address or a DNS name');
  });

  for (const address of ['0.0.0.0', '"::"', '127.0.0.1', '127.1.2.3', '"::1"', 'localhost']) {
    it(`bad address (${address}, a wildcard or loopback): names the entry, asks for the host's own address`, () => {
      const e = rejection(fileWith({ hosts: hostsWith({ 3: `  - { id: n4, address: ${address}, roles: [agent] }` }) }));
      expect(e.message).toContain('hosts[3] (n4)');
      expect(e.message).toContain('is not one other hosts can dial');
      expect(e.message).toContain("give the host's own network address");
    });
  }

  it('bad id: names the entry by its index, says what an id is', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: N4_x, address: 10.0.0.14, roles: [agent] }' }) }));
    expect(e.message).toContain('hosts[3] (N4_x)');
    expect(e.message).toContain('id must be lower-case letters, digits and "-"');
  });

  it('an entry that is not a mapping: names it by index', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - n4' }) }));
    expect(e.message).toContain('hosts[3] must be a mapping with id, address and roles');
  });
});

describe('hosts: the roles across entries', () => {
  it('no watchdog: says a cluster needs exactly one', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 4: null }) }));
    expect(e.message).toContain('no host has the watchdog role');
    expect(e.message).toContain('a cluster needs exactly one');
  });

  it('two watchdogs: says a cluster needs exactly one', () => {
    const e = rejection(fileWith({ hosts: [...HOSTS, '  - { id: watchdog2, address: 10.0.0.4, roles: [watchdog] }'] }));
    expect(e.message).toContain('2 hosts have (watchdog, watchdog2) the watchdog role');
    expect(e.message).toContain('a cluster needs exactly one');
  });

  it('2 replica hosts: names them, says a group needs exactly 3', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 2: '  - { id: n3, address: 10.0.0.13, roles: [agent] }' }) }));
    expect(e.message).toContain('2 hosts have the replica role (n1, n2)');
    expect(e.message).toContain('needs exactly 3, on distinct hosts');
  });

  it('4 replica hosts: names them, says a group needs exactly 3', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: n4, address: 10.0.0.14, roles: [replica, agent] }' }) }));
    expect(e.message).toContain('4 hosts have the replica role (n1, n2, n3, n4)');
    expect(e.message).toContain('needs exactly 3, on distinct hosts');
  });

  it('fewer than 3 agent hosts: rejected (every replica host is an agent host, so the replica count says it first)', () => {
    // Three replica hosts imply three agent hosts (a replica host must be an agent host), so a
    // file with two agent hosts always fails on the replica rule or the replica-without-agent rule.
    const two = rejection(fileWith({ hosts: hostsWith({ 2: null, 3: null }) }));
    expect(two.message).toContain('2 hosts have the replica role (n1, n2)');
    const noAgent = rejection(fileWith({ hosts: hostsWith({ 2: '  - { id: n3, address: 10.0.0.13, roles: [replica] }', 3: null }) }));
    expect(noAgent.message).toContain('hosts[2] (n3)');
    expect(noAgent.message).toContain('add "agent" to its roles');
  });

  it('no operator: says to give the role to exactly one host', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 5: null }) }));
    expect(e.message).toContain('no host has the operator role');
    expect(e.message).toContain('give it to exactly one');
  });

  it('an empty hosts list: says what "hosts" must be', () => {
    const e = rejection('cluster: lab\nhosts: []\n');
    expect(e.message).toContain('"hosts" must be a list of hosts, each with id, address and roles');
  });
});

describe('cluster-wide settings', () => {
  it('unknown top-level key (a misspelt `hsots:`): names it and lists the keys to use', () => {
    const e = rejection(fileWith().replace('hosts:', 'hsots:'));
    expect(e.message).toContain('unknown setting "hsots"');
    expect(e.message).toContain('use cluster, port, spares-per-host, install, task-user, reset, timing, allow-inject, hosts');
  });

  for (const port of ['80', '65535', '"7400"', '7400.5']) {
    it(`bad port (${port}): says the range`, () => {
      const e = rejection(fileWith({ head: ['cluster: lab', `port: ${port}`] }));
      expect(e.message).toContain('"port" must be an integer from 1024 to 65532');
    });
  }

  it('bad spares-per-host: says the range', () => {
    const e = rejection(fileWith({ head: ['spares-per-host: 9'] }));
    expect(e.message).toContain('"spares-per-host" must be an integer from 0 to 8');
  });

  it('bad cluster name: says what a name is', () => {
    const e = rejection(fileWith({ head: ['cluster: Lab_1'] }));
    expect(e.message).toContain('"cluster" must be a name of lower-case letters');
  });

  it('unknown install key: names it', () => {
    const e = rejection(fileWith({ head: ['install: { dir: /var/lib/trine, usr: trine }'] }));
    expect(e.message).toContain('install: unknown setting "usr": use dir, trine, user');
  });

  it('install.dir not absolute: says it must be an absolute path', () => {
    const e = rejection(fileWith({ head: ['install: { dir: var/lib/trine }'] }));
    expect(e.message).toContain('install.dir must be an absolute path without spaces');
  });

  it('reset command not absolute: says the watchdog runs it without a shell', () => {
    const e = rejection(fileWith({ head: ['reset: { command: [power-cycle, "{node}"] }'] }));
    expect(e.message).toContain('reset.command must start with an absolute path to the program');
  });

  it('reset driver unknown: names it and the drivers to use', () => {
    const e = rejection(fileWith({ head: ['reset: { driver: ipmi }'] }));
    expect(e.message).toContain('reset.driver must be "log" or "command", got "ipmi"');
  });

  it('reset: the log driver with a command: says to remove it or use driver: command', () => {
    const e = rejection(fileWith({ head: ['reset: { driver: log, command: [/bin/true] }'] }));
    expect(e.message).toContain('the "log" driver takes no command');
  });

  it('timing unknown timer: names it and lists the timers', () => {
    const e = rejection(fileWith({ head: ['timing: { replicaHeartbeat: 75 }'] }));
    expect(e.message).toContain('timing: unknown timer "replicaHeartbeat"');
    expect(e.message).toContain(`use ${Object.keys(DEFAULT_TIMING).join(', ')}`);
  });

  for (const ms of ['-75', '0', '"75"']) {
    it(`timing value ${ms}: names the timer, asks for a positive number of ms`, () => {
      const e = rejection(fileWith({ head: [`timing: { replicaHeartbeatMs: ${ms} }`] }));
      expect(e.message).toContain('timing.replicaHeartbeatMs must be a positive number of ms');
    });
  }
});

describe('the document', () => {
  it('invalid YAML: says so and points at the example', () => {
    const e = rejection('cluster: lab\nhosts: [\n  { id: n1\n');
    expect(e.message).toContain('not valid YAML');
    expect(e.message).toContain('see examples/hosts.yaml');
  });

  it('duplicate YAML keys at the top level: invalid YAML, with the line', () => {
    const e = rejection(fileWith({ head: ['cluster: lab', 'cluster: lab2'] }));
    expect(e.message).toContain('not valid YAML');
    expect(e.message).toContain('Map keys must be unique');
    expect(e.message).toContain('line 2');
  });

  it('duplicate YAML keys inside a host entry: invalid YAML, with the line', () => {
    const e = rejection(fileWith({ hosts: hostsWith({ 3: '  - { id: n4, address: 10.0.0.14, roles: [agent], slots: 4, slots: 8 }' }) }));
    expect(e.message).toContain('Map keys must be unique');
    expect(e.message).toContain('line 6');
  });

  it('a bare list is not a hosts file: says it must be a mapping with a "hosts" list', () => {
    const e = rejection(HOSTS.map((l) => l.slice(2)).join('\n'));
    expect(e.message).toContain('must be a mapping with a "hosts" list');
  });

  for (const [what, text] of [['a scalar', 'lab\n'], ['an empty file', ''], ['a number', '3\n']] as const) {
    it(`${what} is not a hosts file: says it must be a mapping`, () => {
      const e = rejection(text);
      expect(e.message).toContain('must be a mapping with a "hosts" list; see examples/hosts.yaml');
    });
  }
});

describe('readHostsFile', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'trine-hosts-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('an oversized file (> 256 KiB) is refused before it is read, naming the file', () => {
    const path = join(dir, 'big.yaml');
    // A valid file padded with a comment: only the size is wrong.
    writeFileSync(path, `${fileWith()}# ${'x'.repeat(MAX_HOSTS_FILE_BYTES)}\n`);
    expect(() => readHostsFile(path)).toThrow(HostsFileError);
    expect(() => readHostsFile(path)).toThrow(`${path} is larger than ${MAX_HOSTS_FILE_BYTES} bytes`);
  });

  it('a missing file: names it and says to pass the hosts file with --hosts', () => {
    const path = join(dir, 'missing.yaml');
    let err: unknown;
    try {
      readHostsFile(path);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(HostsFileError);
    expect((err as Error).message).toContain(`cannot read ${path} (ENOENT)`);
    expect((err as Error).message).toContain('pass the hosts file with --hosts');
  });

  it('a file it can read names itself in its errors', () => {
    const path = join(dir, 'bad.yaml');
    writeFileSync(path, fileWith({ hosts: hostsWith({ 4: null }) }));
    expect(() => readHostsFile(path)).toThrow(`${path}: no host has the watchdog role`);
  });
});
