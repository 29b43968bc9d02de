// Creating the cluster dir's private files (issue 14 item 5): the daemons' logs, task output and
// the records in run/ are the operator's alone. Task output may hold a task's secrets, the logs
// name every process, port and task, and run/ holds task journals, which carry task keys
// (PROTOCOL §9.5). Node creates files 0666 and directories 0777 less the umask, so under the
// usual umask 022 every other local user could read them all.
//
// Every creation site goes through these helpers, which make the mode exact whatever the umask
// (it can only narrow a mode, and a umask like 0277 would leave a directory we cannot write),
// and tighten what an older release left open: a directory is chmodded when it is made or
// reached again, a file when it is opened. Daemons reach logs/ (their log) and run/ (their
// incarnation record) at every start, so a dir made 0755 by an older release is 0700 again as
// soon as a daemon starts.
import { chmodSync, closeSync, constants as fsConstants, existsSync, fchmodSync, fstatSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, statSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** Directories of logs, task output and records: only their owner may list or enter them. */
export const PRIVATE_DIR_MODE = 0o700;
/** Log, output and record files: only their owner may read or write them. */
export const PRIVATE_FILE_MODE = 0o600;

/** Makes `path` and any missing parents, each exactly PRIVATE_DIR_MODE, and sets `path` itself to
 *  it if it was there with another mode. One level at a time, each chmodded before the next is
 *  made in it: a umask that takes the owner's write bit would leave a parent nothing fits in. */
export function mkdirPrivate(path: string): void {
  const parent = dirname(path);
  if (parent !== path && !existsSync(parent)) mkdirPrivate(parent);
  try {
    mkdirSync(path, { mode: PRIVATE_DIR_MODE });
  } catch (e) {
    // There already (or made meanwhile by another process): only a directory will do.
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(path).isDirectory()) throw e;
  }
  if ((statSync(path).mode & 0o777) !== PRIVATE_DIR_MODE) chmodSync(path, PRIVATE_DIR_MODE);
}

/** Opens `path` ('a' append, 'w' truncate, 'wx' a new file only), created with exactly
 *  PRIVATE_FILE_MODE; an existing regular file is set to it too. A symlink is refused (ELOOP):
 *  the daemons run as root, and a link planted where a log goes must not make root open, or
 *  chmod, what it points to. Anything else that is not a regular file (a device) keeps its mode.
 *  Returns the fd; the caller closes it. */
export function openPrivate(path: string, flags: 'a' | 'w' | 'wx'): number {
  const fd = openSync(path, OPEN_FLAGS[flags], PRIVATE_FILE_MODE);
  try {
    if (fstatSync(fd).isFile()) fchmodSync(fd, PRIVATE_FILE_MODE);
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  return fd;
}

const { O_WRONLY, O_CREAT, O_APPEND, O_TRUNC, O_EXCL, O_NOFOLLOW } = fsConstants;
const OPEN_FLAGS = {
  a: O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW,
  w: O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW,
  wx: O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW,
} as const;

/** Writes all of `data` to `fd`: writeSync may write less than asked. */
function writeAll(fd: number, data: string | Uint8Array): void {
  const bytes = typeof data === 'string' ? Buffer.from(data) : data;
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
}

/** Replaces the contents of `path` in place (a pid or incarnation record), mode PRIVATE_FILE_MODE. */
export function writeFilePrivate(path: string, data: string | Uint8Array): void {
  const fd = openPrivate(path, 'w');
  try {
    writeAll(fd, data);
  } finally {
    closeSync(fd);
  }
}

/** Replaces `path` whole through a temporary file and a rename, so a reader (or a crash) sees the
 *  old file or the new, never half of one, and never a looser mode an old file had. `mode` is
 *  exact (PRIVATE_FILE_MODE unless the file is public, as the public-key table is); `durable`
 *  flushes the data to disk before the rename, for a record that must survive a power reset. */
export function writeFileAtomic(path: string, data: string | Uint8Array, opts: { mode?: number; durable?: boolean } = {}): void {
  const mode = opts.mode ?? PRIVATE_FILE_MODE;
  const tmp = `${path}.${process.pid}.tmp`;
  rmSync(tmp, { force: true }); // left behind by a crashed writer with the same pid
  try {
    const fd = openSync(tmp, 'wx', mode);
    try {
      fchmodSync(fd, mode);
      writeAll(fd, data);
      if (opts.durable === true) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, path);
  } catch (e) {
    rmSync(tmp, { force: true });
    throw e;
  }
}
