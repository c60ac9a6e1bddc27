// What /proc says about a process: is it still the one we started? A pid alone is not enough (pids
// are reused), so a process is ours when its start time matches and its command line carries an
// argument that only our run dir produces.
import { readFile } from 'node:fs/promises';

export interface ProcIdentity {
  readonly pid: number;
  /** Field 22 of /proc/<pid>/stat (clock ticks since boot): survives exec, changes with pid reuse. */
  readonly startTime: string;
  /** An argv element the process must carry, e.g. `--cert-dir=/…/run/kas-1/certs`. */
  readonly marker: string;
}

interface Stat {
  readonly state: string;
  readonly startTime: string;
}

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

export async function readStat(pid: number): Promise<Stat | null> {
  try {
    return parseStat(await readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return null;
  }
}

export async function readCmdline(pid: number): Promise<string[] | null> {
  try {
    const raw = await readFile(`/proc/${pid}/cmdline`, 'utf8');
    return raw.split('\0').filter((a, i, all) => !(a === '' && i === all.length - 1));
  } catch {
    return null;
  }
}

/** Alive (not a zombie: an exited child nobody reaped is gone for our purposes) and ours. */
export async function isOurs(p: ProcIdentity): Promise<boolean> {
  const stat = await readStat(p.pid);
  if (stat === null || stat.state === 'Z' || stat.state === 'X' || stat.startTime !== p.startTime) return false;
  const cmdline = await readCmdline(p.pid);
  return cmdline !== null && cmdline.includes(p.marker);
}
