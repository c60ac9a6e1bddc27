// Health reporting and the graceful, idempotent shutdown of the ext_proc server.
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { EXTPROC_SERVICE_NAME, UPSTREAM_HEADER } from '../../src/constants.js';
import type { ProcessingResponseMsg } from '../../src/extproc/messages.js';
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
} from '../helpers/extproc-client.js';

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

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('health: SERVING while running, NOT_SERVING as soon as shutdown begins', async (t) => {
  const { server, client } = await started(t);
  t.same(await client.check(''), { code: grpc.status.OK, status: 'SERVING' });
  t.same(await client.check(EXTPROC_SERVICE_NAME), { code: grpc.status.OK, status: 'SERVING' });
  t.match(await client.check('no.such.Service'), { code: grpc.status.NOT_FOUND });

  const watch = client.watch(EXTPROC_SERVICE_NAME);
  const unknownWatch = client.watch('no.such.Service');
  t.equal(await watch.next(), 'SERVING');
  t.equal(await unknownWatch.next(), 'SERVICE_UNKNOWN');
  t.equal(server.servingStatus(), 'SERVING');

  const closing = server.close(2000, { drainMs: 400 });
  t.equal(server.servingStatus(), 'NOT_SERVING', 'flips synchronously');
  t.equal(await watch.next(), 'NOT_SERVING', 'watchers are told');
  // During the drain the listener still answers, so a health checker sees the change.
  t.same(await client.check(EXTPROC_SERVICE_NAME), { code: grpc.status.OK, status: 'NOT_SERVING' });
  t.same(await client.check(''), { code: grpc.status.OK, status: 'NOT_SERVING' });
  t.equal((await watch.ended).code, grpc.status.OK, 'watch ended by the server when the listener closes');
  t.equal((await unknownWatch.ended).code, grpc.status.OK);
  const before = Date.now();
  await closing;
  t.ok(Date.now() - before < 1500, 'no open streams: shutdown completes well before the grace period');
  const after = await client.check('');
  t.not(after.code, grpc.status.OK, 'nothing answers after close');
});

t.test('graceful close lets an open stream finish, then exits', async (t) => {
  const { server, client, target } = await started(t);
  // Establish the connection first, as Envoy's would be.
  t.equal(replyHeader((await client.process({ path: WIDGETS })).response, UPSTREAM_HEADER)?.raw, 'kas-new');

  const call = client.open();
  const replies: ProcessingResponseMsg[] = [];
  call.on('data', (m: ProcessingResponseMsg) => replies.push(m));
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((r) => call.on('status', r));
  await sleep(50);

  const t0 = Date.now();
  let closed = false;
  const closing = server.close(5000).then(() => {
    closed = true;
  });
  t.equal(server.close(5000), server.close(1), 'close is idempotent: one promise');
  await sleep(150);
  t.notOk(closed, 'close waits for the open stream');

  // A new connection is refused while the old stream is still being served.
  const late = createExtProcClient(target);
  const refused = await late.process({ path: WIDGETS }, { deadlineMs: 1000 });
  late.close();
  t.equal(refused.response, null);
  t.not(refused.status.code, grpc.status.OK, `new stream refused (${grpc.status[refused.status.code]})`);

  call.write(requestHeadersMessage({ path: WIDGETS }));
  await sleep(50);
  t.equal(replies.length, 1, 'the open stream is still answered during shutdown');
  t.equal(replyHeader(replies[0] ?? null, UPSTREAM_HEADER)?.raw, 'kas-new');
  call.end();
  t.equal((await ended).code, grpc.status.OK, 'stream finishes normally');
  client.close();
  await closing;
  t.ok(Date.now() - t0 < 3000, 'exited as soon as the stream finished, not at the grace deadline');
  await t.rejects(server.start('127.0.0.1:0'), /closed/, 'no restart after close');
});

t.test('streams still open after the grace period are cut', async (t) => {
  const { server, client, logs } = await started(t);
  await client.process({ path: WIDGETS });
  const call = client.open();
  call.on('error', () => undefined);
  call.on('data', () => undefined);
  const ended = new Promise<grpc.StatusObject>((r) => call.on('status', r));
  await sleep(50);
  const t0 = Date.now();
  await server.close(300);
  const took = Date.now() - t0;
  t.ok(took >= 250 && took < 2000, `close waited for the grace period (${took} ms)`);
  const status = await ended;
  t.not(status.code, grpc.status.OK, `hung stream cut (${grpc.status[status.code]})`);
  t.ok(logs.lines.some((l) => l['level'] === 40 && /grace period/.test(String(l['msg']))), 'warned about the cut');
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
