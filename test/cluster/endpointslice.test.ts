// The EndpointSlice source against real kube-apiservers that publish themselves: two apiservers
// at addresses the lab adds to lo (not 127/8, so the real lease endpoint reconciler runs and
// writes `default/kubernetes`), a gateway whose config names only the first. The second is learnt
// from the slice its own reconciler wrote, probed, given to Envoy and routed to; stopped, it
// leaves the slice (its reconciler removes it on shutdown) and skewgate drains, then removes it.
// Fails, never skips, when a part (or root for `ip addr add`) is missing. Uses two alias addresses
// of its lab slot (left on lo afterwards: harmless, and the next run finds them there).
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { readFile } from 'node:fs/promises';
import { freePort } from '../../harness/lab/lab.js';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { apiserverIdentity } from '../../src/membership/apiserver-identity.js';
import { IDENTITY_LEASE_SELECTOR, IDENTITY_LEASES_PATH } from '../../src/membership/identity-leases.js';
import { KUBERNETES_SLICES_PATH, KUBERNETES_SLICES_SELECTOR } from '../../src/membership/sources.js';
import { learntName } from '../../src/membership/members.js';
import { requireLabParts } from '../helpers/lab-parts.js';
import { ownLab } from '../helpers/cluster-lab.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
t.setTimeout(6 * 60_000);

const { versions } = requireLabParts();
const slot = claimLabSlot();
const SEED: ApiServerSpec = { name: 'kas-21', version: versions.kubeOld, ip: slot.alias(1), port: 6443, placement: 'alias' };
const JOINER: ApiServerSpec = { name: 'kas-22', version: versions.kubeNew, ip: slot.alias(2), port: 6443, placement: 'alias' };
const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

const { lab, get } = await ownLab(t, { name: 'endpointslice', addresses: slot, servername: 'kubernetes' });

/** The addresses in the kubernetes EndpointSlices, as the apiservers wrote them. */
async function sliceAddresses(): Promise<string[]> {
  const q = new URLSearchParams({ labelSelector: KUBERNETES_SLICES_SELECTOR });
  const r = await get(`${lab.apiServerUrl(SEED.name)}${KUBERNETES_SLICES_PATH}?${q}`);
  if (r.status !== 200) throw new Error(`listing the kubernetes EndpointSlices: ${r.status} ${r.body.slice(0, 200)}`);
  const items = (JSON.parse(r.body) as { items: { endpoints?: { addresses: string[] }[] }[] }).items;
  return items.flatMap((i) => (i.endpoints ?? []).flatMap((e) => e.addresses)).sort();
}

async function until<T>(what: string, ms: number, probe: () => Promise<T | undefined>): Promise<T> {
  for (const deadline = Date.now() + ms; Date.now() < deadline; await sleep(200)) {
    const v = await probe();
    if (v !== undefined) return v;
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`);
}

t.test(
  'an apiserver published in the kubernetes EndpointSlice by its own reconciler is learnt, routed to, then drained and removed',
  async (t) => {
    await lab.startEtcd();
    await lab.startApiServer(SEED);
    await until('kas-21 in the slice', 30_000, async () => ((await sliceAddresses()).includes(SEED.ip) ? true : undefined));
    const gw = await lab.startGateway({ name: 'slices', withSkewgate: true, port: await freePort(), membershipSources: ['endpointSlice'] });
    const before = await until('the seed alone: a true 404', 30_000, async () => {
      const r = await get(`${gw.url}${NEW_ONLY}`);
      return r.reason === 'resource_not_served' ? r : undefined;
    });
    t.equal(before.status, 404, 'kas-21 alone (the slice names only it): a true 404');

    const learnt = learntName(JOINER.ip, JOINER.port);
    await lab.startApiServer(JOINER);
    const listed = await until('kas-22 in the slice', 60_000, async () =>
      (await sliceAddresses()).includes(JOINER.ip) ? Date.now() : undefined,
    );
    t.same(await sliceAddresses(), [SEED.ip, JOINER.ip], 'both apiservers published themselves');
    const falseNotFound: string[] = [];
    const routedAt = await until('routed to the learnt apiserver', 30_000, async () => {
      const r = await get(`${gw.url}${NEW_ONLY}`);
      if (r.status === 404) falseNotFound.push(`${Date.now() - listed} ms after the slice listed it: ${r.reason ?? '?'}`);
      return r.status === 200 ? Date.now() : undefined;
    });
    t.same(falseNotFound, [], 'no 404 once kas-22 was running');
    t.comment(`slice listed kas-22 → routed through the gateway: ${routedAt - listed} ms`);
    t.ok(routedAt - listed < 10_000, `learnt, probed and routed within 10 s of the slice listing it (${routedAt - listed} ms)`);
    const clusters = await (await fetch(`${gw.envoyAdminUrl}/clusters`)).text();
    t.match(clusters, new RegExp(`^${learnt}::`, 'm'), "Envoy has the learnt apiserver's cluster (no Envoy restart)");

    // Stopped gracefully, kube-apiserver removes itself from the slice; skewgate drains it (10 s in the lab), then removes it.
    await lab.stopApiServer(JOINER.name);
    await until('kas-22 out of the slice', 60_000, async () => ((await sliceAddresses()).includes(JOINER.ip) ? undefined : true));
    await until('the learnt cluster gone from Envoy', 60_000, async () =>
      new RegExp(`^${learnt}::`, 'm').test(await (await fetch(`${gw.envoyAdminUrl}/clusters`)).text()) ? undefined : true,
    );
    const log = await readFile(lab.logFile('skewgate-slices'), 'utf8');
    for (const line of [
      'apiserver learnt; probing it',
      'apiserver admitted as a member',
      'apiserver left every source: draining',
      'drained apiserver removed',
    ])
      t.ok(
        log.split('\n').some((l) => l.includes(line) && l.includes(learnt)),
        `skewgate logged "${line}" for ${learnt}`,
      );
    // Gone: while its identity Lease still looks live, no 404 (it might be running); once not, a true one.
    const q = new URLSearchParams({ labelSelector: IDENTITY_LEASE_SELECTOR });
    const leases = await get(`${lab.apiServerUrl(SEED.name)}${IDENTITY_LEASES_PATH}?${q}`);
    const mine = (JSON.parse(leases.body) as { items: { metadata: { name: string } }[] }).items.some(
      (i) => i.metadata.name === apiserverIdentity(JOINER.name),
    );
    const after = await get(`${gw.url}${NEW_ONLY}`);
    if (mine) t.match(after, { status: 503, reason: 'unmatched_apiserver_identity' }, 'its Lease is still there: 503, never 404');
    else t.match(after, { status: 404, reason: 'resource_not_served' }, 'its Lease is gone: a true 404');
    t.comment(`after kas-22 stopped, its identity Lease was ${mine ? 'still listed' : 'deleted'}`);
  },
);
