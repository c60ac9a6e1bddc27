import t from 'tap';
import { BOUNDED_HEADER, REASON_HEADER, UPSTREAM_HEADER } from '../../src/constants.js';
import type { ProcessingResponseMsg } from '../../src/extproc/core/messages.js';
import { loadProtos } from '../../src/extproc/proto.js';
import { continueRequestHeaders, emptyResponseFor, internalErrorResponse, responseFor, routeTo } from '../../src/extproc/core/responses.js';
import type { ProcessingResponseOut } from '../../src/extproc/core/messages.js';
import type { Decision } from '../../src/routing/decision.js';
import { resourceInfo, resultOf, statedIdentity } from '../helpers/extproc-client.js';
import { REQUEST_PHASES } from '../../src/extproc/core/messages.js';

const { extProc } = loadProtos();
const processMethod = extProc['Process'];
if (!processMethod) throw new Error('Process method missing');

/** Through the real serializer and back, so every assertion is about what goes on the wire. */
function wire(res: ProcessingResponseOut): ProcessingResponseMsg {
  return processMethod!.responseDeserialize(processMethod!.responseSerialize(res)) as ProcessingResponseMsg;
}

type SetHeaders = NonNullable<NonNullable<NonNullable<ProcessingResponseMsg['immediate_response']>['headers']>['set_headers']>;

function headersOf(list: SetHeaders | undefined): Map<string, string> {
  const m = new Map<string, string>();
  for (const o of list ?? []) {
    const h = o.header;
    if (!h?.key) continue;
    m.set(h.key, Buffer.from(h.raw_value ?? []).toString('utf8'));
  }
  return m;
}

type Asserts = Pick<typeof t, 'equal' | 'ok'>;

function assertRawOnly(t: Asserts, list: SetHeaders | undefined): void {
  t.ok(list && list.length > 0, 'headers are set');
  for (const o of list ?? []) {
    t.equal(o.header?.value, '', `${o.header?.key}: value is empty`);
    t.ok((o.header?.raw_value?.length ?? 0) > 0, `${o.header?.key}: raw_value set`);
  }
}

t.test('routed: sets the upstream header with raw_value only and clears the route cache', async (t) => {
  const decision: Decision = { outcome: 'routed', reason: 'served_by_subset', candidates: ['kas-new'], upstream: 'kas-new' };
  const res = wire(responseFor(resultOf(decision), 5));
  t.equal(res.response, 'request_headers');
  const common = res.request_headers?.response;
  t.equal(common?.clear_route_cache, true);
  t.equal(common?.status, 'CONTINUE');
  const set = common?.header_mutation?.set_headers;
  assertRawOnly(t, set);
  t.equal(set?.length, 1);
  t.equal(set?.[0]?.header?.key, UPSTREAM_HEADER);
  t.equal(Buffer.from(set?.[0]?.header?.raw_value ?? []).toString(), 'kas-new');
  t.equal(set?.[0]?.append, null, 'append unset means overwrite');
  t.equal(set?.[0]?.append_action, 'APPEND_IF_EXISTS_OR_ADD', 'append_action left at its zero value');
  t.same(routeTo('x'), {
    request_headers: {
      response: {
        header_mutation: { set_headers: [{ header: { key: UPSTREAM_HEADER, raw_value: Buffer.from('x') } }] },
        clear_route_cache: true,
      },
    },
  });
});

t.test('default and passthrough continue without touching headers', async (t) => {
  const decisions: Decision[] = [
    { outcome: 'default', reason: 'served_by_all', candidates: ['a', 'b'] },
    { outcome: 'passthrough', reason: 'non_resource', candidates: [] },
    { outcome: 'passthrough', reason: 'not_synced', candidates: [] },
    { outcome: 'passthrough', reason: 'view_incomplete', candidates: [] },
    { outcome: 'passthrough', reason: 'verb_not_listed', candidates: ['a'] },
    { outcome: 'passthrough', reason: 'empty_path_segment', candidates: [] },
  ];
  for (const d of decisions) {
    const out = responseFor(resultOf(d), 5);
    t.same(out, continueRequestHeaders(), `${d.outcome}/${d.reason}`);
    const res = wire(out);
    t.equal(res.response, 'request_headers');
    t.equal(res.request_headers?.response?.header_mutation, null, 'no header mutation');
    t.equal(res.request_headers?.response?.clear_route_cache, false);
    t.equal(res.immediate_response, undefined);
  }
});

