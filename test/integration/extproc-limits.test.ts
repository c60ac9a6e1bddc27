// The ext_proc listener's bounds over real gRPC streams: the stream bound answers 429 (and refuses
// a flood beyond the ceiling), an oversize message ends its stream before it is buffered, a stream
// that never sends its headers is ended, a connection is told its stream limit, and repeated
// warnings are rate-limited with a count.
import { constants as h2 } from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { EXTPROC_LIMIT_DEFAULTS, TOO_MANY_STREAMS_REASON } from '../../src/constants.js';
import type { ProcessingResponseMsg } from '../../src/extproc/core/messages.js';
import { createExtProcServer, type ExtProcLimits, type ExtProcServer } from '../../src/extproc/server.js';
import {
  captureLogs,
  createExtProcClient,
  immediateBody,
  replyHeader,
  requestHeadersMessage,
  resultOf,
  stubRouter,
  type ExtProcTestClient,
  type LogCapture,
  type ProcessStream,
  rawProcess,
  rawSession,
} from '../helpers/extproc-client.js';
import { eventually, within } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

interface Harness {
  readonly server: ExtProcServer;
  readonly client: ExtProcTestClient;
  readonly logs: LogCapture;
  readonly port: number;
}

const table = { '/api/v1/pods': resultOf({ outcome: 'default', reason: 'served_by_all', candidates: ['a', 'b'] }) };

async function harness(t: Tap, limits: Partial<ExtProcLimits>, logIntervalMs?: number): Promise<Harness> {
  const logs = captureLogs('info');
  const server = createExtProcServer({
    router: stubRouter(table, 3),
    logger: logs.logger,
    limits,
    ...(logIntervalMs ? { logIntervalMs } : {}),
  });
  const { port = 0 } = await server.start('127.0.0.1:0');
  const client = createExtProcClient(`127.0.0.1:${port}`);
  t.teardown(async () => {
    client.close();
    await server.close(500);
  });
  return { server, client, logs, port };
}

/** A stream that has sent nothing yet; `ended` settles with its status, `first` with its first reply. */
function held(client: ExtProcTestClient): {
  call: ProcessStream;
  ended: Promise<grpc.StatusObject>;
  first: Promise<ProcessingResponseMsg | null>;
} {
  const call = client.open();
  call.on('error', () => undefined);
  const ended = new Promise<grpc.StatusObject>((resolve) => call.on('status', resolve));
  const first = new Promise<ProcessingResponseMsg | null>((resolve) => {
    call.once('data', resolve);
    void ended.then(() => resolve(null));
  });
  return { call, ended, first };
}

const settle = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const FIRST_MESSAGE_TIMEOUT_MS = 300;
const DEFAULT_FIRST_MESSAGE_TIMEOUT_MS = EXTPROC_LIMIT_DEFAULTS.firstMessageTimeoutMs;
/** The repeated-warnings test: a burst of this many, and the log interval it is judged by. */
const BURST = 50;
const LOG_INTERVAL_MS = 400;
const LONG_LOG_INTERVAL_MS = 3_600_000;

t.test('maxStreams: routed up to the bound, 429 with Retry-After beyond it, released as streams end', async (t) => {
  // A log interval longer than any run: "logged once" cannot depend on how long the test takes.
  const h = await harness(t, { maxStreams: 2, firstMessageTimeoutMs: 10_000 }, LONG_LOG_INTERVAL_MS);
  // Two streams that got their headers and a reply, left open (as an old Envoy keeps them).
  const open = [held(h.client), held(h.client)];
  for (const s of open) {
    s.call.write(requestHeadersMessage({ path: '/api/v1/pods' }));
    t.equal((await s.first)?.request_headers?.response?.status, 'CONTINUE', 'within the bound: routed');
  }
  const over = await h.client.process({ path: '/api/v1/pods' });
  t.equal(over.response?.immediate_response?.status?.code, 429, 'the third: 429');
  t.equal(replyHeader(over.response, 'retry-after')?.raw, '3', 'Retry-After: routing.retryAfterSeconds');
  t.equal(replyHeader(over.response, 'x-skewgate-reason')?.raw, TOO_MANY_STREAMS_REASON);
  t.match(immediateBody(over.response), { kind: 'Status', reason: 'TooManyRequests', code: 429, details: { retryAfterSeconds: 3 } });
  t.equal(over.status.code, grpc.status.CANCELLED, 'and the stream closed after it (the client reset, as Envoy does)');
  const again = await h.client.process({ path: '/api/v1/pods' });
  t.equal(again.response?.immediate_response?.status?.code, 429, 'a 429 frees its place: the next one too');
  for (const s of open) {
    s.call.cancel();
    await s.ended;
  }
  // The server takes in the two resets on its own time: asked until it has (each 429 meanwhile
  // frees its own place, as shown above). Never released, this times out and fails.
  let after: Awaited<ReturnType<ExtProcTestClient['process']>> | undefined;
  await eventually(
    'a stream routed once the two have ended',
    async () => (after = await h.client.process({ path: '/api/v1/pods' })).response?.request_headers?.response?.status === 'CONTINUE',
    waitMs(),
  ).catch(() => undefined);
  t.equal(after?.response?.request_headers?.response?.status, 'CONTINUE', 'the two ended: routed again');
  const lines = h.logs.lines.filter((l) => l['msg'] === 'too many ext_proc streams at once; answering 429');
  t.equal(lines.length, 1, 'the 429s logged once (rate-limited)');
});

