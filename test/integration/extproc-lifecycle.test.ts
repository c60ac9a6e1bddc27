// Health reporting and the graceful, idempotent shutdown of the ext_proc server.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { EXTPROC_SERVICE_NAME, UPSTREAM_HEADER } from '../../src/constants.js';
import type { ProcessingResponseMsg } from '../../src/extproc/core/messages.js';
import { createExtProcServer, type ExtProcServer } from '../../src/extproc/server.js';
import {
  captureLogs,
  createExtProcClient,
  replyHeader,
  requestHeadersMessage,
  resultOf,
  stubRouter,
  type ExtProcTestClient,
  type LogCapture,
  type ProcessStream,
} from '../helpers/extproc-client.js';
import { within } from '../helpers/http.js';

const WIDGETS = '/apis/example.com/v1/widgets';
const router = stubRouter({
  [WIDGETS]: resultOf({ outcome: 'routed', reason: 'served_by_subset', candidates: ['kas-new'], upstream: 'kas-new' }),
});

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

async function started(t: Tap): Promise<{ server: ExtProcServer; client: ExtProcTestClient; logs: LogCapture; target: string }> {
  const logs = captureLogs('info');
  const server = createExtProcServer({ router, logger: logs.logger });
  const { port } = await server.start('127.0.0.1:0');
  t.ok(port && port > 0, 'bound an ephemeral port');
  const target = `127.0.0.1:${port}`;
  const client = createExtProcClient(target);
  t.teardown(async () => {
    client.close();
    await server.close(500);
  });
  return { server, client, logs, target };
}

/** Resolves with the stream's next reply (the guard only bounds a hang). */
function nextReply(call: ProcessStream): Promise<ProcessingResponseMsg> {
  return within('a reply on the open stream', new Promise((resolve) => call.once('data', resolve)));
}
const cutWarning = (logs: LogCapture): boolean => logs.lines.some((l) => l['level'] === 40 && /grace period/.test(String(l['msg'])));

t.test('health: SERVING while running, NOT_SERVING as soon as shutdown begins', async (t) => {
  const { server, client, logs } = await started(t);
  t.same(await client.check(''), { code: grpc.status.OK, status: 'SERVING' });
  t.same(await client.check(EXTPROC_SERVICE_NAME), { code: grpc.status.OK, status: 'SERVING' });
  t.match(await client.check('no.such.Service'), { code: grpc.status.NOT_FOUND });

  const watch = client.watch(EXTPROC_SERVICE_NAME);
  const unknownWatch = client.watch('no.such.Service');
  t.equal(await watch.next(), 'SERVING');
  t.equal(await unknownWatch.next(), 'SERVICE_UNKNOWN');
  t.equal(server.servingStatus(), 'SERVING');

  // A grace period longer than the test's own timeout: close() can only end by itself finishing.
  const closing = server.close(3_600_000, { drainMs: 400 });
  t.equal(server.servingStatus(), 'NOT_SERVING', 'flips synchronously');
  t.equal(await watch.next(), 'NOT_SERVING', 'watchers are told');
  // During the drain the listener still answers, so a health checker sees the change.
  t.same(await client.check(EXTPROC_SERVICE_NAME), { code: grpc.status.OK, status: 'NOT_SERVING' });
  t.same(await client.check(''), { code: grpc.status.OK, status: 'NOT_SERVING' });
  t.equal((await watch.ended).code, grpc.status.OK, 'watch ended by the server when the listener closes');
  t.equal((await unknownWatch.ended).code, grpc.status.OK);
  await closing;
  t.notOk(cutWarning(logs), 'no open streams: shutdown completed by itself, nothing was cut at a deadline');
  const after = await client.check('');
  t.not(after.code, grpc.status.OK, 'nothing answers after close');
});

