// A lab node's own cgroup subtree (the kubelet's cgroupRoot), in every cgroup v1 hierarchy of the
// machine. Two kubelets sharing the default root would each see the other's pods as orphans and
// kill their processes; a subtree of its own keeps nodes apart, and on down every process still in
// it (a pod's, after a SIGKILLed containerd) is found and killed, then the subtree removed.
import { appendFile, mkdir, readdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The mount points of the machine's cgroup v1 hierarchies, and with `v2` its cgroup2 (unified) mount too. */
export function cgroupMounts(mountinfo: string, v2 = false): string[] {
  const out: string[] = [];
  for (const line of mountinfo.split('\n')) {
    const [before, after] = line.split(' - ');
    if (before === undefined || after === undefined) continue;
    const fs = after.split(' ')[0];
    if (fs !== 'cgroup' && !(v2 && fs === 'cgroup2')) continue;
    const mountPoint = before.split(' ')[4];
    if (mountPoint !== undefined) out.push(mountPoint);
  }
  return out;
}

/** With `v2`: also the unified hierarchy, where the kubelet's libcontainer mirrors its cgroups on a hybrid machine. */
async function hierarchies(v2 = false): Promise<string[]> {
  return cgroupMounts(await readFile('/proc/self/mountinfo', 'utf8'), v2);
}

/** Creates `root` (e.g. /skewgate-lab-node-1) in every hierarchy; cpuset's inherits its parent's cpus and mems. */
export async function ensureCgroupRoot(root: string): Promise<void> {
  for (const h of await hierarchies()) {
    const dir = join(h, root);
    await mkdir(dir, { recursive: true });
    // A new cpuset cgroup starts with no cpus and no mems: no task could join it.
    for (const f of ['cpuset.cpus', 'cpuset.mems']) {
      const mine = await readFile(join(dir, f), 'utf8').catch(() => null);
      if (mine === null || mine.trim() !== '') continue;
      await writeFile(join(dir, f), await readFile(join(h, f), 'utf8'));
    }
  }
}

/** Every cgroup directory under `root` in every hierarchy, deepest first. */
async function subtree(root: string): Promise<string[]> {
  const dirs: string[] = [];
  const walk = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
    for (const e of entries) if (e.isDirectory()) await walk(join(dir, e.name));
    dirs.push(dir);
  };
  for (const h of await hierarchies(true)) await walk(join(h, root));
  return dirs;
}

/** The pids in the subtree (any hierarchy). */
export async function cgroupPids(root: string): Promise<number[]> {
  const pids = new Set<number>();
  for (const dir of await subtree(root)) {
    const text = await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '');
    for (const l of text.split('\n')) if (/^\d+$/.test(l.trim())) pids.add(Number(l.trim()));
  }
  return [...pids];
}

/** SIGKILLs every process in the subtree until none is left, then removes the subtree. */
export async function removeCgroupRoot(root: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const pids = await cgroupPids(root);
    if (pids.length === 0) break;
    if (Date.now() > deadline) throw new Error(`processes still in cgroup ${root} after ${timeoutMs} ms: ${pids.join(' ')}`);
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone already
      }
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  // A frozen cgroup (the freezer) would keep killed tasks: thaw first.
  for (const dir of await subtree(root)) await appendFile(join(dir, 'freezer.state'), 'THAWED').catch(() => undefined);
  for (const dir of await subtree(root)) await rmdir(dir).catch(() => undefined);
}
