// In-cluster clients through the gateways: with kubernetesService.publish, the gateways write the
// `default/kubernetes` Endpoints and EndpointSlice with their own addresses (the lab's apiservers
// run with --endpoint-reconciler-type=none, as the recipe requires). A client that resolves the
// Service as kube-proxy would reaches a gateway; a gateway whose skewgate is killed leaves the
// endpoints once its Lease has run out and by the end of the survivor's next tick (orderings of
// the Leases' own renewals, not a time); the last one to stop gracefully hands them back to the
// apiservers. A watch of each object from before the kill to after the handback records every
// state they went through: never empty, never pointing at nothing. Real kube-apiservers, two
// gateways (Envoy + skewgate). Fails, never skips, when a part is missing.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'undici';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { GATEWAY_LEASE_SELECTOR, LEASES_PATH, gatewayLeaseName, parseGatewayLease } from '../../src/kubernetes-service/core/publication.js';
import { freeLoopbackPort } from '../load/run.js';
import { withLoadLab } from '../helpers/load-lab.js';
import { ObjectWatch } from '../helpers/object-watch.js';
import { deadGatewayFindings, stateSequence, stateText, type ServicePoll } from '../helpers/service-record.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
t.setTimeout(8 * 60_000);

const SLICE = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes';
const ENDPOINTS = '/api/v1/namespaces/default/endpoints/kubernetes';
const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/** The gateways' Lease duration; each renews it, and rewrites the endpoints, every third of it. */
const LEASE_MS = 6000;
/**
 * How long to wait for the dead gateway to leave before calling it never removed: its Lease (at
 * most LEASE_MS from the kill) and then a handful of the survivor's ticks. A wait limit; the
 * verdict is the ordering in deadGatewayFindings.
 */
const REMOVAL_WAIT_MS = LEASE_MS + 10 * (LEASE_MS / 3);
const slot = claimLabSlot();
const A = slot.alias(14);
const B = slot.alias(15);

