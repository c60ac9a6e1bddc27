// (i) child process: the demo stack (3 fake apiservers here, one skewgate in its own process,
// membership learnt from the kubernetes EndpointSlice) behind two real Envoys — skewgate's own on filesystem xDS (fast path on,
// client certificates stated by its Lua where exact) and a bare one without the ext_proc filter or
// client certificates (the baseline) — and the phases of an upgrade on demand: an apiserver
// stopped and started, one restarted as the next version, one joining at a new address.
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { readFile } from 'node:fs/promises';
import { startStack, type Stack } from '../harness/demo/stack.js';
import { withoutExtProc } from '../harness/baseline-envoy.js';
import { BUILTINS_NEW, BUILTINS_OLD, FakeApiServer } from '../harness/fake/index.js';
import { packageRoot } from '../src/util/package-root.js';
import { parseConfig } from '../src/config/load.js';
import { renderBootstrap } from '../src/envoy/bootstrap.js';
import { FAST_PATH_ROUTE_PREFIX, FAST_PATH_X509 } from '../src/envoy/fast-routes.js';
import { startEnvoy, type EnvoyHandle } from '../src/envoy-runtime/process.js';
import { fastRouteCluster } from './fast-route.js';
import { serveParent } from './child-ipc.js';
import { NODE_STACK_DIR, type NodeStackCpu, type NodeStackReady } from './protocol.js';
import { learntName } from '../src/membership/members.js';
import { EVENT_NAME, LEASE_NAMESPACE, NAMESPACE, NODE_NAME, POD_NAME, withNodeApis } from './node-mix.js';
import { procCpuUs } from './proc-cpu.js';

const STREAMS_STARTED = 'http.skewgate.ext_proc.streams_started';
/** The joining apiserver's own address: a learnt member (serving certificate SANs cover 127.0.0.1-9). */
const JOIN_HOST = '127.0.0.4';

async function streamsStarted(adminUrl: string): Promise<number> {
  const res = await fetch(`${adminUrl}/stats?format=json&filter=${encodeURIComponent(`^${STREAMS_STARTED.replaceAll('.', '\\.')}$`)}`);
  const body = (await res.json()) as { stats?: { name?: string; value?: number }[] };
  return body.stats?.find((s) => s.name === STREAMS_STARTED)?.value ?? 0;
}

/**
 * An apiserver in the kubernetes EndpointSlice (one slice each: the fakes listen on ports of their
 * own). With the slices synced, membership follows them: a seed none lists would be drained.
 */
function publish(stack: Stack, name: string, host: string, port: number): void {
  stack.cluster.create({ group: 'discovery.k8s.io', resource: 'endpointslices' }, 'default', {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: `kubernetes-${name}`, labels: { 'kubernetes.io/service-name': 'kubernetes' } },
    addressType: 'IPv4',
    endpoints: [{ addresses: [host], conditions: { ready: true } }],
    ports: [{ name: 'https', port, protocol: 'TCP' }],
  });
}

