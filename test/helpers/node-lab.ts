// A lab with a real node, shared by the suites that need one (issue 26): etcd, the given
// kube-apiservers, two gateways in front of them as a load-balanced control plane has — one on this
// machine's loopback for the control-plane components and the tests' own requests, one on an
// alias address the node reaches from its network namespace (checked by the certificate's name
// `kubernetes`) — kube-controller-manager (its whole default set: node lifecycle at its 40 s
// default) and kube-scheduler through the first, and a node (containerd, kubelet and kube-proxy
// KUBE_OLD in a network namespace of their own) registered through the second with its own client
// certificate, Ready before the first suite. Each suite runs as a subtest; a suite leaves the lab as
// it found it (its apiservers up, its objects in a namespace of its own).
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import type { LabAddresses } from '../../harness/lab/addresses.js';
import { Lab, freePort, type GatewayInfo } from '../../harness/lab/lab.js';
import type { LabVersions } from '../../harness/lab/versions.js';
import { LabNode } from '../../harness/node/node.js';
import { labNodeOptions, requireNodeParts, type NodeParts } from '../../harness/node/lab-node.js';
import { packageRoot } from '../../src/util/package-root.js';
import { requireLabParts } from './lab-parts.js';
import { waitMs } from './waits.js';

const run = promisify(execFile);

/** The kubelet's defaults (harness/node/config.ts states them): a Lease of 40 s, status every 10 s. */
export const LEASE_SECONDS = 40;
/** The kubelet renews its Lease every quarter of it. */
export const RENEW_MS = (LEASE_SECONDS * 1000) / 4;
export const NODE_STATUS_MS = 10_000;
/** How long kube-controller-manager takes to give a new namespace its account and CA ConfigMap (a wait bound). */
const NAMESPACE_SETUP_MS = 5000;

export interface ApiAnswer {
  readonly status: number;
  readonly json: unknown;
}

export interface NodeLab {
  readonly lab: Lab;
  readonly versions: LabVersions;
  readonly kubectl: string;
  readonly parts: NodeParts & {
    readonly workloadImage: string;
    /** registry.k8s.io/kubectl at KUBE_NEW: the in-cluster client's image. */
    readonly kubectlImage: string;
  };
  readonly servers: readonly ApiServerSpec[];
  /** The control plane's gateway (loopback): kcm, scheduler, the tests' requests and kubectl. */
  readonly gw: GatewayInfo;
  /** The node's gateway (an alias address): the kubelet and kube-proxy. */
  readonly nodeGw: GatewayInfo;
  readonly node: LabNode;
  readonly nodeName: string;
  readonly progress: (line: string) => void;
  /** A request with the admin token to `base` (a gateway's or an apiserver's URL). */
  readonly api: (base: string, method: string, path: string, body?: unknown) => Promise<ApiAnswer>;
  /**
   * Waits until namespace `name` (made by the caller) has what kube-controller-manager gives every
   * namespace: the `default` ServiceAccount, without which the ServiceAccount admission plugin
   * refuses pods, and the kube-root-ca.crt ConfigMap in-cluster clients verify the server with.
   */
  readonly namespaceReady: (name: string) => Promise<void>;
  /** Polls `probe` every 500 ms until it returns a value (not undefined), at most `limitMs`. */
  readonly until: <T>(what: string, limitMs: number, probe: () => Promise<T | undefined>) => Promise<T>;
}

export interface NodeSuite {
  readonly title: string;
  readonly run: (t: Test, lab: NodeLab) => Promise<void>;
}

export interface NodeShape {
  /** The lab's name (its run dir is .cache/lab-<name>). */
  readonly name: string;
  readonly addresses: LabAddresses;
  readonly specs: (versions: LabVersions, addresses: LabAddresses) => readonly ApiServerSpec[];
}

interface NodeObject {
  status?: { conditions?: { type: string; status: string }[] };
}

export async function withNodeLab(t: Test, shape: NodeShape, suites: readonly NodeSuite[]): Promise<void> {
  const { versions, kubectl } = requireLabParts();
  const parts = {
    ...requireNodeParts(),
    workloadImage: await workloadImage(),
    kubectlImage: `registry.k8s.io/kubectl:v${versions.kubeNew}`,
  };
  const images = [parts.pauseImage, parts.workloadImage, parts.kubectlImage];
  for (const image of images)
    await run('docker', ['image', 'inspect', image]).catch(() => {
      throw new Error(`image ${image} is not in the local Docker engine: run scripts/demo-images.sh`);
    });
  const started = performance.now();
  const progress = (line: string): void => t.comment(`[${shape.name} +${((performance.now() - started) / 1000).toFixed(1)}s] ${line}`);
  const slot = shape.addresses;
  const nodeName = `node-${slot.slot}`;
  const labDir = join(packageRoot(), '.cache', `lab-${shape.name}`);
  // What a crashed earlier run left, stopped by a Lab object of its own (down() closes it).
  await (await Lab.open({ dir: labDir, addresses: slot })).down({ kill: true });
  const lab = await Lab.open({ dir: labDir, killOnExit: true, addresses: slot, log: progress });
  const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
  const nodeOptions = labNodeOptions(lab, parts, {
    addresses: slot,
    index: 0,
    name: nodeName,
    images,
    log: progress,
  });
  let node: LabNode | undefined;
  try {
    const api = labApi(lab, agent);
    const until = poller(async () => (await node?.logTails(20)) ?? '');

    // kube-controller-manager runs (its serviceaccount controller): pods get their tokens, as in a cluster.
    const servers = shape.specs(versions, slot).map((s) => ({ ...s, serviceAccountAdmission: true }));
    await lab.startEtcd();
    await Promise.all(servers.map((s) => lab.startApiServer(s)));
    const { gw, nodeGw } = await startNodeControlPlane(lab, slot, versions);
    progress(
      `control plane up (${servers.map((s) => `${s.name} v${s.version}`).join(', ')}); gateways ${gw.url}, for the node ${nodeGw.url}`,
    );

    // What a crashed earlier run left (its processes, mounts, bridge), by a node object of its own.
    await new LabNode({ ...nodeOptions, server: nodeGw.url }).down();
    node = new LabNode({ ...nodeOptions, server: nodeGw.url, killOnExit: true });
    await node.start();
    const kas = lab.apiServerUrl(servers[0]?.name ?? '');
    await until(`Node ${nodeName} Ready`, waitMs(NODE_STATUS_MS), async () => {
      const r = await api(kas, 'GET', `/api/v1/nodes/${nodeName}`);
      const cond = (r.json as NodeObject).status?.conditions?.find((c) => c.type === 'Ready');
      return r.status === 200 && cond?.status === 'True' ? true : undefined;
    });
    progress(`node ${nodeName} Ready; ${suites.length} suites`);

    const namespaceReady = (name: string): Promise<void> => waitNamespaceReady(api, gw.url, until, name);
    const ctx: NodeLab = { lab, versions, kubectl, parts, servers, gw, nodeGw, node, nodeName, progress, api, namespaceReady, until };
    for (const suite of suites) {
      progress(`suite: ${suite.title}`);
      await t.test(suite.title, (st) => suite.run(st, ctx));
    }
  } finally {
    await node?.down().catch((err: Error) => progress(`node down: ${err.message}`));
    await lab.down({ kill: true }).catch((err: Error) => progress(`lab down: ${err.message}`));
    await agent.close();
  }
}