t.test('a bounded request carries the mark and picks its route again; answers of its own never do', async (t) => {
  const upstreamOf = (res: ProcessingResponseMsg): Map<string, string> =>
    headersOf(res.request_headers?.response?.header_mutation?.set_headers);
  const cases: readonly Decision[] = [
    { outcome: 'routed', reason: 'served_by_subset', candidates: ['kas-new'], upstream: 'kas-new' },
    { outcome: 'default', reason: 'served_by_all', candidates: ['a', 'b'] },
    { outcome: 'passthrough', reason: 'non_resource', candidates: [] },
  ];
  for (const d of cases) {
    const marked = wire(responseFor(resultOf(d), 5, [['traceparent', '00-a-b-01']], true));
    t.equal(upstreamOf(marked).get(BOUNDED_HEADER), 'true', `${d.outcome}: marked`);
    t.equal(upstreamOf(marked).get('traceparent'), '00-a-b-01', `${d.outcome}: beside the trace context`);
    t.equal(marked.request_headers?.response?.clear_route_cache, true, `${d.outcome}: Envoy picks the bounded route`);
    const unmarked = wire(responseFor(resultOf(d), 5, [], false));
    t.notOk(upstreamOf(unmarked).has(BOUNDED_HEADER), `${d.outcome}: a long-running request is not marked`);
  }
  const nf = wire(responseFor(resultOf({ outcome: 'not_found', reason: 'resource_not_served', candidates: [] }), 5, [], true));
  t.equal(nf.immediate_response?.status?.code, 404);
  t.notOk(headersOf(nf.immediate_response?.headers?.set_headers).has(BOUNDED_HEADER), "skewgate's own answer carries no mark");
});

interface ImmediateCase {
  readonly name: string;
  readonly decision: Decision;
  readonly info?: ReturnType<typeof resourceInfo>;
  readonly code: number;
  readonly reason: string;
  readonly message: RegExp;
  readonly details?: Record<string, unknown>;
  readonly retryAfter?: string;
}

const immediateCases: ImmediateCase[] = [
  {
    name: 'not_found: resource',
    decision: { outcome: 'not_found', reason: 'resource_not_served', candidates: [] },
    code: 404,
    reason: 'NotFound',
    message: /no apiserver serves resource "widgets" in API version "example.com\/v1"/,
    details: { group: 'example.com', kind: 'widgets' },
  },
  {
    name: 'not_found: group/version',
    decision: { outcome: 'not_found', reason: 'group_version_not_served', candidates: [] },
    info: resourceInfo({ group: 'flowcontrol.apiserver.k8s.io', version: 'v1beta2', resource: 'flowschemas', name: 'fs1' }),
    code: 404,
    reason: 'NotFound',
    message: /no apiserver serves API version "flowcontrol.apiserver.k8s.io\/v1beta2" \(requested resource "flowschemas"\)/,
    details: { group: 'flowcontrol.apiserver.k8s.io', kind: 'flowschemas', name: 'fs1' },
  },
  {
    name: 'not_found: core subresource',
    decision: { outcome: 'not_found', reason: 'subresource_not_served', candidates: [] },
    info: resourceInfo({ apiPrefix: 'api', group: '', version: 'v1', resource: 'pods', subresource: 'resize', name: 'p' }),
    code: 404,
    reason: 'NotFound',
    message: /no apiserver serves subresource "resize" of resource "pods" in API version "v1"/,
    details: { kind: 'pods', name: 'p' },
  },
  {
    name: 'unavailable',
    decision: { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['kas-a', 'kas-b'] },
    code: 503,
    reason: 'ServiceUnavailable',
    message: /\(kas-a, kas-b\) are unhealthy; retry after 5s/,
    details: { group: 'example.com', kind: 'widgets', retryAfterSeconds: 5 },
    retryAfter: '5',
  },
  {
    name: 'rejected',
    decision: { outcome: 'rejected', reason: 'malformed_path', candidates: [], problem: 'invalid percent-encoding' },
    info: undefined,
    code: 400,
    reason: 'BadRequest',
    message: /cannot be parsed: invalid percent-encoding/,
  },
];

for (const c of immediateCases) {
  t.test(`immediate response: ${c.name}`, async (t) => {
    const res = wire(responseFor(resultOf(c.decision, c.info ?? resourceInfo()), 5));
    t.equal(res.response, 'immediate_response');
    const imm = res.immediate_response;
    t.equal(imm?.status?.code, c.code);
    t.equal(imm?.details, `skewgate_${c.decision.reason}`);
    t.notOk(imm?.details?.includes(' '), 'details has no spaces');
    assertRawOnly(t, imm?.headers?.set_headers);
    const headers = headersOf(imm?.headers?.set_headers);
    t.equal(headers.get('content-type'), 'application/json');
    t.equal(headers.get(REASON_HEADER), c.decision.reason);
    t.equal(headers.get('retry-after'), c.retryAfter, 'retry-after only on 503');
    const body = JSON.parse(Buffer.from(imm?.body ?? []).toString('utf8')) as Record<string, unknown>;
    t.equal(body['kind'], 'Status');
    t.equal(body['apiVersion'], 'v1');
    t.equal(body['status'], 'Failure');
    t.equal(body['code'], c.code);
    t.equal(body['reason'], c.reason);
    t.match(body['message'], c.message);
    if (c.details) t.same(body['details'], c.details);
  });
}

