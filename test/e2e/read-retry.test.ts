// A read cut by an apiserver before it answered (one stopping mid-request: Envoy's UC) is tried on
// another apiserver; a write cut the same way is not (it may have been applied): the client gets a
// Status 503 and the write reached one apiserver, once.
import t from 'tap';
import { BUILTINS_NEW } from '../../harness/fake/index.js';
import { send } from '../helpers/envoy-fixtures.js';
import { stackFixture } from '../helpers/stack-fixture.js';

const COMMON = '/api/v1/namespaces/default/configmaps';
const fixture = stackFixture(t, 'read-retry', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_NEW },
    { name: 'apiserver-b', builtins: BUILTINS_NEW },
  ],
  failureMode: 'open',
  clientCertificates: false,
});
const port = (): number => Number(new URL(fixture.stack().gatewayUrl).port);
const token = (): Record<string, string> => ({ authorization: `Bearer ${fixture.stack().pki.token}` });
const seen = (name: string, method: string): number =>
  fixture
    .stack()
    .apiservers.find((a) => a.name === name)
    ?.requests.filter((r) => r.method === method && r.path.startsWith(COMMON)).length ?? 0;

t.test('a GET cut before the answer: tried on the other apiserver, the client sees 200', async (t) => {
  const [a] = fixture.stack().apiservers;
  for (const s of fixture.stack().apiservers) s.clearRequests();
  a?.setResetRequests((method, path) => method === 'GET' && path.startsWith(COMMON));
  t.teardown(() => a?.setResetRequests(null));
  const statuses: number[] = [];
  for (let i = 0; i < 10; i++) statuses.push((await send(port(), fixture.stack().pki, 'GET', COMMON, token())).status);
  t.same(statuses, Array(10).fill(200), 'every read answered');
  t.ok(seen('apiserver-a', 'GET') > 0, `apiserver-a cut ${seen('apiserver-a', 'GET')} of them`);
  t.equal(seen('apiserver-b', 'GET'), 10, 'apiserver-b answered all ten');
});

t.test('a POST cut before the answer: not tried again; a Status 503, the write sent once', async (t) => {
  for (const s of fixture.stack().apiservers) {
    s.clearRequests();
    s.setResetRequests((method, path) => method === 'POST' && path.startsWith(COMMON));
  }
  t.teardown(() => {
    for (const s of fixture.stack().apiservers) s.setResetRequests(null);
  });
  const r = await send(port(), fixture.stack().pki, 'POST', COMMON, { ...token(), 'content-type': 'application/json' });
  t.equal(r.status, 503, r.body);
  t.match(JSON.parse(r.body), { kind: 'Status', reason: 'ServiceUnavailable', code: 503 });
  t.equal(seen('apiserver-a', 'POST') + seen('apiserver-b', 'POST'), 1, 'one attempt, on one apiserver');
});
