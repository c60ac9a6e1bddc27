// Where a lab node lives in its lab's slot (harness/lab/addresses.ts): its network namespace and
// the /30 joining it to this machine (10.215.S.4i/30: this machine .4i+1, the node .4i+2; netns.ts),
// its pod range (10.244.S.64i/26), its bridge and ports. Node i of slot S never collides with any
// other slot's or node's. Pure.
import { join } from 'node:path';
import type { LabAddresses } from '../lab/addresses.js';
import type { NodeSpec } from './config.js';

/** Nodes per slot (a /26 of the slot's pod /24 each). */
export const NODES_PER_SLOT = 4;
/** The nodes' links: 10.215.<slot>.0/24, a /30 per node. */
const NODE_LINK_NET = '10.215.';

export interface NodePlacementInput {
  readonly addresses: LabAddresses;
  /** 0…NODES_PER_SLOT-1 within the slot. */
  readonly index: number;
  readonly name: string;
  /** The lab's run dir: the node's folder is <labDir>/nodes/<name>. */
  readonly labDir: string;
  readonly sandboxImage: string;
  readonly cniBinDir: string;
  readonly clientCaFile: string;
}

export function labNodeSpec(o: NodePlacementInput): Omit<NodeSpec, 'servingCertFile' | 'servingKeyFile' | 'kubeconfig'> {
  if (!Number.isInteger(o.index) || o.index < 0 || o.index >= NODES_PER_SLOT)
    throw new RangeError(`node index ${o.index}: 0…${NODES_PER_SLOT - 1}`);
  const slot = o.addresses.slot;
  return {
    name: o.name,
    dir: join(o.labDir, 'nodes', o.name),
    ip: `${NODE_LINK_NET}${slot}.${4 * o.index + 2}`,
    netns: `skewgate-lab-${slot}-${o.index}`,
    hostIf: `sgn${slot}-${o.index}`,
    hostIp: `${NODE_LINK_NET}${slot}.${4 * o.index + 1}`,
    kubeletPort: 10250,
    streamPort: 10010,
    podCidr: `10.244.${slot}.${64 * o.index}/26`,
    bridge: `sglab${slot}-${o.index}`,
    sandboxImage: o.sandboxImage,
    cniBinDir: o.cniBinDir,
    clientCaFile: o.clientCaFile,
  };
}

/** Whether `ip` (dotted IPv4) lies in `cidr` (a.b.c.d/n). */
export function ipv4InCidr(ip: string, cidr: string): boolean {
  const num = (a: string): number => a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
  const [net = '', bits = '32'] = cidr.split('/');
  const size = 2 ** (32 - Number(bits));
  return /^\d+\.\d+\.\d+\.\d+$/.test(ip) && Math.floor(num(ip) / size) === Math.floor(num(net) / size);
}
