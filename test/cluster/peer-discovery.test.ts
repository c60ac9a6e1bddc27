// Parity with kube-apiserver's own peer-aggregated discovery, in the lab: real kube-apiservers with
// the built-in Mixed Version Proxy (--peer-ca-file), no two serving the same APIs, behind Envoy +
// skewgate. skewgate's GET /apis must equal kube-apiserver's peer-aggregated /apis for the same
// servers, byte for byte and ETag for ETag, in every phase of an upgrade; kubectl must work through
// the gateway every time and revalidate its discovery cache by ETag. Fails, never skips, when a
// part is missing. Uses the addresses of its lab slot.
import t, { type Test } from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Agent, request } from 'undici';
import { Lab, type GatewayInfo, freePort } from '../../harness/lab/lab.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { MEDIA_AGGREGATED_V2, MEDIA_AGGREGATED_V2_NOPEER, REASON_HEADER } from '../../src/constants.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { computeEtag, discoveryBody, mergePeerDiscovery } from '../../src/discovery/core/merge.js';
import { negotiateApis } from '../../src/routing/discovery-accept.js';
import { requireLabParts } from '../helpers/lab-parts.js';

// This file's addresses and etcd ports (harness/lab/slots.ts): it can run beside any other lab.
const slot = claimLabSlot();

const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const PB = 'application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList';

t.setTimeout(8 * 60_000);

// Missing parts fail here, with the command that provides them.
const { versions, kubectl } = requireLabParts();

// No server serves everything, and every phase has another union: groups, versions and resources
// (resource.k8s.io/v1beta2 lists devicetaintrules on v1.36 only) are merged at every level.
const KAS6: ApiServerSpec = {
  name: 'kas-6',
  version: versions.kubeNew,
  ip: slot.loopback(1),
  port: 6443,
  peerProxy: true,
  runtimeConfig: 'autoscaling/v2=false,resource.k8s.io/v1beta2=true,coordination.k8s.io/v1beta1=true',
};
const KAS7: ApiServerSpec = {
  name: 'kas-7',
  version: versions.kubeNew,
  ip: slot.loopback(2),
  port: 6443,
  peerProxy: true,
  runtimeConfig: 'batch/v1=false',
};
const KAS8_OLD: ApiServerSpec = {
  name: 'kas-8',
  version: versions.kubeOld,
  ip: slot.loopback(3),
  port: 6443,
  peerProxy: true,
  runtimeConfig: 'resource.k8s.io/v1beta2=true,resource.k8s.io/v1beta1=true,networking.k8s.io/v1beta1=true',
};
const KAS8_NEW: ApiServerSpec = { ...KAS8_OLD, version: versions.kubeNew, runtimeConfig: 'storage.k8s.io/v1beta1=true' };

/** Two versions, a status subresource, a short name and a category: it shows in every part of discovery. */
const CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: { plural: widgets, singular: widget, kind: Widget, shortNames: [wd], categories: [all] }
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
      subresources: { status: {} }
    - name: v1beta1
      served: true
      storage: false
      schema: { openAPIV3Schema: { type: object, x-kubernetes-preserve-unknown-fields: true } }
`;

const dir = await mkdtemp(join(tmpdir(), 'skewgate-peer-discovery-'));
const lab = await Lab.open({ dir, killOnExit: true, addresses: slot, log: (l) => t.comment(l) });
const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
t.teardown(async () => {
  await agent.close();
  await lab.down({ kill: true }).catch((err: unknown) => t.fail(`down: ${(err as Error).message}`));
  await rm(dir, { recursive: true, force: true });
});

const CONVERGENCE_MS = 240_000;

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}
async function get(url: string, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await request(url, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${lab.pki.adminToken}`, ...headers },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}
const etagOf = (r: Reply): string | undefined => r.headers['etag'] as string | undefined;

/**
 * kube-apiserver's peer-aggregated /apis, once every running server gives the same one (its peer
 * caches have converged). Their refresh is kube-apiserver's own: in one CI run (2026-12-01) the
 * servers still disagreed 90 s after a CRD was applied, and agreed in seconds on the next run.
 * This waits for them; nothing of skewgate's is timed here.
 */
