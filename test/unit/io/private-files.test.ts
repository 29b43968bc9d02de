// The private-file helpers (issue 14 item 5, src/io/private-files.ts): whatever the umask, what
// they create is exactly 0700 (directories) or 0600 (files), and what an older release left open
// is closed when it is reached again — including by a daemon's start, which opens its log and
// records its incarnation.
import { chmodSync, closeSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { nextIncarnation, paths } from '../../../src/io/cluster-dir.ts';
import { createProcessLog } from '../../../src/io/log.ts';
import { mkdirPrivate, openPrivate, writeFileAtomic, writeFilePrivate } from '../../../src/io/private-files.ts';

const root = mkdtempSync(join(tmpdir(), 'trine-private-files-'));
const umask = process.umask();
afterEach(() => {
  process.umask(umask);
});
afterAll(() => rmSync(root, { recursive: true, force: true }));

const modeOf = (path: string): number => statSync(path).mode & 0o777;
let n = 0;
const fresh = (): string => join(root, `case-${++n}`);

describe('issue 14 item 5: private directories and files, whatever the umask', () => {
  for (const mask of [0o022, 0o002, 0o000, 0o077, 0o277]) {
    it(`umask ${mask.toString(8).padStart(3, '0')}: mkdirPrivate makes every missing level 0700; files are 0600 and writable`, () => {
      process.umask(mask);
      const top = fresh();
      const leaf = join(top, 'logs', 'tasks', 't1');
      mkdirPrivate(leaf);
      for (const d of [top, join(top, 'logs'), join(top, 'logs', 'tasks'), leaf]) expect(modeOf(d), d).toBe(0o700);

      const fd = openPrivate(join(leaf, '0.out'), 'a');
      writeSync(fd, 'hello\n');
      closeSync(fd);
      writeFilePrivate(join(leaf, 'pid'), '42\n');
      writeFileAtomic(join(leaf, 'journal'), new Uint8Array([1, 2, 3]), { durable: true });
      writeFileAtomic(join(leaf, 'public.json'), '{}\n', { mode: 0o644 });
      expect(readdirSync(leaf).sort()).toEqual(['0.out', 'journal', 'pid', 'public.json']);
      for (const f of ['0.out', 'pid', 'journal']) expect(modeOf(join(leaf, f)), f).toBe(0o600);
      expect(modeOf(join(leaf, 'public.json'))).toBe(0o644);
      expect(readFileSync(join(leaf, '0.out'), 'utf8')).toBe('hello\n');
      expect([...readFileSync(join(leaf, 'journal'))]).toEqual([1, 2, 3]);
    });
  }

  it('what an older release left open is closed when reached again: a 0755 dir, a 0644 log appended to, a 0666 record replaced', () => {
    process.umask(0o022);
    const top = fresh();
    mkdirSync(top, { mode: 0o755 });
    chmodSync(top, 0o755);
    writeFileSync(join(top, 'a.log'), 'old line\n', { mode: 0o644 });
    writeFileSync(join(top, 'a.pid'), '1\n');
    chmodSync(join(top, 'a.pid'), 0o666);
    writeFileSync(join(top, 'a.procs.json'), '{}\n');
    chmodSync(join(top, 'a.procs.json'), 0o666);

    mkdirPrivate(top);
    const fd = openPrivate(join(top, 'a.log'), 'a');
    writeSync(fd, 'new line\n');
    closeSync(fd);
    writeFilePrivate(join(top, 'a.pid'), '2\n');
    writeFileAtomic(join(top, 'a.procs.json'), '{"procs":[]}\n');

    expect(modeOf(top)).toBe(0o700);
    expect(modeOf(join(top, 'a.log'))).toBe(0o600);
    expect(readFileSync(join(top, 'a.log'), 'utf8')).toBe('old line\nnew line\n');
    expect(modeOf(join(top, 'a.pid'))).toBe(0o600);
    expect(readFileSync(join(top, 'a.pid'), 'utf8')).toBe('2\n');
    expect(modeOf(join(top, 'a.procs.json'))).toBe(0o600);
    expect(readdirSync(top).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  it('a daemon start (its log, its incarnation record) closes logs/ and run/ of a cluster dir an older release made 0755', () => {
    process.umask(0o022);
    const dir = fresh();
    for (const d of [dir, paths.logs(dir), paths.run(dir)]) mkdirSync(d, { recursive: true, mode: 0o755 });
    writeFileSync(join(paths.logs(dir), 'r1.log'), '', { mode: 0o644 });
    for (const d of [paths.logs(dir), paths.run(dir)]) expect(modeOf(d)).toBe(0o755);

    const log = createProcessLog(dir, 'r1', 'silent');
    log.flush();
    nextIncarnation(dir, 'r1', 1_000);

    expect(modeOf(paths.logs(dir))).toBe(0o700);
    expect(modeOf(join(paths.logs(dir), 'r1.log'))).toBe(0o600);
    expect(modeOf(paths.run(dir))).toBe(0o700);
    expect(modeOf(paths.incFile(dir, 'r1'))).toBe(0o600);
  });

  it('a symlink planted where a private file goes is refused (ELOOP), and what it points to keeps its mode and contents', () => {
    const dir = mkdtempSync(join(tmpdir(), 'trine-private-link-'));
    try {
      const target = join(dir, 'elsewhere');
      writeFileSync(target, 'not ours');
      chmodSync(target, 0o644);
      symlinkSync(target, join(dir, 'r1.log'));
      for (const flags of ['a', 'w'] as const) expect(() => openPrivate(join(dir, 'r1.log'), flags)).toThrow(expect.objectContaining({ code: 'ELOOP' }));
      expect(statSync(target).mode & 0o777).toBe(0o644);
      expect(readFileSync(target, 'utf8')).toBe('not ours');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writeFileAtomic whose rename fails leaves no temporary file behind', () => {
    const top = fresh();
    const target = join(top, 'r1.tasks');
    mkdirPrivate(target); // a directory in the way: the rename fails
    expect(() => writeFileAtomic(target, 'x')).toThrow(/EISDIR|ENOTDIR|EEXIST|ENOTEMPTY/);
    expect(readdirSync(top)).toEqual(['r1.tasks']);
  });
});