t.test('streams without a first message: at most maxStreams; the oldest goes, never a new one', async (t) => {
  const h = await harness(t, { maxStreams: 3, firstMessageTimeoutMs: 10_000 });
  const idle = [held(h.client), held(h.client), held(h.client)];
  await settle(100);
  // A fourth idle one pushes out the oldest.
  const fourth = held(h.client);
  const oldest = await idle[0]!.ended;
  t.equal(oldest.code, grpc.status.RESOURCE_EXHAUSTED, `the oldest idle stream ended (${oldest.details})`);
  // An Envoy-like stream (headers at once) is routed even while idle ones fill the bound.
  const r = await h.client.process({ path: '/api/v1/pods' });
  t.equal(r.response?.request_headers?.response?.status, 'CONTINUE', 'a stream that sends its headers is routed');
  const second = await idle[1]!.ended;
  t.equal(second.code, grpc.status.RESOURCE_EXHAUSTED, 'and it pushed out the next oldest idle one');
  fourth.call.write(requestHeadersMessage({ path: '/api/v1/pods' }));
  t.equal((await fourth.first)?.request_headers?.response?.status, 'CONTINUE', 'an idle stream that speaks in time is served');
  for (const s of [idle[2]!, fourth]) s.call.cancel();
  const evictions = h.logs.lines.filter((l) => l['msg'] === 'too many ext_proc streams without a first message; ending the oldest');
  t.equal(evictions.length, 1, 'logged once (rate-limited)');
});

t.test('maxMessageBytes: a larger message ends its stream; 1 MiB of headers passes at the default', async (t) => {
  const h = await harness(t, { maxMessageBytes: 1_200_000 });
  const big = await h.client.process({ path: '/api/v1/pods', headers: { 'x-pad': 'p'.repeat(1_300_000) } });
  t.equal(big.response, null, 'no reply');
  t.equal(big.status.code, grpc.status.RESOURCE_EXHAUSTED, big.status.details);
  const dflt = await harness(t, {});
  // 1 MiB of request headers in 10,000 lines, as Envoy's listener admits them.
  const lines: Record<string, string[]> = { 'x-line': Array.from({ length: 10_000 }, (_, i) => `${i}`.padStart(100, 'v')) };
  const ok = await dflt.client.process({ path: '/api/v1/pods', headers: lines });
  t.equal(ok.response?.request_headers?.response?.status, 'CONTINUE', 'the largest request Envoy forwards is routed');
});

