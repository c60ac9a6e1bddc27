// `skewgate-lab node up|down|status`: a real node beside `skewgate-lab lab up` — containerd, a
// kubelet and kube-proxy (KUBE_OLD) in a network namespace of their own, registering through a gateway of the
// lab (node-gateway, on an alias address) with the node's own client certificate
// (CN=system:node:<name>, O=system:nodes), with the lab's kube-scheduler and
// kube-controller-manager (its default controllers: node lifecycle, Deployments, service accounts)
// running through the lab's gateway, so that pods are scheduled, reconciled and evicted as in a
// cluster. Started detached: the node outlives this command; `node down` from another shell stops
// it (and only it: `lab down` stops the control plane).
import { join, relative } from 'node:path';
import { parse } from 'yaml';
import { Agent, request } from 'undici';
import { readFile } from 'node:fs/promises';
import { EXIT_OK, EXIT_PROBLEMS } from '../../src/constants.js';
import { formatTable } from '../../src/cli/one-shot.js';
import { Lab } from '../lab/lab.js';
import { labAddresses } from '../lab/addresses.js';
import { slotAddresses } from './lab.js';
import { labVersions } from '../lab/versions.js';
import { labNodeOptions, requireNodeParts } from '../node/lab-node.js';
import { LabNode } from '../node/node.js';
import { NODES_PER_SLOT } from '../node/placement.js';

export interface NodeCommandOptions {
  /** The lab's run dir (`lab up --dir`). */
  readonly dir: string;
  /** The Node's name. */
  readonly name: string;
  /** Which of the slot's node places (addresses, pod range, bridge): 0…3. */
  readonly index: number;
  /** The lab's slot (`lab up --slot`): the node's addresses and its gateway's. */
  readonly slot: number;
  /**
   * The lab's gateway (on 127.0.0.1): the scheduler and the controller manager talk to it, and
   * `status` reads the Node through it. Default: the one `lab up` started (its kubeconfig's).
   */
  readonly controlPlaneServer?: string | undefined;
}

/**
 * The gateway the node talks to: on an alias address (a node's network namespace cannot reach
 * this machine's 127/8), verified by the lab certificate's name `kubernetes`.
 */
const NODE_GATEWAY = 'node-gateway';
const NODE_GATEWAY_PORT = 16444;
const nodeGatewayUrl = (slot: number): string => `https://${labAddresses(slot).alias(11)}:${NODE_GATEWAY_PORT}`;

const KCM = 'kube-controller-manager';
const SCHEDULER = 'kube-scheduler';
const out = (s: string): void => {
  process.stdout.write(`${s}\n`);
};
const rel = (p: string): string => {
  const r = relative(process.cwd(), p);
  return r === '' || r.startsWith('..') ? p : r;
};

function labNode(lab: Lab, o: NodeCommandOptions, log: (l: string) => void): LabNode {
  if (!Number.isInteger(o.index) || o.index < 0 || o.index >= NODES_PER_SLOT)
    throw new Error(`--index must be 0…${NODES_PER_SLOT - 1}, got ${o.index}`);
  const parts = requireNodeParts();
  const options = labNodeOptions(lab, parts, {
    addresses: labAddresses(o.slot),
    index: o.index,
    name: o.name,
    images: [parts.pauseImage],
    log,
  });
  return new LabNode({ ...options, server: nodeGatewayUrl(o.slot) });
}

/** The lab of the run dir, at its slot's addresses. */
function openLab(dir: string, slot: number, log?: (l: string) => void): Promise<Lab> {
  return Lab.open({ dir, addresses: slotAddresses(slot), ...(log === undefined ? {} : { log }) });
}

/** The kubeconfig `lab up` writes for its gateway: its current context's server is the gateway. */
const gatewayKubeconfig = (lab: Lab): string => join(lab.dir, 'run', 'gateway-gateway', 'kubeconfig');

async function controlPlaneServer(lab: Lab, o: NodeCommandOptions): Promise<string> {
  if (o.controlPlaneServer !== undefined) return o.controlPlaneServer;
  const file = gatewayKubeconfig(lab);
  const text = await readFile(file, 'utf8').catch(() => {
    throw new Error(`no gateway of the lab in ${rel(lab.dir)} (${rel(file)} is missing): \`skewgate-lab lab up\` first, or --server`);
  });
  const doc = parse(text) as {
    'current-context'?: string;
    contexts?: { name: string; context: { cluster: string } }[];
    clusters?: { name: string; cluster: { server: string } }[];
  };
  const cluster = doc.contexts?.find((c) => c.name === doc['current-context'])?.context.cluster;
  const server = doc.clusters?.find((c) => c.name === cluster)?.cluster.server;
  if (server === undefined) throw new Error(`${rel(file)}: no server for its current context: --server`);
  return server;
}

