// A lab node: containerd (with runc and the CNI bridge) and a kubelet in a network namespace of
// their own (netns.ts), started detached under the lab's supervisor (their own run dir, logs and
// records), so a node outlives the command that started it and `down` from another shell stops
// it. What runs inside (pods, their shims, its cgroups, mounts, its network with the bridge and
// the kubelet's iptables chains) is removed on down as well: nothing of the node is left.
import { execFile, spawn } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { issueCert, type KeyPairFiles } from '../openssl.js';
import { LabError } from '../lab/errors.js';
import { certKubeconfig } from '../lab/kubeconfig.js';
import { findProcesses } from '../lab/procfs.js';
import { Supervisor, logTail, type ProcRecord } from '../lab/supervisor.js';
import { ensureCgroupRoot, removeCgroupRoot } from './cgroups.js';
import { ensureInotifyInstances } from './host-limits.js';
import { createNodeNetwork, deleteNodeNetwork, inNodeNetwork } from './netns.js';
import { KUBE_PROXY_HEALTHZ_PORT, kubeProxyArgs, kubeProxyConfiguration, kubeProxyPaths } from './kube-proxy.js';
import { KUBE_PROXY_USER } from '../lab/pki.js';
import { containerdConfig, cniConflist, kubeletArgs, kubeletConfiguration, nodeCgroupRoot, nodePaths, type NodeSpec } from './config.js';

const run = promisify(execFile);

/** The group every kubelet's certificate names (the Node authorizer's). */
export const NODES_GROUP = 'system:nodes';
/** The user a node's kubelet is: system:node:<name>. */
export const nodeUser = (name: string): string => `system:node:${name}`;

export interface NodeProcRecord extends ProcRecord {
  readonly kind: 'containerd' | 'kubelet' | 'kube-proxy';
}

export interface NodeBinaries {
  readonly kubelet: string;
  readonly containerd: string;
  /** ctr, containerd's own client: imports images, lists tasks. */
  readonly ctr: string;
}

