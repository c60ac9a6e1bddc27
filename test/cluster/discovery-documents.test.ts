// Every discovery-like document, not just the merged /apis, seen as the cluster's union: legacy
// discovery (/api/v1, /apis, /apis/<g>, /apis/<g>/<v>) and OpenAPI (/openapi/v2, the /openapi/v3
// index and the documents it names), through skewgate in the mixed phase of an upgrade (two
// v1.35 and one v1.36 kube-apiservers), against each apiserver's own answers fetched directly.
// Each answer must be byte for byte one apiserver's own and list everything any of them lists;
// every OpenAPI v3 document named by the index must come back 200 with the hash it was named by;
// `kubectl explain` of a resource only v1.36 serves must work every time. The plain round-robin
// baseline shows the harm. Fails, never skips, when a part is missing. Uses its lab slot's addresses.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, type GatewayInfo } from '../../harness/lab/lab.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { writeClusterPart } from '../../bench/cluster-results.js';
import { ownLab } from '../helpers/cluster-lab.js';
import { requireLabParts } from '../helpers/lab-parts.js';

const run = promisify(execFile);
const { versions, kubectl } = requireLabParts();
t.setTimeout(10 * 60_000);

const TRIES = 9;
const NEW_GV = '/apis/admissionregistration.k8s.io/v1';
const NEW_RESOURCE = 'mutatingadmissionpolicies';
const NEW_DEFINITION = 'io.k8s.api.admissionregistration.v1.MutatingAdmissionPolicy';
const spec = (name: string, version: string, ip: string, runtimeConfig?: string): ApiServerSpec => ({
  name,
  version,
  ip,
  port: 6443,
  ...(runtimeConfig ? { runtimeConfig } : {}),
});
// kas-22 without batch/v1: /apis/batch/v1 is a 404 there (seen here: its legacy /apis and /apis/batch
// still list batch/v1, the same bytes as the others').
const slot = claimLabSlot();
const SERVERS = [
  spec('kas-21', versions.kubeOld, slot.loopback(1)),
  spec('kas-22', versions.kubeOld, slot.loopback(2), 'batch/v1=false'),
  spec('kas-23', versions.kubeNew, slot.loopback(3)),
];

const { lab, get } = await ownLab(t, { name: 'discovery-documents', addresses: slot });
const tmp = await mkdtemp(join(tmpdir(), 'skewgate-docs-kubectl-'));
t.teardown(() => rm(tmp, { recursive: true, force: true }));
await lab.startEtcd();
await Promise.all(SERVERS.map((s) => lab.startApiServer(s)));
const gateways = await lab.startGateways({
  skewgate: { name: 'docs-skewgate', withSkewgate: true, port: await freePort() },
  baseline: { name: 'docs-baseline', withSkewgate: false, port: await freePort() },
});
type Arm = keyof typeof gateways;

async function ok200(url: string): Promise<string> {
  const res = await get(url);
  if (res.status !== 200) throw new Error(`GET ${url}: ${res.status} ${res.body.slice(0, 200)}`);
  return res.body;
}

/** What one document lists, as comparable strings: resources with verbs, or group/versions. */
function listed(path: string, body: string): Set<string> {
  const doc = JSON.parse(body) as {
    resources?: { name: string; verbs: string[] }[];
    groups?: { versions: { groupVersion: string }[] }[];
    versions?: { groupVersion: string }[];
  };
  if (doc.resources) return new Set(doc.resources.flatMap((r) => [r.name, ...r.verbs.map((v) => `${r.name} ${v}`)]));
  if (doc.groups) return new Set(doc.groups.flatMap((g) => g.versions.map((v) => v.groupVersion)));
  if (doc.versions) return new Set(doc.versions.map((v) => v.groupVersion));
  throw new Error(`${path}: not a discovery document`);
}

const rows: string[] = [];

await t.test("legacy discovery through skewgate: byte for byte one apiserver's own document, listing the union", async (t) => {
  for (const path of ['/api/v1', '/apis', '/apis/admissionregistration.k8s.io', NEW_GV, '/apis/apps/v1', '/apis/batch', '/apis/batch/v1']) {
    // An apiserver that does not serve the group answers 404: it lists nothing.
    const replies = await Promise.all(SERVERS.map((s) => get(`${lab.apiServerUrl(s.name)}${path}`)));
    const own = replies.filter((r) => r.status === 200).map((r) => r.body);
    const union = new Set(own.flatMap((b) => [...listed(path, b)]));
    const distinct = new Set(replies.map((r) => `${r.status} ${r.body}`)).size;
    const tally: Record<Arm, number> = { skewgate: 0, baseline: 0 };
    for (const arm of ['skewgate', 'baseline'] as const) {
      for (let i = 0; i < TRIES; i++) {
        const res = await get(`${gateways[arm].url}${path}`);
        const whole = res.status === 200 && [...union].every((x) => listed(path, res.body).has(x));
        if (whole) tally[arm]++;
        if (arm === 'skewgate') {
          t.equal(res.status, 200, `${path} #${i + 1}: 200`);
          t.ok(own.includes(res.body), `${path} #${i + 1}: one apiserver's own bytes`);
          t.ok(whole, `${path} #${i + 1}: lists all ${union.size} entries the apiservers list`);
        }
      }
    }
    rows.push(`| \`GET ${path}\` | ${distinct} | ${tally.skewgate}/${TRIES} | ${tally.baseline}/${TRIES} |`);
  }
  // The document that differs must show the baseline's harm, or the test proves nothing.
  const own = await Promise.all(SERVERS.map((s) => ok200(`${lab.apiServerUrl(s.name)}${NEW_GV}`)));
  t.equal(own.filter((b) => b.includes(`"name":"${NEW_RESOURCE}"`)).length, 1, `only ${versions.kubeNew} lists ${NEW_RESOURCE}`);
  const baselineWhole = rows.find((r) => r.startsWith(`| \`GET ${NEW_GV}\``));
  t.notMatch(baselineWhole, new RegExp(`\\| ${TRIES}/${TRIES} \\|$`), 'round robin serves the partial document some of the time');
});

