// An apiserver made unreachable without closing anything: iptables drops every packet to and
// from its address:port in the INPUT chain (on loopback each packet passes INPUT once, at the
// receiver; a DROP in OUTPUT would instead fail the sender's send with EPERM, which a client
// notices at once). Established connections stay open and silent, new ones never complete their
// handshake. The rules live in a chain of their own, removed by restore(), by the test's
// teardown and, failing both, when the Node process exits. Needs root (CAP_NET_ADMIN).
import { execFile, execFileSync } from 'node:child_process';
import { promisify } from 'node:util';
import type { Test } from 'tap';

const run = promisify(execFile);

export interface PacketDrop {
  /** Removes the rules (idempotent); packets flow again and TCP retransmits what was held. */
  restore(): Promise<void>;
}

export async function dropPackets(t: Test, target: { readonly ip: string; readonly port: number }): Promise<PacketDrop> {
  const chain = `SKEWGATE-DROP-${process.pid}`;
  const removeArgs = [
    ['-D', 'INPUT', '-j', chain],
    ['-F', chain],
    ['-X', chain],
  ];
  let removed = false;
  const removeNow = (): void => {
    if (removed) return;
    removed = true;
    for (const args of removeArgs) {
      try {
        execFileSync('iptables', args, { stdio: 'ignore' });
      } catch {
        // already gone
      }
    }
  };
  process.once('exit', removeNow);
  const restore = async (): Promise<void> => {
    if (removed) return;
    removed = true;
    process.removeListener('exit', removeNow);
    for (const args of removeArgs) await run('iptables', args).catch(() => undefined);
  };
  t.teardown(restore);
  const port = String(target.port);
  try {
    await run('iptables', ['-N', chain]);
    await run('iptables', ['-A', chain, '-p', 'tcp', '-d', target.ip, '--dport', port, '-j', 'DROP']);
    await run('iptables', ['-A', chain, '-p', 'tcp', '-s', target.ip, '--sport', port, '-j', 'DROP']);
    await run('iptables', ['-I', 'INPUT', '1', '-j', chain]);
  } catch (err) {
    await restore();
    throw new Error(`cannot drop packets to ${target.ip}:${port} with iptables (needs root): ${(err as Error).message}`);
  }
  return { restore };
}
