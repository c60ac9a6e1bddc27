// The ext_proc Process stream over a real gRPC connection (TCP port 0 and a unix socket), driven
// the way Envoy drives it, with a stub router.
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { BOUNDED_HEADER, UPSTREAM_HEADER } from '../../src/constants.js';
import type { ProcessingResponseMsg } from '../../src/extproc/core/messages.js';
import { classifyRequest } from '../../src/k8s/classify.js';
import type { DecisionContext, DecisionObserver } from '../../src/extproc/observer.js';
import { createExtProcServer, type ExtProcServer } from '../../src/extproc/server.js';
import type { RoutingResult } from '../../src/routing/router.js';
import {
  captureLogs,
  createExtProcClient,
  immediateBody,
  replyHeader,
  requestHeadersMessage,
  resourceInfo,
  resultOf,
  stubRouter,
  TRACEPARENT,
  type ExtProcTestClient,
  type LogCapture,
  type StubRouter,
} from '../helpers/extproc-client.js';

const TOKEN = 'sha256~very-secret-bearer-token';
/** How long the slow route takes: 5 ms. */
const ROUTE_NS = 5_000_000n;

const table: Record<string, RoutingResult | (() => RoutingResult)> = {
  '/apis/example.com/v1/widgets': resultOf({ outcome: 'routed', reason: 'served_by_subset', candidates: ['kas-new'], upstream: 'kas-new' }),
  '/api/v1/pods': resultOf(
    { outcome: 'default', reason: 'served_by_all', candidates: ['kas-old', 'kas-new'] },
    resourceInfo({ apiPrefix: 'api', group: '', version: 'v1', resource: 'pods', path: '/api/v1/pods' }),
  ),
  '/healthz': resultOf({ outcome: 'passthrough', reason: 'non_resource', candidates: [] }),
  // Long-running, as the real classifier has them.
  '/api/v1/pods?watch=true': resultOf(
    { outcome: 'default', reason: 'served_by_all', candidates: ['kas-old', 'kas-new'] },
    classifyRequest('GET', '/api/v1/pods?watch=true'),
  ),
  '/api/v1/namespaces/default/pods/p/exec?command=sh': resultOf(
    { outcome: 'default', reason: 'served_by_all', candidates: ['kas-old', 'kas-new'] },
    classifyRequest('GET', '/api/v1/namespaces/default/pods/p/exec?command=sh'),
  ),
  '/apis/example.com/v1/gone': resultOf(
    { outcome: 'not_found', reason: 'resource_not_served', candidates: [] },
    resourceInfo({ resource: 'gone', path: '/apis/example.com/v1/gone' }),
  ),
  '/apis/example.com/v1/sick': resultOf(
    { outcome: 'unavailable', reason: 'no_healthy_capable_server', candidates: ['kas-a', 'kas-b'] },
    resourceInfo({ resource: 'sick', path: '/apis/example.com/v1/sick' }),
  ),
  '/api/v1/%zz': resultOf({ outcome: 'rejected', reason: 'malformed_path', candidates: [], problem: 'invalid URL escape "%zz"' }),
  '/boom': () => {
    throw new Error('router bug');
  },
  // A router that takes ROUTE_NS on the clock the server measures with: the decision's duration
  // must cover it.
  '/apis/example.com/v1/slow': () => {
    const until = process.hrtime.bigint() + ROUTE_NS;
    while (process.hrtime.bigint() < until) {
      // routing, slowly
    }
    return resultOf(
      { outcome: 'not_found', reason: 'resource_not_served', candidates: [] },
      resourceInfo({ resource: 'slow', path: '/apis/example.com/v1/slow' }),
    );
  },
};

interface Harness {
  readonly server: ExtProcServer;
  readonly client: ExtProcTestClient;
  readonly router: StubRouter;
  readonly logs: LogCapture;
  readonly decisions: { result: RoutingResult; ctx: DecisionContext }[];
  readonly errors: unknown[];
}