/** The Node object as the apiservers have it, read through the gateway with the admin token. */
async function nodeCondition(lab: Lab, o: NodeCommandOptions): Promise<string> {
  const server = await controlPlaneServer(lab, o).catch((err: Error) => err);
  if (server instanceof Error) return server.message;
  const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
  try {
    const res = await request(`${server}/api/v1/nodes/${encodeURIComponent(o.name)}`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${lab.pki.adminToken}`, accept: 'application/json' },
      signal: AbortSignal.timeout(5000),
    });
    const body = (await res.body.json().catch(() => ({}))) as {
      status?: { conditions?: { type: string; status: string; reason?: string }[] };
    };
    if (res.statusCode === 404) return 'not registered';
    if (res.statusCode !== 200) return `GET the Node: ${res.statusCode}`;
    const ready = body.status?.conditions?.find((c) => c.type === 'Ready');
    return ready === undefined ? 'registered, no Ready condition yet' : `Ready=${ready.status}${ready.reason ? ` (${ready.reason})` : ''}`;
  } catch (err) {
    return `the gateway does not answer: ${(err as Error).message}`;
  } finally {
    await agent.close();
  }
}

export async function runNodeUp(o: NodeCommandOptions): Promise<number> {
  const started = Date.now();
  let lab: Lab;
  try {
    lab = await openLab(o.dir, o.slot, (l) => out(`  ${l}`));
  } catch (err) {
    process.stderr.write(`skewgate-lab node up: ${(err as Error).message}\n`);
    return EXIT_PROBLEMS;
  }
  try {
    const v = labVersions();
    const running = new Map((await lab.status()).map((r) => [r.name, r.alive]));
    if (![...running.entries()].some(([name, alive]) => name.startsWith('kas-') && alive))
      throw new Error(`no apiserver of the lab in ${rel(lab.dir)} runs: \`skewgate-lab lab up\` first`);
    const server = await controlPlaneServer(lab, o);
    // Its parts checked before anything starts: a missing one leaves nothing running.
    const node = labNode(lab, o, (l) => out(`  ${l}`));
    if (running.get(KCM) !== true)
      await lab.startControllerManager({
        name: KCM,
        version: v.kubeOld,
        kubeconfig: gatewayKubeconfig(lab),
        controllers: ['*'],
        serviceAccountKeyFile: lab.pki.saKeyFile,
        rootCaFile: lab.pki.caFile,
      });
    if (running.get(SCHEDULER) !== true) await lab.startScheduler({ name: SCHEDULER, version: v.kubeOld, server });
    if (running.get(`envoy-${NODE_GATEWAY}`) !== true)
      await lab.startGateway({
        name: NODE_GATEWAY,
        withSkewgate: true,
        xds: true,
        port: NODE_GATEWAY_PORT,
        address: labAddresses(o.slot).alias(11),
      });
    await node.start();
    let condition = await nodeCondition(lab, o);
    for (const deadline = Date.now() + 60_000; !condition.startsWith('Ready=True') && Date.now() < deadline;) {
      await new Promise((r) => setTimeout(r, 1000));
      condition = await nodeCondition(lab, o);
    }
    out(`\nnode ${o.name} up in ${((Date.now() - started) / 1000).toFixed(1)} s: ${condition}`);
    out(`  address ${node.spec.ip} (network namespace ${node.spec.netns}), pods ${node.spec.podCidr}`);
    out(`  kubelet through ${nodeGatewayUrl(o.slot)} (gateway ${NODE_GATEWAY}) as system:node:${o.name}`);
    out(`  kubelet kubeconfig ${rel(node.spec.kubeconfig ?? '')}, logs ${rel(node.logFile('kubelet'))}`);
    out(`  stop it: node dist/harness/cli/main.js node down --name ${o.name}${o.slot === 0 ? '' : ` --slot ${o.slot}`}`);
    return condition.startsWith('Ready=True') ? EXIT_OK : EXIT_PROBLEMS;
  } catch (err) {
    process.stderr.write(`skewgate-lab node up: ${(err as Error).message}\n`);
    process.stderr.write(`what started is still running (logs in ${rel(lab.dir)}/): \`skewgate-lab node down\` stops it\n`);
    return EXIT_PROBLEMS;
  } finally {
    await lab.close();
  }
}

export async function runNodeDown(o: NodeCommandOptions): Promise<number> {
  const lab = await openLab(o.dir, o.slot);
  try {
    const node = labNode(lab, o, (l) => out(`  ${l}`));
    await node.down();
    out(`skewgate-lab node: ${o.name} stopped (kube-proxy, kubelet, pods, containerd; its mounts and network namespace removed)`);
    return EXIT_OK;
  } finally {
    await lab.close();
  }
}

export async function runNodeStatus(o: NodeCommandOptions): Promise<number> {
  const lab = await openLab(o.dir, o.slot);
  try {
    const node = labNode(lab, o, () => undefined);
    const rows = await node.status();
    out(formatTable([['NAME', 'PID', 'LOG'], ...rows.map((r) => [r.name, r.pid === null ? '-' : String(r.pid), rel(r.log)])]).trimEnd());
    out(`Node ${o.name}: ${await nodeCondition(lab, o)}`);
    return rows.every((r) => r.pid !== null) ? EXIT_OK : EXIT_PROBLEMS;
  } finally {
    await lab.close();
  }
}
