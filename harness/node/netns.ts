// A lab node's own network stack, as a machine of its own has: a network namespace (`ip netns`)
// joined to this machine by a veth pair on a /30 of its own. Everything the node's kubelet,
// containerd and (later) kube-proxy write into iptables, every pod bridge and route, lives and dies
// with the namespace: nothing host-wide is left behind, and two nodes (two test files) never share
// a chain. The node reaches this machine's addresses (the lab's gateways on alias addresses) through
// its default route; this machine reaches the node's address and its pods through routes on the
// host side of the link. Processes join it with `nsenter --net` (not `ip netns exec`, which would
// remount /sys and hide the cgroup hierarchies the kubelet and runc need).
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface NodeNetwork {
  /** The namespace's name under /run/netns. */
  readonly netns: string;
  /** The veth end on this machine (≤ 15 characters); the node's end is its eth0. */
  readonly hostIf: string;
  /** This machine's address on the link (the node's default gateway). */
  readonly hostIp: string;
  /** The node's address (its eth0): the kubelet's, containerd's stream server's. */
  readonly nodeIp: string;
  /** The node's pod range, routed from this machine to nodeIp. */
  readonly podCidr: string;
}

/** The commands that make the network, in order (pure: ip(8) argument lists). */
export function createCommands(n: NodeNetwork): string[][] {
  const ns = ['-n', n.netns];
  return [
    ['netns', 'add', n.netns],
    ['link', 'add', n.hostIf, 'type', 'veth', 'peer', 'name', 'eth0', 'netns', n.netns],
    ['addr', 'add', `${n.hostIp}/30`, 'dev', n.hostIf],
    ['link', 'set', n.hostIf, 'up'],
    [...ns, 'link', 'set', 'lo', 'up'],
    [...ns, 'addr', 'add', `${n.nodeIp}/30`, 'dev', 'eth0'],
    [...ns, 'link', 'set', 'eth0', 'up'],
    [...ns, 'route', 'add', 'default', 'via', n.hostIp],
    ['route', 'add', n.podCidr, 'via', n.nodeIp, 'dev', n.hostIf],
  ];
}

/** argv that runs `cmd args` inside the node's network namespace (the process keeps its pid: nsenter execs). */
export function inNodeNetwork(netns: string, cmd: string, args: readonly string[]): { cmd: string; args: string[] } {
  return { cmd: 'nsenter', args: [`--net=/run/netns/${netns}`, '--', cmd, ...args] };
}

/** Makes the network, first removing what an earlier (crashed) node of the same name left. */
export async function createNodeNetwork(n: NodeNetwork): Promise<void> {
  await deleteNodeNetwork(n);
  for (const args of createCommands(n)) {
    try {
      await run('ip', args);
    } catch (err) {
      throw new Error(`node network ${n.netns}: ip ${args.join(' ')}: ${((err as { stderr?: string }).stderr ?? String(err)).trim()}`);
    }
  }
  // Pods reach this machine through the node (the CNI bridge plugin's isGateway sets it too).
  await run('nsenter', [`--net=/run/netns/${n.netns}`, '--', 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
}

/**
 * Deletes the namespace (its eth0, bridge, pods' veths and iptables go with it once no process is
 * left inside; the kernel frees it asynchronously) and the host end if it lingers. No-op when absent.
 */
export async function deleteNodeNetwork(n: Pick<NodeNetwork, 'netns' | 'hostIf'>): Promise<void> {
  await run('ip', ['netns', 'delete', n.netns]).catch(() => undefined);
  for (let i = 0; i < 50; i++) {
    const present = await run('ip', ['link', 'show', n.hostIf]).then(
      () => true,
      () => false,
    );
    if (!present) return;
    if (i === 20) await run('ip', ['link', 'delete', n.hostIf]).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`node network ${n.netns}: ${n.hostIf} is still there after the namespace was deleted`);
}
