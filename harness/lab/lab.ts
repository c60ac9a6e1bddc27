// A real control plane on loopback: etcd, kube-apiservers of two versions, and gateways (Envoy,
// with or without skewgate) in front of them. Every process is started detached (its own process
// group, stdout/stderr to a log file) with a pid file, so it outlives the `skewgate-lab lab up`
// process and `skewgate-lab lab down` from another shell can stop it; Lab.open() adopts the ones still
// running. Tests use the same detached processes (killOnExit guards a crashing test runner).
import { spawn } from 'node:child_process';
import { existsSync, openSync, closeSync } from 'node:fs';
import { mkdir, readdir, readFile, rename, rm, writeFile, open as openFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import { join, resolve } from 'node:path';
import { Agent, request } from 'undici';
import { parse as parseYaml, stringify } from 'yaml';
import { parseConfig } from '../../src/config.js';
import { EXTPROC_CLUSTER, renderBootstrap } from '../../src/envoy/bootstrap.js';
import { findEnvoyBinary } from '../../src/envoy/process.js';
import { packageRoot } from '../../src/package-root.js';
import { withoutExtProc } from '../baseline-envoy.js';
import { AUDIT_POLICY, ETCD_CLIENT_PORT, ETCD_PEER_PORT, apiServerArgs, apiServerUrl, etcdArgs, etcdUrl, type ApiServerSpec } from './flags.js';
import { JANE_NAMESPACE, gatewayConfigDocument, gatewayKubeconfig, labRbacObjects, type GatewayApiServer } from './gateway-config.js';
import { createLabPki, type LabPki } from './pki.js';
import { findProcesses, ownership, readBootId, readStat, type ProcIdentity } from './procfs.js';
import { defaultLabDir, labBinary, labVersions } from './versions.js';

export { defaultLabDir };

export interface LabOptions {
  /** Run dir (default `<package root>/.cache/lab`): PKI, pid files, logs, configs, etcd data. */
  readonly dir?: string;
  /** Progress lines (e.g. "kas-1 ready in 14.2 s"). */
  readonly log?: (line: string) => void;
  /** SIGKILL every process this Lab object started when the Node process exits (tests). */
  readonly killOnExit?: boolean;
  /** How long startApiServer waits for /readyz (default 90 s). */
  readonly apiServerReadyTimeoutMs?: number;
  /** etcd's ports on 127.0.0.1 (default 23790 and 23800): another pair lets two labs run side by side. */
  readonly etcdClientPort?: number;
  readonly etcdPeerPort?: number;
}

export interface GatewayOptions {
  readonly name: string;
  readonly withSkewgate: boolean;
  readonly port: number;
  /** skewgate's `telemetry` config section (tracing, metrics), e.g. to export to a lab Jaeger. */
  readonly telemetry?: Readonly<Record<string, unknown>>;
}

export interface GatewayInfo {
  readonly url: string;
  readonly kubeconfigFile: string;
  /** skewgate's config (usable with `skewgate explain|skew|validate`). */
  readonly configFile: string;
  readonly envoyAdminUrl: string;
}

export interface LabProcessStatus {
  readonly name: string;
  readonly pid: number | null;
  readonly alive: boolean;
  readonly detail: string;
}

type ProcKind = 'etcd' | 'kube-apiserver' | 'skewgate' | 'envoy';

/** The pid file's companion: enough to recognise, describe and stop the process from any shell. */
interface ProcRecord {
  readonly name: string;
  readonly kind: ProcKind;
  readonly pid: number;
  readonly startTime: string;
  readonly bootId?: string;
  readonly marker: string;
  readonly logFile: string;
  readonly startedAt: string;
  readonly url?: string;
  readonly apiserver?: ApiServerSpec;
  readonly gateway?: GatewayOptions & { readonly extprocListen?: string; readonly adminAddressFile?: string };
}

export class LabError extends Error {
  readonly code = 'SKEWGATE_ERR_LAB';
  constructor(message: string, readonly logTail?: string) {
    super(logTail === undefined ? message : `${message}\n--- log (tail) ---\n${logTail}`);
    this.name = 'LabError';
  }
}

const ETCD = 'etcd';
const RUN_HEADER = '====';
const SKEWGATE_MAIN_RELATIVE = 'dist/src/cli/main.js';
/** sun_path holds 108 bytes; longer socket paths fall back to a loopback TCP port. */
const MAX_UNIX_SOCKET_PATH = 100;
const APISERVER_STOP_GRACE_MS = 30_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** The last lines of a log file. */
export async function logTail(file: string, lines = 40): Promise<string> {
  try {
    const fh = await openFile(file, 'r');
    try {
      const { size } = await fh.stat();
      const len = Math.min(size, 16_384);
      const buf = Buffer.alloc(len);
      await fh.read(buf, 0, len, size - len);
      let text = buf.toString('utf8');
      // Logs are appended across runs: show only the latest run (spawnDetached writes the header).
      const header = text.lastIndexOf(`\n${RUN_HEADER}`);
      if (header >= 0) text = text.slice(header + 1);
      return text.split('\n').slice(-lines).join('\n');
    } finally {
      await fh.close();
    }
  } catch {
    return `(no log at ${file})`;
  }
}

export class Lab {
  readonly dir: string;
  readonly pki: LabPki;
  private readonly runDir: string;
  private readonly logDir: string;
  private readonly procs = new Map<string, ProcRecord>();
  /** Every apiserver named so far (stopped ones included): the gateway fronts all of them. */
  private readonly apiservers = new Map<string, ApiServerSpec>();
  /** Exit notes of the processes this object spawned (adopted ones are watched through /proc). */
  private readonly exits = new Map<number, string>();
  private readonly agent: Agent;
  private readonly log: (line: string) => void;
  private readonly readyTimeoutMs: number;
  private readonly etcdPorts: { readonly client: number; readonly peer: number };
  /**
   * Every process this object spawned, by pid, until it is known to be gone: down() stops these
   * even if a record was dropped, and killOnExit may kill only these.
   */
  private readonly started = new Map<number, ProcRecord>();
  private readonly killOnExitHook: (() => void) | undefined;
  /** Run-dir record writes, one at a time (parallel starts must not interleave them). */
  private writes: Promise<unknown> = Promise.resolve();
  private tmpSeq = 0;

  private constructor(dir: string, pki: LabPki, ca: string, opts: LabOptions) {
    this.dir = dir;
    this.pki = pki;
    this.runDir = join(dir, 'run');
    this.logDir = join(dir, 'logs');
    this.log = opts.log ?? (() => undefined);
    this.readyTimeoutMs = opts.apiServerReadyTimeoutMs ?? 90_000;
    this.etcdPorts = { client: opts.etcdClientPort ?? ETCD_CLIENT_PORT, peer: opts.etcdPeerPort ?? ETCD_PEER_PORT };
    this.agent = new Agent({ connect: { ca } });
    if (opts.killOnExit) {
      this.killOnExitHook = (): void => {
        for (const pid of this.started.keys()) if (!this.exits.has(pid)) signal(pid, 'SIGKILL');
      };
      process.on('exit', this.killOnExitHook);
    }
  }

  /** Creates the run dir and PKI (reused when complete) and adopts processes still running. */
  static async open(opts: LabOptions = {}): Promise<Lab> {
    const dir = resolve(opts.dir ?? defaultLabDir());
    await mkdir(join(dir, 'run'), { recursive: true });
    await mkdir(join(dir, 'logs'), { recursive: true });
    const pki = await createLabPki(join(dir, 'pki'));
    const lab = new Lab(dir, pki, await readFile(pki.caFile, 'utf8'), opts);
    await lab.init();
    return lab;
  }

  private async init(): Promise<void> {
    await writeFile(join(this.dir, 'audit-policy.yaml'), AUDIT_POLICY);
    await this.adoptRecords();
    try {
      const known = JSON.parse(await readFile(this.apiserversFile(), 'utf8')) as ApiServerSpec[];
      for (const s of known) this.apiservers.set(s.name, s);
    } catch {
      // none named yet
    }
  }

  // ---- etcd --------------------------------------------------------------------------------

  /** Starts etcd with a fresh data dir (or returns the URL of the one running); waits until healthy. */
  async startEtcd(): Promise<string> {
    const running = await this.alive(ETCD);
    if (running?.url !== undefined) return running.url;
    const spec = { name: 'lab', dataDir: join(this.dir, 'etcd-data'), ip: '127.0.0.1', clientPort: this.etcdPorts.client, peerPort: this.etcdPorts.peer };
    // Otherwise the health check could pass against somebody else's etcd while ours fails to bind.
    await assertPortFree(spec.ip, spec.clientPort, 'etcd client');
    await assertPortFree(spec.ip, spec.peerPort, 'etcd peer');
    await rm(spec.dataDir, { recursive: true, force: true });
    const url = etcdUrl(spec);
    const started = Date.now();
    const bin = labBinary('etcd', labVersions().etcd);
    const rec = await this.spawnDetached({ name: ETCD, kind: 'etcd', cmd: bin, args: etcdArgs(spec), marker: `--data-dir=${spec.dataDir}`, url });
    await this.waitFor(rec, 30_000, async () => {
      const res = await this.get(`${url}/health`, undefined, 1000);
      return res.status === 200 && /"health":\s*"true"/.test(res.body) ? null : `/health: ${res.status} ${res.body.slice(0, 200)}`;
    });
    this.log(`etcd ready at ${url} in ${seconds(Date.now() - started)}`);
    return url;
  }

  // ---- kube-apiservers ---------------------------------------------------------------------

  apiServerUrl(name: string): string {
    const spec = this.apiservers.get(name);
    if (spec === undefined) throw new LabError(`no apiserver named ${name} in this lab`);
    return apiServerUrl(spec);
  }

  /** Specs of every apiserver named so far, in start order. */
  apiServerSpecs(): readonly ApiServerSpec[] {
    return [...this.apiservers.values()];
  }

  /**
   * Starts kube-apiserver `spec.version` in a UTS namespace whose hostname is `spec.name`, and
   * waits for /readyz 200. A process of that name still running with the same spec is reused.
   */
  async startApiServer(spec: ApiServerSpec): Promise<void> {
    const etcd = await this.alive(ETCD);
    if (etcd?.url === undefined) throw new LabError('etcd is not running: call startEtcd() first');
    const running = await this.alive(spec.name);
    if (running !== undefined) {
      if (running.apiserver === undefined || !sameSpec(running.apiserver, spec)) {
        throw new LabError(`${spec.name} is already running with another spec (${running.apiserver?.version ?? '?'} at ${running.url ?? '?'}): stop it first`);
      }
    } else {
      for (const p of this.procs.values()) {
        if (p.apiserver && p.apiserver.ip === spec.ip && p.apiserver.port === spec.port && p.name !== spec.name) {
          throw new LabError(`${p.name} already serves ${apiServerUrl(spec)}: stop it before starting ${spec.name} there`);
        }
      }
      const bin = labBinary('kube-apiserver', spec.version);
      await assertPortFree(spec.ip, spec.port, spec.name);
      const certDir = join(this.runDir, spec.name, 'certs');
      await mkdir(certDir, { recursive: true });
      const args = apiServerArgs(spec, this.pki, etcd.url, {
        certDir,
        auditLog: this.auditLogFile(spec.name),
        auditPolicyFile: join(this.dir, 'audit-policy.yaml'),
      });
      this.apiservers.set(spec.name, spec);
      await this.saveApiServers();
      // unshare execs (no fork) and sh execs: the pid we record is kube-apiserver's own. Every
      // link of that chain carries the marker (and procfs.ts copes with the empty cmdline mid-exec).
      await this.spawnDetached({
        name: spec.name, kind: 'kube-apiserver', cmd: 'unshare',
        args: ['--uts', 'sh', '-c', 'hostname "$1" && shift && exec "$@"', 'sh', spec.name, bin, ...args],
        marker: `--cert-dir=${certDir}`, url: apiServerUrl(spec), apiserver: spec,
      });
    }
    const rec = this.procs.get(spec.name) as ProcRecord;
    const started = Date.now();
    await this.waitFor(rec, this.readyTimeoutMs, async () => {
      const res = await this.get(`${apiServerUrl(spec)}/readyz`, this.pki.adminToken, 2000);
      return res.status === 200 ? null : `/readyz ${res.status}: ${res.body.split('\n').filter((l) => l.includes('failed')).join('; ').slice(0, 300)}`;
    });
    if (running === undefined) this.log(`${spec.name} (v${spec.version}) ready at ${apiServerUrl(spec)} in ${seconds(Date.now() - started)}`);
    await this.ensureRbac(apiServerUrl(spec));
  }

  /** SIGTERM, then SIGKILL after 30 s; resolves once the process is gone. It stays in the gateway's list. */
  async stopApiServer(name: string): Promise<void> {
    if (!this.apiservers.has(name)) throw new LabError(`no apiserver named ${name} in this lab`);
    await this.stopProc(name, APISERVER_STOP_GRACE_MS);
  }

  // ---- gateways ----------------------------------------------------------------------------

  /**
   * Envoy in front of every apiserver named so far; with skewgate as its ext_proc service, or
   * (withSkewgate false) the same bootstrap without the ext_proc filter: plain balancing, the
   * baseline. A gateway of the same name is replaced. Waits until Envoy sees the apiservers
   * (and skewgate) healthy.
   */
  async startGateway(o: GatewayOptions): Promise<GatewayInfo> {
    if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(o.name)) throw new LabError(`gateway name "${o.name}" must be a DNS label`);
    const specs = this.apiServerSpecs();
    if (specs.length === 0) throw new LabError('start at least one apiserver before a gateway');
    await this.stopGateway(o.name);
    await assertPortFree('127.0.0.1', o.port, `gateway ${o.name}`);
    const upstreams: GatewayApiServer[] = specs.map((s) => ({ name: s.name, url: apiServerUrl(s) }));
    const alive: string[] = [];
    for (const s of specs) if (await this.alive(s.name)) alive.push(s.name);
    const first = alive[0];
    if (first === undefined) throw new LabError('no apiserver is running');
    await this.ensureRbac(this.apiServerUrl(first));

    const gwDir = join(this.runDir, `gateway-${o.name}`);
    await rm(gwDir, { recursive: true, force: true });
    await mkdir(gwDir, { recursive: true });
    const socket = join(gwDir, 'extproc.sock');
    const extprocListen = socket.length <= MAX_UNIX_SOCKET_PATH ? `unix:${socket}` : `127.0.0.1:${await freePort()}`;
    const configFile = join(gwDir, 'skewgate.yaml');
    const doc = gatewayConfigDocument({ pki: this.pki, apiservers: upstreams, extprocListen, port: o.port, ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }) });
    await writeFile(configFile, `# written by skewgate's lab (${new Date().toISOString()})\n${stringify(doc)}`);
    const config = parseConfig(doc, configFile, gwDir);
    const bootstrap = o.withSkewgate ? renderBootstrap(config) : withoutExtProc(renderBootstrap(config));
    const bootstrapFile = join(gwDir, 'envoy.yaml');
    await writeFile(bootstrapFile, stringify(bootstrap, { lineWidth: 0 }));
    const url = `https://127.0.0.1:${o.port}`;

    if (o.withSkewgate) await this.spawnSkewgate(o, configFile, extprocListen);

    const adminAddressFile = join(gwDir, 'envoy-admin-address');
    const envoy = await this.spawnDetached({
      name: `envoy-${o.name}`, kind: 'envoy', cmd: findEnvoyBinary(),
      // Access log lines reach the log file within 0.2 s instead of Envoy's default 10 s.
      args: ['-c', bootstrapFile, '--log-level', 'warn', '--disable-hot-restart', '--file-flush-interval-msec', '200', '--admin-address-path', adminAddressFile,
        '--use-dynamic-base-id', '--base-id-path', join(gwDir, 'envoy-base-id')],
      marker: bootstrapFile, url, gateway: { ...o, adminAddressFile },
    });
    const adminUrl = await this.waitEnvoyHealthy(envoy, adminAddressFile, [...alive, ...(o.withSkewgate ? [EXTPROC_CLUSTER] : [])]);

    const kubeconfigFile = join(gwDir, 'kubeconfig');
    await writeFile(kubeconfigFile, stringify(gatewayKubeconfig({ pki: this.pki, gatewayUrl: url, apiservers: upstreams })), { mode: 0o600 });
    this.log(`gateway ${o.name} (${o.withSkewgate ? 'Envoy + skewgate' : 'plain Envoy, no ext_proc'}) at ${url}`);
    return { url, kubeconfigFile, configFile, envoyAdminUrl: adminUrl };
  }

  /**
   * Stops only the gateway's skewgate: its Envoy keeps running and, with the lab's fail-open
   * config, keeps balancing (invariant 4). Resolves once Envoy's health check marks it down.
   */
  async stopSkewgate(name: string): Promise<void> {
    const envoy = await this.gatewayEnvoy(name);
    await this.stopProc(`skewgate-${name}`, 10_000);
    await this.waitFor(envoy, 30_000, async () => {
      const clusters = await this.get(`${await this.envoyAdminUrl(envoy)}/clusters`, undefined, 1000);
      return healthyIn(clusters.body, EXTPROC_CLUSTER) ? `${EXTPROC_CLUSTER} still healthy in Envoy` : null;
    });
  }

  /** Starts the gateway's skewgate again (same config); resolves once Envoy sees it healthy. */
  async startSkewgate(name: string): Promise<void> {
    const envoy = await this.gatewayEnvoy(name);
    if (envoy.gateway?.withSkewgate !== true) throw new LabError(`gateway ${name} runs without skewgate`);
    if (await this.alive(`skewgate-${name}`)) throw new LabError(`skewgate-${name} is already running`);
    const configFile = join(this.runDir, `gateway-${name}`, 'skewgate.yaml');
    const config = parseConfig(parseYaml(await readFile(configFile, 'utf8')), configFile, join(this.runDir, `gateway-${name}`));
    const { adminAddressFile, extprocListen: _, ...opts } = envoy.gateway;
    await this.spawnSkewgate(opts, configFile, config.extproc.listen);
    await this.waitEnvoyHealthy(envoy, adminAddressFile ?? '', [EXTPROC_CLUSTER]);
  }

  /** Stops a gateway's Envoy and skewgate (no-op when not running). */
  async stopGateway(name: string): Promise<void> {
    await this.stopProc(`envoy-${name}`, 5000);
    await this.stopProc(`skewgate-${name}`, 10_000);
  }

  // ---- status and teardown -----------------------------------------------------------------

  async status(): Promise<LabProcessStatus[]> {
    const rows: LabProcessStatus[] = [];
    const etcd = await this.alive(ETCD);
    if (etcd) rows.push({ name: ETCD, pid: etcd.pid, alive: true, detail: `v${labVersionsSafe()?.etcd ?? '?'} ${etcd.url ?? ''} ${await this.probe(`${etcd.url ?? ''}/health`, undefined)}` });
    else rows.push({ name: ETCD, pid: null, alive: false, detail: 'not running' });
    for (const spec of this.apiservers.values()) {
      const rec = await this.alive(spec.name);
      const url = apiServerUrl(spec);
      rows.push(rec
        ? { name: spec.name, pid: rec.pid, alive: true, detail: `v${rec.apiserver?.version ?? spec.version} ${url} /readyz ${await this.probe(`${url}/readyz`, this.pki.adminToken)}` }
        : { name: spec.name, pid: null, alive: false, detail: `stopped (last: v${spec.version} ${url})` });
    }
    const gatewayProcs = [...this.procs.values()].filter((p) => p.kind === 'skewgate' || p.kind === 'envoy');
    gatewayProcs.sort((a, b) => (a.gateway?.name ?? '').localeCompare(b.gateway?.name ?? '') || a.kind.localeCompare(b.kind));
    for (const rec of gatewayProcs) {
      const ok = await this.alive(rec.name);
      const detail = rec.kind === 'envoy'
        ? `${rec.gateway?.withSkewgate ? 'with skewgate' : 'baseline, no ext_proc'} ${rec.url ?? ''} kubeconfig ${join(this.runDir, `gateway-${rec.gateway?.name ?? ''}`, 'kubeconfig')}`
        : `ext_proc ${rec.gateway?.extprocListen ?? ''}`;
      rows.push({ name: rec.name, pid: ok ? rec.pid : null, alive: ok !== undefined, detail });
    }
    return rows;
  }

  /**
   * Stops everything (gateways, apiservers, etcd): what this object tracks, records other Lab
   * objects wrote since, what this object spawned (even if dropped), then any process still
   * carrying one of this run dir's markers; verifies that nothing is left running.
   */
  async down(): Promise<void> {
    await this.adoptRecords();
    const all = new Map<string, ProcRecord>();
    for (const p of [...this.procs.values(), ...this.started.values()]) all.set(`${p.pid}/${p.startTime}`, p);
    const byKind = (k: ProcKind): ProcRecord[] => [...all.values()].filter((p) => p.kind === k);
    const stop = (p: ProcRecord, graceMs: number): Promise<void> => this.stopRecord(p, graceMs);
    await Promise.all(byKind('envoy').map((p) => stop(p, 5000)));
    await Promise.all(byKind('skewgate').map((p) => stop(p, 10_000)));
    await Promise.all(byKind('kube-apiserver').map((p) => stop(p, APISERVER_STOP_GRACE_MS)));
    await Promise.all(byKind('etcd').map((p) => stop(p, 10_000)));
    const strays = await findProcesses((argv) => this.carriesMarker(argv));
    if (strays.length > 0) {
      this.log(`stopping ${strays.length} process(es) of ${this.dir} without a record: ${strays.map((p) => `pid ${p.pid} ${p.cmdline[0] ?? ''}`).join(', ')}`);
      const bootId = await readBootId();
      await Promise.all(strays.map((p) => this.terminate(`pid ${p.pid}`, {
        pid: p.pid, startTime: p.startTime, marker: p.cmdline.find((a) => this.carriesMarker([a])) ?? '', ...(bootId === null ? {} : { bootId }),
      }, APISERVER_STOP_GRACE_MS)));
    }
    const left: string[] = [];
    for (const p of all.values()) if ((await ownership(p)).verdict === 'ours') left.push(`${p.name} (pid ${p.pid})`);
    for (const p of await findProcesses((argv) => this.carriesMarker(argv))) left.push(`pid ${p.pid} (${p.cmdline.join(' ').slice(0, 120)})`);
    if (left.length > 0) throw new LabError(`still running after down: ${left.join(', ')}`);
    this.apiservers.clear();
    await this.serialized(() => rm(this.apiserversFile(), { force: true }));
    await this.close();
  }

  /** Closes this object's HTTP connections; the processes keep running (see down()). */
  async close(): Promise<void> {
    if (this.killOnExitHook) process.removeListener('exit', this.killOnExitHook);
    if (!this.agent.closed) await this.agent.close();
  }

  /** The log file of a process of this lab (whether or not it runs). */
  logFile(name: string): string {
    return join(this.logDir, `${name}.log`);
  }

  /** An apiserver's audit log (metadata of every request; whether or not it runs). */
  auditLogFile(name: string): string {
    return join(this.logDir, `${name}.audit.log`);
  }

  // ---- internals ---------------------------------------------------------------------------

  private async spawnSkewgate(o: GatewayOptions, configFile: string, extprocListen: string): Promise<void> {
    const main = join(packageRoot(), SKEWGATE_MAIN_RELATIVE);
    if (!existsSync(main)) throw new LabError(`${main} is missing: run \`npm run build\` first`);
    const rec = await this.spawnDetached({
      name: `skewgate-${o.name}`, kind: 'skewgate', cmd: process.execPath, args: [main, 'serve', '--config', configFile],
      marker: configFile, gateway: { ...o, extprocListen },
    });
    // skewgate listens only after its first discovery round: connectable means it has views.
    await this.waitFor(rec, 30_000, async () => ((await canConnect(extprocListen)) ? null : `${extprocListen} not accepting yet`));
  }

  private async gatewayEnvoy(name: string): Promise<ProcRecord & { gateway: NonNullable<ProcRecord['gateway']> }> {
    const envoy = await this.alive(`envoy-${name}`);
    if (envoy?.gateway === undefined) throw new LabError(`gateway ${name} is not running`);
    return envoy as ProcRecord & { gateway: NonNullable<ProcRecord['gateway']> };
  }

  private async envoyAdminUrl(envoy: ProcRecord): Promise<string> {
    const addr = (await readFile(envoy.gateway?.adminAddressFile ?? '', 'utf8').catch(() => '')).trim();
    if (addr === '') throw new LabError(`${envoy.name}: admin address not written yet`);
    return `http://${addr}`;
  }

  /** Waits until Envoy is ready and sees every cluster of `mustBeHealthy` healthy; returns its admin URL. */
  private async waitEnvoyHealthy(envoy: ProcRecord, adminAddressFile: string, mustBeHealthy: readonly string[]): Promise<string> {
    let adminUrl = '';
    await this.waitFor(envoy, 30_000, async () => {
      if (adminUrl === '') {
        const addr = (await readFile(adminAddressFile, 'utf8').catch(() => '')).trim();
        if (addr === '') return 'admin address not written yet';
        adminUrl = `http://${addr}`;
      }
      const ready = await this.get(`${adminUrl}/ready`, undefined, 1000);
      if (ready.status !== 200) return `/ready: ${ready.status} ${ready.body.trim()}`;
      const clusters = await this.get(`${adminUrl}/clusters`, undefined, 1000);
      const unhealthy = mustBeHealthy.filter((c) => !healthyIn(clusters.body, c));
      return unhealthy.length === 0 ? null : `not yet healthy in Envoy: ${unhealthy.join(', ')}`;
    });
    return adminUrl;
  }

  private apiserversFile(): string {
    return join(this.dir, 'apiservers.json');
  }

  /** The list as it is when the write's turn comes, so the last write carries every start. */
  private saveApiServers(): Promise<void> {
    return this.serialized(() => this.writeAtomic(this.apiserversFile(), `${JSON.stringify([...this.apiservers.values()], null, 2)}\n`));
  }

  /** Runs record writes one after another, in call order (a failed one does not block the next). */
  private serialized<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.writes.then(fn, fn);
    this.writes = run.catch(() => undefined);
    return run;
  }

  /** Readers (another Lab, another shell) see the old file or the new one, never half of one. */
  private async writeAtomic(file: string, text: string): Promise<void> {
    const tmp = `${file}.${process.pid}.${++this.tmpSeq}.tmp`;
    try {
      await writeFile(tmp, text);
      await rename(tmp, file);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  /** Takes over the records in the run dir whose process still runs; drops the others. */
  private async adoptRecords(): Promise<void> {
    for (const entry of await readdir(this.runDir)) {
      if (!entry.endsWith('.json')) continue;
      let rec: ProcRecord;
      try {
        rec = JSON.parse(await readFile(join(this.runDir, entry), 'utf8')) as ProcRecord;
      } catch {
        continue;
      }
      // A name this object tracks already: its own record wins (down() finds the other one by its marker).
      if (this.procs.has(rec.name)) continue;
      if ((await ownership(rec)).verdict === 'ours') this.procs.set(rec.name, rec);
      else await this.removeRecordFiles(rec.name);
    }
  }

  /** An argument only this run dir's etcd, apiservers (and their exec chain), Envoys and skewgates carry. */
  private carriesMarker(argv: readonly string[]): boolean {
    const gateways = `${this.runDir}/gateway-`;
    return argv.some((a) => a.startsWith(`--cert-dir=${this.runDir}/`)
      || a === `--data-dir=${join(this.dir, 'etcd-data')}`
      || (a.startsWith(gateways) && (a.endsWith('/envoy.yaml') || a.endsWith('/skewgate.yaml'))));
  }

  private async alive(name: string): Promise<ProcRecord | undefined> {
    const rec = this.procs.get(name);
    if (rec === undefined) return undefined;
    if ((this.started.has(rec.pid) && this.exits.has(rec.pid)) || (await ownership(rec)).verdict !== 'ours') return undefined;
    return rec;
  }

  private async spawnDetached(o: {
    name: string; kind: ProcKind; cmd: string; args: readonly string[]; marker: string;
    url?: string; apiserver?: ApiServerSpec; gateway?: ProcRecord['gateway'];
  }): Promise<ProcRecord> {
    if (await this.alive(o.name)) throw new LabError(`${o.name} is already running`);
    const logFile = this.logFile(o.name);
    const fd = openSync(logFile, 'a');
    let child;
    try {
      await writeFile(logFile, `\n${RUN_HEADER} ${new Date().toISOString()} ${o.cmd} ${o.args.join(' ')}\n`, { flag: 'a' });
      // detached: its own process group, so a Ctrl-C of `lab up` does not reach it.
      child = spawn(o.cmd, o.args, { detached: true, stdio: ['ignore', fd, fd], cwd: this.dir });
    } finally {
      closeSync(fd);
    }
    const pid = await new Promise<number>((res, rej) => {
      child.once('spawn', () => {
        this.exits.delete(child.pid as number); // a reused pid of an earlier child
        res(child.pid as number);
      });
      child.once('error', (err) => rej(new LabError(`cannot start ${o.name} (${o.cmd}): ${err.message}`)));
      child.once('exit', (code, sig) => {
        if (child.pid !== undefined) this.exits.set(child.pid, sig === null ? `exit code ${String(code)}` : `signal ${sig}`);
      });
    });
    child.unref();
    // Tracked before any await: whatever happens next, down() and killOnExit know this pid.
    const provisional: ProcRecord = { name: o.name, kind: o.kind, pid, startTime: '', marker: o.marker, logFile, startedAt: new Date().toISOString() };
    this.started.set(pid, provisional);
    const [stat, bootId] = await Promise.all([readStat(pid), readBootId()]);
    const rec: ProcRecord = {
      ...provisional, startTime: stat?.startTime ?? '',
      ...(bootId === null ? {} : { bootId }),
      ...(o.url === undefined ? {} : { url: o.url }),
      ...(o.apiserver === undefined ? {} : { apiserver: o.apiserver }),
      ...(o.gateway === undefined ? {} : { gateway: o.gateway }),
    };
    this.started.set(pid, rec);
    this.procs.set(o.name, rec);
    await this.serialized(async () => {
      await this.writeAtomic(join(this.runDir, `${o.name}.pid`), `${pid}\n`);
      await this.writeAtomic(join(this.runDir, `${o.name}.json`), `${JSON.stringify(rec, null, 2)}\n`);
    });
    return rec;
  }

  /** Polls `check` (null = ready) until it passes; fails early, with the log tail, if the process dies. */
  private async waitFor(rec: ProcRecord, timeoutMs: number, check: () => Promise<string | null>): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last = 'not checked yet';
    for (;;) {
      // Liveness by pid + start time (procfs.ts): a process in the middle of an exec is still ours.
      let gone = this.started.has(rec.pid) ? this.exits.get(rec.pid) : undefined;
      if (gone === undefined) {
        const o = await ownership(rec);
        if (o.verdict !== 'ours') gone = o.detail;
      }
      if (gone !== undefined) {
        await this.forget(rec);
        throw new LabError(`${rec.name} exited before it was ready (${gone}); log: ${rec.logFile}`, await logTail(rec.logFile));
      }
      try {
        const problem = await check();
        if (problem === null) return;
        last = problem;
      } catch (err) {
        last = errorText(err);
      }
      if (Date.now() > deadline) {
        throw new LabError(`${rec.name} not ready within ${seconds(timeoutMs)} (${last}); log: ${rec.logFile}`, await logTail(rec.logFile));
      }
      await sleep(250);
    }
  }

  private async stopProc(name: string, graceMs: number): Promise<void> {
    const rec = this.procs.get(name);
    if (rec !== undefined) await this.stopRecord(rec, graceMs);
  }

  private async stopRecord(rec: ProcRecord, graceMs: number): Promise<void> {
    await this.terminate(rec.name, rec, graceMs);
    await this.forget(rec);
  }

  /** SIGTERM, SIGKILL after graceMs; resolves once the process is gone (no-op if it is). */
  private async terminate(label: string, id: ProcIdentity, graceMs: number): Promise<void> {
    const ours = async (): Promise<boolean> => (await ownership(id)).verdict === 'ours';
    if (!(await ours())) return;
    signal(id.pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while ((await ours()) && Date.now() < deadline) await sleep(100);
    if (!(await ours())) return;
    this.log(`${label} did not stop within ${seconds(graceMs)}: SIGKILL`);
    signal(id.pid, 'SIGKILL');
    const killDeadline = Date.now() + 5000;
    while ((await ours()) && Date.now() < killDeadline) await sleep(100);
    if (await ours()) throw new LabError(`${label} (pid ${id.pid}) survived SIGKILL`);
  }

  /** Drops the record of a process that is gone; one still running stays tracked, whatever the caller thought. */
  private async forget(rec: ProcRecord): Promise<void> {
    if ((await ownership(rec)).verdict === 'ours') {
      this.log(`${rec.name} (pid ${rec.pid}) still runs: it stays in the lab's records`);
      return;
    }
    if (this.started.get(rec.pid)?.startTime === rec.startTime) this.started.delete(rec.pid);
    const current = this.procs.get(rec.name);
    if (current !== undefined && current.pid !== rec.pid) return; // replaced meanwhile: keep the newer record
    this.procs.delete(rec.name);
    await this.removeRecordFiles(rec.name);
  }

  private removeRecordFiles(name: string): Promise<void> {
    return this.serialized(async () => {
      await rm(join(this.runDir, `${name}.pid`), { force: true });
      await rm(join(this.runDir, `${name}.json`), { force: true });
    });
  }

  /**
   * skewgate's token may list and watch CRDs and APIServices; jane may read configmaps in
   * `default` (stored in etcd: once per lab is enough).
   */
  private async ensureRbac(baseUrl: string): Promise<void> {
    // jane's Role lives in `default`: make sure it is there, whatever the apiserver's own bootstrap has done yet.
    const ns = await this.send('POST', `${baseUrl}/api/v1/namespaces`, this.pki.adminToken, JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name: JANE_NAMESPACE } }));
    if (ns.status !== 201 && ns.status !== 409) throw new LabError(`creating namespace ${JANE_NAMESPACE} on ${baseUrl}: ${ns.status} ${ns.body.slice(0, 300)}`);
    for (const { path, body } of labRbacObjects()) {
      const res = await this.send('POST', `${baseUrl}${path}`, this.pki.adminToken, JSON.stringify(body));
      if (res.status !== 201 && res.status !== 409) throw new LabError(`creating ${path} on ${baseUrl}: ${res.status} ${res.body.slice(0, 300)}`);
    }
  }

  private async probe(url: string, token: string | undefined): Promise<string> {
    try {
      const res = await this.get(url, token, 1000);
      return res.status === 200 ? 'ok' : `${res.status}`;
    } catch (err) {
      return errorText(err);
    }
  }

  private get(url: string, token: string | undefined, timeoutMs: number): Promise<{ status: number; body: string }> {
    return this.send('GET', url, token, undefined, timeoutMs);
  }

  private async send(method: string, url: string, token: string | undefined, body: string | undefined, timeoutMs = 5000): Promise<{ status: number; body: string }> {
    const res = await request(url, {
      method: method as 'GET',
      dispatcher: this.agent,
      headers: {
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return { status: res.statusCode, body: await res.body.text() };
  }
}

/** Envoy's /clusters text lists a healthy host of `cluster`. */
function healthyIn(clustersText: string, cluster: string): boolean {
  return new RegExp(`^${cluster}::[^\\n]*::health_flags::healthy$`, 'm').test(clustersText);
}

function sameSpec(a: ApiServerSpec, b: ApiServerSpec): boolean {
  const key = (s: ApiServerSpec): string => JSON.stringify([s.name, s.version, s.ip, s.port, s.runtimeConfig ?? null, Boolean(s.peerProxy), s.tracingConfigFile ?? null, s.extraArgs ?? []]);
  return key(a) === key(b);
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

function errorText(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return e.cause?.code ?? e.cause?.message ?? e.message ?? String(err);
}

function labVersionsSafe(): ReturnType<typeof labVersions> | undefined {
  try {
    return labVersions();
  } catch {
    return undefined;
  }
}

function canConnect(listen: string): Promise<boolean> {
  return new Promise((res) => {
    const m = /^(.*):(\d+)$/.exec(listen);
    const sock = listen.startsWith('unix:') ? connect(listen.slice(5)) : connect(Number(m?.[2]), m?.[1] ?? '127.0.0.1');
    sock.once('connect', () => { sock.destroy(); res(true); });
    sock.once('error', () => res(false));
  });
}

/** A clear error now rather than a process that dies on bind while a stranger answers our checks. */
async function assertPortFree(host: string, port: number, what: string): Promise<void> {
  const free = await new Promise<boolean>((res) => {
    const srv = createServer();
    srv.once('error', () => res(false));
    srv.listen({ host, port, exclusive: true }, () => srv.close(() => res(true)));
  });
  if (!free) throw new LabError(`${what}: ${host}:${port} is already in use (another lab? \`skewgate-lab lab status\`, or \`ss -ltnp\`)`);
}

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const srv = createServer();
    srv.once('error', rej);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => res(typeof addr === 'object' && addr !== null ? addr.port : 0));
    });
  });
}
