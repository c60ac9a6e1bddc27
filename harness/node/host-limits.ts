// What several lab nodes on one machine need of its kernel limits. Every kubelet, containerd and
// kube-proxy, and every `kubectl logs -f` a kubelet serves, takes inotify instances, and the
// default per-user limit (fs.inotify.max_user_instances = 128) runs out with three nodes at once:
// the kubelet then logs "too many open files" and ends a follow at once, exit 0 (seen in CI with
// three node test files side by side). kind raises the same limit for the same reason.
import { readFile, writeFile } from 'node:fs/promises';

const INSTANCES = '/proc/sys/fs/inotify/max_user_instances';
/** Enough for the nodes of every lab slot this machine can run at once, with room for pods. */
export const MIN_INOTIFY_INSTANCES = 1024;

/** Raises fs.inotify.max_user_instances to MIN_INOTIFY_INSTANCES when lower; says what it did. */
export async function ensureInotifyInstances(log: (line: string) => void): Promise<void> {
  const now = Number((await readFile(INSTANCES, 'utf8')).trim());
  if (now >= MIN_INOTIFY_INSTANCES) return;
  try {
    await writeFile(INSTANCES, `${MIN_INOTIFY_INSTANCES}\n`);
    log(`fs.inotify.max_user_instances ${now} -> ${MIN_INOTIFY_INSTANCES} (kubelets, containerd and log follows each take some)`);
  } catch (err) {
    throw new Error(
      `fs.inotify.max_user_instances is ${now} and cannot be raised (${(err as Error).message}): ` +
        `run \`sysctl -w fs.inotify.max_user_instances=${MIN_INOTIFY_INSTANCES}\` as root`,
    );
  }
}
