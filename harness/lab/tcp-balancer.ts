// A plain TCP balancer in front of the lab's apiservers, as kubeadm's high-availability guide
// builds one (HAProxy in TCP mode): round robin, a TCP connect check every 2 s, out after 2
// failures, back after 2 successes — the check deploy/static-pods/README.md shows. It is Envoy with
// a tcp_proxy listener: TLS passes through, so every client, a kubelet's client certificate
// included, authenticates at the apiserver itself. The baseline a real node is compared against:
// what a node's kubelet sees today in front of a control plane being upgraded.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { findEnvoyBinary } from '../../src/envoy/process.js';
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

/** The Envoy bootstrap of the balancer. Pure. */
export function tcpBalancerBootstrap(o: Pick<TcpBalancerOptions, 'address' | 'port' | 'upstreams'>): object {
  const socket = (address: string, port: number): object => ({ socket_address: { address, port_value: port } });
  return {
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
          type: 'STATIC',
          connect_timeout: '2s',
          lb_policy: 'ROUND_ROBIN',
          load_assignment: {
            cluster_name: CLUSTER,
            endpoints: [{ lb_endpoints: o.upstreams.map((u) => ({ endpoint: { address: socket(u.ip, u.port) } })) }],
          },
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

  constructor(private readonly o: TcpBalancerOptions) {
    this.url = `https://${o.address}:${o.port}`;
    this.bootstrapFile = join(o.dir, `${o.name}.json`);
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
    await writeFile(this.bootstrapFile, `${JSON.stringify(tcpBalancerBootstrap(this.o), null, 2)}\n`);
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
      ],
      marker: this.bootstrapFile,
      extra: {},
    });
    await this.procs.waitFor(rec, timeoutMs, async () =>
      (await canConnect(`${this.o.address}:${this.o.port}`)) ? null : `nothing accepts on ${this.o.address}:${this.o.port} yet`,
    );
    this.o.log?.(`TCP balancer ${this.o.name} (round robin, no skewgate) at ${this.url}`);
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
