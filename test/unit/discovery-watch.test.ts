// Watch stream handling and the service's scheduling, with a stubbed fetch (no network).
import t from 'tap';
import { pino } from 'pino';
import type { FetchInit, FetchLike, FetchResponseLike } from '../../src/kube/transport.js';
import { createCredentials } from '../../src/kube/credentials.js';
import { ApiWatcher, WatchLineTooLong, jsonLines } from '../../src/kube/watch.js';
import { openStream as openWatchStream } from '../../src/kube/requests.js';
import type { DiscoveryFetchError } from '../../src/kube/transport.js';
import { DiscoveryService } from '../../src/discovery/service.js';
import { MEDIA_AGGREGATED_V2 } from '../../src/constants.js';
import { installFakeClock } from '../helpers/fake-clock.js';

const enc = new TextEncoder();

async function* chunks(parts: readonly string[]): AsyncGenerator<Uint8Array> {
  for (const p of parts) yield enc.encode(p);
}

async function collect(it: AsyncIterable<string>): Promise<string[]> {
  const out: string[] = [];
  for await (const x of it) out.push(x);
  return out;
}

t.test('jsonLines splits across chunk boundaries, multi-byte characters included', async (t) => {
  const bytes = enc.encode('{"a":"é"}\n{"b":1}\n\n{"c":');
  // Split inside the two-byte é.
  const cut = bytes.indexOf(0xc3) + 1;
  async function* parts(): AsyncGenerator<Uint8Array> {
    yield bytes.slice(0, cut);
    yield bytes.slice(cut);
    yield enc.encode('2}');
  }
  t.same(await collect(jsonLines(parts())), ['{"a":"é"}', '{"b":1}', '{"c":2}']);
  t.same(await collect(jsonLines(chunks([]))), []);
});

t.test('jsonLines: a line longer than the cap throws, wherever the chunks cut it; shorter ones pass', async (t) => {
  const cases: [parts: string[], cap: number, want: string[] | 'too long'][] = [
    [['{"a":1}\n{"b":2}\n'], 7, ['{"a":1}', '{"b":2}']],
    [['{"a":1}\n{"b":22}\n'], 7, 'too long'],
    [['{"a":', '1}\n'], 7, ['{"a":1}']],
    [['{"a":', '12}\n'], 7, 'too long'],
    [['{"a"', ':', '1', '2', '}'], 7, 'too long'],
    [['{"a":1}\n{', '"b":2}'], 7, ['{"a":1}', '{"b":2}']],
    [['{"a":1}\n{"b"', ':22}\n'], 7, 'too long'],
    // UTF-8 bytes, not characters: é is two.
    [['{"é":1}\n'], 7, 'too long'],
    [['{"é":1}\n'], 8, ['{"é":1}']],
  ];
  for (const [parts, cap, want] of cases) {
    const got = await collect(jsonLines(chunks(parts), cap)).catch((err: unknown) => err);
    if (want === 'too long') {
      t.type(got, WatchLineTooLong, `${JSON.stringify(parts)} cap ${cap}`);
      t.equal((got as Error).message, `a watch event longer than discovery.maxDocumentBytes (${cap} bytes)`);
    } else t.same(got, want, `${JSON.stringify(parts)} cap ${cap}`);
  }
});

function response(status: number, body: AsyncIterable<Uint8Array> | string): FetchResponseLike {
  const text = typeof body === 'string' ? body : '';
  return {
    status,
    statusText: '',
    headers: { get: (n: string) => (n === 'content-type' ? 'application/json' : null) },
    body: typeof body === 'string' ? chunks([body]) : body,
    text: async () => text,
  };
}

/** A stream that yields `lines` and then stays open until the request is aborted. */
function openStream(lines: readonly string[], init: FetchInit): AsyncIterable<Uint8Array> {
  return (async function* () {
    for (const l of lines) yield enc.encode(`${l}\n`);
    await new Promise<void>((_, reject) => {
      if (init.signal.aborted) reject(new Error('aborted'));
      init.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
    });
  })();
}