async function main(): Promise<void> {
  let stack: Stack | undefined;
  let baseline: EnvoyHandle | undefined;
  let joined: FakeApiServer | undefined;
  const dir = join(packageRoot(), NODE_STACK_DIR);
  const xdsDir = join(dir, 'xds');
  const server = (name: unknown): FakeApiServer | undefined => stack?.apiservers.find((a) => a.name === name);
  const ipc = serveParent(
    {
      cpu: (): NodeStackCpu => {
        const u = process.cpuUsage();
        return {
          fakesUs: u.user + u.system,
          skewgateUs: procCpuUs(stack?.skewgatePid() ?? -1),
          skewgateEnvoyUs: procCpuUs(stack?.envoy.process.pid ?? -1),
          baselineEnvoyUs: procCpuUs(baseline?.process.pid ?? -1),
        };
      },
      streams: async () => (stack === undefined ? Number.NaN : streamsStarted(stack.envoy.adminUrl)),
      certRoute: async () =>
        stack === undefined ? null : fastRouteCluster(xdsDir, stack.envoy.adminUrl, `${FAST_PATH_ROUTE_PREFIX}${FAST_PATH_X509}read`),
      stopServer: async (name: unknown) => {
        await server(name)?.close();
        return true;
      },
      startServer: async (name: unknown) => {
        await server(name)?.start();
        return true;
      },
      /** Restarted as the next version: the resources only the new built-ins have are served too. */
      upgrade: async (name: unknown) => {
        const s = server(name);
        if (s === undefined) return false;
        await s.close();
        for (const r of BUILTINS_NEW.filter((n) => !BUILTINS_OLD.includes(n))) s.addBuiltin(r);
        await s.start();
        return true;
      },
      /** A fourth apiserver at a new address, published in the kubernetes EndpointSlice: its member name. */
      join: async () => {
        if (stack === undefined || joined !== undefined) return null;
        joined = new FakeApiServer({
          name: 'apiserver-d',
          pki: stack.pki,
          cluster: stack.cluster,
          builtins: withNodeApis(BUILTINS_OLD),
          host: JOIN_HOST,
        });
        await joined.start();
        publish(stack, 'apiserver-d', JOIN_HOST, joined.port);
        return learntName(JOIN_HOST, joined.port);
      },
      clear: () => {
        for (const a of [...(stack?.apiservers ?? []), ...(joined ? [joined] : [])]) a.clearRequests();
        return true;
      },
    },
    async () => {
      await baseline?.stop().catch(() => undefined);
      await joined?.close().catch(() => undefined);
      await stack?.close();
    },
  );
  try {
    await Promise.all(
      ['envoy.log', 'envoy-baseline.log', 'skewgate.log', 'xds'].map((f) => rm(join(dir, f), { force: true, recursive: true })),
    );
    stack = await startStack({
      dir,
      // skewgate's own log (its process writes skewgate.log): the report reads what the fast path did per phase.
      logLevel: 'info',
      skewgateProcess: true,
      envoy: { xds: { directory: xdsDir } },
      servers: ['apiserver-a', 'apiserver-b', 'apiserver-c'].map((name) => ({ name, builtins: withNodeApis(BUILTINS_OLD) })),
      membership: {
        sources: ['endpointSlice'],
        template: { caFile: join(dir, 'pki', 'ca.crt'), serverName: 'localhost', credentials: { tokenFile: join(dir, 'pki', 'token') } },
      },
    });
    // The baseline: the same config without xDS, client certificates or the ext_proc filter.
    const doc = parse(await readFile(stack.configFile, 'utf8')) as {
      envoy: Record<string, unknown> & { listen: Record<string, unknown>; tls: Record<string, unknown> };
    };
    delete doc.envoy.xds;
    delete doc.envoy.upstreamClientCert;
    delete doc.envoy.tls.clientCaFile;
    delete (doc as Record<string, unknown>)['membership'];
    doc.envoy.listen = { ...doc.envoy.listen, port: 0 };
    baseline = await startEnvoy({
      bootstrap: withoutExtProc(renderBootstrap(parseConfig(doc, stack.configFile, dir))),
      logFile: join(dir, 'envoy-baseline.log'),
    });
    for (const a of stack.apiservers) publish(stack, a.name, '127.0.0.1', a.port);
    const c = stack.cluster;
    c.create({ group: '', resource: 'nodes' }, '', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name: NODE_NAME },
      status: { phase: 'Running' },
    });
    c.create({ group: '', resource: 'pods' }, NAMESPACE, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: POD_NAME, namespace: NAMESPACE },
      spec: { nodeName: NODE_NAME },
      status: {},
    });
    c.create({ group: '', resource: 'events' }, NAMESPACE, {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name: EVENT_NAME, namespace: NAMESPACE },
      reason: 'Bench',
      count: 0,
    });
    c.create({ group: '', resource: 'serviceaccounts' }, NAMESPACE, {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: { name: 'default', namespace: NAMESPACE },
    });
    c.create({ group: 'coordination.k8s.io', resource: 'leases' }, LEASE_NAMESPACE, {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: NODE_NAME, namespace: LEASE_NAMESPACE },
      spec: { holderIdentity: NODE_NAME },
    });
    ipc.ready({
      urls: { skewgate: stack.gatewayUrl, baseline: `https://127.0.0.1:${baseline.listenPort ?? 0}` },
      pids: { skewgate: stack.envoy.process.pid ?? -1, baseline: baseline.process.pid ?? -1, skewgateProcess: stack.skewgatePid() },
      caFile: stack.pki.caFile,
      token: stack.pki.token,
      certFile: stack.pki.clients.limited.certFile,
      keyFile: stack.pki.clients.limited.keyFile,
    } satisfies NodeStackReady);
  } catch (err) {
    ipc.failed(err);
  }
}

void main();
