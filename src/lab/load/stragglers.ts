// Processes of one lab run dir that the Lab no longer tracks (it can lose one: see the report on
// Lab.waitFor), found through /proc by an argument that only this run dir produces, and stopped
// by pid. Never by name: other labs and other users' processes are left alone.
import { readdir, readFile } from 'node:fs/promises';

export async function findByArgument(fragment: string): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const args = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).split('\0');
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      if (/\) [ZX] /.test(stat)) continue;
      if (args.some((a) => a.includes(fragment))) pids.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** SIGTERM, then SIGKILL after graceMs; returns the pids that were found. */
export async function stopByArgument(fragment: string, graceMs = 10_000): Promise<number[]> {
  const pids = await findByArgument(fragment);
  const send = (pid: number, sig: NodeJS.Signals): void => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  for (const pid of pids) send(pid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  let left = pids;
  while (left.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    const still = new Set(await findByArgument(fragment));
    left = left.filter((p) => still.has(p));
  }
  for (const pid of left) send(pid, 'SIGKILL');
  return pids;
}