t.test('a watch must have its headers within the timeout; then the stream runs on with no clock', async (t) => {
  const credentials = createCredentials({ name: 's', url: 'https://127.0.0.1:6443' });
  t.teardown(() => credentials.close());
  const signal = new AbortController().signal;
  // Accepts the connection and never answers: only the deadline can end it (a silent apiserver).
  const silent: FetchLike = (_url, init) =>
    new Promise((_, reject) => init.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true }));
  const target = { name: 's', url: 'https://127.0.0.1:6443', credentials, timeoutMs: 50 };
  const err = (await openWatchStream({ ...target, fetchImpl: silent }, '/apis/x?watch=1', { accept: 'application/json', signal }).then(
    () => null,
    (e: unknown) => e,
  )) as DiscoveryFetchError | null;
  t.match(err?.message, /timed out after 50ms/, 'the headers deadline ends it');
  t.equal(err?.kind, 'timeout');
  // Headers at once, then time moves far past the timeout (a make-believe clock: no verdict on
  // the machine's speed): the stream is not cut by the clock.
  const clock = installFakeClock();
  t.teardown(() => clock.uninstall());
  let streamSignal: AbortSignal | undefined;
  const headersAtOnce: FetchLike = async (_url, init) => {
    streamSignal = init.signal;
    return response(200, openStream([], init));
  };
  const ac = new AbortController();
  await openWatchStream({ ...target, fetchImpl: headersAtOnce }, '/apis/x?watch=1', { accept: 'application/json', signal: ac.signal });
  await clock.advance(10 * target.timeoutMs);
  t.equal(streamSignal?.aborted, false, "ten timeouts after its headers, the watch's request is still open");
  ac.abort();
  t.equal(streamSignal?.aborted, true, "and the caller's abort still ends it");
});

t.test('watch: list → watch from its resourceVersion; ERROR 410 → relist; junk lines are skipped and counted', async (t) => {
  const urls: string[] = [];
  let lists = 0;
  const fetchImpl: FetchLike = async (url, init) => {
    urls.push(url);
    if (!url.includes('watch=1')) {
      lists++;
      return response(
        200,
        JSON.stringify({ kind: 'CustomResourceDefinitionList', metadata: { resourceVersion: lists === 1 ? '5' : '9' }, items: [] }),
      );
    }
    if (url.includes('resourceVersion=5')) {
      return response(
        200,
        openStream(['this is not json', JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } })], init),
      );
    }
    return response(200, openStream([JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'x', resourceVersion: '10' } } })], init));
  };
  const credentials = createCredentials({ name: 's', url: 'https://127.0.0.1:6443' });
  t.teardown(() => credentials.close());
  const events: string[] = [];
  let sawAdded: () => void = () => undefined;
  const added = new Promise<void>((r) => (sawAdded = r));
  const watcher = new ApiWatcher(
    {
      candidates: () => [
        { target: { name: 's', url: 'https://127.0.0.1:6443', credentials, timeoutMs: 1000, fetchImpl }, health: 'healthy' },
      ],
      onChange: (kind, type) => {
        events.push(`${kind}:${type}`);
        if (type === 'ADDED') sawAdded();
      },
      logger: pino({ level: 'silent' }),
      minBackoffMs: 10,
    },
    [{ kind: 'CustomResourceDefinition', path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions' }],
  );
  // The watcher's own timers are unref'd; in a test nothing else keeps the process alive.
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  watcher.start();
  await added;
  await watcher.close();
  await watcher.close();
  t.same(events, ['CustomResourceDefinition:RELIST', 'CustomResourceDefinition:RELIST', 'CustomResourceDefinition:ADDED']);
  t.equal(lists, 2, 'relisted after the 410');
  t.equal(watcher.skipped, 1, 'the junk line was counted');
  const watches = urls.filter((u) => u.includes('watch=1'));
  t.match(watches[0], /resourceVersion=5/);
  t.match(watches[1], /resourceVersion=9/);
  t.match(watches[0], /allowWatchBookmarks=true/);
});

