// (k) The node's requests on real apiservers through the phases of an upgrade, next to Kubernetes'
// built-in Mixed Version Proxy (issue 28, item 5's third arm): etcd and three real kube-apiservers
// of the old version with the MVP switched on, behind plain round-robin Envoy (the MVP arm: what a
// cluster without skewgate runs) and behind Envoy + skewgate (fast path on, members learnt from
// the control-plane Nodes). The kubelet's requests of bench/node-traffic-mix.json (as in (i)) are
// replayed open-loop through both, the arms alternating, in four phases run in order: steady, one
// apiserver stopped (its restart), mixed versions (it is back; another restarted as the new
// version), a fourth apiserver of the new version joining at a new address (the plain Envoy's pool
// updated as a load balancer's is). Each phase is measured from its change, the transition
// included. The audit logs say whether the MVP forwarded any of the requests.
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { pino } from 'pino';
import { Pool } from 'undici';
import type { ApiServerSpec } from '../harness/lab/flags.js';
import { claimLabSlot } from '../harness/lab/slots.js';
import { loadConfig } from '../src/config/load.js';
import type { ApiServerConfig } from '../src/config/core/schema.js';
import { fastClusterName } from '../src/envoy/clusters.js';
import { FAST_PATH_ROUTE_PREFIX } from '../src/envoy/fast-routes.js';
import { XdsWriter } from '../src/envoy-runtime/xds-files.js';
import { learntName, type MemberEntry } from '../src/membership/members.js';
import { FAST_ON, skewgateArmOptions } from '../test/helpers/fast-path-arms.js';
import { controlPlaneNode } from '../test/helpers/k8s-objects.js';
import { withLoadLab, type LoadLab } from '../test/helpers/load-lab.js';
import { freeLoopbackPort } from '../test/load/run.js';
import { fastRouteCluster } from './fast-route.js';
import { EVENT_NAME, LEASE_NAMESPACE, NAMESPACE, NODE_NAME, POD_NAME, pick, schedule, type MixWindow } from './node-mix.js';
import { latencyVerdicts, window, type Answered, type WindowFigures } from './node-phases.js';
import { procCpuUs } from './proc-cpu.js';
import type { Section, TargetRow } from './report.js';
import { fmt, formatCounts, summarise } from './stats.js';
import { median, NO_FAILURES } from './verdict.js';
import { packageRoot } from '../src/util/package-root.js';
import { join } from 'node:path';

export interface NodeLabOptions {
  /** Requests per second through each arm while it is measured (real apiservers share the 2 cores with everything else). */
  readonly rate: number;
  readonly rounds: number;
  readonly windowMs: number;
  readonly warmupMs: number;
}
export const DEFAULT_NODE_LAB: NodeLabOptions = { rate: 200, rounds: 4, windowMs: 3000, warmupMs: 1000 };
export const QUICK_NODE_LAB: NodeLabOptions = { rate: 100, rounds: 2, windowMs: 1500, warmupMs: 500 };

type ArmName = 'skewgate' | 'mvp';
const ARMS: readonly ArmName[] = ['skewgate', 'mvp'];
const LABEL: Record<ArmName, string> = {
  skewgate: 'Envoy + skewgate (fast path)',
  mvp: 'plain Envoy, the MVP on (bare Envoy)',
};
const SEED = ['kas-1', 'kas-2', 'kas-3'];

interface Figures extends WindowFigures {
  p50: number[];
  p99: number[];
  envoyUs: number;
  skewgateUs: number;
}
const fresh = (): Figures => ({ requests: 0, failures: NO_FAILURES, statuses: new Map(), p50: [], p99: [], envoyUs: 0, skewgateUs: 0 });

/** Any answer a kube-apiserver gave but 401/403/5xx: Envoy's own replies (no audit id) count as failed. */
const realAnswered: Answered = (status, headers) =>
  typeof headers['audit-id'] === 'string' && status < 500 && status !== 401 && status !== 403;

interface PhaseResult {
  readonly name: string;
  readonly what: string;
  readonly figures: Record<ArmName, Figures>;
  settledS: number | null;
}