/**
 * What runs beside the apiservers of a lab with nodes: the control plane's gateway (loopback), the
 * nodes' gateway on the slot's first alias address with kubernetesService.publish (the `kubernetes`
 * Service points at it: in-cluster clients), both learning apiservers from `membershipSources` when
 * given, and kube-controller-manager (its default controllers:
 * node lifecycle, ServiceAccounts, Jobs) and kube-scheduler through the first.
 */
export async function startNodeControlPlane(
  lab: Lab,
  slot: LabAddresses,
  versions: LabVersions,
  membershipSources?: readonly 'nodes'[],
): Promise<{ readonly gw: GatewayInfo; readonly nodeGw: GatewayInfo }> {
  // Both gateways learn apiservers the same way (the seed alone, or the control-plane Nodes too).
  const learn = membershipSources === undefined ? {} : { membershipSources };
  const gateways = await lab.startGateways({
    gw: { name: 'gateway', withSkewgate: true, xds: true, port: await freePort(), ...learn },
    nodeGw: {
      name: 'node-gateway',
      withSkewgate: true,
      xds: true,
      ...learn,
      port: 6443,
      address: slot.alias(1),
      publishService: { leaseDuration: '15s' },
    },
  });
  await lab.startControllerManager({
    name: 'kcm',
    version: versions.kubeOld,
    kubeconfig: gateways.gw.kubeconfigFile,
    controllers: ['*'],
    serviceAccountKeyFile: lab.pki.saKeyFile,
    rootCaFile: lab.pki.caFile,
  });
  await lab.startScheduler({ name: 'kube-scheduler', version: versions.kubeOld, server: gateways.gw.url });
  return gateways;
}

/** NodeLab['namespaceReady'] for a lab of one's own. */
export async function waitNamespaceReady(api: NodeLab['api'], base: string, until: NodeLab['until'], name: string): Promise<void> {
  await until(`${name}/default ServiceAccount and kube-root-ca.crt`, waitMs(NAMESPACE_SETUP_MS), async () => {
    const sa = await api(base, 'GET', `/api/v1/namespaces/${name}/serviceaccounts/default`);
    const ca = await api(base, 'GET', `/api/v1/namespaces/${name}/configmaps/kube-root-ca.crt`);
    return sa.status === 200 && ca.status === 200 ? true : undefined;
  });
}

/** Requests with the admin token to a gateway's or an apiserver's URL (`agent` trusts the lab CA). */
export function labApi(lab: Lab, agent: Agent): NodeLab['api'] {
  return async (base, method, path, body) => {
    const res = await request(`${base}${path}`, {
      method: method as 'GET',
      dispatcher: agent,
      headers: {
        authorization: `Bearer ${lab.pki.adminToken}`,
        accept: 'application/json',
        ...(body === undefined ? {} : { 'content-type': method === 'PATCH' ? 'application/merge-patch+json' : 'application/json' }),
      },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await res.body.text();
    let json: unknown = text;
    try {
      json = JSON.parse(text);
    } catch {
      // not JSON: kept as text
    }
    return { status: res.statusCode, json };
  };
}

/** NodeLab['until'], whose failure message ends with `context()` (e.g. the node's log tails). */
export function poller(context: () => Promise<string>): NodeLab['until'] {
  return async (what, limitMs, probe) => {
    const deadline = Date.now() + limitMs;
    for (;;) {
      const v = await probe().catch(() => undefined);
      if (v !== undefined) return v;
      if (Date.now() > deadline) throw new Error(`${what}: not within ${limitMs / 1000} s\n${await context()}`);
      await new Promise((r) => setTimeout(r, 500));
    }
  };
}

/** The image the pods of the node tests run: the Node.js image the skewgate Dockerfile builds on. */
export async function workloadImage(): Promise<string> {
  const dockerfile = await readFile(join(packageRoot(), 'Dockerfile'), 'utf8');
  const tag = /^FROM node:(\S+) AS build$/m.exec(dockerfile)?.[1];
  if (tag === undefined) throw new Error('Dockerfile: no `FROM node:<tag> AS build` line');
  return `node:${tag}`;
}
