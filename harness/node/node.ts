// A lab node: containerd (with runc and the CNI bridge) and a kubelet, started detached under
// the lab's supervisor (their own run dir, logs and records), so a node outlives the command that
// started it and `down` from another shell stops it. What runs inside (pods, their shims, its
// cgroups, mounts, the bridge) is cleaned up on down as well. Left, as on any machine that ran a
// kubelet: its host-wide iptables chains (KUBE-FIREWALL drops packets to 127/8 from other
// sources, which the lab never sends; KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT).
import { execFile, spawn } from 'node:child_process';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';
import { issueCert, type KeyPairFiles } from '../openssl.js';
import { LabError } from '../lab/errors.js';
import { findProcesses } from '../lab/procfs.js';
import { Supervisor, logTail, type ProcRecord } from '../lab/supervisor.js';
import { ensureCgroupRoot, removeCgroupRoot } from './cgroups.js';
import { containerdConfig, cniConflist, kubeletArgs, kubeletConfiguration, nodeCgroupRoot, nodePaths, type NodeSpec } from './config.js';

const run = promisify(execFile);

export interface NodeProcRecord extends ProcRecord {
  readonly kind: 'containerd' | 'kubelet';
}

export interface NodeBinaries {
  readonly kubelet: string;
  readonly containerd: string;
  /** ctr, containerd's own client: imports images, lists tasks. */
  readonly ctr: string;
}

export interface NodeOptions {
  readonly spec: Omit<NodeSpec, 'servingCertFile' | 'servingKeyFile'>;
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
    this.spec = { ...o.spec, servingCertFile: join(dir, 'pki', 'kubelet.crt'), servingKeyFile: join(dir, 'pki', 'kubelet.key') };
    this.paths = nodePaths(dir);
    this.log = o.log ?? (() => undefined);
    this.procs = new Supervisor<NodeProcRecord>({
      runDir: join(dir, 'run'),
      logDir: join(dir, 'logs'),
      cwd: dir,
      log: this.log,
      carriesMarker: (argv) => argv.includes(`--config=${this.paths.kubeletConfig}`) || argv.includes(this.paths.containerdConfig),
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
    await issueCert({
      dir: join(s.dir, 'pki'),
      name: 'kubelet',
      subject: `/CN=${s.name}`,
      usage: 'server',
      ca: this.o.ca,
      sans: [`IP:${s.ip}`, `DNS:${s.name}`],
    });
    await writeFile(p.containerdConfig, containerdConfig(s));
    await writeFile(join(p.cniConfDir, '10-skewgate-lab.conflist'), `${JSON.stringify(cniConflist(s), null, 2)}\n`);
    await writeFile(p.kubeletConfig, stringify(kubeletConfiguration(s)));

    const containerd = await this.procs.spawn({
      name: `${s.name}-containerd`,
      kind: 'containerd',
      cmd: this.o.binaries.containerd,
      args: ['--config', p.containerdConfig],
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
      cmd: this.o.binaries.kubelet,
      args: kubeletArgs(s),
      marker: `--config=${p.kubeletConfig}`,
      extra: {},
    });
    await this.procs.waitFor(kubelet, timeoutMs, async () => {
      const r = await fetch(`http://${s.ip}:${s.kubeletPort + 1}/healthz`).catch(() => null);
      return r?.status === 200 ? null : `kubelet healthz ${r?.status ?? 'not answering'}`;
    });
    this.log(`node ${s.name}: containerd and kubelet up (${s.ip}, pods ${s.podCidr})`);
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

  /** Places a static pod manifest in the kubelet's folder. */
  async addStaticPod(fileName: string, manifest: object): Promise<void> {
    await writeFile(join(this.paths.staticPods, fileName), stringify(manifest));
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
    await run('ip', ['link', 'delete', this.spec.bridge]).catch(() => undefined);
    this.procs.close();
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
    const mounts = (await readFile('/proc/self/mountinfo', 'utf8'))
      .split('\n')
      .map((l) => l.split(' ')[4] ?? '')
      .filter((m) => m.startsWith(`${this.spec.dir}/`))
      .sort((a, b) => b.length - a.length);
    for (const m of mounts) await run('umount', ['-l', m]).catch(() => undefined);
  }

  /** Removes the node's folder after down(). */
  async remove(): Promise<void> {
    await this.down();
    await rm(this.spec.dir, { recursive: true, force: true });
  }

  async logTails(lines = 30): Promise<string> {
    const parts: string[] = [];
    for (const kind of ['containerd', 'kubelet'] as const) parts.push(`--- ${kind} ---\n${await logTail(this.logFile(kind), lines)}`);
    return parts.join('\n');
  }
}