export async function benchNodeLab(progress: (msg: string) => void, o: NodeLabOptions = DEFAULT_NODE_LAB): Promise<Section> {
  const mix = JSON.parse(readFileSync(join(packageRoot(), 'bench/node-traffic-mix.json'), 'utf8')) as { windows: MixWindow[] };
  const plan = schedule(mix.windows[0] as MixWindow);
  const next = pick(plan.requests);
  const slot = claimLabSlot();
  let section: Section | undefined;
  await withLoadLab('bench-node-lab', { connections: 4, addresses: slot }, async (l) => {
    const { session, lab } = l;
    const v = l.parts.versions;
    const spec = (name: string, version: string): ApiServerSpec => ({
      name,
      version,
      ip: slot.loopback(Number(name.slice(4))),
      port: 6443,
      peerProxy: true,
    });
    progress(`(k) starting etcd and ${SEED.join(', ')} (v${v.kubeOld}, the MVP on)`);
    await Promise.all(SEED.map((s) => session.start(spec(s, v.kubeOld))));
    const admin = lab.apiServerUrl('kas-1');
    for (const s of SEED) await create(l, admin, '/api/v1/nodes', controlPlaneNode(s, spec(s, v.kubeOld).ip));
    await createNodeObjects(l, admin);
    const gateways = {
      // Production logging (repeats held back): a benchmark measures the gateway, not a test's log.
      skewgate: await lab.startGateway({
        ...skewgateArmOptions(FAST_ON, await freeLoopbackPort(), true),
        logEveryDecision: false,
        membershipSources: ['nodes'],
      }),
      mvp: await lab.startGateway({ name: 'plain', withSkewgate: false, port: await freeLoopbackPort(), xds: true }),
    };
    // The plain Envoy's pool, updated as a load balancer's is: the same files, written here.
    const plainConfig = loadConfig(gateways.mvp.configFile);
    const plainPool = new Map<string, ApiServerConfig>(plainConfig.apiservers.map((s) => [s.name, s]));
    const lb = new XdsWriter(plainConfig, pino({ level: 'silent' }));
    const skewgateXds = loadConfig(gateways.skewgate.configFile).envoy.xds?.directory ?? '';
    const fastPool = (): Promise<string | null> =>
      fastRouteCluster(skewgateXds, gateways.skewgate.envoyAdminUrl, `${FAST_PATH_ROUTE_PREFIX}read`);
    const pids = async (): Promise<Record<string, number>> => Object.fromEntries((await lab.status()).map((p) => [p.name, p.pid ?? -1]));
    const ca = readFileSync(lab.pki.caFile, 'utf8');
    const pools: Record<ArmName, Pool> = {
      skewgate: new Pool(gateways.skewgate.url, { connect: { ca }, connections: 64, keepAliveTimeout: 60_000 }),
      mvp: new Pool(gateways.mvp.url, { connect: { ca }, connections: 64, keepAliveTimeout: 60_000 }),
    };
    const headers = {
      authorization: `Bearer ${lab.pki.adminToken}`,
      accept: 'application/json',
      'user-agent': 'kubelet/v1.35 (skewgate-bench)',
    };
    const joined = learntName(slot.loopback(4), 6443);
    const phases: { name: string; what: string; change: () => Promise<readonly string[]> }[] = [
      { name: 'steady', what: `three apiservers of v${v.kubeOld}`, change: () => Promise.resolve(SEED) },
      {
        name: 'restart',
        what: 'kas-2 stopped, as in its restart',
        change: async () => {
          await session.stop('kas-2');
          return ['kas-1', 'kas-3'];
        },
      },
      {
        name: 'mixed',
        what: `kas-2 back; kas-3 restarted as v${v.kubeNew}`,
        change: async () => {
          await session.start(spec('kas-2', v.kubeOld));
          await session.stop('kas-3');
          await session.start(spec('kas-3', v.kubeNew));
          return SEED;
        },
      },
      {
        name: 'join',
        what: `kas-4 (v${v.kubeNew}) joining at ${slot.loopback(4)}: its Node registered, the plain Envoy's pool given it`,
        change: async () => {
          await session.start(spec('kas-4', v.kubeNew));
          await create(l, admin, '/api/v1/nodes', controlPlaneNode('kas-4', slot.loopback(4)));
          plainPool.set('kas-4', { name: 'kas-4', url: lab.apiServerUrl('kas-4'), caFile: lab.pki.caFile } as ApiServerConfig);
          await lb.update([...plainPool.values()].map((s): MemberEntry => ({ spec: s, role: 'member', seed: false, sources: ['lb'] })));
          return [...SEED, joined];
        },
      },
    ];
    for (let i = 0; ; i++) {
      if ((await fastPool()) === fastClusterName(SEED)) break;
      if (i > 300) throw new Error('(k) the fast path never covered the three apiservers');
      await sleep(200);
    }
    const results: PhaseResult[] = [];
    // The XdsWriter's timers are unref'd (a service's must not hold its process): this holds the bench's.
    const alive = setInterval(() => undefined, 1000);
    try {
      for (const phase of phases) {
        progress(`(k) ${phase.name}: ${phase.what}`);
        const want = fastClusterName(await phase.change());
        const changedAt = Date.now();
        const result: PhaseResult = {
          name: phase.name,
          what: phase.what,
          figures: { skewgate: fresh(), mvp: fresh() },
          settledS: null,
        };
        let watching = true;
        const watcher = (async () => {
          while (watching && result.settledS === null) {
            if ((await fastPool()) === want) result.settledS = (Date.now() - changedAt) / 1000;
            else await sleep(200);
          }
        })();
        for (let round = 0; round < o.rounds; round++) {
          for (const name of round % 2 === 0 ? ARMS : [...ARMS].reverse()) {
            await window(pools[name], next, o.rate, o.warmupMs, headers, null, realAnswered);
            const p = await pids();
            const proc = name === 'skewgate' ? [`envoy-${FAST_ON}`, `skewgate-${FAST_ON}`] : ['envoy-plain', ''];
            const c0 = proc.map((n) => procCpuUs(p[n] ?? -1));
            const f = result.figures[name];
            const { lat } = await window(pools[name], next, o.rate, o.windowMs, headers, f, realAnswered);
            const c1 = proc.map((n) => procCpuUs(p[n] ?? -1));
            f.envoyUs += (c1[0] ?? 0) - (c0[0] ?? 0);
            f.skewgateUs += (c1[1] ?? 0) - (c0[1] ?? 0);
            const sum = summarise(lat);
            f.p50.push(sum.p50 / 1e6);
            f.p99.push(sum.p99 / 1e6);
          }
        }
        watching = false;
        await watcher;
        results.push(result);
      }
    } finally {
      clearInterval(alive);
      await pools.skewgate.close().catch(() => undefined);
      await pools.mvp.close().catch(() => undefined);
    }
    // A request the MVP forwarded is logged by two apiservers under one Audit-ID.
    const hops = await session.auditIds();
    const forwarded = [...hops.values()].filter((servers) => servers.size > 1).length;
    section = report(results, plan.left, o, v, forwarded);
  });
  if (section === undefined) throw new Error('(k) the lab run ended without a result');
  return section;
}