t.test('watch: an event longer than discovery.maxDocumentBytes fails the watch (logged, backed off), never buffered on', async (t) => {
  const watches: number[] = [];
  let pulled = 0;
  const fetchImpl: FetchLike = async (url, init) => {
    if (!url.includes('watch=1')) return response(200, JSON.stringify({ kind: 'List', metadata: { resourceVersion: '5' }, items: [] }));
    watches.push(Date.now());
    const event = JSON.stringify({ type: 'ADDED', object: { metadata: { name: 'x', resourceVersion: '6' } } });
    // One good event, then a line that never ends.
    return response(
      200,
      (async function* () {
        yield enc.encode(`${event}\n`);
        for (;;) {
          if (init.signal.aborted) return;
          pulled++;
          yield enc.encode('x'.repeat(512));
        }
      })(),
    );
  };
  const credentials = createCredentials({ name: 's', url: 'https://127.0.0.1:6443' });
  t.teardown(() => credentials.close());
  const lines: { msg: string; err?: string }[] = [];
  const logger = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as { msg: string; err?: string }) });
  const target = { name: 's', url: 'https://127.0.0.1:6443', credentials, timeoutMs: 1000, maxDocumentBytes: 4096, fetchImpl };
  const events: string[] = [];
  const watcher = new ApiWatcher(
    { candidates: () => [{ target, health: 'healthy' }], onChange: (_k, type) => events.push(type), logger, minBackoffMs: 50 },
    [{ kind: 'CustomResourceDefinition', path: '/apis/apiextensions.k8s.io/v1/customresourcedefinitions' }],
  );
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  watcher.start();
  const deadline = Date.now() + 5000;
  while (watches.length < 3 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  await watcher.close();
  t.ok(events.includes('ADDED'), 'the event before the long line was delivered');
  const failed = lines.find((l) => l.msg === 'watch failed; trying the next apiserver');
  t.equal(
    failed?.err,
    'watch /apis/apiextensions.k8s.io/v1/customresourcedefinitions on s: a watch event longer than discovery.maxDocumentBytes (4096 bytes)',
  );
  t.ok(pulled <= 9 * (watches.length + 1), `stopped just past the cap: ${pulled} chunks of 512 bytes over ${watches.length} watches`);
  t.ok(watches.length >= 2 && (watches[1] ?? 0) - (watches[0] ?? 0) >= 40, `the next watch after a backoff (${watches.join(', ')})`);
});

t.test('service: failures back off up to the interval; refresh() goes through at once; nothing after close()', async (t) => {
  // Fake time: the schedule is exact, whatever the machine's load.
  const clock = installFakeClock(t);
  const calls: number[] = [];
  const fetchImpl: FetchLike = async (url) => {
    if (url.endsWith('/api')) calls.push(clock.now());
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  };
  const svc = new DiscoveryService(
    {
      apiservers: [{ name: 's', url: 'https://127.0.0.1:6443' }],
      discovery: { interval: 400, timeout: 200, watch: false, staleAfter: 1200, identityLeaseLiveness: 60_000 },
    },
    { fetchImpl, minRetryMs: 25, now: clock.now },
  );
  await svc.start();
  t.equal(svc.current().servers[0]?.consecutiveFailures, 1);
  t.match(
    svc.current().servers[0]?.lastError,
    /GET https:\/\/127\.0\.0\.1:6443\/apis?: connect ECONNREFUSED 127\.0\.0\.1:6443 \(ECONNREFUSED\)/,
  );
  await clock.advance(1175);
  const gaps = calls.slice(1).map((c, i) => c - (calls[i] ?? 0));
  // Doubling from minRetryMs, capped at the interval.
  t.same(gaps, [25, 50, 100, 200, 400, 400], `retries at ${calls.join(', ')} ms`);
  await clock.advance(399);
  t.equal(calls.length, 7, 'nothing before the next attempt is due');

  svc.refresh();
  await clock.flush();
  t.equal(calls.length, 8, 'refresh() fetched at once despite the backoff');
  t.equal(calls.at(-1), 1574, 'with no time passing');
  t.equal(svc.current().servers[0]?.consecutiveFailures, 8);
  t.equal(svc.current().servers[0]?.view, null);

  await svc.close();
  const gen = svc.current().generation;
  svc.refresh();
  await clock.advance(10 * 400);
  t.equal(calls.length, 8, 'no fetch after close(), not even a refresh()');
  t.equal(svc.current().generation, gen, 'no new snapshot after close()');
  t.same(clock.pending(), [], 'no timer left behind');
});

