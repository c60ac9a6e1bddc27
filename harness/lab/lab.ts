// A real control plane on loopback: etcd, kube-apiservers of two versions, and gateways (Envoy,
// with or without skewgate) in front of them, started and stopped step by step. The processes are
// the supervisor's (supervisor.ts): detached, with pid files, so they outlive the `skewgate-lab lab
// up` process and `skewgate-lab lab down` from another shell can stop them; Lab.open() adopts the
// ones still running. Tests use the same detached processes (killOnExit guards a crashing test runner).
import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { checkServerIdentity } from 'node:tls';
import { Agent, request } from 'undici';
import { parse as parseYaml, stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { EXTPROC_CLUSTER, renderBootstrap } from '../../src/envoy/bootstrap.js';
import { HEALTH_PATH } from '../../src/constants.js';
import { writeSeedXds } from '../../src/envoy-runtime/xds-disk.js';
import { findEnvoyBinary } from '../../src/envoy-runtime/process.js';
import { packageRoot } from '../../src/util/package-root.js';
import { withoutExtProc } from '../baseline-envoy.js';
import {
  APISERVER_STOP_GRACE_MS,
  AUDIT_POLICY,
  apiServerArgs,
  apiServerUrl,
  etcdArgs,
  etcdUrl,
  type ApiServerSpec,
  LAB_ALIAS_PREFIX,
} from './flags.js';
import { labAddresses, type LabAddresses } from './addresses.js';
import { controllerManagerArgs, type ControllerManagerSpec } from './controller-manager.js';
import { certKubeconfig } from './kubeconfig.js';
import { schedulerArgs } from './scheduler.js';
import { LabError } from './errors.js';
import { gatewayConfigDocument, gatewayKubeconfig, type GatewayApiServer, type GatewayConfigInput } from './gateway-config.js';
import { assertPortFree, canConnect, ensureLoopbackAlias, freePort } from './net.js';
import { issuePeerChannelPki, PEER_SERVER_NAME } from './peer-pki.js';
import { SCHEDULER_USER, createLabPki, type LabPki, type LabPkiFiles } from './pki.js';
import { ensureLabRbac } from './rbac.js';
import { Supervisor, errorText, seconds, type ProcRecord } from './supervisor.js';
import { defaultLabDir, labBinary, labVersions } from './versions.js';

export { defaultLabDir, LabError };
export { freePort } from './net.js';
export { logTail } from './supervisor.js';

export interface LabOptions {
  /** Run dir (default `<package root>/.cache/lab`): PKI, pid files, logs, configs, etcd data. */
  readonly dir?: string;
  /** Progress lines (e.g. "kas-1 ready in 14.2 s"). */
  readonly log?: (line: string) => void;
  /** SIGKILL every process this Lab object started when the Node process exits (tests). */
  readonly killOnExit?: boolean;
  /** How long startApiServer waits for /readyz (default 90 s). */
  readonly apiServerReadyTimeoutMs?: number;
  /**
   * The lab's addresses and etcd ports (addresses.ts; default slot 0, `skewgate-lab lab up`'s): a
   * slot of its own (slots.ts claimLabSlot) lets labs run side by side. The serving certificates
   * name the slot's loopback addresses.
   */
  readonly addresses?: LabAddresses;
}

export interface GatewayOptions {
  readonly name: string;
  readonly withSkewgate: boolean;
  readonly port: number;
  /** skewgate's `telemetry` config section (tracing, metrics), e.g. to export to a lab Jaeger. */
  readonly telemetry?: Readonly<Record<string, unknown>>;
  /** Envoy's apiserver clusters and routes through filesystem xDS (implied by membershipSources). */
  readonly xds?: boolean;
  /** skewgate learns apiservers from these sources (membership.sources); the started ones are the seed. */
  readonly membershipSources?: readonly ('nodes' | 'endpointSlice')[];
  /**
   * Envoy's listen address: 127.0.0.1 (default), another of the lab certificate's 127.0.0.1-16, or
   * an alias address (flags.ts LAB_ALIAS_PREFIX, verified by the name kubernetes), which may be an
   * Endpoints address where a loopback one may not.
   */
  readonly address?: string;
  /** The gateway publishes itself as an endpoint of the kubernetes Service (kubernetesService.publish). */
  readonly publishService?: { readonly leaseDuration: string };
  /**
   * A second skewgate, as another control-plane node's would be, in Envoy's ext_proc cluster
   * behind the local one (envoy.extprocPeers, priority 1, mutual TLS with certificates of its own:
   * peer-pki.ts); `skewgate-<name>-peer`. Needs withSkewgate.
   */
  readonly peerSkewgate?: boolean;
  /** The gateway's health listener (envoy.health, GET /ready) on 127.0.0.1, a free port. */
  readonly healthListener?: boolean;
  /** envoy.requestTimeout, e.g. "5s" (default 65 s): how long Envoy waits for a bounded request. */
  readonly requestTimeout?: string;
  /**
   * The gateway's own TLS files instead of the lab PKI's (default): e.g. copies a test renews in
   * place, so that the lab's set stays as it was made.
   */
  readonly tlsFiles?: GatewayTlsFiles;
  /**
   * routing.fastPath (skewgate's default: true). The fast path needs xds (or membershipSources):
   * on with xds, what every apiserver serves alike skips ext_proc; false, or without xds, skewgate
   * judges every request.
   */
  readonly fastPath?: boolean;
  /** log.decisions.interval 0s: every routed or refused decision on its own line (tests that explain a false 404 by it). */
  readonly logEveryDecision?: boolean;
  /**
   * skewgate's admin endpoint (a unix socket in the gateway's folder: GatewayInfo.adminAddress) with
   * this gate section (`gate`: window, thresholds), and Envoy's admin on a fixed port the gate reads.
   */
  readonly operator?: { readonly gate: Readonly<Record<string, unknown>> };
}

/** Envoy's serving pair, the client CA bundle it and skewgate verify against, and its front-proxy pair. */
export type GatewayTlsFiles = Partial<
  Pick<LabPkiFiles, 'gatewayCertFile' | 'gatewayKeyFile' | 'frontProxyClientCertFile' | 'frontProxyClientKeyFile'> & {
    readonly clientCaFile: string;
  }
>;

/** Which of a gateway's skewgates: its own, or the peer (GatewayOptions.peerSkewgate). */
export type SkewgateRole = 'local' | 'peer';

export interface GatewayInfo {
  readonly url: string;
  readonly kubeconfigFile: string;
  /** skewgate's config (usable with `skewgate explain|skew|validate`). */
  readonly configFile: string;
  readonly envoyAdminUrl: string;
  /** GET <healthUrl> is the health listener's /ready (with healthListener). */
  readonly healthUrl?: string;
  /** skewgate's admin endpoint (with operator): `skewgate gate|cordon|status --admin <this>`. */
  readonly adminAddress?: string;
}

export interface LabProcessStatus {
  readonly name: string;
  readonly pid: number | null;
  readonly alive: boolean;
  readonly detail: string;
}

type ProcKind = 'etcd' | 'kube-apiserver' | 'kube-controller-manager' | 'kube-scheduler' | 'skewgate' | 'envoy';

/** A lab process's record: the supervisor's, plus what the lab needs to find and describe it again. */
interface LabProcRecord extends ProcRecord {
  readonly kind: ProcKind;
  readonly url?: string;
  readonly apiserver?: ApiServerSpec;
  readonly gateway?: GatewayOptions & {
    readonly extprocListen?: string;
    readonly adminAddressFile?: string;
    /** The peer skewgate's host:port in Envoy's ext_proc cluster (with peerSkewgate). */
    readonly peerEndpoint?: string;
  };
}

const ETCD = 'etcd';
const SKEWGATE_MAIN_RELATIVE = 'dist/src/cli/main.js';
/** sun_path holds 108 bytes; longer socket paths fall back to a loopback TCP port. */
const MAX_UNIX_SOCKET_PATH = 100;

export class Lab {
  readonly dir: string;
  readonly pki: LabPki;
  private readonly runDir: string;
  private readonly logDir: string;
  private readonly procs: Supervisor<LabProcRecord>;
  /** Every apiserver named so far (stopped ones included): the gateway fronts all of them. */
  private readonly apiservers = new Map<string, ApiServerSpec>();
  private readonly agent: Agent;
  private readonly log: (line: string) => void;
  private readonly readyTimeoutMs: number;
  private readonly etcdPorts: { readonly client: number; readonly peer: number };

  private constructor(dir: string, pki: LabPki, ca: string, opts: LabOptions) {
    this.dir = dir;
    this.pki = pki;
    this.runDir = join(dir, 'run');
    this.logDir = join(dir, 'logs');
    this.log = opts.log ?? (() => undefined);
    this.readyTimeoutMs = opts.apiServerReadyTimeoutMs ?? 90_000;
    const addresses = opts.addresses ?? labAddresses(0);
    this.etcdPorts = { client: addresses.etcdClientPort, peer: addresses.etcdPeerPort };
    // An alias address is not in slot 0's serving certificate (its IP SANs are 127.0.0.1-16): such an
    // apiserver is verified by the DNS SAN `kubernetes`, as kubeadm's apiservers are.
    this.agent = new Agent({
      connect: {
        ca,
        checkServerIdentity: (host, cert) => checkServerIdentity(host.startsWith(LAB_ALIAS_PREFIX) ? 'kubernetes' : host, cert),
      },
    });
    this.procs = new Supervisor<LabProcRecord>({
      runDir: this.runDir,
      logDir: this.logDir,
      cwd: dir,
      log: this.log,
      carriesMarker: (argv) => this.carriesMarker(argv),
      killOnExit: opts.killOnExit === true,
    });
  }

  /** Creates the run dir and PKI (reused when complete) and adopts processes still running. */
  static async open(opts: LabOptions = {}): Promise<Lab> {
    const dir = resolve(opts.dir ?? defaultLabDir());
    await mkdir(join(dir, 'run'), { recursive: true });
    await mkdir(join(dir, 'logs'), { recursive: true });
    const slot = opts.addresses?.slot ?? 0;
    // Slot 0's loopback addresses are in LAB_SANS already (and its PKI is the one `lab up` made).
    const pki = await createLabPki(join(dir, 'pki'), slot === 0 ? {} : { extraSans: opts.addresses?.sans ?? [] });
    const lab = new Lab(dir, pki, await readFile(pki.caFile, 'utf8'), opts);
    await lab.init();
    return lab;
  }

  private async init(): Promise<void> {
    await writeFile(join(this.dir, 'audit-policy.yaml'), AUDIT_POLICY);
    await this.procs.adopt();
    try {
      const known = JSON.parse(await readFile(this.apiserversFile(), 'utf8')) as ApiServerSpec[];
      for (const s of known) this.apiservers.set(s.name, s);
    } catch {
      // none named yet
    }
  }

  // ---- etcd --------------------------------------------------------------------------------

  /**
   * Starts etcd with a fresh data dir (or returns the URL of the one running); waits until
   * healthy. keepData: start it again on the data it had (after stopEtcd), as a restarted etcd would.
   */
  async startEtcd(o: { readonly keepData?: boolean } = {}): Promise<string> {
    const running = await this.procs.alive(ETCD);
    if (running?.url !== undefined) return running.url;
    const spec = {
      name: 'lab',
      dataDir: join(this.dir, 'etcd-data'),
      ip: '127.0.0.1',
      clientPort: this.etcdPorts.client,
      peerPort: this.etcdPorts.peer,
    };
    // Otherwise the health check could pass against somebody else's etcd while ours fails to bind.
    await assertPortFree(spec.ip, spec.clientPort, 'etcd client');
    await assertPortFree(spec.ip, spec.peerPort, 'etcd peer');
    if (o.keepData !== true) await rm(spec.dataDir, { recursive: true, force: true });
    const url = etcdUrl(spec);
    const started = Date.now();
    const bin = labBinary('etcd', labVersions().etcd);
    const rec = await this.procs.spawn({
      name: ETCD,
      kind: 'etcd',
      cmd: bin,
      args: etcdArgs(spec),
      marker: `--data-dir=${spec.dataDir}`,
      extra: { url },
    });
    await this.procs.waitFor(rec, 30_000, async () => {
      const res = await this.get(`${url}/health`, undefined, 1000);
      return res.status === 200 && /"health":\s*"true"/.test(res.body) ? null : `/health: ${res.status} ${res.body.slice(0, 200)}`;
    });
    this.log(`etcd ready at ${url} in ${seconds(Date.now() - started)}`);
    return url;
  }

  /** SIGTERM (SIGKILL after 10 s); resolves once etcd is gone. Its data stays for startEtcd({ keepData: true }). */
  async stopEtcd(): Promise<void> {
    await this.procs.stop(ETCD, 10_000);
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
    const etcd = await this.procs.alive(ETCD);
    if (etcd?.url === undefined) throw new LabError('etcd is not running: call startEtcd() first');
    const running = await this.procs.alive(spec.name);
    if (running !== undefined) {
      if (running.apiserver === undefined || !sameSpec(running.apiserver, spec)) {
        throw new LabError(
          `${spec.name} is already running with another spec (${running.apiserver?.version ?? '?'} at ${running.url ?? '?'}): stop it first`,
        );
      }
    } else {
      for (const p of this.procs.records()) {
        if (p.apiserver && p.apiserver.ip === spec.ip && p.apiserver.port === spec.port && p.name !== spec.name) {
          throw new LabError(`${p.name} already serves ${apiServerUrl(spec)}: stop it before starting ${spec.name} there`);
        }
      }
      const bin = labBinary('kube-apiserver', spec.version);
      if (spec.placement === 'alias') await ensureLoopbackAlias(spec.ip);
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
      await this.procs.spawn({
        name: spec.name,
        kind: 'kube-apiserver',
        cmd: 'unshare',
        args: ['--uts', 'sh', '-c', 'hostname "$1" && shift && exec "$@"', 'sh', spec.name, bin, ...args],
        marker: `--cert-dir=${certDir}`,
        extra: { url: apiServerUrl(spec), apiserver: spec },
      });
    }
    const rec = this.procs.record(spec.name) as LabProcRecord;
    const started = Date.now();
    await this.procs.waitFor(rec, this.readyTimeoutMs, async () => {
      const res = await this.get(`${apiServerUrl(spec)}/readyz`, this.pki.adminToken, 2000);
      return res.status === 200
        ? null
        : `/readyz ${res.status}: ${res.body
            .split('\n')
            .filter((l) => l.includes('failed'))
            .join('; ')
            .slice(0, 300)}`;
    });
    if (running === undefined)
      this.log(`${spec.name} (v${spec.version}) ready at ${apiServerUrl(spec)} in ${seconds(Date.now() - started)}`);
    await this.ensureRbac(apiServerUrl(spec));
  }

  /**
   * SIGTERM, then SIGKILL after graceMs (APISERVER_STOP_GRACE_MS); resolves once the process is gone (the
   * --shutdown-delay-duration window included: a stop takes at least SHUTDOWN_DELAY_MS). It stays
   * in the gateway's list.
   */
  async stopApiServer(name: string, graceMs = APISERVER_STOP_GRACE_MS): Promise<void> {
    if (!this.apiservers.has(name)) throw new LabError(`no apiserver named ${name} in this lab`);
    await this.procs.stop(name, graceMs);
  }

  /** SIGKILL, as a crash would (no --shutdown-delay-duration window); resolves once the process is gone. */
  async killApiServer(name: string): Promise<void> {
    if (!this.apiservers.has(name)) throw new LabError(`no apiserver named ${name} in this lab`);
    await this.procs.kill(name);
  }

  // ---- gateways ----------------------------------------------------------------------------

  /**
   * Envoy in front of every apiserver named so far; with skewgate as its ext_proc service, or
   * (withSkewgate false) the same bootstrap without the ext_proc filter: plain balancing, the
   * baseline. A gateway of the same name is replaced. Waits until Envoy sees the apiservers
   * (and skewgate) healthy.
   */
  /** Several gateways side by side (each waits for its own processes, not for the others'). */
  async startGateways<K extends string>(opts: Readonly<Record<K, GatewayOptions>>): Promise<Record<K, GatewayInfo>> {
    const entries = Object.entries(opts) as [K, GatewayOptions][];
    const infos = await Promise.all(entries.map(([, o]) => this.startGateway(o)));
    return Object.fromEntries(entries.map(([k], i) => [k, infos[i]])) as Record<K, GatewayInfo>;
  }

  async startGateway(o: GatewayOptions): Promise<GatewayInfo> {
    if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(o.name)) throw new LabError(`gateway name "${o.name}" must be a DNS label`);
    const specs = this.apiServerSpecs();
    if (specs.length === 0) throw new LabError('start at least one apiserver before a gateway');
    await this.stopGateway(o.name);
    const address = o.address ?? '127.0.0.1';
    if (address.startsWith(LAB_ALIAS_PREFIX)) await ensureLoopbackAlias(address);
    await assertPortFree(address, o.port, `gateway ${o.name}`);
    const upstreams: GatewayApiServer[] = specs.map((s) => ({ name: s.name, url: apiServerUrl(s) }));
    const alive: string[] = [];
    for (const s of specs) if (await this.procs.alive(s.name)) alive.push(s.name);
    const first = alive[0];
    if (first === undefined) throw new LabError('no apiserver is running');
    await this.ensureRbac(this.apiServerUrl(first));

    const gwDir = join(this.runDir, `gateway-${o.name}`);
    await rm(gwDir, { recursive: true, force: true });
    await mkdir(gwDir, { recursive: true });
    const socket = join(gwDir, 'extproc.sock');
    const extprocListen = socket.length <= MAX_UNIX_SOCKET_PATH ? `unix:${socket}` : `127.0.0.1:${await freePort()}`;
    const configFile = join(gwDir, 'skewgate.yaml');
    const xdsDir = o.xds === true || o.membershipSources !== undefined ? join(gwDir, 'xds') : undefined;
    if (o.peerSkewgate === true && (!o.withSkewgate || xdsDir !== undefined || o.publishService !== undefined)) {
      // The peer would write the same xDS files and publish the same Service as this gateway's own skewgate.
      throw new LabError(`gateway ${o.name}: peerSkewgate needs withSkewgate, and neither xds, membershipSources nor publishService`);
    }
    const peer = o.peerSkewgate === true ? await this.peerChannel(gwDir) : undefined;
    const healthPort = o.healthListener === true ? await freePort() : undefined;
    const adminAddress = o.operator === undefined ? undefined : `unix:${join(gwDir, 'admin.sock')}`;
    const operator =
      o.operator === undefined || adminAddress === undefined
        ? undefined
        : { adminListen: adminAddress, envoyAdminPort: await freePort(), gate: o.operator.gate };
    const { clientCaFile, ...pairs } = o.tlsFiles ?? {};
    const input: GatewayConfigInput = {
      pki: { ...this.pki, ...pairs },
      ...(clientCaFile === undefined ? {} : { clientCaFile }),
      apiservers: upstreams,
      extprocListen,
      port: o.port,
      ...(o.telemetry === undefined ? {} : { telemetry: o.telemetry }),
      ...(xdsDir === undefined ? {} : { xdsDir }),
      ...(o.membershipSources === undefined ? {} : { membershipSources: o.membershipSources }),
      ...(operator === undefined ? {} : { operator }),
      ...(o.address === undefined ? {} : { address: o.address }),
      ...(o.publishService === undefined ? {} : { publishService: { gatewayName: o.name, leaseDuration: o.publishService.leaseDuration } }),
      ...(peer === undefined ? {} : { extprocPeers: peer.envoySide }),
      ...(healthPort === undefined ? {} : { healthPort }),
      ...(o.requestTimeout === undefined ? {} : { requestTimeout: o.requestTimeout }),
      ...(o.fastPath === undefined ? {} : { fastPath: o.fastPath }),
      ...(o.logEveryDecision === true ? { logEveryDecision: true } : {}),
    };
    const doc = gatewayConfigDocument(input);
    await writeFile(configFile, `# written by skewgate's lab (${new Date().toISOString()})\n${stringify(doc)}`);
    const config = parseConfig(doc, configFile, gwDir);
    const bootstrap = o.withSkewgate ? renderBootstrap(config) : withoutExtProc(renderBootstrap(config));
    const bootstrapFile = join(gwDir, 'envoy.yaml');
    await writeFile(bootstrapFile, stringify(bootstrap, { lineWidth: 0 }));
    // What `skewgate envoy-config` does: the seed cluster and route files Envoy starts from.
    writeSeedXds(config);
    const url = `https://${address}:${o.port}`;

    if (o.withSkewgate) await this.spawnSkewgate(o, configFile, extprocListen);
    if (peer !== undefined) {
      // Node 2's skewgate: the same apiservers, its own ext_proc socket, and the peer listener.
      const peerDoc = gatewayConfigDocument({ ...input, extprocListen: peer.extprocListen, peerListener: peer.listener });
      await mkdir(dirname(peer.configFile), { recursive: true });
      await writeFile(peer.configFile, `# written by skewgate's lab (${new Date().toISOString()})\n${stringify(peerDoc)}`);
      await this.spawnSkewgate(o, peer.configFile, peer.listener.listen, 'peer');
    }

    const adminAddressFile = join(gwDir, 'envoy-admin-address');
    const envoy = await this.procs.spawn({
      name: `envoy-${o.name}`,
      kind: 'envoy',
      cmd: findEnvoyBinary(),
      // Access log lines reach the log file within 0.2 s instead of Envoy's default 10 s.
      args: [
        '-c',
        bootstrapFile,
        '--log-level',
        'warn',
        '--disable-hot-restart',
        '--file-flush-interval-msec',
        '200',
        '--admin-address-path',
        adminAddressFile,
        '--use-dynamic-base-id',
        '--base-id-path',
        join(gwDir, 'envoy-base-id'),
      ],
      marker: bootstrapFile,
      extra: { url, gateway: { ...o, adminAddressFile, ...(peer === undefined ? {} : { peerEndpoint: peer.listener.listen }) } },
    });
    const adminUrl = await this.waitEnvoyHealthy(envoy, adminAddressFile, [...alive, ...(o.withSkewgate ? [EXTPROC_CLUSTER] : [])]);
    if (peer !== undefined) await this.waitExtprocHost(envoy, 'peer', true);

    const kubeconfigFile = join(gwDir, 'kubeconfig');
    await writeFile(kubeconfigFile, stringify(gatewayKubeconfig({ pki: this.pki, gatewayUrl: url, apiservers: upstreams })), {
      mode: 0o600,
    });
    this.log(`gateway ${o.name} (${o.withSkewgate ? 'Envoy + skewgate' : 'plain Envoy, no ext_proc'}) at ${url}`);
    return {
      url,
      kubeconfigFile,
      configFile,
      envoyAdminUrl: adminUrl,
      ...(healthPort === undefined ? {} : { healthUrl: `http://127.0.0.1:${healthPort}${HEALTH_PATH}` }),
      ...(adminAddress === undefined ? {} : { adminAddress }),
    };
  }

  /**
   * Starts kube-controller-manager (the harm controllers, controller-manager.ts) against
   * `spec.kubeconfig`: a gateway's, to watch what it does behind it. Resolves once it runs; its
   * log is logFile(spec.name).
   */
  async startControllerManager(spec: ControllerManagerSpec): Promise<void> {
    if (await this.procs.alive(spec.name)) throw new LabError(`${spec.name} is already running`);
    const rec = await this.procs.spawn({
      name: spec.name,
      kind: 'kube-controller-manager',
      cmd: labBinary('kube-controller-manager', spec.version),
      args: controllerManagerArgs(spec),
      marker: `--kubeconfig=${spec.kubeconfig}`,
      extra: {},
    });
    await this.procs.waitFor(rec, 30_000, async () => {
      // This run's part of the log (each start appends after a "==== <time> <command>" line).
      const all = await readFile(this.logFile(spec.name), 'utf8').catch(() => '');
      const log = all.slice(Math.max(0, all.lastIndexOf('\n==== ')));
      return log.includes('"Controller starting..." controller="garbage-collector-controller"')
        ? null
        : 'garbage collector not started yet';
    });
  }

  async stopControllerManager(name: string): Promise<void> {
    await this.procs.stop(name, 10_000);
  }

  /**
   * Starts kube-scheduler (scheduler.ts) as system:kube-scheduler (its certificate of the lab PKI)
   * against `server`, e.g. a gateway's URL. Resolves once it has started its informers.
   */
  async startScheduler(o: { readonly name: string; readonly version: string; readonly server: string }): Promise<void> {
    if (await this.procs.alive(o.name)) throw new LabError(`${o.name} is already running`);
    const kubeconfig = join(this.runDir, `${o.name}.kubeconfig`);
    const doc = certKubeconfig({
      cluster: 'lab',
      server: o.server,
      caFile: this.pki.caFile,
      user: SCHEDULER_USER,
      certFile: this.pki.schedulerCertFile,
      keyFile: this.pki.schedulerKeyFile,
    });
    await writeFile(kubeconfig, stringify(doc));
    const rec = await this.procs.spawn({
      name: o.name,
      kind: 'kube-scheduler',
      cmd: labBinary('kube-scheduler', o.version),
      args: schedulerArgs({ name: o.name, version: o.version, kubeconfig }),
      marker: `--kubeconfig=${kubeconfig}`,
      extra: {},
    });
    await this.procs.waitFor(rec, 30_000, async () => {
      const all = await readFile(this.logFile(o.name), 'utf8').catch(() => '');
      return all.slice(Math.max(0, all.lastIndexOf('\n==== '))).includes('Starting Kubernetes Scheduler')
        ? null
        : 'scheduler not started yet';
    });
  }

  async stopScheduler(name: string): Promise<void> {
    await this.procs.stop(name, 10_000);
  }

  /**
   * Stops only the gateway's skewgate: its Envoy keeps running and, with the lab's fail-open
   * config, keeps balancing (docs/design.md, invariant 4). Resolves once Envoy's health check marks it down.
   */
  async stopSkewgate(name: string): Promise<void> {
    const envoy = await this.gatewayEnvoy(name);
    await this.procs.stop(skewgateName(name, 'local'), 10_000);
    if (envoy.gateway.peerEndpoint !== undefined) {
      await this.waitExtprocHost(envoy, 'local', false);
      return;
    }
    await this.procs.waitFor(envoy, 30_000, async () => {
      const clusters = await this.get(`${await this.envoyAdminUrl(envoy)}/clusters`, undefined, 1000);
      return healthyIn(clusters.body, EXTPROC_CLUSTER) ? `${EXTPROC_CLUSTER} still healthy in Envoy` : null;
    });
  }

  /** SIGKILL of one of a gateway's skewgates, as a crash would; resolves once the process is gone (not waiting for Envoy). */
  async killSkewgate(name: string, role: SkewgateRole = 'local'): Promise<void> {
    await this.gatewayEnvoy(name);
    await this.procs.kill(skewgateName(name, role));
  }

  /** Starts one of the gateway's skewgates again (same config); resolves once Envoy sees it healthy. */
  async startSkewgate(name: string, role: SkewgateRole = 'local'): Promise<void> {
    const envoy = await this.gatewayEnvoy(name);
    if (envoy.gateway.withSkewgate !== true) throw new LabError(`gateway ${name} runs without skewgate`);
    if (role === 'peer' && envoy.gateway.peerEndpoint === undefined) throw new LabError(`gateway ${name} runs without a peer skewgate`);
    if (await this.procs.alive(skewgateName(name, role))) throw new LabError(`${skewgateName(name, role)} is already running`);
    const gwDir = join(this.runDir, `gateway-${name}`);
    const configFile = role === 'local' ? join(gwDir, 'skewgate.yaml') : peerConfigFile(gwDir);
    const config = parseConfig(parseYaml(await readFile(configFile, 'utf8')), configFile, gwDir);
    const { adminAddressFile, extprocListen: _, peerEndpoint, ...opts } = envoy.gateway;
    await this.spawnSkewgate(opts, configFile, role === 'local' ? config.extproc.listen : (config.extproc.peer?.listen ?? ''), role);
    if (peerEndpoint !== undefined) await this.waitExtprocHost(envoy, role, true);
    else await this.waitEnvoyHealthy(envoy, adminAddressFile ?? '', [EXTPROC_CLUSTER]);
  }

  /** Each host of the gateway's ext_proc cluster as Envoy's /clusters shows it: its health flags ("healthy", "/failed_active_hc" …). */
  async extprocHosts(name: string): Promise<ReadonlyMap<SkewgateRole, string>> {
    return this.extprocHostFlags(await this.gatewayEnvoy(name));
  }

  /** Stops a gateway's Envoy and skewgate (no-op when not running). */
  async stopGateway(name: string): Promise<void> {
    await this.procs.stop(`envoy-${name}`, 5000);
    await this.procs.stop(skewgateName(name, 'local'), 10_000);
    await this.procs.stop(skewgateName(name, 'peer'), 10_000);
  }

  // ---- status and teardown -----------------------------------------------------------------

  async status(): Promise<LabProcessStatus[]> {
    const rows: LabProcessStatus[] = [];
    const etcd = await this.procs.alive(ETCD);
    if (etcd)
      rows.push({
        name: ETCD,
        pid: etcd.pid,
        alive: true,
        detail: `v${labVersionsSafe()?.etcd ?? '?'} ${etcd.url ?? ''} ${await this.probe(`${etcd.url ?? ''}/health`, undefined)}`,
      });
    else rows.push({ name: ETCD, pid: null, alive: false, detail: 'not running' });
    for (const spec of this.apiservers.values()) {
      const rec = await this.procs.alive(spec.name);
      const url = apiServerUrl(spec);
      rows.push(
        rec
          ? {
              name: spec.name,
              pid: rec.pid,
              alive: true,
              detail: `v${rec.apiserver?.version ?? spec.version} ${url} /readyz ${await this.probe(`${url}/readyz`, this.pki.adminToken)}`,
            }
          : { name: spec.name, pid: null, alive: false, detail: `stopped (last: v${spec.version} ${url})` },
      );
    }
    const gatewayProcs = this.procs.records().filter((p) => p.kind === 'skewgate' || p.kind === 'envoy');
    gatewayProcs.sort((a, b) => (a.gateway?.name ?? '').localeCompare(b.gateway?.name ?? '') || a.kind.localeCompare(b.kind));
    for (const rec of gatewayProcs) {
      const ok = await this.procs.alive(rec.name);
      const detail =
        rec.kind === 'envoy'
          ? `${rec.gateway?.withSkewgate ? 'with skewgate' : 'baseline, no ext_proc'} ${rec.url ?? ''} kubeconfig ${join(this.runDir, `gateway-${rec.gateway?.name ?? ''}`, 'kubeconfig')}`
          : `ext_proc ${rec.gateway?.extprocListen ?? ''}`;
      rows.push({ name: rec.name, pid: ok ? rec.pid : null, alive: ok !== undefined, detail });
    }
    for (const rec of this.procs.records().filter((p) => p.kind === 'kube-controller-manager' || p.kind === 'kube-scheduler')) {
      const ok = await this.procs.alive(rec.name);
      rows.push({ name: rec.name, pid: ok ? rec.pid : null, alive: ok !== undefined, detail: `${rec.kind} log ${this.logFile(rec.name)}` });
    }
    return rows;
  }

  /**
   * Stops everything (gateways, apiservers, etcd): what this object tracks, records other Lab
   * objects wrote since, what this object spawned (even if dropped), then any process still
   * carrying one of this run dir's markers; verifies that nothing is left running.
   * kill: SIGKILL everything at once, for a teardown where a graceful stop is not what is tested
   * (each apiserver would otherwise wait out --shutdown-delay-duration, 10 s).
   */
  async down(o: { readonly kill?: boolean } = {}): Promise<void> {
    const order = [
      { kind: 'kube-scheduler', graceMs: 10_000 },
      { kind: 'kube-controller-manager', graceMs: 10_000 },
      { kind: 'envoy', graceMs: 5000 },
      { kind: 'skewgate', graceMs: 10_000 },
      { kind: 'kube-apiserver', graceMs: APISERVER_STOP_GRACE_MS },
      { kind: 'etcd', graceMs: 10_000 },
    ] as const;
    if (o.kill === true) await this.procs.stopAll(order, 0, 'SIGKILL');
    else await this.procs.stopAll(order, APISERVER_STOP_GRACE_MS);
    this.apiservers.clear();
    await this.procs.serialized(() => rm(this.apiserversFile(), { force: true }));
    await this.close();
  }

  /** Closes this object's HTTP connections; the processes keep running (see down()). */
  async close(): Promise<void> {
    this.procs.close();
    if (!this.agent.closed) await this.agent.close();
  }

  /** The log file of a process of this lab (whether or not it runs). */
  logFile(name: string): string {
    return this.procs.logFile(name);
  }

  /** An apiserver's audit log (metadata of every request; whether or not it runs). */
  auditLogFile(name: string): string {
    return join(this.logDir, `${name}.audit.log`);
  }

  // ---- internals ---------------------------------------------------------------------------

  /** `listen`: the address whose accepting means the process serves (its ext_proc socket, or the peer listener). */
  private async spawnSkewgate(o: GatewayOptions, configFile: string, extprocListen: string, role: SkewgateRole = 'local'): Promise<void> {
    const main = join(packageRoot(), SKEWGATE_MAIN_RELATIVE);
    if (!existsSync(main)) throw new LabError(`${main} is missing: run \`npm run build\` first`);
    const rec = await this.procs.spawn({
      name: skewgateName(o.name, role),
      kind: 'skewgate',
      cmd: process.execPath,
      args: [main, 'serve', '--config', configFile],
      marker: configFile,
      extra: { gateway: { ...o, extprocListen } },
    });
    // skewgate listens only after its first discovery round: connectable means it has views.
    await this.procs.waitFor(rec, 30_000, async () => ((await canConnect(extprocListen)) ? null : `${extprocListen} not accepting yet`));
  }

  /** The peer channel of a gateway with peerSkewgate: certificates, the peer's listener and config file, Envoy's side. */
  private async peerChannel(gwDir: string): Promise<{
    readonly configFile: string;
    readonly extprocListen: string;
    readonly listener: { readonly listen: string; readonly certFile: string; readonly keyFile: string; readonly clientCaFile: string };
    readonly envoySide: { endpoints: string[]; certFile: string; keyFile: string; caFile: string; serverName: string };
  }> {
    const pki = await issuePeerChannelPki(join(gwDir, 'peer-pki'));
    const listen = `127.0.0.1:${await freePort()}`;
    const socket = join(gwDir, 'peer', 'extproc.sock');
    return {
      configFile: peerConfigFile(gwDir),
      extprocListen: socket.length <= MAX_UNIX_SOCKET_PATH ? `unix:${socket}` : `127.0.0.1:${await freePort()}`,
      listener: { listen, certFile: pki.serving.certFile, keyFile: pki.serving.keyFile, clientCaFile: pki.ca.certFile },
      envoySide: {
        endpoints: [listen],
        certFile: pki.envoyClient.certFile,
        keyFile: pki.envoyClient.keyFile,
        caFile: pki.ca.certFile,
        serverName: PEER_SERVER_NAME,
      },
    };
  }

  private async extprocHostFlags(envoy: LabProcRecord): Promise<Map<SkewgateRole, string>> {
    const clusters = await this.get(`${await this.envoyAdminUrl(envoy)}/clusters`, undefined, 1000);
    const out = new Map<SkewgateRole, string>();
    for (const [host, flags] of hostHealthFlags(clusters.body, EXTPROC_CLUSTER))
      out.set(host === envoy.gateway?.peerEndpoint ? 'peer' : 'local', flags);
    return out;
  }

  /** Waits until Envoy's health check sees that skewgate healthy (or, healthy false, no longer healthy). */
  private async waitExtprocHost(envoy: LabProcRecord, role: SkewgateRole, healthy: boolean): Promise<void> {
    await this.procs.waitFor(envoy, 30_000, async () => {
      const flags = (await this.extprocHostFlags(envoy)).get(role) ?? 'absent';
      return (flags === 'healthy') === healthy ? null : `${role} skewgate in Envoy: ${flags}`;
    });
  }

  private async gatewayEnvoy(name: string): Promise<LabProcRecord & { gateway: NonNullable<LabProcRecord['gateway']> }> {
    const envoy = await this.procs.alive(`envoy-${name}`);
    if (envoy?.gateway === undefined) throw new LabError(`gateway ${name} is not running`);
    return envoy as LabProcRecord & { gateway: NonNullable<LabProcRecord['gateway']> };
  }

  private async envoyAdminUrl(envoy: LabProcRecord): Promise<string> {
    const addr = (await readFile(envoy.gateway?.adminAddressFile ?? '', 'utf8').catch(() => '')).trim();
    if (addr === '') throw new LabError(`${envoy.name}: admin address not written yet`);
    return `http://${addr}`;
  }

  /** Waits until Envoy is ready and sees every cluster of `mustBeHealthy` healthy; returns its admin URL. */
  private async waitEnvoyHealthy(envoy: LabProcRecord, adminAddressFile: string, mustBeHealthy: readonly string[]): Promise<string> {
    let adminUrl = '';
    await this.procs.waitFor(envoy, 30_000, async () => {
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
    return this.procs.serialized(() =>
      this.procs.writeAtomic(this.apiserversFile(), `${JSON.stringify([...this.apiservers.values()], null, 2)}\n`),
    );
  }

  /** An argument only this run dir's etcd, apiservers (and their exec chain), Envoys and skewgates carry. */
  private carriesMarker(argv: readonly string[]): boolean {
    const gateways = `${this.runDir}/gateway-`;
    return argv.some(
      (a) =>
        a.startsWith(`--cert-dir=${this.runDir}/`) ||
        a === `--data-dir=${join(this.dir, 'etcd-data')}` ||
        (a.startsWith(gateways) && (a.endsWith('/envoy.yaml') || a.endsWith('/skewgate.yaml'))),
    );
  }

  /** skewgate's discovery role and jane's Role, as the cluster admin (rbac.ts). */
  private ensureRbac(baseUrl: string): Promise<void> {
    return ensureLabRbac(baseUrl, (url, body) => this.send('POST', url, this.pki.adminToken, body));
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

  private async send(
    method: string,
    url: string,
    token: string | undefined,
    body: string | undefined,
    timeoutMs = 5000,
  ): Promise<{ status: number; body: string }> {
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

/** host → health flags of every host of `cluster` in Envoy's /clusters text. */
function hostHealthFlags(clustersText: string, cluster: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of clustersText.matchAll(new RegExp(`^${cluster}::(.+)::health_flags::(.*)$`, 'gm')))
    out.set(m[1] as string, m[2] as string);
  return out;
}

function skewgateName(gateway: string, role: SkewgateRole): string {
  return role === 'local' ? `skewgate-${gateway}` : `skewgate-${gateway}-peer`;
}

/** Under gateway-<name>/ and named skewgate.yaml, like the local one's: carriesMarker finds both. */
function peerConfigFile(gwDir: string): string {
  return join(gwDir, 'peer', 'skewgate.yaml');
}

function sameSpec(a: ApiServerSpec, b: ApiServerSpec): boolean {
  const key = (s: ApiServerSpec): string =>
    JSON.stringify([
      s.name,
      s.version,
      s.ip,
      s.port,
      s.runtimeConfig ?? null,
      Boolean(s.peerProxy),
      s.tracingConfigFile ?? null,
      s.extraArgs ?? [],
    ]);
  return key(a) === key(b);
}

function labVersionsSafe(): ReturnType<typeof labVersions> | undefined {
  try {
    return labVersions();
  } catch {
    return undefined;
  }
}