export interface NodeOptions {
  readonly spec: Omit<NodeSpec, 'servingCertFile' | 'servingKeyFile' | 'kubeconfig'>;
  /**
   * Registers the node with this server (a gateway's URL, or an apiserver's), as kubeadm's
   * kubelet.conf does: a client certificate of the lab CA, CN=system:node:<name>, O=system:nodes.
   * Absent: a standalone kubelet (static pods only).
   */
  readonly server?: string;
  /**
   * The name the server's certificate is checked against when its address is not in it: "kubernetes"
   * for a gateway on an alias address (the lab certificate's DNS name), as a kubeadm node checks
   * its control-plane endpoint's name.
   */
  readonly serverName?: string;
  /**
   * Runs kube-proxy (kube-proxy.ts) on the node, talking to `server` as system:kube-proxy (this
   * certificate of the lab PKI). Needs server.
   */
  readonly kubeProxy?: { readonly binary: string; readonly certFile: string; readonly keyFile: string };
  /** The lab CA: signs the kubelet's serving certificate. */
  readonly ca: KeyPairFiles;
  readonly binaries: NodeBinaries;
  /** Image tags of the local Docker engine to import into the node's containerd (the sandbox image first). */
  readonly images: readonly string[];
  readonly log?: (line: string) => void;
  readonly killOnExit?: boolean;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export class LabNode {
  readonly spec: NodeSpec;
  readonly paths: ReturnType<typeof nodePaths>;
  private readonly procs: Supervisor<NodeProcRecord>;
  private readonly log: (line: string) => void;

  constructor(private readonly o: NodeOptions) {
    const dir = o.spec.dir;
    this.spec = {
      ...o.spec,
      servingCertFile: join(dir, 'pki', 'kubelet.crt'),
      servingKeyFile: join(dir, 'pki', 'kubelet.key'),
      ...(o.server === undefined ? {} : { kubeconfig: join(dir, 'kubelet.kubeconfig') }),
    };
    this.paths = nodePaths(dir);
    this.log = o.log ?? (() => undefined);
    this.procs = new Supervisor<NodeProcRecord>({
      runDir: join(dir, 'run'),
      logDir: join(dir, 'logs'),
      cwd: dir,
      log: this.log,
      carriesMarker: (argv) =>
        argv.includes(`--config=${this.paths.kubeletConfig}`) ||
        argv.includes(this.paths.containerdConfig) ||
        argv.includes(`--config=${kubeProxyPaths(dir).config}`),
      killOnExit: o.killOnExit === true,
    });
  }

  logFile(kind: NodeProcRecord['kind']): string {
    return this.procs.logFile(`${this.spec.name}-${kind}`);
  }

  /** containerd up and answering, the images imported, the kubelet up and healthy. */
  async start(timeoutMs = 60_000): Promise<void> {
    const s = this.spec;
    const p = this.paths;
    for (const d of [join(s.dir, 'run'), join(s.dir, 'logs'), join(s.dir, 'pki'), p.cniConfDir, p.staticPods, p.podLogs, p.kubeletRoot])
      await mkdir(d, { recursive: true });
    await this.procs.adopt();
    await ensureInotifyInstances(this.o.log ?? (() => undefined));
    // Its network is made anew below: never under a running node.
    for (const kind of ['containerd', 'kubelet', 'kube-proxy'] as const)
      if (await this.procs.alive(`${s.name}-${kind}`)) throw new LabError(`node ${s.name} is already running (its ${kind}): down first`);
    await issueCert({
      dir: join(s.dir, 'pki'),
      name: 'kubelet',
      subject: `/CN=${s.name}`,
      usage: 'server',
      ca: this.o.ca,
      sans: [`IP:${s.ip}`, `DNS:${s.name}`],
    });
    if (this.o.server !== undefined && s.kubeconfig !== undefined) {
      const user = nodeUser(s.name);
      const client = await issueCert({
        dir: join(s.dir, 'pki'),
        name: 'kubelet-client',
        subject: `/O=${NODES_GROUP}/CN=${user}`,
        usage: 'client',
        ca: this.o.ca,
      });
      const doc = certKubeconfig({
        cluster: 'lab',
        server: this.o.server,
        caFile: s.clientCaFile,
        ...(this.o.serverName === undefined ? {} : { tlsServerName: this.o.serverName }),
        user,
        certFile: client.certFile,
        keyFile: client.keyFile,
      });
      await writeFile(s.kubeconfig, stringify(doc));
    }
    await createNodeNetwork({ netns: s.netns, hostIf: s.hostIf, hostIp: s.hostIp, nodeIp: s.ip, podCidr: s.podCidr });
    await writeFile(p.containerdConfig, containerdConfig(s));
    await writeFile(join(p.cniConfDir, '10-skewgate-lab.conflist'), `${JSON.stringify(cniConflist(s), null, 2)}\n`);
    await writeFile(p.kubeletConfig, stringify(kubeletConfiguration(s)));

    const containerd = await this.procs.spawn({
      name: `${s.name}-containerd`,
      kind: 'containerd',
      ...inNodeNetwork(s.netns, this.o.binaries.containerd, ['--config', p.containerdConfig]),
      marker: p.containerdConfig,
      extra: {},
    });
    await this.procs.waitFor(containerd, timeoutMs, async () => {
      const r = await this.ctr(['version']).catch((err: Error) => ({ stdout: '', stderr: err.message }));
      return r.stdout.includes('Server:') ? null : 'containerd not answering yet';
    });
    await this.importImages();
    await ensureCgroupRoot(nodeCgroupRoot(s.name));
    const kubelet = await this.procs.spawn({
      name: `${s.name}-kubelet`,
      kind: 'kubelet',
      ...inNodeNetwork(s.netns, this.o.binaries.kubelet, kubeletArgs(s)),
      marker: `--config=${p.kubeletConfig}`,
      extra: {},
    });
    await this.procs.waitFor(kubelet, timeoutMs, async () => {
      const r = await fetch(`http://${s.ip}:${s.kubeletPort + 1}/healthz`).catch(() => null);
      return r?.status === 200 ? null : `kubelet healthz ${r?.status ?? 'not answering'}`;
    });
    if (this.o.kubeProxy !== undefined) await this.startKubeProxy(this.o.kubeProxy, timeoutMs);
    this.log(`node ${s.name}: containerd, kubelet${this.o.kubeProxy ? ', kube-proxy' : ''} up (${s.ip}, pods ${s.podCidr})`);
  }

  /** kube-proxy in the node's namespace; resolves once its healthz answers 200 (its first sync done). */
  private async startKubeProxy(kp: NonNullable<NodeOptions['kubeProxy']>, timeoutMs: number): Promise<void> {
    const s = this.spec;
    if (this.o.server === undefined) throw new LabError(`node ${s.name}: kube-proxy needs the node registered (server)`);
    const paths = kubeProxyPaths(s.dir);
    const doc = certKubeconfig({
      cluster: 'lab',
      server: this.o.server,
      caFile: s.clientCaFile,
      ...(this.o.serverName === undefined ? {} : { tlsServerName: this.o.serverName }),
      user: KUBE_PROXY_USER,
      certFile: kp.certFile,
      keyFile: kp.keyFile,
    });
    await writeFile(paths.kubeconfig, stringify(doc));
    await writeFile(paths.config, stringify(kubeProxyConfiguration(s)));
    const rec = await this.procs.spawn({
      name: `${s.name}-kube-proxy`,
      kind: 'kube-proxy',
      ...inNodeNetwork(s.netns, kp.binary, kubeProxyArgs(s)),
      marker: `--config=${paths.config}`,
      extra: {},
    });
    await this.procs.waitFor(rec, timeoutMs, async () => {
      const r = await fetch(`http://${s.ip}:${KUBE_PROXY_HEALTHZ_PORT}/healthz`).catch(() => null);
      return r?.status === 200 ? null : `kube-proxy healthz ${r?.status ?? 'not answering'}`;
    });
  }

  /** The node's processes, each with its pid when it runs (from any shell: adopts the records). */
  async status(): Promise<{ readonly name: string; readonly pid: number | null; readonly log: string }[]> {
    await this.procs.adopt();
    const rows: { name: string; pid: number | null; log: string }[] = [];
    for (const kind of ['containerd', 'kubelet', ...(this.o.kubeProxy ? (['kube-proxy'] as const) : [])] as const) {
      const name = `${this.spec.name}-${kind}`;
      rows.push({ name, pid: (await this.procs.alive(name))?.pid ?? null, log: this.logFile(kind) });
    }
    this.procs.close();
    return rows;
  }

  /** `ctr` against this node's containerd, in the kubelet's namespace. */
  ctr(args: readonly string[]): Promise<{ stdout: string; stderr: string }> {
    return run(this.o.binaries.ctr, ['--address', this.paths.containerdSocket, '--namespace', 'k8s.io', ...args], {
      timeout: 60_000,
      maxBuffer: 16 * 1024 * 1024,
    });
  }

  /** `docker save` of the tags, piped into `ctr images import` (no registry to pull from). */
  private async importImages(): Promise<void> {
    if (this.o.images.length === 0) return;
    const save = spawn('docker', ['save', ...this.o.images], { stdio: ['ignore', 'pipe', 'pipe'] });
    const load = spawn(this.o.binaries.ctr, ['--address', this.paths.containerdSocket, '--namespace', 'k8s.io', 'images', 'import', '-'], {
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let errors = '';
    save.stderr.on('data', (c: Buffer) => (errors += c.toString()));
    load.stderr.on('data', (c: Buffer) => (errors += c.toString()));
    save.stdout.pipe(load.stdin);
    const exit = (c: ReturnType<typeof spawn>): Promise<number | null> => new Promise((r) => c.once('close', (code) => r(code)));
    const [a, b] = await Promise.all([exit(save), exit(load)]);
    if (a !== 0 || b !== 0)
      throw new LabError(`importing ${this.o.images.join(', ')} into node ${this.spec.name} failed: ${errors.trim()}`);
    this.log(`node ${this.spec.name}: imported ${this.o.images.join(', ')}`);
  }

  /** Places a static pod manifest in the kubelet's folder (before start too: the kubelet runs it first). */
  async addStaticPod(fileName: string, manifest: object): Promise<void> {
    await mkdir(this.paths.staticPods, { recursive: true });
    // As the recipes install it (install -m 0600): the kubelet reads it as root.
    await writeFile(join(this.paths.staticPods, fileName), stringify(manifest), { mode: 0o600 });
  }

  /** The pod sandboxes and containers containerd runs for the kubelet, as `ctr` lists them. */
  async tasks(): Promise<{ id: string; pid: number; status: string }[]> {
    const { stdout } = await this.ctr(['tasks', 'list']);
    return stdout
      .split('\n')
      .slice(1)
      .map((l) => l.trim().split(/\s+/))
      .filter((c) => c.length >= 3)
      .map(([id, pid, status]) => ({ id: id ?? '', pid: Number(pid), status: status ?? '' }));
  }

  /**
   * Stops the kubelet, then every pod (their tasks, shims), containerd, and removes the node's
   * mounts and its bridge. Idempotent; from any shell (adopts the records).
   */
  async down(): Promise<void> {
    await this.procs.adopt();
    await this.procs.kill(`${this.spec.name}-kube-proxy`);
    await this.procs.kill(`${this.spec.name}-kubelet`);
    // Pods first, while containerd still answers: their shims and runc containers are not its children.
    try {
      for (const t of await this.tasks()) await this.ctr(['tasks', 'kill', '--signal', 'SIGKILL', t.id]).catch(() => undefined);
    } catch {
      // containerd already gone: the shims are found below.
    }
    await this.procs.kill(`${this.spec.name}-containerd`);
    await this.killShims();
    // Whatever a pod still runs (its shim gone before it): every process in the node's cgroups.
    await removeCgroupRoot(nodeCgroupRoot(this.spec.name));
    await this.unmountAll();
    // Its bridge, the pods' veths and every iptables rule the kubelet wrote go with the namespace.
    await deleteNodeNetwork(this.spec);
    await this.forgetPods();
    this.procs.close();
  }

  /**
   * What the runtime and the kubelet kept of their pods: a lab node is never restarted with them,
   * and a static pod's UID is the same from run to run, so a next start would count its restarts
   * on from an earlier run's containers. Never through a mount (a hostPath's source would go too).
   */
  private async forgetPods(): Promise<void> {
    const left = (await mountsUnder(this.spec.dir)).length;
    if (left > 0) throw new LabError(`node ${this.spec.name}: ${left} mounts remain under ${this.spec.dir}; its pods' state kept`);
    const p = this.paths;
    for (const d of [p.containerdRoot, p.containerdState, p.kubeletRoot, p.podLogs, p.cniIpam])
      await rm(d, { recursive: true, force: true });
  }

  /** containerd-shim processes of this node (their -address is its socket). */
  private async killShims(): Promise<void> {
    const socket = this.paths.containerdSocket;
    for (const shim of await findProcesses((argv) => argv.some((a) => a.includes('containerd-shim')) && argv.includes(socket))) {
      try {
        process.kill(shim.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await sleep(100);
  }

  /** Every mount under the node's folder (pod volumes, sandbox shm, overlay rootfs), deepest first. */
  private async unmountAll(): Promise<void> {
    for (const m of await mountsUnder(this.spec.dir)) await run('umount', ['-l', m]).catch(() => undefined);
  }

  /** Removes the node's folder after down(). */
  async remove(): Promise<void> {
    await this.down();
    await rm(this.spec.dir, { recursive: true, force: true });
  }

  async logTails(lines = 30): Promise<string> {
    const parts: string[] = [];
    for (const kind of ['containerd', 'kubelet', 'kube-proxy'] as const)
      parts.push(`--- ${kind} ---\n${await logTail(this.logFile(kind), lines)}`);
    return parts.join('\n');
  }
}

/** The mount points under `dir`, deepest first. */
async function mountsUnder(dir: string): Promise<string[]> {
  return (await readFile('/proc/self/mountinfo', 'utf8'))
    .split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((m) => m.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}