t.test('graceful close lets an open stream finish, then exits', async (t) => {
  const { server, client, target, logs } = await started(t);
  // Establish the connection first, as Envoy's would be.
  t.equal(replyHeader((await client.process({ path: WIDGETS })).response, UPSTREAM_HEADER)?.raw, 'kas-new');

  // A stream the server is known to hold: it has answered on it.
  const call = client.open();
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((r) => call.on('status', r));
  const first = nextReply(call);
  call.write(requestHeadersMessage({ path: WIDGETS }));
  t.equal(replyHeader(await first, UPSTREAM_HEADER)?.raw, 'kas-new', 'the stream is open at the server');

  let closed = false;
  // A grace period longer than the test's own timeout: only the stream's end can let close() return.
  const closing = server.close(3_600_000).then(() => {
    closed = true;
  });
  t.equal(server.close(5000), server.close(1), 'close is idempotent: one promise');

  // A new connection is refused while the old stream is still being served.
  const late = createExtProcClient(target);
  const refused = await late.process({ path: WIDGETS }, { deadlineMs: 1000 });
  late.close();
  t.equal(refused.response, null);
  t.not(refused.status.code, grpc.status.OK, `new stream refused (${grpc.status[refused.status.code]})`);

  const second = nextReply(call);
  call.write(requestHeadersMessage({ path: WIDGETS }));
  t.equal(replyHeader(await second, UPSTREAM_HEADER)?.raw, 'kas-new', 'the open stream is still answered during shutdown');
  t.notOk(closed, 'close waits for the open stream');
  call.end();
  t.equal((await ended).code, grpc.status.OK, 'stream finishes normally');
  client.close();
  await closing;
  t.notOk(cutWarning(logs), 'exited as soon as the stream finished, not at the grace deadline');
  await t.rejects(server.start('127.0.0.1:0'), /closed/, 'no restart after close');
});

t.test('streams still open after the grace period are cut', async (t) => {
  const { server, client, logs } = await started(t);
  await client.process({ path: WIDGETS });
  const call = client.open();
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((r) => call.on('status', r));
  const first = nextReply(call);
  call.write(requestHeadersMessage({ path: WIDGETS }));
  await first; // the server holds the stream
  const closing = server.close(2000);
  // Within the grace period the stream is not cut: it is still answered.
  const during = nextReply(call);
  call.write(requestHeadersMessage({ path: WIDGETS }));
  t.equal(replyHeader(await during, UPSTREAM_HEADER)?.raw, 'kas-new', 'answered during the grace period');
  t.notOk(cutWarning(logs), 'not cut before the grace period ends');
  // The client never ends it: only the grace timer can end close().
  await closing;
  t.ok(cutWarning(logs), 'cut when the grace period ended, with a warning');
  const status = await ended;
  t.not(status.code, grpc.status.OK, `hung stream cut (${grpc.status[status.code]})`);
});

t.test('start and close edge cases', async (t) => {
  const logs = captureLogs('info');
  const unstarted = createExtProcServer({ router, logger: logs.logger });
  await unstarted.close(100);
  t.equal(unstarted.servingStatus(), 'NOT_SERVING');
  await t.rejects(unstarted.start('127.0.0.1:0'), /closed/);

  const twice = createExtProcServer({ router, logger: logs.logger });
  await twice.start('127.0.0.1:0');
  await t.rejects(twice.start('127.0.0.1:0'), /already started/);
  await twice.close(100);

  const bad = createExtProcServer({ router, logger: logs.logger });
  await t.rejects(bad.start('not a valid address::::'), /cannot listen/);
  await bad.close(100);
});

t.test('extproc.healthListen: grpc.health.v1 alone, for the kubelet; its status follows the server (issue 30, item 7)', async (t) => {
  const logs = captureLogs('info');
  const server = createExtProcServer({ router, logger: logs.logger });
  const { port, healthPort } = await server.start('127.0.0.1:0', undefined, '127.0.0.1:0');
  t.ok(healthPort !== undefined && healthPort > 0 && healthPort !== port, `a port of its own (${healthPort}, ext_proc on ${port})`);
  const probe = createExtProcClient(`127.0.0.1:${healthPort}`);
  t.teardown(() => probe.close());
  t.match(await probe.check(''), { status: 'SERVING', code: grpc.status.OK }, "Check '' (the kubelet's default): SERVING");
  t.match(await probe.check(EXTPROC_SERVICE_NAME), { status: 'SERVING' }, 'Check of the ext_proc service: SERVING');
  t.match(await probe.check('nope'), { code: grpc.status.NOT_FOUND }, 'an unknown service: NOT_FOUND');
  const p = await probe.process({ path: WIDGETS });
  t.equal(p.status.code, grpc.status.UNIMPLEMENTED, 'ext_proc is not served there');
  t.match(p.status.details, /serves grpc\.health\.v1 only/);
  const watch = probe.watch('');
  t.equal(await watch.next(), 'SERVING');
  const closed = server.close(2000, { drainMs: 300 });
  t.equal(await watch.next(), 'NOT_SERVING', 'shutdown: NOT_SERVING there too, at once');
  await closed;
  const after = await probe.check('');
  t.not(after.code, grpc.status.OK, `closed: the probe fails (${after.code} ${after.details ?? ''})`);
});