async function harness(t: Tap, listen: string, opts: { observe?: boolean; level?: string } = {}): Promise<Harness> {
  const router = stubRouter(table, 7);
  const logs = captureLogs(opts.level ?? 'debug');
  const decisions: Harness['decisions'] = [];
  const errors: unknown[] = [];
  const observer: DecisionObserver | undefined = opts.observe
    ? { onDecision: (result, ctx) => decisions.push({ result, ctx }), onRouteError: (e) => errors.push(e) }
    : undefined;
  const server = createExtProcServer({ router, logger: logs.logger, ...(observer ? { observer } : {}) });
  const bound = await server.start(listen);
  const target = listen.startsWith('unix:') ? listen : `127.0.0.1:${bound.port}`;
  const client = createExtProcClient(target);
  t.teardown(async () => {
    client.close();
    await server.close(1000);
  });
  return { server, client, router, logs, decisions, errors };
}

// The subtest type, taken from the last overload of t.test(cb).
type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

function raw(res: ProcessingResponseMsg | null, key: string): string | undefined {
  return replyHeader(res, key)?.raw;
}

async function routingTable(t: Tap, h: Harness): Promise<void> {
  const { client } = h;

  await t.test('routed: upstream header via raw_value, route cache cleared', async (t) => {
    const { response, status } = await client.process({
      path: '/apis/example.com/v1/widgets',
      headers: { authorization: `Bearer ${TOKEN}`, accept: 'application/json' },
    });
    t.equal(status.code, grpc.status.CANCELLED, 'client reset the stream after the reply, as Envoy does');
    t.equal(response?.response, 'request_headers');
    t.equal(response?.request_headers?.response?.clear_route_cache, true);
    const h1 = replyHeader(response, UPSTREAM_HEADER);
    t.same(h1, { value: '', raw: 'kas-new' }, 'raw_value only, value empty');
    t.same(replyHeader(response, BOUNDED_HEADER), { value: '', raw: 'true' }, 'a list: bounded by envoy.requestTimeout');
    t.equal(response?.request_headers?.response?.header_mutation?.set_headers?.length, 2);
    const call = h.router.calls.at(-1);
    t.equal(call?.method, 'GET');
    t.equal(call?.path, '/apis/example.com/v1/widgets');
    t.equal(call?.headers.get('authorization'), `Bearer ${TOKEN}`, 'router sees headers decoded from raw_value');
    t.equal(call?.headers.get(':authority'), 'kubernetes.default.svc');
  });

  for (const p of ['/api/v1/pods', '/healthz']) {
    await t.test(`continue, marked bounded only: ${p}`, async (t) => {
      const { response } = await client.process({ path: p });
      t.equal(response?.response, 'request_headers');
      t.equal(response?.request_headers?.response?.status, 'CONTINUE');
      const set = response?.request_headers?.response?.header_mutation?.set_headers ?? [];
      t.same(
        set.map((o) => o.header?.key),
        [BOUNDED_HEADER],
        'the bounded mark and nothing else: no upstream header',
      );
      t.equal(response?.request_headers?.response?.clear_route_cache, true, 'so that Envoy picks the bounded route');
    });
  }

  for (const [path, headers] of [
    ['/api/v1/pods?watch=true', {}],
    ['/api/v1/namespaces/default/pods/p/exec?command=sh', {}],
    ['/api/v1/pods', { upgrade: 'websocket', connection: 'Upgrade' }],
  ] as const) {
    await t.test(`continue unchanged (long-running): ${path}${'upgrade' in headers ? ' (upgrade)' : ''}`, async (t) => {
      const { response } = await client.process({ path, headers });
      t.equal(response?.request_headers?.response?.status, 'CONTINUE');
      t.equal(response?.request_headers?.response?.header_mutation, null, 'no mutation: no route timeout for it');
      t.equal(response?.request_headers?.response?.clear_route_cache, false);
    });
  }

  await t.test('not_found: immediate 404 Status', async (t) => {
    const { response } = await client.process({ path: '/apis/example.com/v1/gone' });
    t.equal(response?.response, 'immediate_response');
    t.equal(response?.immediate_response?.status?.code, 404);
    t.equal(response?.immediate_response?.details, 'skewgate_resource_not_served');
    t.equal(raw(response, 'content-type'), 'application/json');
    t.equal(raw(response, 'x-skewgate-reason'), 'resource_not_served');
    t.equal(replyHeader(response, 'content-type')?.value, '', 'raw_value only');
    t.match(immediateBody(response), { kind: 'Status', code: 404, reason: 'NotFound', details: { group: 'example.com', kind: 'gone' } });
  });

  await t.test('unavailable: immediate 503 with Retry-After', async (t) => {
    const { response } = await client.process({ path: '/apis/example.com/v1/sick', method: 'POST' });
    t.equal(response?.immediate_response?.status?.code, 503);
    t.equal(raw(response, 'retry-after'), '7', 'router.retryAfterSeconds');
    t.match(immediateBody(response), { kind: 'Status', code: 503, reason: 'ServiceUnavailable', details: { retryAfterSeconds: 7 } });
    t.match((immediateBody(response) as { message: string }).message, /kas-a, kas-b/);
    t.equal(h.router.calls.at(-1)?.method, 'POST');
  });

  await t.test('rejected: immediate 400', async (t) => {
    const { response } = await client.process({ path: '/api/v1/%zz' });
    t.equal(response?.immediate_response?.status?.code, 400);
    t.match(immediateBody(response), { kind: 'Status', code: 400, reason: 'BadRequest', message: /%zz/ });
  });

  await t.test('router throws: stream ends INTERNAL, never OK-with-nothing', async (t) => {
    const before = h.logs.lines.length;
    const { response, status } = await client.process({ path: '/boom' }, { close: 'half-close' });
    t.equal(response, null, 'no reply');
    t.equal(status.code, grpc.status.INTERNAL);
    const logged = h.logs.lines.slice(before).filter((l) => l['level'] === 50);
    t.equal(logged.length, 1, 'logged once at error');
    t.match(logged[0], { msg: /routing failed/, err: { message: 'router bug' } });
  });

  await t.test('half-close after the reply ends the stream OK', async (t) => {
    const { response, status } = await client.process({ path: '/apis/example.com/v1/widgets' }, { close: 'half-close' });
    t.equal(status.code, grpc.status.OK);
    t.equal(raw(response, UPSTREAM_HEADER), 'kas-new');
  });
}