t.test('the kubernetes Service points at the live gateways, and back at the apiservers when none is left', async (t) => {
  await withLoadLab(
    'kubernetes-service',
    { connections: 4, addresses: slot },
    async ({ parts: { versions: v }, lab, session, progress }) => {
      // At alias addresses too, so that they can be the Service's endpoints when the gateways hand
      // it back; their own reconciler off, as the recipe requires (a later flag wins).
      const spec = (name: string, version: string): ApiServerSpec => ({
        name,
        version,
        ip: slot.alias(Number(name.slice(-1))),
        port: 6443,
        placement: 'alias',
        extraArgs: ['--endpoint-reconciler-type=none'],
      });
      await Promise.all([session.start(spec('kas-1', v.kubeOld)), session.start(spec('kas-2', v.kubeNew))]);
      const port = await freeLoopbackPort();
      // Not loopback: an Endpoints address may not be one (the lab adds these to lo).
      for (const [name, address] of [
        ['gw-a', A],
        ['gw-b', B],
      ] as const) {
        await lab.startGateway({ name, withSkewgate: true, port, address, publishService: { leaseDuration: `${LEASE_MS}ms` } });
      }
      const kas1 = lab.apiServerUrl('kas-1');
      const published = async (path: string): Promise<string[]> => {
        const r = await session.direct.send('GET', `${kas1}${path}`);
        if (r.status === 404) return [];
        if (r.status !== 200) throw new Error(`GET ${path}: ${r.status}`);
        const o = JSON.parse(r.text) as {
          endpoints?: { addresses: string[] }[];
          ports?: { port: number }[];
          subsets?: { addresses?: { ip: string }[]; ports?: { port: number }[] }[];
        };
        if (o.endpoints) return o.endpoints.flatMap((e) => e.addresses.map((a) => `${a}:${o.ports?.[0]?.port}`)).sort();
        return (o.subsets ?? []).flatMap((s) => (s.addresses ?? []).flatMap((a) => (s.ports ?? []).map((p) => `${a.ip}:${p.port}`))).sort();
      };
      const until = async (what: string, want: string[], ms: number): Promise<number> => {
        const t0 = Date.now();
        let got: string[] = [];
        for (const deadline = t0 + ms; Date.now() < deadline; await sleep(200)) {
          const [slice, eps] = [await published(SLICE), await published(ENDPOINTS)];
          got = slice;
          if (JSON.stringify(slice) === JSON.stringify(want) && JSON.stringify(eps) === JSON.stringify(want)) return Date.now() - t0;
        }
        throw new Error(`timed out waiting for ${what}: the slice lists ${JSON.stringify(got)}, not ${JSON.stringify(want)}`);
      };
      const gatewayAddresses = [`${A}:${port}`, `${B}:${port}`];
      await until('both gateways published', gatewayAddresses, 30_000);
      t.pass(`the kubernetes Endpoints and EndpointSlice list both gateways: ${gatewayAddresses.join(', ')}`);

      // An in-cluster-style client: the Service's endpoints, as kube-proxy would pick one, and the
      // name in-cluster config verifies (kubernetes.default.svc), with a token.
      const ca = await readFile(lab.pki.caFile, 'utf8');
      const agent = new Agent({ connect: { ca, servername: 'kubernetes.default.svc' } });
      t.teardown(() => agent.close());
      for (const addr of await published(SLICE)) {
        const res = await request(`https://${addr}${NEW_ONLY}`, {
          dispatcher: agent,
          headers: { authorization: `Bearer ${lab.pki.adminToken}` },
        });
        await res.body.text();
        t.equal(
          res.statusCode,
          200,
          `via the Service endpoint ${addr}: ${NEW_ONLY} answered (only kas-2 serves it; skewgate routed it there)`,
        );
      }

      // Every state of both objects from here to the handback, by watch (a poll would miss some).
      const watchUrl = (collection: string): string =>
        `${kas1}${collection}?${new URLSearchParams({ watch: '1', fieldSelector: 'metadata.name=kubernetes', timeoutSeconds: '600' })}`;
      const watches = {
        endpoints: new ObjectWatch(session.direct, watchUrl(ENDPOINTS.replace(/\/kubernetes$/, ''))),
        slice: new ObjectWatch(session.direct, watchUrl(SLICE.replace(/\/kubernetes$/, ''))),
      };
      t.teardown(() => Promise.all(Object.values(watches).map((w) => w.stop())));
      await Promise.all(Object.values(watches).map((w) => w.start()));

      // gw-b's skewgate is killed: nothing withdraws it, its Lease runs out, gw-a drops it. Each
      // round reads the gateway Leases first, then both objects, and every round is kept.
      const leases = async (): Promise<ServicePoll['leases']> => {
        const r = await session.direct.send(
          'GET',
          `${kas1}${LEASES_PATH}?${new URLSearchParams({ labelSelector: GATEWAY_LEASE_SELECTOR })}`,
        );
        if (r.status !== 200) throw new Error(`listing the gateway Leases: ${r.status}`);
        return ((JSON.parse(r.text) as { items?: unknown[] }).items ?? []).flatMap((o) => parseGatewayLease(o) ?? []);
      };
      const status = await lab.status();
      const pid = status.find((p) => p.name === 'skewgate-gw-b')?.pid;
      if (pid === null || pid === undefined) throw new Error('no pid for skewgate-gw-b');
      process.kill(pid, 'SIGKILL');
      const polls: ServicePoll[] = [];
      const [dead, survivor] = [gatewayLeaseName('gw-b'), gatewayLeaseName('gw-a')];
      const findings = () => deadGatewayFindings(polls, dead, survivor, `${B}:${port}`);
      for (const deadline = Date.now() + REMOVAL_WAIT_MS; Date.now() < deadline && findings().settled === 0; await sleep(200)) {
        const ls = await leases();
        const leasesAt = Date.now();
        const [endpoints, slice] = await Promise.all([published(ENDPOINTS), published(SLICE)]);
        polls.push({ leasesAt, leases: ls, objectsAt: Date.now(), endpoints, slice });
      }
      const f = findings();
      const goneAt = polls.find((p) => !p.endpoints.includes(`${B}:${port}`) && !p.slice.includes(`${B}:${port}`))?.objectsAt;
      progress(
        `killed gateway: ${polls.length} rounds, ${f.beforeExpiry} before its Lease ran out, ${f.settled} after the survivor's next tick; first seen gone ${goneAt === undefined || f.expiresAt === null ? 'never' : `${goneAt - f.expiresAt} ms after the expiry`} (a figure)`,
      );
      t.ok(f.expiresAt !== null, "the dead gateway's Lease was seen");
      // Not removed while its Lease lives (the survivor drops only an expired one): a slow machine only reads later.
      t.ok(f.beforeExpiry >= 1, `${f.beforeExpiry} rounds read before its Lease ran out (at least 1)`);
      t.same(f.droppedEarly, [], 'listed in both objects until its Lease ran out');
      // Removed by the survivor's first tick that began after the expiry: seen once the survivor has renewed again.
      t.ok(f.settled >= 1, `${f.settled} rounds read after the survivor's first tick past the expiry had ended (at least 1)`);
      t.same(f.listedLate, [], 'after that tick, in neither object');

      // The last gateway stops gracefully: it hands the Service back to the apiservers.
      await lab.stopSkewgate('gw-a');
      await until('the apiservers back', [`${slot.alias(1)}:6443`, `${slot.alias(2)}:6443`], 15_000);
      await Promise.all(Object.values(watches).map((w) => w.stop()));

      // Every state each object went through, from both gateways to the apiservers.
      const gatewaysBoth = gatewayAddresses.join(',');
      const want = [gatewaysBoth, `${A}:${port}`, `${slot.alias(1)}:6443,${slot.alias(2)}:6443`];
      for (const [name, w] of Object.entries(watches)) {
        t.equal(w.endedEarly, null, `${name}: the watch ran unbroken from before the kill to after the handback`);
        const states = stateSequence(w.events).map(stateText);
        t.ok(
          w.events.length >= want.length,
          `${name}: ${w.events.length} watch events (at least ${want.length}: the first state and two changes)`,
        );
        t.same(states, want, `${name}: both gateways, then the survivor, then the apiservers: never empty, never a dead address`);
      }
    },
  );
});