t.test('Retry-After is whole seconds even from an odd setting', async (t) => {
  const d: Decision = { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: [] };
  const get = (s: number): string | undefined =>
    headersOf(wire(responseFor(resultOf(d), s)).immediate_response?.headers?.set_headers).get('retry-after');
  t.equal(get(2.2), '3');
  t.equal(get(0), '0');
  t.equal(get(Number.NaN), '1');
  t.equal(get(-4), '1');
  const body = JSON.parse(Buffer.from(wire(responseFor(resultOf(d), 9)).immediate_response?.body ?? []).toString()) as { message: string };
  t.match(body.message, /\(none listed\)/);
});

t.test('internalErrorResponse is a 500 Status', async (t) => {
  const res = wire(internalErrorResponse());
  t.equal(res.immediate_response?.status?.code, 500);
  const body = JSON.parse(Buffer.from(res.immediate_response?.body ?? []).toString()) as Record<string, unknown>;
  t.equal(body['reason'], 'InternalError');
  t.equal(body['code'], 500);
});

t.test('emptyResponseFor answers each phase with its own kind', async (t) => {
  for (const p of REQUEST_PHASES) {
    const res = wire(emptyResponseFor(p));
    t.equal(res.response, p, p);
  }
});

t.test('a stated client certificate goes upstream as front-proxy headers, XFCC and the Lua marker removed', async (t) => {
  const identity = statedIdentity({
    user: 'jane',
    uid: 'u-1',
    groups: ['dev', 'a,b'],
    extra: [['authentication.kubernetes.io/credential-id', ['X509SHA256=ab']]],
    fingerprint: 'ab',
  });
  const routed: Decision = { outcome: 'routed', reason: 'served_by_subset', candidates: ['kas-new'], upstream: 'kas-new' };
  const passthrough: Decision = { outcome: 'passthrough', reason: 'non_resource', candidates: [] };
  for (const d of [routed, passthrough]) {
    const res = wire(responseFor(resultOf(d, resourceInfo(), identity), 5));
    const common = res.request_headers?.response;
    t.equal(common?.clear_route_cache, true, `${d.outcome}: the route is picked again (Envoy's backstop route no longer matches)`);
    const set = common?.header_mutation?.set_headers ?? [];
    assertRawOnly(t, set);
    const lines = set
      .filter((o) => o.header?.key !== UPSTREAM_HEADER)
      .map((o) => [o.header?.key, Buffer.from(o.header?.raw_value ?? []).toString(), o.append?.value ?? false]);
    t.same(
      lines,
      [
        ['x-remote-user', 'jane', false],
        ['x-remote-uid', 'u-1', false],
        ['x-remote-group', 'dev', false],
        ['x-remote-group', 'a,b', true],
        ['x-remote-extra-authentication.kubernetes.io%2Fcredential-id', 'X509SHA256=ab', false],
      ],
      `${d.outcome}: user, uid, one line per group (appended), extra`,
    );
    t.same(
      common?.header_mutation?.remove_headers,
      ['x-forwarded-client-cert', 'x-skewgate-envoy-identity'],
      `${d.outcome}: XFCC, and the marker of Envoy's Lua (skewgate has stated the identity now)`,
    );
  }
  const unstated: Decision = {
    outcome: 'rejected',
    reason: 'client_identity_unstated',
    problem: 'the client certificate has no common name (CN), so it names no user',
    candidates: [],
  };
  const res = wire(responseFor(resultOf(unstated), 5));
  const im = res.immediate_response;
  t.equal(im?.status?.code, 401);
  t.equal(headersOf(im?.headers?.set_headers).get(REASON_HEADER), 'client_identity_unstated');
  t.match(JSON.parse(Buffer.from(im?.body ?? []).toString()), {
    kind: 'Status',
    reason: 'Unauthorized',
    code: 401,
    message: /cannot state the identity of this client certificate.*no common name/,
  });
  t.equal(im?.details, 'skewgate_client_identity_unstated');
});
