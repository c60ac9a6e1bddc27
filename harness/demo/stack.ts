// A whole gateway on loopback: fake skewed apiservers (shared "etcd"), skewgate, and a real Envoy
// rendered from the same config. Used by `skewgate-lab demo`, the end-to-end tests and the benchmarks.
import { mkdir, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import { createLogger, type Logger } from '../../src/util/log.js';
import { createSkewgate, type Skewgate, type SkewgateOptions } from '../../src/app/skewgate.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { startEnvoy, type EnvoyHandle } from '../../src/envoy-runtime/process.js';
import { writeSeedXds } from '../../src/envoy-runtime/xds-disk.js';
import { withoutExtProc } from '../baseline-envoy.js';
import { startSkewgateProcess, type SkewgateProcess } from './skewgate-process.js';
import { freeConsecutivePorts } from '../lab/net.js';
import { BlackholeProxy, FakeApiServer, FakeCluster, createPki, type FakeResource, type Pki } from '../fake/index.js';

export interface StackServer {
  readonly name: string;
  readonly builtins: readonly FakeResource[];
  readonly discovery?: 'aggregated' | 'legacy';
  readonly gitVersion?: string;
}

export interface StackOptions {
  /** Working folder for the PKI, the config file and logs. */
  readonly dir: string;
  readonly servers: readonly StackServer[];
  /** Gateway port; 0 picks a free one. */
  readonly gatewayPort?: number;
  readonly failureMode?: 'open' | 'closed';
  /**
   * Client certificates (default true): Envoy verifies them against the fake cluster CA and
   * skewgate re-states them as front-proxy identity, Envoy presenting the fake front-proxy client
   * certificate. false: tokens only, no certificate asked for.
   */
  readonly clientCertificates?: boolean;
  readonly discoveryInterval?: number;
  readonly logLevel?: string;
  /** Also start a second Envoy without the ext_proc filter: plain round-robin, the baseline. */
  readonly baseline?: boolean;
  readonly logger?: Logger;
  /** The config file's telemetry section, as written in YAML (Envoy's tracer follows it). */
  readonly telemetry?: Readonly<Record<string, unknown>>;
  /** Passed to createSkewgate: the OTEL_* environment, in-memory telemetry for tests. */
  readonly skewgateOptions?: SkewgateOptions;
  /**
   * Put a BlackholeProxy in front of every apiserver (skewgate and Envoy connect through it), so
   * that a test can make one accept connections and never answer.
   */
  readonly proxied?: boolean;
  /** More fields of the config's envoy section (e.g. requestTimeout). */
  readonly envoy?: Readonly<Record<string, unknown>>;
  /** More fields of the config's extproc section (e.g. limits). */
  readonly extproc?: Readonly<Record<string, unknown>>;
  /** The config's membership section (sources, template), as written in YAML. */
  readonly membership?: Readonly<Record<string, unknown>>;
  /**
   * Run skewgate as its own process (`skewgate serve`, log in the folder's skewgate.log) rather
   * than in this one: a benchmark then tells its CPU from the fakes'. skewgateOptions do not apply.
   */
  readonly skewgateProcess?: boolean;
}

export interface Stack {
  readonly pki: Pki;
  readonly cluster: FakeCluster;
  readonly apiservers: readonly FakeApiServer[];
  /** With `proxied`: the proxy in front of each apiserver, by name. */
  readonly proxies: ReadonlyMap<string, BlackholeProxy>;
  readonly config: Config;
  /** The YAML config written for this stack (usable with `skewgate explain|skew|validate`). */
  readonly configFile: string;
  readonly gatewayUrl: string;
  readonly envoy: EnvoyHandle;
  readonly baselineUrl?: string;
  readonly baselineEnvoy?: EnvoyHandle;
  /** The running skewgate, or null while stopped (and always with `skewgateProcess`). */
  skewgate(): Skewgate | null;
  /** The process skewgate runs in: this one, or its own with `skewgateProcess`. */
  skewgatePid(): number;
  stopSkewgate(): Promise<void>;
  startSkewgate(): Promise<void>;
  close(): Promise<void>;
}

function configDocument(
  o: StackOptions,
  pki: Pki,
  servers: readonly FakeApiServer[],
  extprocPort: number,
  gatewayPort: number,
  proxies: ReadonlyMap<string, BlackholeProxy> = new Map(),
  dir?: string,
): object {
  const certificates = o.clientCertificates ?? true;
  const urlOf = (s: FakeApiServer): string => {
    const proxy = proxies.get(s.name);
    return proxy ? `https://127.0.0.1:${proxy.port}` : s.url;
  };
  return {
    apiservers: servers.map((s) => ({
      name: s.name,
      url: urlOf(s),
      caFile: pki.caFile,
      serverName: 'localhost',
      credentials: { tokenFile: pki.tokenFile },
    })),
    discovery: { interval: `${o.discoveryInterval ?? 1000}ms`, timeout: '2s' },
    extproc: {
      listen: `127.0.0.1:${extprocPort}`,
      messageTimeout: '1s',
      failureMode: o.failureMode ?? 'open',
      shutdownGrace: '2s',
      ...o.extproc,
    },
    envoy: {
      listen: { address: '127.0.0.1', port: gatewayPort },
      admin: { address: '127.0.0.1', port: 0 },
      tls: { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile, ...(certificates ? { clientCaFile: pki.caFile } : {}) },
      healthCheck: { interval: '1s', timeout: '1s', unhealthyThreshold: 2, healthyThreshold: 1 },
      ...(certificates ? { upstreamClientCert: { certFile: pki.frontProxyClientCertFile, keyFile: pki.frontProxyClientKeyFile } } : {}),
      ...o.envoy,
    },
    ...(o.membership ? { membership: o.membership } : {}),
    log: { level: o.logLevel ?? 'warn' },
    // `skewgate status|skew|explain --config <this file>` ask the running stack's gateway.
    ...(dir === undefined ? {} : { admin: { listen: `unix:${join(dir, 'admin.sock')}` } }),
    ...(o.telemetry ? { telemetry: o.telemetry } : {}),
  };
}

export async function startStack(o: StackOptions): Promise<Stack> {
  const dir = resolve(o.dir);
  await mkdir(dir, { recursive: true });
  const pki = await createPki(join(dir, 'pki'));
  const cluster = new FakeCluster();
  const apiservers = o.servers.map(
    (s) =>
      new FakeApiServer({
        name: s.name,
        cluster,
        pki,
        builtins: s.builtins,
        ...(s.discovery ? { discovery: s.discovery } : {}),
        ...(s.gitVersion ? { gitVersion: s.gitVersion } : {}),
      }),
  );
  const cleanups: (() => Promise<void>)[] = [];
  const closeAll = async (): Promise<void> => {
    for (const c of cleanups.splice(0).reverse()) await c().catch(() => undefined);
  };
  try {
    const proxies = new Map<string, BlackholeProxy>();
    for (const a of apiservers) {
      await a.start();
      cleanups.push(() => a.close());
      if (o.proxied) {
        const proxy = new BlackholeProxy({ host: '127.0.0.1', port: a.port });
        await proxy.start();
        cleanups.push(() => proxy.close());
        proxies.set(a.name, proxy);
      }
    }
    const logger = o.logger ?? createLogger(o.logLevel ?? 'warn');
    // Bind skewgate first on a free port; the final config then names that port for Envoy. With
    // extproc.workers, Envoy expects the ports after it: a free run of them, named from the start.
    const workers = Number(o.extproc?.['workers'] ?? 1);
    const configFile = join(dir, 'skewgate.yaml');
    let app: Skewgate | null = null;
    let proc: SkewgateProcess | null = null;
    let extprocPort: number;
    if (o.skewgateProcess === true) {
      // Its own process: the port is chosen first and named in the one config it starts from.
      extprocPort = await freeConsecutivePorts(workers);
      await writeFile(
        configFile,
        `# written by skewgate's demo stack\n${stringify(configDocument(o, pki, apiservers, extprocPort, o.gatewayPort ?? 0, proxies, dir))}`,
      );
      proc = await startSkewgateProcess(configFile, `127.0.0.1:${extprocPort}`, join(dir, 'skewgate.log'));
      cleanups.push(async () => {
        await proc?.stop();
      });
    } else {
      const base = workers > 1 ? await freeConsecutivePorts(workers) : 0;
      const first = parseConfig(configDocument(o, pki, apiservers, base, o.gatewayPort ?? 0, proxies, dir), configFile, dir);
      app = createSkewgate(first, logger, o.skewgateOptions);
      const bound = await app.start();
      cleanups.push(async () => {
        await app?.close();
      });
      extprocPort = bound.port ?? 0;
    }
    const doc = configDocument(o, pki, apiservers, extprocPort, o.gatewayPort ?? 0, proxies, dir);
    await writeFile(configFile, `# written by skewgate's demo stack\n${stringify(doc)}`);
    const config = parseConfig(doc, configFile, dir);

    const bootstrap = renderBootstrap(config);
    // With envoy.xds (through o.envoy): what `skewgate envoy-config` does, the files Envoy starts from.
    writeSeedXds(config);
    const envoy = await startEnvoy({ bootstrap, logFile: join(dir, 'envoy.log') });
    cleanups.push(() => envoy.stop());
    let baselineEnvoy: EnvoyHandle | undefined;
    if (o.baseline) {
      // A plain balancer: its own static clusters, never skewgate's xDS folder (with envoy.xds).
      const { xds: _xds, ...plainEnvoy } = o.envoy ?? {};
      const baselineConfig = parseConfig(
        configDocument({ ...o, envoy: plainEnvoy }, pki, apiservers, extprocPort, 0, proxies),
        configFile,
        dir,
      );
      baselineEnvoy = await startEnvoy({
        bootstrap: withoutExtProc(renderBootstrap(baselineConfig)),
        logFile: join(dir, 'envoy-baseline.log'),
      });
      const b = baselineEnvoy;
      cleanups.push(() => b.stop());
    }
    return {
      pki,
      cluster,
      apiservers,
      proxies,
      config,
      configFile,
      envoy,
      gatewayUrl: `https://127.0.0.1:${envoy.listenPort ?? config.envoy.listen.port}`,
      ...(baselineEnvoy ? { baselineEnvoy, baselineUrl: `https://127.0.0.1:${baselineEnvoy.listenPort ?? 0}` } : {}),
      skewgate: () => app,
      skewgatePid: () => proc?.pid ?? process.pid,
      async stopSkewgate() {
        await app?.close();
        app = null;
        await proc?.stop();
      },
      async startSkewgate() {
        if (o.skewgateProcess === true) {
          await proc?.stop();
          proc = await startSkewgateProcess(configFile, `127.0.0.1:${extprocPort}`, join(dir, 'skewgate.log'));
          return;
        }
        if (app) return;
        app = createSkewgate(config, logger, o.skewgateOptions);
        await app.start();
      },
      close: closeAll,
    };
  } catch (err) {
    await closeAll();
    throw err;
  }
}