/** A JSON answer with the headers discovery reads. */
function answer(status: number, body: AsyncIterable<Uint8Array> | string, headers: Record<string, string> = {}): FetchResponseLike {
  const h: Record<string, string> = { 'content-type': 'application/json', ...headers };
  return {
    status,
    statusText: '',
    headers: { get: (n: string) => h[n.toLowerCase()] ?? null },
    body: typeof body === 'string' ? chunks([body]) : body,
    text: async () => (typeof body === 'string' ? body : ''),
  };
}

t.test('service: a watch event refreshes discovery at once and again after 250 and 750 ms; then nothing until the poll', async (t) => {
  const clock = installFakeClock(t);
  const apisFetched: number[] = [];
  let pushCrdEvent: (line: string) => void = () => undefined;
  const emptyList = JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items: [] });
  const fetchImpl: FetchLike = async (url, init) => {
    const u = new URL(url);
    if (u.pathname === '/readyz') return answer(200, 'ok', { 'content-type': 'text/plain' });
    if (u.pathname === '/api' || u.pathname === '/apis') {
      if (u.pathname === '/apis') apisFetched.push(clock.now());
      return answer(200, emptyList, { 'content-type': MEDIA_AGGREGATED_V2, etag: '"1"' });
    }
    if (u.searchParams.get('watch') !== '1')
      return answer(200, JSON.stringify({ kind: 'List', metadata: { resourceVersion: '5' }, items: [] }));
    // A watch that stays open; the CRD one delivers what the test pushes.
    const lines: string[] = [];
    let wake: () => void = () => undefined;
    if (u.pathname.endsWith('/customresourcedefinitions'))
      pushCrdEvent = (l) => {
        lines.push(l);
        wake();
      };
    return answer(
      200,
      (async function* () {
        for (;;) {
          while (lines.length > 0) yield enc.encode(`${lines.shift() as string}\n`);
          await new Promise<void>((resolve, reject) => {
            wake = resolve;
            if (init.signal.aborted) reject(new Error('aborted'));
            init.signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
          });
        }
      })(),
    );
  };
  const svc = new DiscoveryService(
    {
      apiservers: [{ name: 's', url: 'https://127.0.0.1:6443' }],
      discovery: { interval: 60_000, timeout: 1000, watch: true, staleAfter: 180_000, identityLeaseLiveness: 60_000 },
    },
    { fetchImpl, now: clock.now },
  );
  await svc.start();
  // The watches' first lists are RELIST events too: let their refreshes and follow-ups pass.
  await clock.advance(1000);
  t.ok(apisFetched.length >= 2, `start-up: the first round and the relist refreshes (${apisFetched.join(', ')} ms)`);
  apisFetched.length = 0;
  const at = clock.now();
  pushCrdEvent(
    JSON.stringify({
      type: 'ADDED',
      object: { kind: 'CustomResourceDefinition', metadata: { name: 'crontabs.stable.example.com', resourceVersion: '6' } },
    }),
  );
  await clock.flush();
  t.same(apisFetched, [at], 'fetched at once: no time passed');
  await clock.advance(249);
  t.same(apisFetched, [at], 'nothing before the first follow-up');
  await clock.advance(1);
  t.same(apisFetched, [at, at + 250], 'the first follow-up at 250 ms');
  await clock.advance(500);
  t.same(apisFetched, [at, at + 250, at + 750], 'the second at 750 ms: a CRD published late is still learnt within 1 s');
  await clock.advance(59_000);
  t.same(apisFetched, [at, at + 250, at + 750], 'then nothing until the 60 s poll');
  await clock.advance(1000);
  t.same(apisFetched, [at, at + 250, at + 750, at + 750 + 60_000], 'which comes an interval after the last round');
  await svc.close();
});