async function converged(servers: readonly ApiServerSpec[], what: string, holds: (r: Reply) => boolean = () => true): Promise<Reply> {
  let last = '';
  for (const deadline = Date.now() + CONVERGENCE_MS; Date.now() < deadline; await sleep(500)) {
    const replies = await Promise.all(servers.map((s) => get(`${lab.apiServerUrl(s.name)}/apis`, { accept: MEDIA_AGGREGATED_V2 })));
    // Until a server has its peers' documents it answers with its own, which differs from the others'.
    const tags = new Set(replies.map(etagOf));
    last = `${tags.size} distinct ETags`;
    if (tags.size === 1 && replies.every((r) => r.status === 200) && holds(replies[0] as Reply)) {
      // The same set again a moment later: not a transient state of a peer cache.
      await sleep(2000);
      const again = await get(`${lab.apiServerUrl(servers[0]?.name as string)}/apis`, { accept: MEDIA_AGGREGATED_V2 });
      if (etagOf(again) === etagOf(replies[0] as Reply)) return replies[0] as Reply;
    }
  }
  throw new Error(`kube-apiservers did not agree on a peer-aggregated /apis (${what}) within ${CONVERGENCE_MS / 1000} s: ${last}`);
}

/** Polls the gateway until its /apis carries `etag` (skewgate follows readiness and views within ~1-2 s). */
async function gatewayApis(gw: GatewayInfo, etag: string | undefined): Promise<Reply> {
  let last: Reply | undefined;
  for (const deadline = Date.now() + 30_000; Date.now() < deadline; await sleep(250)) {
    last = await get(`${gw.url}/apis`, { accept: MEDIA_AGGREGATED_V2 });
    if (etagOf(last) === etag) return last;
  }
  return last as Reply;
}

function kubectlIn(gw: GatewayInfo, cacheDir: string, ...args: string[]): Promise<{ stdout: string; stderr: string }> {
  return run(kubectl, ['--kubeconfig', gw.kubeconfigFile, '--cache-dir', cacheDir, ...args], { timeout: 60_000 });
}

/**
 * Answers skewgate gave with this reason, counted in Envoy's access log (its response-code
 * details are `skewgate_<reason>`); skewgate itself logs discovery answers at debug only. Envoy
 * writes a line when a request ends and flushes the file every 0.2 s (lab flag): a marker request
 * sent after everything to be counted has ended is logged after it, so once the marker's line is
 * in the file, all of theirs are.
 */
async function decisions(gw: GatewayInfo, name: string, reason: string): Promise<number> {
  const marker = `/version?access-log-marker=${randomUUID()}`;
  await get(`${gw.url}${marker}`);
  let text = '';
  for (const deadline = Date.now() + 15_000; !text.includes(marker); await sleep(100)) {
    if (Date.now() > deadline) throw new Error(`Envoy's access log (envoy-${name}) never showed ${marker}`);
    text = await readFile(lab.logFile(`envoy-${name}`), 'utf8').catch(() => '');
  }
  return text.split('\n').filter((l) => l.includes(`"details":"skewgate_${reason}"`)).length;
}

async function parity(
  t: Test,
  gw: GatewayInfo,
  servers: readonly ApiServerSpec[],
  phase: string,
  holds?: (r: Reply) => boolean,
): Promise<void> {
  const kube = await converged(servers, phase, holds);
  const edge = await gatewayApis(gw, etagOf(kube));
  t.equal(edge.status, 200, `${phase}: 200 through the gateway`);
  t.equal(edge.headers[REASON_HEADER], 'merged_apis', `${phase}: answered by skewgate`);
  t.equal(etagOf(edge), etagOf(kube), `${phase}: the same ETag as kube-apiserver's peer-aggregated /apis`);
  t.equal(edge.body, kube.body, `${phase}: the same body, byte for byte (groups, versions, resources, verbs, order)`);
  t.equal(edge.headers['content-type'], kube.headers['content-type'], `${phase}: Content-Type`);
  t.equal(edge.headers['vary'], kube.headers['vary'], `${phase}: Vary`);
  t.equal(edge.headers['cache-control'], kube.headers['cache-control'], `${phase}: Cache-Control`);
  // Each side accepts the other's ETag.
  t.equal(
    (await get(`${gw.url}/apis`, { accept: MEDIA_AGGREGATED_V2, 'if-none-match': etagOf(kube) as string })).status,
    304,
    `${phase}: skewgate: 304 for kube-apiserver's ETag`,
  );
  const first = servers[0] as ApiServerSpec;
  t.equal(
    (await get(`${lab.apiServerUrl(first.name)}/apis`, { accept: MEDIA_AGGREGATED_V2, 'if-none-match': etagOf(edge) as string })).status,
    304,
    `${phase}: kube-apiserver: 304 for skewgate's ETag`,
  );
  // And the pure merge over the servers' own documents (what skewgate's discovery fetched) agrees.
  const own = await Promise.all(
    servers.map(async (s) => ({
      serverId: apiserverIdentity(s.name),
      document: JSON.parse((await get(`${lab.apiServerUrl(s.name)}/apis`, { accept: MEDIA_AGGREGATED_V2_NOPEER })).body) as unknown,
    })),
  );
  const items = mergePeerDiscovery(own);
  t.equal(discoveryBody(items), kube.body, `${phase}: mergePeerDiscovery of the nopeer documents`);
  t.equal(`"${computeEtag(items)}"`, etagOf(kube), `${phase}: computeEtag`);
  t.comment(
    `${phase}: ${(JSON.parse(kube.body) as { items: unknown[] }).items.length} groups, ETag ${String(etagOf(kube)).slice(0, 17)}…"`,
  );
  for (const s of own)
    t.not(`"${computeEtag(mergePeerDiscovery([s]))}"`, etagOf(kube), `${phase}: no single server's document is the union (${s.serverId})`);
  phaseEtags.add(String(etagOf(kube)));
}