t.test('over TCP (port 0)', async (t) => {
  const h = await harness(t, '127.0.0.1:0');
  await routingTable(t, h);
});

t.test('over a unix socket, replacing a stale socket file', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skewgate-extproc-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = path.join(dir, 'extproc.sock');
  // A socket file left behind by a crashed run: a listener killed with SIGKILL never unlinks it.
  const child = spawn(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(sock)}, () => console.log('up'))`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  await new Promise((r) => child.stdout.once('data', r));
  child.kill('SIGKILL');
  await new Promise((r) => child.once('exit', r));
  t.ok(existsSync(sock), 'stale socket file present before start');
  const h = await harness(t, `unix:${sock}`);
  await routingTable(t, h);
  h.client.close();
  await h.server.close(1000);
  t.notOk(existsSync(sock), 'socket file removed after close');
});

t.test('a non-socket file at the unix path is not removed', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skewgate-extproc-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'not-a-socket');
  writeFileSync(file, 'keep me');
  const server = createExtProcServer({ router: stubRouter({}), logger: captureLogs().logger });
  await t.rejects(server.start(`unix:${file}`), /exists and is not a socket/);
  t.ok(existsSync(file));
  await server.close(100);
});

t.test("a live server's unix socket is never taken over", async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skewgate-extproc-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const sock = `unix:${path.join(dir, 'live.sock')}`;
  const first = createExtProcServer({ router: stubRouter({}), logger: captureLogs().logger });
  await first.start(sock);
  t.teardown(() => first.close(100));
  const second = createExtProcServer({ router: stubRouter({}), logger: captureLogs().logger });
  await t.rejects(second.start(sock), /another process is serving on it/);
  await second.close(100);
  const client = createExtProcClient(sock);
  t.same(await client.check(''), { code: grpc.status.OK, status: 'SERVING' }, 'the first server still answers');
  client.close();
});

t.test('value-only headers (old senders) are read through the fallback', async (t) => {
  const h = await harness(t, '127.0.0.1:0');
  const { response } = await h.client.process({ path: '/apis/example.com/v1/widgets', encoding: 'value', headers: { 'x-test': 'v' } });
  t.equal(raw(response, UPSTREAM_HEADER), 'kas-new');
  t.equal(h.router.calls.at(-1)?.path, '/apis/example.com/v1/widgets');
  t.equal(h.router.calls.at(-1)?.headers.get('x-test'), 'v');
});

t.test('other phases get an empty reply of the matching kind', async (t) => {
  const h = await harness(t, '127.0.0.1:0');
  const call = h.client.open();
  const replies: ProcessingResponseMsg[] = [];
  call.on('data', (m: ProcessingResponseMsg) => replies.push(m));
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((r) => call.on('status', r));
  call.write(requestHeadersMessage({ path: '/api/v1/pods', method: 'POST', endOfStream: false }));
  call.write({ request_body: { body: Buffer.from('{}'), end_of_stream: true } });
  call.write({ request_trailers: { trailers: { headers: [] } } });
  call.write({ response_headers: { headers: { headers: [{ key: ':status', raw_value: Buffer.from('200') }] } } });
  call.write({ response_body: { body: Buffer.from('{}'), end_of_stream: true } });
  call.write({ response_trailers: { trailers: { headers: [] } } });
  call.end();
  const status = await ended;
  t.equal(status.code, grpc.status.OK);
  t.same(
    replies.map((r) => r.response),
    ['request_headers', 'request_body', 'request_trailers', 'response_headers', 'response_body', 'response_trailers'],
  );
  t.equal(h.router.calls.length, 1, 'only request headers are routed');
});

t.test('observability mode: decision recorded, no reply written', async (t) => {
  const h = await harness(t, '127.0.0.1:0', { observe: true });
  const call = h.client.open();
  const replies: unknown[] = [];
  call.on('data', (m) => replies.push(m));
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((r) => call.on('status', r));
  call.write({ ...requestHeadersMessage({ path: '/apis/example.com/v1/widgets' }), observability_mode: true });
  call.end();
  t.equal((await ended).code, grpc.status.OK);
  t.equal(replies.length, 0);
  t.equal(h.decisions.length, 1);
});

t.test('observer gets the result, duration, metadata and headers', async (t) => {
  const h = await harness(t, '127.0.0.1:0', { observe: true });
  // The server runs in this process: its clock (process.hrtime) is the one read around the call.
  const before = process.hrtime.bigint();
  await h.client.process(
    { path: '/apis/example.com/v1/slow', headers: { 'user-agent': 'kubectl/v1.34.0' } },
    { metadata: { 'x-request-id': 'r-1' } },
  );
  const roundTrip = process.hrtime.bigint() - before;
  await h.client.process({ path: '/boom' });
  t.equal(h.decisions.length, 1);
  const d = h.decisions[0];
  t.equal(d?.result.decision.outcome, 'not_found');
  const ns = d?.ctx.durationNs;
  t.equal(typeof ns, 'bigint');
  // In nanoseconds, from the request's arrival to the decision: it covers the routing and fits in
  // the client's round trip.
  t.ok(ns !== undefined && ns >= ROUTE_NS, `the duration (${String(ns)} ns) covers the ${ROUTE_NS} ns of routing`);
  t.ok(ns !== undefined && ns <= roundTrip, `and fits in the round trip (${roundTrip} ns)`);
  t.same(d?.ctx.metadata.get('traceparent'), [TRACEPARENT]);
  t.same(d?.ctx.metadata.get('x-request-id'), ['r-1']);
  t.equal(d?.ctx.headers.get('user-agent'), 'kubectl/v1.34.0');
  t.equal(h.errors.length, 1, 'onRouteError called for the throwing router');
});

t.test('default log observer: non-routine at info, headers only at debug and redacted', async (t) => {
  await t.test('info level', async (t) => {
    const h = await harness(t, '127.0.0.1:0', { level: 'info' });
    await h.client.process({ path: '/apis/example.com/v1/gone', headers: { authorization: `Bearer ${TOKEN}` } });
    await h.client.process({ path: '/api/v1/pods', headers: { authorization: `Bearer ${TOKEN}` } });
    await h.client.process({ path: '/apis/example.com/v1/widgets', headers: { authorization: `Bearer ${TOKEN}` } });
    const decisions = h.logs.lines.filter((l) => l['msg'] === 'decision');
    t.same(
      decisions.map((l) => l['outcome']),
      ['not_found', 'routed'],
      'default decisions are not logged at info',
    );
    t.match(decisions[0], { level: 30, reason: 'resource_not_served', resource: 'gone', traceparent: TRACEPARENT });
    t.match(decisions[1], { upstream: 'kas-new' });
    t.notOk('requestHeaders' in (decisions[0] ?? {}), 'no headers at info');
    t.notOk(h.logs.text().includes(TOKEN));
  });
  await t.test('debug level', async (t) => {
    const h = await harness(t, '127.0.0.1:0', { level: 'debug' });
    await h.client.process({ path: '/api/v1/pods', headers: { authorization: `Bearer ${TOKEN}`, 'x-remote-user': 'admin' } });
    const line = h.logs.lines.find((l) => l['msg'] === 'decision');
    t.match(line, {
      level: 20,
      outcome: 'default',
      requestHeaders: { authorization: 'Bearer [redacted]', 'x-remote-user': '[redacted]', ':path': '/api/v1/pods' },
    });
    t.notOk(h.logs.text().includes(TOKEN), 'the token never reaches a log line');
  });
});

t.test('many concurrent streams, each answered for its own request', async (t) => {
  const h = await harness(t, '127.0.0.1:0', { level: 'info' });
  const paths = ['/apis/example.com/v1/widgets', '/api/v1/pods', '/apis/example.com/v1/gone', '/apis/example.com/v1/sick'];
  const expect = ['kas-new', 'continue', '404', '503'];
  const n = 400;
  const results = await Promise.all(
    Array.from({ length: n }, (_, i) => h.client.process({ path: paths[i % 4]! }, { close: i % 2 ? 'cancel' : 'half-close' })),
  );
  const got = results.map(({ response }) =>
    response?.immediate_response
      ? String(response.immediate_response.status?.code)
      : (raw(response, UPSTREAM_HEADER) ?? (response?.response === 'request_headers' ? 'continue' : 'none')),
  );
  const wrong = got.filter((g, i) => g !== expect[i % 4]).length;
  t.equal(wrong, 0, `all ${n} streams answered correctly`);
  t.equal(h.router.calls.length, n);
  t.same(h.logs.problems(), [], 'CANCELLED after a reply is not a warning or an error');
});

t.test('a stream cancelled after its reply logs nothing at warn or above', async (t) => {
  const h = await harness(t, '127.0.0.1:0', { level: 'debug' });
  for (let i = 0; i < 20; i++) {
    const { status } = await h.client.process({ path: '/apis/example.com/v1/widgets' }, { close: 'cancel' });
    t.equal(status.code, grpc.status.CANCELLED);
  }
  // A barrier instead of a sleep: a later stream on the same connection, ended normally, is
  // answered only after the server has taken in the resets sent before it.
  const last = await h.client.process({ path: '/apis/example.com/v1/widgets' }, { close: 'half-close' });
  t.equal(last.status.code, grpc.status.OK, 'a stream after them ends normally');
  t.same(h.logs.problems(), []);
});