async function create(l: LoadLab, server: string, path: string, body: unknown): Promise<void> {
  const r = await l.session.direct.send('POST', `${server}${path}`, body);
  if (r.status !== 201) throw new Error(`(k) creating ${path}: ${r.status} ${r.text.slice(0, 200)}`);
}

/** The objects the node's requests name (bench/node-mix.ts), as a real apiserver takes them. */
async function createNodeObjects(l: LoadLab, server: string): Promise<void> {
  await create(l, server, '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: NODE_NAME } });
  await create(l, server, `/api/v1/namespaces/${NAMESPACE}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: POD_NAME },
    spec: { nodeName: NODE_NAME, containers: [{ name: 'c', image: 'bench.invalid/none' }] },
  });
  await create(l, server, `/api/v1/namespaces/${NAMESPACE}/events`, {
    apiVersion: 'v1',
    kind: 'Event',
    metadata: { name: EVENT_NAME },
    involvedObject: { kind: 'Pod', name: POD_NAME, namespace: NAMESPACE },
    reason: 'Bench',
  });
  await create(l, server, `/apis/coordination.k8s.io/v1/namespaces/${LEASE_NAMESPACE}/leases`, {
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name: NODE_NAME },
    spec: { holderIdentity: NODE_NAME, leaseDurationSeconds: 40 },
  });
  // The default ServiceAccount (the token request's) is the controller-manager's to create: none runs here.
  await create(l, server, `/api/v1/namespaces/${NAMESPACE}/serviceaccounts`, {
    apiVersion: 'v1',
    kind: 'ServiceAccount',
    metadata: { name: 'default' },
  });
}

function report(
  results: readonly PhaseResult[],
  left: readonly string[],
  o: NodeLabOptions,
  v: { readonly kubeOld: string; readonly kubeNew: string },
  forwarded: number,
): Section {
  const targets: TargetRow[] = [];
  const rows: string[][] = [];
  for (const r of results) {
    const s = r.figures.skewgate;
    const b = r.figures.mvp;
    const at = `${r.name}, ${o.rate} req/s, real apiservers`;
    targets.push(...latencyVerdicts(at, s, b, ' over the MVP arm'));
    for (const name of ARMS) {
      const f = r.figures[name];
      const failed = f.failures.errors + f.failures.timeouts + f.failures.unexpected + f.failures.unanswered;
      rows.push([
        r.name,
        LABEL[name],
        f.requests.toLocaleString('en-US'),
        String(failed),
        fmt(median(f.p50)),
        fmt(median(f.p99)),
        fmt(f.envoyUs / Math.max(1, f.requests)),
        name === 'skewgate' ? fmt(f.skewgateUs / Math.max(1, f.requests)) : '—',
      ]);
    }
  }
  return {
    id: 'k',
    title: "A real node's traffic on real apiservers through the phases of an upgrade, next to the built-in Mixed Version Proxy",
    method: `etcd and three real kube-apiservers (v${v.kubeOld}, the Mixed Version Proxy switched on in each: --feature-gates=UnknownVersionInteroperabilityProxy=true, --peer-ca-file) behind plain round-robin Envoy (the MVP arm: a cluster without skewgate) and Envoy + skewgate (envoy.xds, fast path on, members learnt from the control-plane Nodes). The kubelet's requests of bench/node-traffic-mix.json's steady window, as in (i), on objects that exist, open-loop at ${o.rate} req/s through one arm at a time, bearer token (the plain Envoy cannot pass a client certificate on; (i) and (j) measure certificates). Phases in order, each measured from its change: ${results.map((r) => `${r.name} (${r.what})`).join('; ')}. Per phase ${o.rounds} rounds of both arms (${o.windowMs / 1000} s windows after ${o.warmupMs / 1000} s of warm-up, order alternating); verdicts on the median of per-round paired differences; a request fails when no kube-apiserver answered it (no Audit-Id: Envoy's own reply), or with a 401/403 or a 5xx. Every process (etcd, the apiservers, both Envoys, skewgate, the load) shares the machine's two cores, which is why the rate is lower than (i)'s.`,
    targets,
    tables: [
      {
        caption: "Per phase and arm: medians over rounds; CPU per request by process over the arm's windows",
        headers: ['phase', 'arm', 'requests', 'failed', 'p50 ms', 'p99 ms', 'Envoy CPU µs/req', 'skewgate CPU µs/req'],
        rows,
      },
    ],
    notes: [
      `Requests the MVP forwarded to a peer over the whole run (an Audit-ID in two apiservers' audit logs): ${forwarded} — every API the node uses is served by both versions, so for this traffic the MVP arm is bare Envoy. (The apiservers' own apiserver_rerouted_request_total also counts their peer discovery's fetches of /api and /apis, which their logs show as proxied.)`,
      `skewgate's fast pool in effect after the change: ${results.map((r) => `${r.name} ${r.settledS?.toFixed(1) ?? 'never'} s`).join(', ')}.`,
      `Not replayed (long-running, no latency to measure): ${left.join(', ') || 'none'}.`,
      ...results.map(
        (r) =>
          `Answers, ${r.name}: skewgate ${formatCounts(r.figures.skewgate.statuses)}; MVP arm ${formatCounts(r.figures.mvp.statuses)}; failed: skewgate ${JSON.stringify(r.figures.skewgate.failures)}, MVP arm ${JSON.stringify(r.figures.mvp.failures)}.`,
      ),
    ],
  };
}
