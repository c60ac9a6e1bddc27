// A plain TCP balancer in front of the lab's apiservers, as kubeadm's high-availability guide
// builds one (HAProxy in TCP mode): round robin, a TCP connect check every 2 s, out after 2
// failures, back after 2 successes — the check deploy/static-pods/README.md shows. It is Envoy with
// a tcp_proxy listener: TLS passes through, so every client, a kubelet's client certificate
// included, authenticates at the apiserver itself. The baseline a real node is compared against:
// what a node's kubelet sees today in front of a control plane being upgraded. Its pool is a file
// Envoy watches (EDS from a path): setUpstreams() changes it while connections stay, as an operator
// updates a load balancer when machines are replaced (new in once ready, old out before it goes).
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findEnvoyBinary } from '../../src/envoy-runtime/process.js';
import { canConnect, ensureLoopbackAlias } from './net.js';
import { LAB_ALIAS_PREFIX } from './flags.js';
import { Supervisor, logTail, type ProcRecord } from './supervisor.js';

export interface TcpBalancerOptions {
  readonly name: string;
  /** The listen address: an alias address (flags.ts LAB_ALIAS_PREFIX) is added to lo when absent. */
  readonly address: string;
  readonly port: number;
  readonly upstreams: readonly { readonly ip: string; readonly port: number }[];
  /** Its folder: bootstrap, pid file and record, log (the access log: one line per connection, as it ends). */
  readonly dir: string;
  readonly log?: (line: string) => void;
  readonly killOnExit?: boolean;
}

/** HAProxy's `inter 2s fall 2 rise 2` as an Envoy TCP health check. */
export const CHECK_INTERVAL_MS = 2000;
const CHECK_FALL = 2;
const CHECK_RISE = 2;
const CLUSTER = 'apiservers';

type Upstream = TcpBalancerOptions['upstreams'][number];
const socket = (address: string, port: number): object => ({ socket_address: { address, port_value: port } });

/** The pool file Envoy reads (a DiscoveryResponse of one ClusterLoadAssignment). Pure. */
export function tcpBalancerPool(upstreams: readonly Upstream[], version: number): object {
  return {
    version_info: String(version),
    resources: [
      {
        '@type': 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
        cluster_name: CLUSTER,
        endpoints: [{ lb_endpoints: upstreams.map((u) => ({ endpoint: { address: socket(u.ip, u.port) } })) }],
      },
    ],
  };
}

/** The Envoy bootstrap of the balancer, its pool read from `poolFile`. Pure. */
export function tcpBalancerBootstrap(o: Pick<TcpBalancerOptions, 'address' | 'port'>, poolFile: string): object {
  return {
    // A file-based xDS source needs the node's id and cluster.
    node: { id: 'tcp-balancer', cluster: 'lab' },
    admin: { address: socket('127.0.0.1', 0) },
    static_resources: {
      listeners: [
        {
          name: 'apiservers',
          address: socket(o.address, o.port),
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.tcp_proxy',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy',
                    stat_prefix: 'apiservers',
                    cluster: CLUSTER,
                    access_log: [
                      {
                        name: 'envoy.access_loggers.stdout',
                        typed_config: {
                          '@type': 'type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog',
                          log_format: {
                            json_format: {
                              start: '%START_TIME%',
                              duration_ms: '%DURATION%',
                              downstream: '%DOWNSTREAM_REMOTE_ADDRESS%',
                              upstream_host: '%UPSTREAM_HOST%',
                              flags: '%RESPONSE_FLAGS%',
                              bytes_received: '%BYTES_RECEIVED%',
                              bytes_sent: '%BYTES_SENT%',
                            },
                          },
                        },
                      },
                    ],
                  },
                },
              ],
            },
          ],
        },
      ],
      clusters: [
        {
          name: CLUSTER,
          type: 'EDS',
          eds_cluster_config: { eds_config: { path_config_source: { path: poolFile }, resource_api_version: 'V3' } },
          connect_timeout: '2s',
          lb_policy: 'ROUND_ROBIN',
          // A host taken out of the pool is out at once, as from a reconfigured HAProxy (Envoy
          // would keep one that still passes its health check).
          ignore_health_on_host_removal: true,
          health_checks: [
            {
              timeout: '1s',
              interval: `${CHECK_INTERVAL_MS / 1000}s`,
              unhealthy_threshold: CHECK_FALL,
              healthy_threshold: CHECK_RISE,
              tcp_health_check: {},
            },
          ],
        },
      ],
    },
  };
}

interface BalancerRecord extends ProcRecord {
  readonly kind: 'tcp-balancer';
}

export class TcpBalancer {
  readonly url: string;
  private readonly procs: Supervisor<BalancerRecord>;
  private readonly bootstrapFile: string;
  private readonly poolFile: string;
  private readonly adminFile: string;
  private poolVersion = 0;

