// A kube-apiserver the gateway's config does not name (a control-plane machine just added at a new
// address, Cluster API's first step of an upgrade) must stop skewgate answering 404 for what only
// it serves, on its identity Lease's creation: from skewgate's own logged transition on, never a
// 404 again, and that transition comes before kube-apiserver first renews the Lease (orderings,
// not a time; how long it took is a figure). Real kube-apiservers (two KUBE_OLD members, then a
// KUBE_NEW one that is no member), Envoy + skewgate. Fails, never skips, when a part is missing.
// Uses the addresses of its lab slot.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from '../../harness/lab/lab.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { IDENTITY_LEASE_SELECTOR, IDENTITY_LEASES_PATH } from '../../src/membership/identity-leases.js';
import { packageRoot } from '../../src/util/package-root.js';
import { requireLabParts } from '../helpers/lab-parts.js';
import { ownLab } from '../helpers/cluster-lab.js';
import { jsonLinesSince, logMark } from '../helpers/log-since.js';
import { membershipFindings, type LeaseSeen, type MembershipRound } from '../helpers/membership-record.js';

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
/** skewgate's log line when a live apiserver's identity Lease matches no member (src/discovery/service.ts). */
const UNMATCHED_MSG = 'identity leases: a live apiserver matches no configured member';
const REFUSAL = 'unmatched_apiserver_identity';
/** kube-apiserver renews its identity Lease every 10 s (IdentityLeaseRenewIntervalPeriod, 1.35 and 1.36 alike). */
const IDENTITY_RENEW_MS = 10_000;
/** Answers sent after skewgate's transition that must all be its refusal. */
const MIN_AFTER = 5;

const { lab, get } = await ownLab(t, { name: 'membership', addresses: slot });

/** The identity Leases a member lists right now: name → renewTime and creation. */
async function leases(): Promise<Map<string, LeaseSeen>> {
  const q = new URLSearchParams({ labelSelector: IDENTITY_LEASE_SELECTOR });
  const r = await get(`${lab.apiServerUrl('kas-9')}${IDENTITY_LEASES_PATH}?${q}`);
  if (r.status !== 200) throw new Error(`listing identity leases: ${r.status} ${r.body.slice(0, 200)}`);
  const items = (JSON.parse(r.body) as { items: { metadata: { name: string; creationTimestamp: string }; spec: { renewTime: string } }[] })
    .items;
  return new Map(
    items.map((i) => [i.metadata.name, { renewTime: Date.parse(i.spec.renewTime), createdAt: Date.parse(i.metadata.creationTimestamp) }]),
  );
}

t.test('an apiserver no source names blocks the 404 from the creation of its identity Lease', async (t) => {
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
  t.same([...(await leases()).keys()].sort(), [...mine].sort(), "the members' own identity Leases, and no other");

  // The stranger starts. Each round reads skewgate's log, lists the Leases, then sends the request.
  const stranger = apiserverIdentity(STRANGER.name);
  const skewgateLog = lab.logFile('skewgate-members');
  const mark = await logMark(skewgateLog);
  const started = lab.startApiServer(STRANGER);
  const rounds: MembershipRound[] = [];
  let transition: Record<string, unknown> | undefined;
  let leaseAt: number | null = null;
  let refusedAt: number | null = null;
  for (
    const deadline = Date.now() + 120_000;
    Date.now() < deadline && rounds.filter((r) => r.afterTransition).length < MIN_AFTER;
    await sleep(50)
  ) {
    transition ??= (await jsonLinesSince(skewgateLog, mark, UNMATCHED_MSG)).find((o) =>
      (o['unmatched'] as { identity?: string }[] | undefined)?.some((u) => u.identity === stranger),
    );
    const lease = (await leases()).get(stranger) ?? null;
    if (lease !== null) leaseAt ??= Date.now();
    const r = await get(`${gw.url}${NEW_ONLY}`);
    if (r.status === 503 && r.reason === REFUSAL) refusedAt ??= Date.now();
    rounds.push({ afterTransition: transition !== undefined, lease, status: r.status, reason: r.reason });
  }
  await started;
  const f = membershipFindings(rounds, REFUSAL, IDENTITY_RENEW_MS);
  t.comment(
    `lease listed → first refusal: ${refusedAt !== null && leaseAt !== null ? `${refusedAt - leaseAt} ms` : 'n/a'} (a figure); ${rounds.length} rounds, ${f.notFoundBeforeTransition} 404s between the Lease being listable and skewgate's transition`,
  );
  t.ok(transition !== undefined, `skewgate logged that ${stranger} matches no member`);
  t.same(
    (transition?.['unmatched'] as { identity?: string; hostname?: string }[] | undefined)?.find((u) => u.identity === stranger),
    { identity: stranger, hostname: STRANGER.name },
    'naming its identity Lease and the hostname in it',
  );
  t.ok(f.afterTransition >= MIN_AFTER, `${f.afterTransition} answers sent after that transition (at least ${MIN_AFTER})`);
  t.same(f.notRefused, [], `every one of them 503 ${REFUSAL}: never a 404 once skewgate knew`);
  // kube-apiserver creates the Lease and renews it IDENTITY_RENEW_MS later: skewgate acted on the creation.
  t.equal(f.renewedByTransition, false, `the transition came before the Lease's first renewal (every ${IDENTITY_RENEW_MS / 1000} s)`);

  // It stays refused while the stranger runs, and what the members serve is untouched.
  const again = await get(`${gw.url}${NEW_ONLY}`);
  t.match(again, { status: 503, reason: REFUSAL });
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
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({
      code: err.code ?? -1,
      stdout: err.stdout ?? '',
      stderr: err.stderr ?? '',
    }),
  );
  t.equal(skew.code, 1, 'skew: exit 1, an apiserver it could not compare');
  // What is said to a person is on stderr; stdout holds the rows (issue 30, item 3).
  t.match(skew.stderr, new RegExp(`not compared: ${stranger} \\(hostname kas-11\\)`));
  t.match(skew.stderr, new RegExp(`a running apiserver is not in the config: identity ${stranger} \\(hostname kas-11\\)`));
  const validated = await run(process.execPath, [cli, 'validate', '--config', gw.configFile], { timeout: 60_000 }).then(
    () => ({ code: 0, stderr: '' }),
    (err: { code?: number; stderr?: string }) => ({ code: err.code ?? -1, stderr: err.stderr ?? '' }),
  );
  t.equal(validated.code, 1, 'validate: exit 1, a problem');
  t.match(validated.stderr, new RegExp(`a running apiserver is not in the config: identity ${stranger} \\(hostname kas-11\\)`));
});
