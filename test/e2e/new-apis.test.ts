// docs/design.md, invariant 1, through a real Envoy: a new CRD is learnt through the watch, never a false 404.
// Discovery polls only every 60 s here, so only the CRD/APIService watch can explain the result
// (every wait is a hang guard far below 60 s); that the watch's refreshes come at once and 250 and
// 750 ms later, hence within 1 s, is pinned with a fake clock in test/unit/discovery-watch.test.ts.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { discoveryQuiet } from '../helpers/discovery-fixtures.js';
import { createClient, eventually, type Client } from '../helpers/http.js';

let stack: Stack;
let client: Client;
t.before(async () => {
  stack = await startStack({
    dir: mkdtempSync(join(tmpdir(), 'sg-e2e-crd-')),
    discoveryInterval: 60_000,
    servers: [
      { name: 'apiserver-a', builtins: BUILTINS_OLD },
      { name: 'apiserver-b', builtins: BUILTINS_OLD, discovery: 'legacy' },
      { name: 'apiserver-c', builtins: BUILTINS_NEW },
    ],
  });
  client = createClient(stack.pki.caFile, stack.pki.token);
});
t.teardown(async () => {
  await client?.close();
  await stack?.close();
});

const crd = (plural: string) => ({
  apiVersion: 'apiextensions.k8s.io/v1',
  kind: 'CustomResourceDefinition',
  metadata: { name: `${plural}.example.com` },
  spec: {
    group: 'example.com',
    scope: 'Namespaced',
    names: { plural, singular: plural.slice(0, -1), kind: 'Widget' },
    versions: [
      {
        name: 'v1',
        served: true,
        storage: true,
        schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
      },
    ],
  },
});

t.test('before the CRD exists its resource is a true 404 from the edge', async (t) => {
  const a = await client.send('GET', `${stack.gatewayUrl}/apis/example.com/v1/namespaces/default/widgets`);
  t.equal(a.status, 404);
  t.equal(a.server, undefined, 'answered by skewgate');
});

t.test('a CRD created through the gateway becomes routable through the watch, and stays so', async (t) => {
  const widgets = `${stack.gatewayUrl}/apis/example.com/v1/namespaces/default/widgets`;
  // Start-up refreshes over: what skewgate learns from here on, the CRD's watch event taught it.
  await discoveryQuiet(stack.apiservers);
  const created = await client.send('POST', `${stack.gatewayUrl}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, {
    body: crd('widgets'),
  });
  t.equal(created.status, 201);
  const ms = await eventually('the new resource routable', async () => (await client.send('GET', widgets)).status === 200, 15_000, 10);
  t.comment(`learnt ${ms} ms after the create (discovery poll: 60 s)`);
  const after: string[] = [];
  for (let i = 0; i < 50; i++) {
    const a = await client.send('GET', widgets);
    after.push(`${a.status} ${a.server ?? 'edge'}`);
  }
  t.same(
    after.filter((x) => !x.startsWith('200 apiserver-')),
    [],
    'no 404 once learnt: 50 more, every one answered by an apiserver',
  );
  const w = await client.send('POST', `${stack.gatewayUrl}/apis/example.com/v1/namespaces/default/widgets`, {
    body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w1', namespace: 'default' } },
  });
  t.equal(w.status, 201);
});