t.test('firstMessageTimeout: a stream that sends no whole message is ended, its partial message dropped', async (t) => {
  const h = await harness(t, { firstMessageTimeoutMs: FIRST_MESSAGE_TIMEOUT_MS });
  // On the server's clock (the same monotonic clock) the stream arrives after this, and its
  // deadline is taken in whole milliseconds: it cannot end sooner than the timeout less 1 ms.
  const started = performance.now();
  const idle = held(h.client);
  const status = await within('the idle stream to be ended', idle.ended, waitMs(DEFAULT_FIRST_MESSAGE_TIMEOUT_MS));
  const ms = performance.now() - started;
  t.equal(status.code, grpc.status.DEADLINE_EXCEEDED, status.details);
  t.ok(
    ms >= FIRST_MESSAGE_TIMEOUT_MS - 1,
    `not before the timeout: ended after ${ms.toFixed(0)} ms (timeout ${FIRST_MESSAGE_TIMEOUT_MS} ms)`,
  );
  // Nothing else ends an idle stream sooner than the default timeout would, had the limit been lost.
  t.ok(ms < DEFAULT_FIRST_MESSAGE_TIMEOUT_MS, `by the configured timeout, not the default (${DEFAULT_FIRST_MESSAGE_TIMEOUT_MS} ms)`);
  // A partial message: the length prefix says 1 MB, 100 kB follow, then nothing.
  const session = rawSession(h.port);
  t.teardown(() => session.destroy());
  const stream = rawProcess(session);
  const prefix = Buffer.alloc(5);
  prefix.writeUInt32BE(1_000_000, 1);
  stream.write(Buffer.concat([prefix, Buffer.alloc(100_000)]));
  const trailers = await new Promise<Record<string, unknown>>((resolve) => {
    stream.on('trailers', (tr) => resolve(tr as Record<string, unknown>));
    stream.on('response', (hd) => {
      if (hd['grpc-status'] !== undefined) resolve(hd as Record<string, unknown>);
    });
  });
  t.equal(String(trailers['grpc-status']), String(grpc.status.DEADLINE_EXCEEDED), 'the partial message did not hold the stream');
  // The client kept its side open: the stream is reset, which is what frees the partial message.
  const rst = await new Promise<number>((resolve) =>
    stream.closed ? resolve(stream.rstCode) : stream.once('close', () => resolve(stream.rstCode)),
  );
  t.equal(rst, h2.NGHTTP2_CANCEL, 'reset (RST_STREAM CANCEL) soon after the status');
  const after = await h.client.process({ path: '/api/v1/pods' });
  t.equal(after.response?.request_headers?.response?.status, 'CONTINUE', 'a stream that speaks is routed');
  t.equal(
    h.logs.lines.filter((l) => l['msg'] === 'ext_proc stream sent no whole message in time; ended').length,
    1,
    'logged once for both',
  );
});

t.test('maxStreamsPerConnection: what the listener tells a connection (Envoy opens another beyond it)', async (t) => {
  const h = await harness(t, { maxStreamsPerConnection: 7 });
  const session = rawSession(h.port);
  t.teardown(() => session.destroy());
  await new Promise<void>((resolve) => session.once('remoteSettings', () => resolve()));
  t.equal(session.remoteSettings.maxConcurrentStreams, 7);
  const dflt = await harness(t, {});
  const other = rawSession(dflt.port);
  t.teardown(() => other.destroy());
  await new Promise<void>((resolve) => other.once('remoteSettings', () => resolve()));
  t.equal(other.remoteSettings.maxConcurrentStreams, 100, 'default 100');
});

t.test('repeated warnings: one line per kind per interval, the next one counting those held back', async (t) => {
  const h = await harness(t, {}, LOG_INTERVAL_MS);
  const phaseless = async (): Promise<grpc.StatusObject> => {
    const s = held(h.client);
    s.call.write({ observability_mode: false });
    return s.ended;
  };
  const statuses = await Promise.all(Array.from({ length: BURST }, phaseless));
  t.equal(statuses.length, BURST);
  t.ok(
    statuses.every((s) => s.code === grpc.status.INVALID_ARGUMENT),
    'each stream still ends INVALID_ARGUMENT',
  );
  const warned = (): Record<string, unknown>[] => h.logs.lines.filter((l) => l['msg'] === 'ext_proc message without a known phase');
  // However long the burst took (one line unless it outlasted the interval), some were held back.
  const burst = warned().length;
  t.ok(burst >= 1 && burst < BURST, `${BURST} messages: ${burst} line(s)`);
  // Past the interval since the last line (a sleep can only make that longer), one more message.
  await settle(LOG_INTERVAL_MS + 50);
  await phaseless();
  const lines = warned();
  t.equal(lines.length, burst + 1, 'after the interval, the next one is written');
  // Every message is accounted for: each line stands for itself and those it says it held back.
  const accounted = lines.reduce((n, l) => n + 1 + Number(l['suppressed'] ?? 0), 0);
  t.equal(accounted, BURST + 1, `the lines' counts add up to the ${BURST + 1} messages`);
  t.ok(Number(lines.at(-1)?.['suppressed'] ?? 0) > 0, 'the last line counts those held back since the one before');
  // One line per interval: each line's time is taken as it is admitted (whole milliseconds).
  const gaps = lines.slice(1).map((l, i) => Number(l['time']) - Number(lines[i]?.['time']));
  t.same(
    gaps.filter((g) => !(g >= LOG_INTERVAL_MS - 1)),
    [],
    `consecutive lines at least the ${LOG_INTERVAL_MS} ms interval apart (${gaps.join(', ')} ms)`,
  );
});
