// The dashboard and the event log on a real cluster, as an operator sees them: one
// `trine up --nodes 4`, a linked task of three processes (test/fixtures/apps/gmpi-recover-app.ts:
// they block in a receive, and when one dies the others have the manager spawn a replacement),
// `trine dashboard` and `trine events --follow --json` running as real processes, and Debian's
// chromium (headless, driven by puppeteer-core; `npm test`'s pretest installs it) on the page.
//   - the page shows the 4 nodes, the three replicas with their roles and the task's processes;
//   - a task process killed with SIGKILL and the primary replica's daemon killed with SIGKILL both
//     appear on the page's timeline with their latencies, and the replacement replica in the
//     group view, the killed one retired — the page updating by itself (Server-Sent Events);
//   - `trine events --follow --json` printed every event once, in order, through the replica's
//     death and the group change, with both episodes, and ends on SIGINT with exit 0;
//   - the server answers 404 and 405 to what it does not serve, and ends on SIGINT with exit 0;
//   - listening beyond loopback, it answers only requests that carry the printed access token.
// Every wait is for a condition on the page (data-* attributes dashboard.js sets) or on the
// CLI's output; the bounds are liveness deadlines. With DASHBOARD_SHOT=path the page after the
// faults is saved there (`npm run dashboard:shot` writes docs/dashboard.png).
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
// @ts-expect-error: a plain ES module of the project's tools, without type declarations
import { findBrowser } from '../../tools/ensure-browser.mjs';
import { downCluster, livePid, trine, TRINE, upCluster, waitFor } from './helpers.ts';
import { REPO } from './gmpi-cluster.ts';

const APP = 'test/fixtures/apps/gmpi-recover-app.ts';
/** Liveness deadlines on a loaded 2-core host: a linked process loads in ~1–3 s, a replica is
 *  condemned and replaced in ~2 s. */
const START_MS = 40_000;
const RECOVERY_MS = 30_000;
const PAGE_MS = 10_000;

let root = '';
let dir = '';
let browser: Browser | null = null;
let page: Page;
let url = '';
let server: ChildProcess | null = null;
let follower: ChildProcess | null = null;
const followed: string[] = [];
let task = '';

