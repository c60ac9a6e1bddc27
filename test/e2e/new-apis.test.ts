// docs/design.md, invariant 1, through a real Envoy: a new CRD is learnt within 1 s, never a false 404.
// Discovery polls only every 60 s here, so only the CRD/APIService watch can explain the result.
import t from 'tap';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { startStack, type Stack } from '../../harness/demo/stack.js';
import { createClient, type Client } from '../helpers/http.js';

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
  spec: { group: 'example.com', scope: 'Namespaced', names: { plural, singular: plural.slice(0, -1), kind: 'Widget' }, versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } } }] },
});

t.test('before the CRD exists its resource is a true 404 from the edge', async (t) => {
  const a = await client.send('GET', `${stack.gatewayUrl}/apis/example.com/v1/namespaces/default/widgets`);
  t.equal(a.status, 404);
  t.equal(a.server, undefined, 'answered by skewgate');
});

t.test('a CRD created through the gateway is routable within 1 s, and stays so', async (t) => {
  const created = await client.send('POST', `${stack.gatewayUrl}/apis/apiextensions.k8s.io/v1/customresourcedefinitions`, { body: crd('widgets') });
  t.equal(created.status, 201);
  const start = Date.now();
  let first: number | undefined;
  let edge404AfterLearnt = 0;
  while (Date.now() - start < 1500) {
    const a = await client.send('GET', `${stack.gatewayUrl}/apis/example.com/v1/namespaces/default/widgets`);
    if (a.status === 200) first ??= Date.now() - start;
    else if (first !== undefined) edge404AfterLearnt++;
    await new Promise((r) => setTimeout(r, 10));
  }
  t.ok(first !== undefined && first < 1000, `learnt after ${String(first)} ms`);
  t.equal(edge404AfterLearnt, 0, 'no 404 once learnt');
  const w = await client.send('POST', `${stack.gatewayUrl}/apis/example.com/v1/namespaces/default/widgets`, { body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w1', namespace: 'default' } } });
  t.equal(w.status, 201);
});