/** Every phase has another union. */
const phaseEtags = new Set<string>();

/** kubectl through the gateway, each time with a fresh discovery cache: must work every time. */
async function kubectlWorks(t: Test, gw: GatewayInfo, phase: string, expectAutoscalingV2: boolean): Promise<void> {
  for (let i = 0; i < 6; i++) {
    const cache = join(dir, `kubectl-${phase.replace(/\W+/g, '-')}-${i}`);
    const res = await kubectlIn(gw, cache, 'api-resources');
    t.match(
      res.stdout,
      /^mutatingadmissionpolicies\s+admissionregistration\.k8s\.io\/v1\s+false\s+MutatingAdmissionPolicy$/m,
      `${phase} #${i + 1}: api-resources lists the v1.36-only resource`,
    );
    t.match(res.stdout, /^cronjobs\s+cj\s+batch\/v1\s+true\s+CronJob$/m, `${phase} #${i + 1}: and batch (not served by kas-7)`);
    if (expectAutoscalingV2)
      t.match(
        res.stdout,
        /^horizontalpodautoscalers\s+hpa\s+autoscaling\/v2\s+true/m,
        `${phase} #${i + 1}: and autoscaling/v2 (not served by kas-6)`,
      );
    const get1 = await kubectlIn(gw, `${cache}-get`, 'get', 'mutatingadmissionpolicies');
    t.match(get1.stderr, /No resources found/, `${phase} #${i + 1}: kubectl get mutatingadmissionpolicies`);
    const get2 = await kubectlIn(gw, `${cache}-get`, 'get', 'cronjobs', '-A');
    t.match(get2.stderr, /No resources found/, `${phase} #${i + 1}: kubectl get cronjobs`);
  }
}

let gw: GatewayInfo;

/** An error as a failure message should carry it: AggregateError's own message is empty (one CI run failed so, unnamed). */
function why(err: unknown): string {
  if (err instanceof AggregateError) return `AggregateError [${err.errors.map(why).join('; ')}]`;
  if (err instanceof Error) return `${err.name}: ${err.message}${err.cause === undefined ? '' : ` (cause: ${why(err.cause)})`}`;
  return String(err);
}

await t.test('three kube-apiservers with the built-in proxy, no two alike; their identities', async (t) => {
  await startServers(t).catch((err: unknown) => {
    t.fail(`the lab did not start: ${why(err)}`);
  });
});

async function startServers(t: Test): Promise<void> {
  await lab.startEtcd();
  // One at a time: the lab's apiserver list file is rewritten on each start.
  for (const s of [KAS6, KAS7, KAS8_OLD]) await lab.startApiServer(s);
  const selector = encodeURIComponent('apiserver.kubernetes.io/identity=kube-apiserver');
  let leases: { name: string; hostname: string }[] = [];
  for (const deadline = Date.now() + 30_000; Date.now() < deadline && leases.length < 3; await sleep(250)) {
    const res = await get(
      `${lab.apiServerUrl('kas-6')}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=${selector}`,
    );
    leases = (JSON.parse(res.body) as { items: { metadata: { name: string; labels?: Record<string, string> } }[] }).items.map((i) => ({
      name: i.metadata.name,
      hostname: i.metadata.labels?.['kubernetes.io/hostname'] ?? '',
    }));
  }
  t.equal(leases.length, 3, 'three identity leases');
  for (const l of leases) t.equal(l.name, apiserverIdentity(l.hostname), `${l.hostname}: lease ${l.name} is apiserverIdentity(hostname)`);
  gw = await lab.startGateway({ name: 'pd', withSkewgate: true, port: await freePort() });
}

await t.test("phase 1, v1.35 + two v1.36: skewgate's /apis equals kube-apiserver's peer-aggregated /apis", async (t) => {
  await parity(t, gw, [KAS6, KAS7, KAS8_OLD], 'v1.35+v1.36');
});