/** `trine ARGS` as a long-running child; `onLine` sees each stdout line. */
function start(args: string[], onLine: (line: string) => void): ChildProcess {
  const child = spawn(process.execPath, [TRINE, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let buf = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => {
    buf += d;
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      onLine(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  child.stderr?.resume();
  return child;
}

/** SIGINT, then the exit code (null: killed by a signal). */
function interrupt(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve(child.exitCode);
    child.once('exit', (code) => resolve(code));
    child.kill('SIGINT');
  });
}

const count = (selector: string) => page.$$eval(selector, (els) => els.length);
const attr = (selector: string, name: string) => page.$eval(selector, (e, n) => e.getAttribute(n as string), name);

describe('trine dashboard and trine events on a 4-node cluster, in headless chromium', () => {
  beforeAll(async () => {
    const executablePath = findBrowser() as string | null;
    if (executablePath === null) throw new Error('no chromium: run `node tools/ensure-browser.mjs` (npm test runs it first)');
    ({ root, dir } = await upCluster('trine-dashboard-'));
    const s = await trine(['submit', '--dir', dir, '--linked', '-n', '3', '--cwd', REPO, '--env', 'GMPI_QUORUM=2', '--env', 'GMPI_TARGET=3',
      '--', process.execPath, '--import', 'tsx', `${REPO}/${APP}`]);
    expect(s.stderr).toBe('');
    task = s.stdout.trim();
    const printed = new Promise<string>((resolve) => {
      server = start(['dashboard', '--listen', '127.0.0.1:0', '--dir', dir], (line) => {
        const m = /^trine dashboard: (http:\/\/\S+)$/.exec(line);
        if (m !== null) resolve(m[1] as string);
      });
    });
    follower = start(['events', '--follow', '--json', '--dir', dir], (line) => followed.push(line));
    url = await printed;
    browser = await puppeteer.launch({
      executablePath, headless: true, args: process.getuid?.() === 0 ? ['--no-sandbox'] : [],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1400, height: 1000 });
    await page.goto(url);
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    for (const c of [server, follower]) if (c !== null && c.exitCode === null) c.kill('SIGKILL');
    await downCluster(root, dir);
  }, 60_000);

  it('shows the 4 nodes, the three replicas with their roles, and the task\'s processes', async () => {
    await page.waitForSelector('#nodes-section[data-count="4"]', { timeout: PAGE_MS });
    for (const n of ['n1', 'n2', 'n3', 'n4']) expect(await attr(`#nodes tr[data-node="${n}"]`, 'data-state')).toBe('up');
    expect(await count('#replicas tr[data-replica]')).toBe(3);
    expect(await count('#replicas tr[data-role="primary"]')).toBe(1);
    expect(await count('#replicas tr[data-role="backup"]')).toBe(2);
    await page.waitForSelector(`#tasks tr[data-proc="${task}/2"][data-state="running"]`, { timeout: START_MS });
    await page.waitForFunction(`document.querySelectorAll('#tasks tr[data-proc^="${task}/"][data-state="running"]').length === 3`, { timeout: START_MS });
  }, 60_000);

  it('a killed process and a killed replica appear on the timeline with their latencies, the replacement in the group view', async () => {
    // Every process waits in its receive: a death now is the one the application recovers from.
    await waitFor('every process blocked in its receive', START_MS, async () => {
      const logs = await trine(['logs', task, '--dir', dir]);
      return [0, 1, 2].every((v) => logs.stdout.includes(`[${task}/${v}] blocked-in-recv`)) ? true : undefined;
    }, 200);
    const pid = Number(await attr(`#tasks tr[data-proc="${task}/2"]`, 'data-pid'));
    expect(pid).toBeGreaterThan(1);
    process.kill(pid, 'SIGKILL');
    const process2 = `#timeline li[data-what="process"][data-subject="${task}/2"]`;
    await page.waitForSelector(`${process2}[data-state="recovered"]`, { timeout: RECOVERY_MS });
    expect(Number(await attr(process2, 'data-recovery-ms'))).toBeGreaterThan(0);

    // The primary: its death is a primary change as well (PROTOCOL §10.5).
    const victim = await page.$eval('#replicas tr[data-role="primary"]', (e) => e.getAttribute('data-replica')) as string;
    const view = Number(await attr('#group-section', 'data-view'));
    process.kill(livePid(dir, victim), 'SIGKILL');
    const replica = `#timeline li[data-what="replica"][data-subject="${victim}"]`;
    await page.waitForSelector(`${replica}[data-state="recovered"]`, { timeout: RECOVERY_MS });
    // Last heartbeat → condemned, and condemned → the replacement installed.
    expect(Number(await attr(replica, 'data-detection-ms'))).toBeGreaterThan(0);
    expect(Number(await attr(replica, 'data-recovery-ms'))).toBeGreaterThan(0);
    // The group view: three serving replicas without the victim, one of them new; it is retired.
    // (Evaluated in the page: the test's TypeScript has no DOM types.)
    await page.waitForFunction(`(() => {
      const rows = [...document.querySelectorAll('#replicas tr[data-replica]')];
      const retired = (document.getElementById('group-history').dataset.retired || '').split(',');
      return Number(document.getElementById('group-section').dataset.view) >= ${view + 2} && rows.length === 3 &&
        rows.every((r) => r.dataset.phase === 'serving') && !rows.some((r) => r.dataset.replica === ${JSON.stringify(victim)}) &&
        rows.filter((r) => r.dataset.role === 'primary').length === 1 && retired.includes(${JSON.stringify(victim)});
    })()`, { timeout: RECOVERY_MS });
    const members = (await attr('#group-section', 'data-members') as string).split(',');
    expect(members.filter((m) => !['r1', 'r2', 'r3'].includes(m))).toHaveLength(1);
    expect(await page.$eval('#plot', (e) => Number(e.getAttribute('data-points')))).toBeGreaterThanOrEqual(2);
    if (process.env['DASHBOARD_SHOT'] !== undefined) await page.screenshot({ path: process.env['DASHBOARD_SHOT'], fullPage: true });
  }, 120_000);

  it('trine events --follow --json printed each event once, in order, with both episodes, and ends on SIGINT with exit 0', async () => {
    const victimEpisode = (l: Record<string, unknown>) => l['type'] === 'episode' && l['what'] === 'replica';
    await waitFor('both episodes in `trine events --follow`', PAGE_MS, () => {
      const lines = followed.map((l) => JSON.parse(l) as Record<string, unknown>);
      return lines.some(victimEpisode) && lines.some((l) => l['type'] === 'episode' && l['subject'] === `${task}/2`) ? true : undefined;
    });
    expect(await interrupt(follower as ChildProcess)).toBe(0);
    const lines = followed.map((l) => JSON.parse(l) as Record<string, unknown>);
    const events = lines.filter((l) => l['type'] === 'event');
    const keys = events.map((e) => `${String(e['rsn'])} ${String(e['text'])}`);
    expect(new Set(keys).size).toBe(keys.length);
    const rsns = events.map((e) => e['rsn'] as number);
    expect(rsns).toEqual([...rsns].sort((a, b) => a - b));
    for (const kind of ['proc.died', 'replica.condemned', 'replica.starting', 'replica.joined']) expect(events.some((e) => e['kind'] === kind)).toBe(true);
    const replicaEpisode = lines.find(victimEpisode) as { subject: string; detectionMs: number; recoveryMs: number; state: string };
    expect(replicaEpisode.state).toBe('recovered');
    expect(replicaEpisode.detectionMs).toBeGreaterThan(0);
    expect(replicaEpisode.recoveryMs).toBeGreaterThan(0);
    // Without --follow: the whole log once, the two episodes as `=>` lines with their latencies.
    const once = await trine(['events', '--dir', dir]);
    expect(once.code).toBe(0);
    expect(once.stdout).toMatch(new RegExp(`=> process ${task}/2 \\(SIGKILL\\): known when ordered, recovered in [0-9]+ ms`));
    // A dead primary is condemned for whichever accusation completes first: its silence, or a
    // backup's report it never ordered (PROTOCOL §10.5); either names the victim.
    expect(once.stdout).toMatch(new RegExp(`=> replica ${replicaEpisode.subject} \\((silent|primary\\.progress)\\): detected in [0-9]+ ms, recovered in [0-9]+ ms`));
  }, 30_000);

  it('on loopback, a request whose Host header names another host (DNS rebinding) reads nothing', async () => {
    const { request } = await import('node:http');
    const at = new URL(url);
    const status = (host: string) => new Promise<number>((resolve, reject) => {
      const r = request({ host: at.hostname, port: at.port, path: '/api/snapshot', headers: { host } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      r.on('error', reject);
      r.end();
    });
    expect(await status(`evil.example:${at.port}`)).toBe(403);
    expect(await status(`127.0.0.1:${at.port}`)).toBe(200);
    expect(await status(`localhost:${at.port}`)).toBe(200);
  });

  it('answers 404 and 405 to what it does not serve, still serves the page, and ends on SIGINT with exit 0', async () => {
    expect((await fetch(new URL('/nope', url))).status).toBe(404);
    expect((await fetch(new URL('/../cluster.json', url))).status).toBe(404);
    expect((await fetch(url, { method: 'POST', body: 'x' })).status).toBe(405);
    // The snapshot the page draws from: the cluster healthy again once the replacement replica
    // has caught up (a liveness wait: the test before only waited for the group view).
    await waitFor('a healthy snapshot', PAGE_MS, async () => {
      const snap = await fetch(new URL('/api/snapshot', url));
      expect(snap.status).toBe(200);
      return ((await snap.json()) as { status: { healthy: boolean } }).status.healthy ? true : undefined;
    }, 250);
    expect(await interrupt(server as ChildProcess)).toBe(0);
  }, 30_000);

  it('beyond loopback every read of the cluster needs the access token printed with the URL; the page with it draws', async () => {
    let open = '';
    const wide = start(['dashboard', '--listen', '0.0.0.0:0', '--dir', dir], (line) => {
      const m = /^trine dashboard: (http:\/\/\S+)$/.exec(line);
      if (m !== null) open = m[1] as string;
    });
    try {
      const withToken = new URL(await waitFor('the dashboard\'s URL', PAGE_MS, () => (open === '' ? undefined : open)));
      const token = withToken.searchParams.get('token') ?? '';
      expect(token).toMatch(/^[0-9a-f]{32}$/);
      expect((await fetch(withToken)).status).toBe(200);
      const bare = new URL(withToken);
      bare.search = '';
      expect((await fetch(new URL('/api/snapshot', bare))).status).toBe(403);
      expect((await fetch(new URL(`/api/stream?token=${'0'.repeat(32)}`, bare))).status).toBe(403);
      // The page (static, no data) loads without the token; its script reads with it and draws.
      const wide2 = await browser?.newPage();
      if (wide2 === undefined) throw new Error('no browser');
      await wide2.goto(withToken.href);
      await wide2.waitForSelector('#nodes-section[data-count="4"]', { timeout: PAGE_MS });
      await wide2.close();
      expect(await interrupt(wide)).toBe(0);
    } finally {
      if (wide.exitCode === null) wide.kill('SIGKILL');
    }
  }, 30_000);
});
