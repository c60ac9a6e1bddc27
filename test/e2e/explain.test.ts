// `skewgate explain` and the gateway decide alike: the same request — kubectl's GET /apis, a
// request with a client certificate, one whose certificate cannot be stated — is sent through a
// REAL Envoy + skewgate and given to `skewgate explain`, both as the running gateway's admin
// endpoint answers it and from a discovery round of explain's own (--discover); outcome and reason
// must agree, and what the gateway did must show it.
// Envoy missing → the stack fixture throws and the test fails (it never skips).
import t from 'tap';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { MEDIA_AGGREGATED_V2, REASON_HEADER } from '../../src/constants.js';
import { packageRoot } from '../../src/util/package-root.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { send } from '../helpers/envoy-fixtures.js';
import { stackFixture } from '../helpers/stack-fixture.js';

const CLI = join(packageRoot(), 'dist/src/cli/main.js');
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
/** What kubectl 1.36 sends for GET /apis (aggregated v2, then the legacy list). */
const KUBECTL_ACCEPT = `${MEDIA_AGGREGATED_V2},application/json`;

const fixture = stackFixture(t, 'explain', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_OLD },
    { name: 'apiserver-b', builtins: BUILTINS_NEW },
  ],
  failureMode: 'open',
});

interface Explained {
  readonly identity: { readonly kind: string; readonly user?: string; readonly groups?: string[] };
  readonly decision: {
    readonly outcome: string;
    readonly reason: string;
    readonly upstream?: string;
    readonly candidates?: string[];
    readonly etag?: string;
    readonly problem?: string;
  };
  readonly fastPath: { readonly takes: boolean; readonly why: string };
}

/**
 * `explain --json` twice: asked of the running gateway (its admin endpoint, found from the config)
 * and with --discover (a round of its own). Both must decide alike; the gateway's answer is returned.
 */
async function explain(method: string, path: string, ...extra: string[]): Promise<Explained> {
  const once = async (...mode: string[]): Promise<Explained> => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [CLI, 'explain', '--config', fixture.stack().configFile, ...mode, '--json', ...extra, method, path],
      { timeout: 60_000 },
    );
    return JSON.parse(stdout) as Explained;
  };
  const [asked, own] = [await once(), await once('--discover')];
  // The upstream is picked at random among the candidates: each pick is its own.
  const key = (e: Explained): unknown => ({
    decision: { outcome: e.decision.outcome, reason: e.decision.reason, candidates: e.decision.candidates },
    identity: e.identity,
    fastPath: e.fastPath,
  });
  if (JSON.stringify(key(asked)) !== JSON.stringify(key(own)))
    throw new Error(
      `the gateway and a round of its own disagree on ${method} ${path}: ${JSON.stringify(key(asked))} vs ${JSON.stringify(key(own))}`,
    );
  return asked;
}

const port = (): number => Number(new URL(fixture.stack().gatewayUrl).port);
const bearer = (): string => `Bearer ${fixture.stack().pki.token}`;

t.test("GET /apis with kubectl's Accept: both answer the merged document, with the same ETag", async (t) => {
  const reply = await send(port(), fixture.stack().pki, 'GET', '/apis', { accept: KUBECTL_ACCEPT, authorization: bearer() });
  t.equal(reply.status, 200);
  t.equal(reply.headers[REASON_HEADER], 'merged_apis', 'the gateway answered it itself');
  t.equal(reply.headers['x-fake-apiserver'], undefined, 'no apiserver answered');
  const e = await explain('GET', '/apis', '-H', `Accept: ${KUBECTL_ACCEPT}`, '-H', `Authorization: ${bearer()}`);
  t.match(e.decision, { outcome: 'discovery', reason: 'merged_apis' });
  t.same(e.fastPath, { takes: false, why: 'off (needs envoy.xds)' }, 'no fast path without filesystem xDS');
  t.equal(e.decision.etag, reply.headers.etag, 'the same document: explain merged what the gateway merged');
  // Without the Accept header both hand /apis (the legacy list) to an apiserver that lists every group.
  const plain = await send(port(), fixture.stack().pki, 'GET', '/apis', { authorization: bearer() });
  t.equal(plain.headers[REASON_HEADER], undefined, 'the gateway did not answer it');
  const legacy = (await explain('GET', '/apis', '-H', `Authorization: ${bearer()}`)).decision;
  t.match(legacy, { outcome: 'routed', reason: 'complete_document' });
  t.ok(
    legacy.candidates?.includes(String(plain.headers['x-fake-apiserver'])),
    `an apiserver explain names answered it (${String(plain.headers['x-fake-apiserver'])})`,
  );
  // And without credentials the merged document is not served at the edge.
  t.match((await explain('GET', '/apis', '-H', `Accept: ${KUBECTL_ACCEPT}`)).decision, {
    outcome: 'passthrough',
    reason: 'no_credentials',
  });
});

t.test('a client certificate: explain states the identity the gateway states, and routes where it routes', async (t) => {
  const jane = fixture.stack().pki.clients.limited;
  for (const a of fixture.stack().apiservers) a.clearRequests();
  const reply = await send(port(), fixture.stack().pki, 'GET', SKEWED, {}, jane);
  t.equal(reply.status, 200);
  const answeredBy = String(reply.headers['x-fake-apiserver']);
  const seen = fixture.stack().apiservers.flatMap((a) => a.requests.filter((r) => r.path === SKEWED));
  t.equal(seen.length, 1, 'one apiserver saw it');
  const e = await explain('GET', SKEWED, '--client-cert', jane.certFile);
  t.match(
    e.decision,
    { outcome: 'routed', reason: 'served_by_subset', upstream: answeredBy },
    `routed to ${answeredBy}, as the gateway did`,
  );
  t.match(e.identity, { kind: 'stated', user: seen[0]?.headers['x-remote-user'] }, 'the user the apiserver was told');
  t.same(e.identity.groups, ['dev-viewers', 'team-b']);
});

t.test('a certificate whose identity cannot be stated: both refuse it with the same reason', async (t) => {
  const noCn = fixture.stack().pki.clients.noCommonName;
  for (const a of fixture.stack().apiservers) a.clearRequests();
  const reply = await send(port(), fixture.stack().pki, 'GET', SKEWED, { authorization: bearer() }, noCn);
  t.equal(reply.status, 401);
  t.equal(reply.headers[REASON_HEADER], 'client_identity_unstated');
  t.equal(fixture.stack().apiservers.flatMap((a) => a.requests.filter((r) => r.path === SKEWED)).length, 0, 'no apiserver saw it');
  const e = await explain('GET', SKEWED, '--client-cert', noCn.certFile, '-H', `Authorization: ${bearer()}`);
  t.match(e.decision, { outcome: 'rejected', reason: 'client_identity_unstated', problem: /no common name/ });
  t.match(e.identity, { kind: 'unstated' });
});

t.test('explain refuses a header line it cannot read, and says which headers Envoy would strip', async (t) => {
  await t.rejects(explain('GET', '/api', '-H', 'no colon here'), { code: 2, stderr: /not a header line/ });
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [
      CLI,
      'explain',
      '--config',
      fixture.stack().configFile,
      '-H',
      'X-Remote-User: admin',
      '-H',
      'x-skewgate-upstream: apiserver-a',
      'GET',
      SKEWED,
    ],
    { timeout: 60_000 },
  );
  t.match(stdout, /stripped:\s+x-remote-user, x-skewgate-upstream/);
  t.match(stdout, /identity:\s+none/, 'a forged X-Remote-User states nothing');
});
