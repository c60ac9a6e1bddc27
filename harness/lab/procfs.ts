// What /proc says about a process: is it still the one we started? A pid alone is not enough (pids
// are reused). The identity is the pid, its start time (field 22 of stat, unchanged by exec) and
// the boot it was started in: within one boot no two processes share a pid and a start time. The
// command line is NOT reliable while a process execs: it reads empty for a moment at each exec
// (the lab's apiservers exec twice: unshare → sh → kube-apiserver), and a check that demanded a
// marker there once made the lab forget a live apiserver. It only guards records without a boot id.
import { readdir, readFile } from 'node:fs/promises';

export interface ProcIdentity {
  readonly pid: number;
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot): survives exec, changes with pid reuse. */
  readonly startTime: string;
  /** /proc/sys/kernel/random/boot_id at spawn (records written before it existed lack it). */
  readonly bootId?: string;
  /** An argv element every link of the exec chain carries, e.g. `--cert-dir=/…/run/kas-1/certs`. */
  readonly marker: string;
}

export interface Stat {
  readonly state: string;
  readonly startTime: string;
}

/** What /proc showed at one moment; null where the file could not be read. */
export interface ProcSample {
  readonly stat: Stat | null;
  readonly cmdline: readonly string[] | null;
  readonly bootId: string | null;
}

export type Verdict =
  /** The process we started (possibly in the middle of an exec). */
  | 'ours'
  /** No such process, a zombie, a reused pid or an earlier boot: nothing of ours runs there. */
  | 'gone'
  /** Same pid and start time but an empty command line and no boot id to confirm: look again shortly. */
  | 'unsure';

export interface Ownership {
  readonly verdict: Verdict;
  readonly detail: string;
}

/** How long an 'unsure' process is given to show its command line before it counts as not ours. */
export const EXEC_SETTLE_MS = 1000;
const SETTLE_POLL_MS = 10;

/** Parses /proc/<pid>/stat; the command name in parentheses may itself hold spaces and parentheses. Pure. */
export function parseStat(text: string): Stat | null {
  const close = text.lastIndexOf(')');
  if (close < 0) return null;
  const rest = text.slice(close + 2).split(' ');
  // rest[0] is field 3 (state); field 22 (starttime) is rest[19].
  const state = rest[0];
  const startTime = rest[19];
  return state === undefined || startTime === undefined ? null : { state, startTime };
}

/** Splits /proc/<pid>/cmdline (NUL-terminated arguments). Pure. */
export function parseCmdline(raw: string): string[] {
  return raw.split('\0').filter((a, i, all) => !(a === '' && i === all.length - 1));
}

/** Is the sampled process the one `p` describes? Pure. */
export function judge(p: ProcIdentity, s: ProcSample): Ownership {
  if (s.stat === null) return { verdict: 'gone', detail: 'no such process' };
  if (s.stat.state === 'Z' || s.stat.state === 'X') return { verdict: 'gone', detail: 'exited (not reaped yet)' };
  if (p.startTime === '' || s.stat.startTime !== p.startTime)
    return { verdict: 'gone', detail: `pid ${p.pid} now belongs to another process` };
  if (p.bootId !== undefined && s.bootId !== null && p.bootId !== s.bootId) return { verdict: 'gone', detail: 'started before a reboot' };
  const argv = s.cmdline ?? [];
  if (argv.includes(p.marker)) return { verdict: 'ours', detail: 'running' };
  if (p.bootId !== undefined && s.bootId !== null) {
    // pid + start time + boot identify it; the command line may be mid-exec (empty) or the next link of the chain.
    return { verdict: 'ours', detail: argv.length === 0 ? 'exec in progress' : `running ${argv[0] ?? ''}` };
  }
  return argv.length === 0
    ? { verdict: 'unsure', detail: 'empty command line (exec in progress?)' }
    : { verdict: 'gone', detail: `pid ${p.pid} runs ${argv[0] ?? '?'} without ${p.marker}` };
}

export async function readStat(pid: number): Promise<Stat | null> {
  try {
    return parseStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

export async function readCmdline(pid: number): Promise<string[] | null> {
  try {
    return parseCmdline(await readFile(`/proc/${pid}/cmdline`, 'utf8'));
  } catch {
    return null;
  }
}

let cachedBootId: string | null | undefined;

/** This boot's id (null where /proc does not provide one). */
export async function readBootId(): Promise<string | null> {
  if (cachedBootId === undefined) {
    cachedBootId = await readFile('/proc/sys/kernel/random/boot_id', 'utf8').then(
      (s) => s.trim() || null,
      () => null,
    );
  }
  return cachedBootId;
}

export async function sample(pid: number): Promise<ProcSample> {
  const [stat, cmdline, bootId] = await Promise.all([readStat(pid), readCmdline(pid), readBootId()]);
  return { stat, cmdline, bootId };
}

/** judge() on a fresh sample; an 'unsure' process is looked at again for up to settleMs. Never 'unsure'. */
export async function ownership(p: ProcIdentity, settleMs = EXEC_SETTLE_MS): Promise<Ownership> {
  const deadline = Date.now() + settleMs;
  for (;;) {
    const o = judge(p, await sample(p.pid));
    if (o.verdict !== 'unsure') return o;
    if (Date.now() >= deadline) return { verdict: 'gone', detail: `${o.detail} for ${settleMs} ms: not ours` };
    await new Promise((r) => setTimeout(r, SETTLE_POLL_MS));
  }
}

/** Alive (not a zombie: an exited child nobody reaped is gone for our purposes) and ours. */
export async function isOurs(p: ProcIdentity): Promise<boolean> {
  return (await ownership(p)).verdict === 'ours';
}

export interface ProcEntry {
  readonly pid: number;
  readonly startTime: string;
  readonly cmdline: readonly string[];
}

/** Every live (non-zombie) process whose command line `match` accepts, this process excluded. */
export async function findProcesses(match: (argv: readonly string[]) => boolean): Promise<ProcEntry[]> {
  const found: ProcEntry[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const pid = Number(entry);
    if (pid === process.pid) continue;
    const cmdline = await readCmdline(pid);
    if (cmdline === null || !match(cmdline)) continue;
    const stat = await readStat(pid);
    if (stat === null || stat.state === 'Z' || stat.state === 'X') continue;
    found.push({ pid, startTime: stat.startTime, cmdline });
  }
  return found;
}