  constructor(private readonly o: TcpBalancerOptions) {
    this.url = `https://${o.address}:${o.port}`;
    this.bootstrapFile = join(o.dir, `${o.name}.json`);
    this.poolFile = join(o.dir, `${o.name}-pool.json`);
    this.adminFile = join(o.dir, `${o.name}.admin`);
    this.procs = new Supervisor<BalancerRecord>({
      runDir: join(o.dir, 'run'),
      logDir: join(o.dir, 'logs'),
      cwd: o.dir,
      log: o.log ?? (() => undefined),
      carriesMarker: (argv) => argv.includes(this.bootstrapFile),
      killOnExit: o.killOnExit === true,
    });
  }

  get logFile(): string {
    return this.procs.logFile(this.o.name);
  }

  /** Starts Envoy; resolves once its listener accepts connections. */
  async start(timeoutMs = 30_000): Promise<void> {
    await mkdir(join(this.o.dir, 'run'), { recursive: true });
    await mkdir(join(this.o.dir, 'logs'), { recursive: true });
    await this.procs.adopt();
    await this.procs.kill(this.o.name);
    if (this.o.address.startsWith(LAB_ALIAS_PREFIX)) await ensureLoopbackAlias(this.o.address);
    await this.writePool(this.o.upstreams);
    await writeFile(this.bootstrapFile, `${JSON.stringify(tcpBalancerBootstrap(this.o, this.poolFile), null, 2)}\n`);
    const rec = await this.procs.spawn({
      name: this.o.name,
      kind: 'tcp-balancer',
      cmd: findEnvoyBinary(),
      args: [
        '-c',
        this.bootstrapFile,
        '--log-level',
        'warn',
        '--disable-hot-restart',
        '--file-flush-interval-msec',
        '200',
        '--use-dynamic-base-id',
        '--base-id-path',
        join(this.o.dir, `${this.o.name}.base-id`),
        '--admin-address-path',
        this.adminFile,
      ],
      marker: this.bootstrapFile,
      extra: {},
    });
    await this.procs.waitFor(rec, timeoutMs, async () =>
      (await canConnect(`${this.o.address}:${this.o.port}`)) ? null : `nothing accepts on ${this.o.address}:${this.o.port} yet`,
    );
    this.o.log?.(`TCP balancer ${this.o.name} (round robin, no skewgate) at ${this.url}`);
  }

  /**
   * Changes the pool (connections to a host that stays are kept; to one that leaves, Envoy closes
   * them as a balancer does); resolves once Envoy's admin lists exactly these hosts.
   */
  async setUpstreams(upstreams: readonly Upstream[], timeoutMs = 30_000): Promise<void> {
    await this.writePool(upstreams);
    const want = upstreams.map((u) => `${u.ip}:${u.port}`).sort();
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hosts = await this.hosts().catch(() => undefined);
      if (hosts !== undefined && JSON.stringify(hosts) === JSON.stringify(want)) return;
      if (Date.now() > deadline)
        throw new Error(
          `TCP balancer ${this.o.name}: pool ${want.join(', ')} not in effect within ${timeoutMs / 1000} s (Envoy lists ${hosts?.join(', ') ?? 'nothing'})`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The hosts Envoy balances over now (its admin's /clusters), sorted. */
  async hosts(): Promise<string[]> {
    const admin = (await readFile(this.adminFile, 'utf8')).trim();
    const res = await fetch(`http://${admin}/clusters?format=json`, { signal: AbortSignal.timeout(5000) });
    const body = (await res.json()) as {
      cluster_statuses?: { name: string; host_statuses?: { address?: { socket_address?: { address: string; port_value: number } } }[] }[];
    };
    const cluster = body.cluster_statuses?.find((c) => c.name === CLUSTER);
    return (cluster?.host_statuses ?? [])
      .map((h) => `${h.address?.socket_address?.address ?? '?'}:${h.address?.socket_address?.port_value ?? '?'}`)
      .sort();
  }

  /** Written beside it and moved over it: Envoy's file watch reacts to the move. */
  private async writePool(upstreams: readonly Upstream[]): Promise<void> {
    this.poolVersion += 1;
    const tmp = `${this.poolFile}.tmp`;
    await writeFile(tmp, `${JSON.stringify(tcpBalancerPool(upstreams, this.poolVersion), null, 2)}\n`);
    await rename(tmp, this.poolFile);
  }

  /** Stops Envoy (idempotent; from any shell: adopts the record). */
  async stop(): Promise<void> {
    await this.procs.adopt();
    await this.procs.kill(this.o.name);
    this.procs.close();
  }

  logTail(lines = 20): Promise<string> {
    return logTail(this.logFile, lines);
  }
}
