// In-cluster clients through the gateways: with kubernetesService.publish, the gateways write the
// `default/kubernetes` Endpoints and EndpointSlice with their own addresses (the lab's apiservers
// run with --endpoint-reconciler-type=none, as the recipe requires). A client that resolves the
// Service as kube-proxy would reaches a gateway; a gateway whose skewgate is killed leaves the
// endpoints within its lease duration; the last one to stop gracefully hands them back to the
// apiservers — never empty, never pointing at nothing. Real kube-apiservers, two gateways (Envoy +
// skewgate). Fails, never skips, when a part is missing.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { readFile } from 'node:fs/promises';
import { Agent, request } from 'undici';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import { freeLoopbackPort } from '../load/run.js';
import { withLoadLab } from '../helpers/load-lab.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
t.setTimeout(8 * 60_000);

const SLICE = '/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes';
const ENDPOINTS = '/api/v1/namespaces/default/endpoints/kubernetes';
const NEW_ONLY = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const LEASE_MS = 6000;
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

      // gw-b's skewgate is killed: nothing withdraws it, its Lease runs out, gw-a drops it.
      const status = await lab.status();
      const pid = status.find((p) => p.name === 'skewgate-gw-b')?.pid;
      if (pid === null || pid === undefined) throw new Error('no pid for skewgate-gw-b');
      process.kill(pid, 'SIGKILL');
      const killedFor = await until('the killed gateway out', [`${A}:${port}`], LEASE_MS + 10_000);
      progress(`killed gateway gone from the endpoints after ${killedFor} ms (lease ${LEASE_MS} ms)`);
      t.ok(killedFor <= LEASE_MS + 5000, `a dead gateway leaves the endpoints within its lease duration and a tick (${killedFor} ms)`);

      // The last gateway stops gracefully: it hands the Service back to the apiservers.
      await lab.stopSkewgate('gw-a');
      await until('the apiservers back', [`${slot.alias(1)}:6443`, `${slot.alias(2)}:6443`], 15_000);
      t.pass('the last gateway to stop wrote the apiservers back: never empty, never pointing at nothing');
    },
  );
});
