// Watch stream handling and the service's scheduling, with a stubbed fetch (no network).
import t from 'tap';
import { pino } from 'pino';
import type { FetchInit, FetchLike, FetchResponseLike } from '../../src/discovery/client.js';
import { createCredentials } from '../../src/discovery/credentials.js';
import { ApiWatcher, jsonLines } from '../../src/discovery/watch.js';
import { DiscoveryService } from '../../src/discovery/service.js';

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

t.test('watch: list → watch from its resourceVersion; ERROR 410 → relist; junk lines are skipped and counted', async (t) => {
  const urls: string[] = [];
  let lists = 0;
  const fetchImpl: FetchLike = async (url, init) => {
    urls.push(url);
    if (!url.includes('watch=1')) {
      lists++;
      return response(200, JSON.stringify({ kind: 'CustomResourceDefinitionList', metadata: { resourceVersion: lists === 1 ? '5' : '9' }, items: [] }));
    }
    if (url.includes('resourceVersion=5')) {
      return response(200, openStream(['this is not json', JSON.stringify({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } })], init));
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
      candidates: () => [{ target: { name: 's', url: 'https://127.0.0.1:6443', credentials, timeoutMs: 1000, fetchImpl }, health: 'healthy' }],
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

t.test('service: failures back off up to the interval; refresh() goes through at once', async (t) => {
  const calls: number[] = [];
  const t0 = performance.now();
  const fetchImpl: FetchLike = async (url) => {
    if (url.endsWith('/api')) calls.push(performance.now() - t0);
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6443'), { code: 'ECONNREFUSED' });
  };
  const svc = new DiscoveryService(
    { apiservers: [{ name: 's', url: 'https://127.0.0.1:6443' }], discovery: { interval: 400, timeout: 200, watch: false, staleAfter: 1200 } },
    { fetchImpl, minRetryMs: 25 },
  );
  t.teardown(() => svc.close());
  const keepAlive = setInterval(() => undefined, 1000);
  t.teardown(() => clearInterval(keepAlive));
  await svc.start();
  t.equal(svc.current().servers[0]?.consecutiveFailures, 1);
  t.match(svc.current().servers[0]?.lastError, /GET https:\/\/127\.0\.0\.1:6443\/apis?: connect ECONNREFUSED 127\.0\.0\.1:6443 \(ECONNREFUSED\)/);
  await new Promise((r) => setTimeout(r, 1300));
  const gaps = calls.slice(1).map((c, i) => c - (calls[i] ?? 0));
  // 25, 50, 100, 200, 400, 400 ...: growing, never above the interval (plus scheduling slack).
  t.ok(calls.length >= 4 && calls.length <= 9, `${calls.length} attempts in 1.3 s: ${gaps.map((g) => g.toFixed(0)).join(', ')}`);
  t.ok((gaps[0] ?? 0) < 250, 'first retry is quick');
  t.ok(gaps.every((g) => g < 400 + 300), 'never waits (much) longer than the interval');
  t.ok((gaps.at(-1) ?? 0) >= 300, 'backed off to about the interval');

  const before = calls.length;
  svc.refresh();
  for (let i = 0; i < 50 && calls.length === before; i++) await new Promise((r) => setTimeout(r, 5));
  t.equal(calls.length, before + 1, 'refresh() fetched at once despite the backoff');
  t.ok((calls.at(-1) ?? 0) - (calls.at(-2) ?? 0) < 400, 'sooner than the next scheduled attempt');
  t.ok((svc.current().servers[0]?.consecutiveFailures ?? 0) >= 6);
  t.equal(svc.current().servers[0]?.view, null);
});