await t.test('Accept negotiation: skewgate answers exactly when kube-apiserver would answer peer-aggregated JSON', async (t) => {
  const kube = await get(`${lab.apiServerUrl('kas-6')}/apis`, { accept: MEDIA_AGGREGATED_V2 });
  const accepts = [
    MEDIA_AGGREGATED_V2,
    MEDIA_AGGREGATED_V2_NOPEER,
    `${MEDIA_AGGREGATED_V2},application/json`,
    'application/json',
    '*/*',
    PB,
    `application/json,${MEDIA_AGGREGATED_V2}`,
    `${PB};q=0.5,${MEDIA_AGGREGATED_V2}`,
    `${MEDIA_AGGREGATED_V2};profile=other`,
    'application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList',
    `${MEDIA_AGGREGATED_V2};stream=foo`,
    '*/*;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
    'application/yaml;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList',
    `${MEDIA_AGGREGATED_V2_NOPEER};q=0.5,${MEDIA_AGGREGATED_V2}`,
  ];
  for (const accept of accepts) {
    const direct = await get(`${lab.apiServerUrl('kas-6')}/apis`, { accept });
    const edge = await get(`${gw.url}/apis`, { accept });
    const kubeMerged =
      direct.status === 200 && etagOf(direct) === etagOf(kube) && /^application\/json;/.test(String(direct.headers['content-type']));
    const n = negotiateApis(accept);
    t.equal(
      n.kind === 'aggregated' && n.mediaType === 'application/json' && n.profile !== 'nopeer',
      kubeMerged,
      `${accept}: negotiateApis agrees with kube-apiserver`,
    );
    t.equal(edge.headers[REASON_HEADER] === 'merged_apis', kubeMerged, `${accept}: skewgate answers only that case`);
    t.equal(edge.status, direct.status, `${accept}: same status`);
    t.equal(edge.headers['content-type'], direct.headers['content-type'], `${accept}: same Content-Type`);
  }
});

await t.test('kubectl through the gateway: api-resources and get of skewed resources, every time', async (t) => {
  await kubectlWorks(t, gw, 'v1.35+v1.36', true);
});

await t.test("client-go's discovery cache revalidates by ETag: a second kubectl run gets 304", async (t) => {
  const cache = join(dir, 'kubectl-revalidate');
  const before = await decisions(gw, 'pd', 'merged_apis_not_modified');
  await kubectlIn(gw, cache, 'api-resources');
  const afterFirst = await decisions(gw, 'pd', 'merged_apis_not_modified');
  t.equal(afterFirst, before, 'first run (empty cache): no If-None-Match');
  const second = await kubectlIn(gw, cache, 'api-resources', '-v=6');
  t.match(second.stdout, /mutatingadmissionpolicies/, 'the second run lists the union (from its revalidated cache)');
  const afterSecond = await decisions(gw, 'pd', 'merged_apis_not_modified');
  t.ok(afterSecond > afterFirst, `second run: If-None-Match answered 304 by skewgate (${afterSecond - afterFirst} in its log)`);
  // kubectl itself logs 200: its HTTP cache turns the 304 into the cached response.
  t.comment(
    second.stderr
      .split('\n')
      .filter((l) => l.includes('/apis?'))
      .slice(0, 2)
      .join('\n'),
  );
});

await t.test("with a CRD (kube-apiserver keeps CRD group/versions out of its peers' documents): still equal", async (t) => {
  const file = join(dir, 'crd.yaml');
  await writeFile(file, CRD);
  await kubectlIn(gw, join(dir, 'kubectl-crd'), 'apply', '-f', file);
  // The apiservers may agree on the document before the CRD is in it (each lists it once its own
  // discovery controller ran): wait for the one that lists it (seen on 2026-12-05: agreed without it).
  await parity(t, gw, [KAS6, KAS7, KAS8_OLD], 'v1.35+v1.36 with a CRD', (r) => r.body.includes('"name":"example.com"'));
  const res = await kubectlIn(gw, join(dir, 'kubectl-crd-get'), 'get', 'widgets', '-A');
  t.match(res.stderr, /No resources found/, 'kubectl get widgets');
});

await t.test('phase 2, the v1.35 apiserver stopped for its upgrade', async (t) => {
  await lab.stopApiServer('kas-8');
  await parity(t, gw, [KAS6, KAS7], 'kas-8 down');
  await kubectlWorks(t, gw, 'kas-8 down', true);
});

await t.test('phase 3, all on v1.36', async (t) => {
  await lab.startApiServer(KAS8_NEW);
  await parity(t, gw, [KAS6, KAS7, KAS8_NEW], 'all v1.36');
  await kubectlWorks(t, gw, 'all v1.36', true);
  t.equal(phaseEtags.size, 4, 'four phases, four different unions');
});
