// A kube-apiserver the gateway's config does not name (a control-plane machine just added at a new
// address, Cluster API's first step of an upgrade) must stop skewgate answering 404 for what only
// it serves, as soon as its identity Lease appears: real kube-apiservers (two KUBE_OLD members,
// then a KUBE_NEW one that is no member), Envoy + skewgate. Fails, never skips, when a part is
// missing. Uses the addresses of its lab slot.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../harness/lab/lab.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { apiserverIdentity } from '../../src/discovery/apiserver-identity.js';
import { IDENTITY_LEASE_SELECTOR, IDENTITY_LEASES_PATH } from '../../src/discovery/identity-leases.js';
import { packageRoot } from '../../src/package-root.js';
import { requireLabParts } from '../helpers/lab-parts.js';
import { ownLab } from '../helpers/cluster-lab.js';

// This file's addresses and etcd ports (harness/lab/slots.ts): it can run beside any other lab.
const slot = claimLabSlot();

const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
t.setTimeout(6 * 60_000);

const { versions } = requireLabParts();
const MEMBERS: ApiServerSpec[] = [
  { name: 'kas-9', version: versions.kubeOld, ip: slot.loopback(1), port: 6443 },
  { name: 'kas-10', version: versions.kubeOld, ip: slot.loopback(2), port: 6443 },
];
/** Started after the gateway: in no source skewgate reads but the identity Leases. */
const STRANGER: ApiServerSpec = { name: 'kas-11', version: versions.kubeNew, ip: slot.loopback(3), port: 6443 };
/** Served by KUBE_NEW only (admissionregistration.k8s.io/v1 MutatingAdmissionPolicy went GA in 1.36). */
const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

const { lab, get } = await ownLab(t, { name: 'membership', addresses: slot });

/** The identity Lease names a member lists right now. */
async function leaseNames(): Promise<string[]> {
  const q = new URLSearchParams({ labelSelector: IDENTITY_LEASE_SELECTOR });
  const r = await get(`${lab.apiServerUrl('kas-9')}${IDENTITY_LEASES_PATH}?${q}`);
  if (r.status !== 200) throw new Error(`listing identity leases: ${r.status} ${r.body.slice(0, 200)}`);
  return (JSON.parse(r.body) as { items: { metadata: { name: string } }[] }).items.map((i) => i.metadata.name);
}

t.test('an apiserver no source names blocks the 404 within a discovery interval of its identity Lease', async (t) => {
  await lab.startEtcd();
  for (const s of MEMBERS) await lab.startApiServer(s);
  const gw = await lab.startGateway({ name: 'members', withSkewgate: true, port: await freePort() });
  const mine = MEMBERS.map((m) => apiserverIdentity(m.name));

  // Before: both members' identities are matched (their hostnames are in the config), and what
  // neither serves is a true 404, answered at the edge.
  let before = await get(`${gw.url}${NEW_ONLY}`);
  for (const deadline = Date.now() + 60_000; before.reason !== 'resource_not_served' && Date.now() < deadline; await sleep(250)) {
    before = await get(`${gw.url}${NEW_ONLY}`);
  }
  t.equal(before.status, 404, 'a true 404 while every live apiserver is a member');
  t.equal(before.reason, 'resource_not_served');
  t.same((await leaseNames()).sort(), [...mine].sort(), "the members' own identity Leases, and no other");

  // The stranger starts; from the moment its Lease is listable, skewgate may never answer 404 for it.
  const stranger = apiserverIdentity(STRANGER.name);
  const started = lab.startApiServer(STRANGER);
  let leaseAt: number | null = null;
  let blockedAt: number | null = null;
  const falseAfterLease: string[] = [];
  for (const deadline = Date.now() + 120_000; blockedAt === null && Date.now() < deadline; await sleep(50)) {
    if (leaseAt === null && (await leaseNames()).includes(stranger)) leaseAt = Date.now();
    const r = await get(`${gw.url}${NEW_ONLY}`);
    if (r.status === 404 && leaseAt !== null)
      falseAfterLease.push(`${Date.now() - leaseAt} ms after the lease: ${r.reason ?? 'no reason'}`);
    if (r.status === 503 && r.reason === 'unmatched_apiserver_identity') blockedAt = Date.now();
  }
  await started;
  t.ok(leaseAt !== null, `kas-11's identity Lease ${stranger} appeared`);
  t.ok(blockedAt !== null, 'skewgate refused the 404 (503 unmatched_apiserver_identity)');
  const lag = (blockedAt ?? Infinity) - (leaseAt ?? 0);
  t.comment(`lease seen → 404 refused: ${lag} ms (lease polled every ~50 ms; discovery interval 1 s)`);
  t.ok(lag <= 1000, `within one discovery interval (1 s) of the lease appearing: ${lag} ms`);
  t.same(falseAfterLease, [], 'never a 404 once the lease was there');

  // It stays refused while the stranger runs, and what the members serve is untouched.
  const again = await get(`${gw.url}${NEW_ONLY}`);
  t.match(again, { status: 503, reason: 'unmatched_apiserver_identity' });
  t.match(JSON.parse(again.body), { kind: 'Status', code: 503, reason: 'ServiceUnavailable', message: new RegExp(stranger) });
  t.equal((await get(`${gw.url}/api/v1/namespaces/default/configmaps`)).status, 200);

  // explain and skew say why, from their own look at the cluster.
  const cli = join(packageRoot(), 'dist/src/cli/main.js');
  const explained = JSON.parse(
    (await run(process.execPath, [cli, 'explain', '--config', gw.configFile, '--discover', '--json', 'GET', NEW_ONLY], { timeout: 60_000 }))
      .stdout,
  ) as {
    decision: { outcome: string; reason: string; candidates: string[] };
    membership: { synced: boolean; unmatched: { identity: string; hostname: string | null }[] };
  };
  t.match(explained.decision, { outcome: 'unavailable', reason: 'unmatched_apiserver_identity', candidates: [stranger] });
  t.same(
    explained.membership.unmatched.map((u) => [u.identity, u.hostname]),
    [[stranger, STRANGER.name]],
  );
  const skew = await run(process.execPath, [cli, 'skew', '--config', gw.configFile, '--discover'], { timeout: 60_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (err: { code?: number; stdout?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '' }),
  );
  t.equal(skew.code, 1, 'skew: exit 1, an apiserver it could not compare');
  t.match(skew.stdout, new RegExp(`not compared: ${stranger} \\(hostname kas-11\\)`));
  t.match(skew.stdout, new RegExp(`a running apiserver is not in the config: identity ${stranger} \\(hostname kas-11\\)`));
  const validated = await run(process.execPath, [cli, 'validate', '--config', gw.configFile], { timeout: 60_000 }).then(
    () => ({ code: 0, stdout: '' }),
    (err: { code?: number; stdout?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '' }),
  );
  t.equal(validated.code, 1, 'validate: exit 1, a problem');
  t.match(validated.stdout, new RegExp(`a running apiserver is not in the config: identity ${stranger} \\(hostname kas-11\\)`));
});