/** GET every document the /openapi/v3 index names, at the URL it names; count those that come back 200 with that very hash. */
async function followIndex(base: string): Promise<{ paths: number; good: number; bad: string[] }> {
  const index = JSON.parse(await ok200(`${base}/openapi/v3`)) as { paths: Record<string, { serverRelativeURL: string }> };
  const bad: string[] = [];
  let good = 0;
  for (const [path, { serverRelativeURL }] of Object.entries(index.paths)) {
    const res = await get(`${base}${serverRelativeURL}`);
    const hash = new URLSearchParams(serverRelativeURL.split('?')[1] ?? '').get('hash');
    const got = createHash('sha512').update(res.body).digest('hex').toUpperCase();
    if (res.status === 200 && got === hash) good++;
    else bad.push(`${path}: ${res.status}${res.status === 200 ? ' (another hash)' : ''}`);
  }
  return { paths: Object.keys(index.paths).length, good, bad };
}

await t.test('OpenAPI v3: the index and the documents it names come from the same source', async (t) => {
  const direct = await followIndex(lab.apiServerUrl('kas-23'));
  t.equal(direct.good, direct.paths, `straight to ${versions.kubeNew}: every named document has its hash`);
  const tally: Record<Arm, string> = { skewgate: '', baseline: '' };
  for (const arm of ['skewgate', 'baseline'] as const) {
    let good = 0;
    let paths = 0;
    const bad: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await followIndex(gateways[arm].url);
      good += r.good;
      paths += r.paths;
      bad.push(...r.bad);
      if (arm === 'skewgate') t.same(r.bad, [], `skewgate round ${i + 1}: all ${r.paths} documents 200 with the hash the index names`);
    }
    tally[arm] = `${good}/${paths}`;
    if (arm === 'baseline') t.ok(bad.length > 0, `round robin mixes hashes: ${bad.length} of ${paths} (${bad.slice(0, 3).join('; ')})`);
  }
  rows.push(
    `| OpenAPI v3 documents named by \`/openapi/v3\`, fetched at the named URL (3 rounds) | 2 | ${tally.skewgate} | ${tally.baseline} |`,
  );
});

await t.test('OpenAPI v2 and kubectl explain of a resource only the new version serves', async (t) => {
  const explainOk: Record<Arm, number> = { skewgate: 0, baseline: 0 };
  const v2Whole: Record<Arm, number> = { skewgate: 0, baseline: 0 };
  for (const arm of ['skewgate', 'baseline'] as const) {
    for (let i = 0; i < TRIES; i++) {
      const body = await ok200(`${gateways[arm].url}/openapi/v2`);
      if (body.includes(`"${NEW_DEFINITION}"`)) v2Whole[arm]++;
      const ok = await explain(gateways[arm], join(tmp, `${arm}-${i}`));
      if (ok) explainOk[arm]++;
      if (arm === 'skewgate') t.ok(ok, `kubectl explain ${NEW_RESOURCE} through skewgate #${i + 1}`);
    }
  }
  t.equal(v2Whole.skewgate, TRIES, `/openapi/v2 through skewgate defines ${NEW_DEFINITION} every time`);
  t.ok(explainOk.baseline < TRIES, `round robin: kubectl explain worked ${explainOk.baseline}/${TRIES}`);
  rows.push(`| \`/openapi/v2\` defines \`MutatingAdmissionPolicy\` | 2 | ${v2Whole.skewgate}/${TRIES} | ${v2Whole.baseline}/${TRIES} |`);
  rows.push(
    `| \`kubectl explain ${NEW_RESOURCE}\` (fresh cache each time) | — | ${explainOk.skewgate}/${TRIES} | ${explainOk.baseline}/${TRIES} |`,
  );
});

async function explain(gw: GatewayInfo, cacheDir: string): Promise<boolean> {
  try {
    const r = await run(kubectl, ['--kubeconfig', gw.kubeconfigFile, '--cache-dir', cacheDir, 'explain', NEW_RESOURCE], {
      timeout: 60_000,
    });
    return /MutatingAdmissionPolicy/.test(r.stdout);
  } catch {
    return false;
  }
}

await t.test('results', async (t) => {
  const md = [
    '### Discovery-like documents in the mixed phase (test/cluster/discovery-documents.test.ts)',
    '',
    `**Method.** etcd and three kube-apiservers: kas-21 and kas-22 v${versions.kubeOld} (kas-22 with \`--runtime-config=batch/v1=false\`), kas-23 v${versions.kubeNew}; a gateway with skewgate and a plain round-robin Envoy in front of all three. Each document is fetched ${TRIES} times through each gateway with an admin token (no Accept: the legacy JSON forms) and compared with each apiserver's own answer fetched directly: "whole" means it lists every resource and verb (or group/version) any apiserver lists. Through skewgate each answer is also checked to be byte for byte one apiserver's own. "Distinct" is how many different answers the three apiservers give (a 404 counts as one).`,
    '',
    '| document | distinct | whole through skewgate | whole through round robin |',
    '|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
  await writeClusterPart('discovery-documents', md);
  t.comment(md);
  t.ok(rows.length >= 9, 'every document measured');
});
