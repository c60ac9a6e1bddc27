// LiveConfig with hand-written discovery fakes: what a reload swaps and when, what it refuses,
// how reloads asked for during one are merged, and shutting down in the middle of one.
import t from 'tap';
import { ConfigError } from '../../src/config/core/problems.js';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';
import type { RoundListener } from '../../src/discovery/core/events.js';
import { initialSnapshot } from '../../src/discovery/core/snapshot.js';
import type { Snapshot } from '../../src/discovery/core/types.js';
import { LiveConfig, type LiveParts, type ReloadResult, type SwappableDiscovery } from '../../src/app/reload.js';
import { captureLogs, resultOf } from '../helpers/extproc-client.js';

/** A discovery service whose start is released by the test (or at once). */
class FakeDiscovery implements SwappableDiscovery {
  started = false;
  closed = false;
  private release: () => void = () => undefined;
  private readonly gate = new Promise<void>((resolve) => (this.release = resolve));
  readonly changes = new Set<(s: Snapshot) => void>();
  readonly rounds = new Set<RoundListener>();
  readonly snapshot: Snapshot;

  constructor(
    readonly config: Config,
    private readonly startMode: 'now' | 'held' | 'fails',
  ) {
    this.snapshot = initialSnapshot(config.apiservers);
  }
  start(): Promise<void> {
    this.started = true;
    if (this.startMode === 'fails') return Promise.reject(new Error('no credentials'));
    return this.startMode === 'now' ? Promise.resolve() : this.gate;
  }
  finishStart(): void {
    this.release();
  }
  close(): Promise<void> {
    this.closed = true;
    this.release();
    return Promise.resolve();
  }
  current(): Snapshot {
    return this.snapshot;
  }
  onChange(l: (s: Snapshot) => void): () => void {
    this.changes.add(l);
    return () => this.changes.delete(l);
  }
  onRound(l: RoundListener): () => void {
    this.rounds.add(l);
    return () => this.rounds.delete(l);
  }
  emitRound(): void {
    for (const l of this.rounds) l({ server: 'x', snapshot: this.snapshot } as Parameters<RoundListener>[0]);
  }
}

function config(edit: { servers?: string[]; retryAfterSeconds?: number; level?: string; listen?: string } = {}): Config {
  return parseConfig(
    {
      apiservers: (edit.servers ?? ['a']).map((name, i) => ({
        name,
        url: `https://10.0.0.${i + 1}:6443`,
        credentials: { tokenFile: 'token' },
      })),
      routing: { retryAfterSeconds: edit.retryAfterSeconds ?? 1 },
      extproc: { listen: edit.listen ?? '127.0.0.1:9002' },
      envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' } },
      log: { level: edit.level ?? 'info' },
    },
    '/etc/skewgate/skewgate.yaml',
    '/etc/skewgate',
  );
}

/** A LiveConfig whose builds are recorded; `modes` says how each successive build's service starts. */
function live(modes: ('now' | 'held' | 'fails')[] = []) {
  const logs = captureLogs('info');
  const built: FakeDiscovery[] = [];
  const results: ReloadResult[] = [];
  const applied: { level: string; changed: readonly string[] }[] = [];
  const lc = new LiveConfig<FakeDiscovery>(config(), {
    build(c): LiveParts<FakeDiscovery> {
      const d = new FakeDiscovery(c, built.length === 0 ? 'now' : (modes[built.length - 1] ?? 'now'));
      built.push(d);
      const names = c.apiservers.map((s) => s.name);
      return {
        config: c,
        discovery: d,
        router: {
          retryAfterSeconds: c.routing.retryAfterSeconds,
          route: () => resultOf({ outcome: 'passthrough', reason: 'non_resource', candidates: names }),
        },
      };
    },
    logger: logs.logger,
    applied: (c, changed) => applied.push({ level: c.log.level, changed }),
    onResult: (r) => results.push(r),
  });
  const decidedBy = (): readonly string[] => lc.router.route('GET', '/x', new Map()).decision.candidates;
  return { lc, logs, built, results, applied, decidedBy };
}

const flush = (): Promise<void> => new Promise((r) => setImmediate(r));

t.test('applied: the new service starts first, then router and discovery move together, then the old one closes', async (t) => {
  const h = live(['held']);
  await h.lc.start();
  const heard: Snapshot[] = [];
  h.lc.discovery.onChange((s) => heard.push(s));
  let rounds = 0;
  h.lc.discovery.onRound(() => rounds++);
  const first = h.built[0] as FakeDiscovery;
  first.emitRound();
  t.equal(rounds, 1, "the running service's rounds are forwarded");

  const done = h.lc.reload(config({ servers: ['a', 'b'], retryAfterSeconds: 4 }), { trigger: 'test' });
  await flush();
  const second = h.built[1] as FakeDiscovery;
  t.ok(second.started, 'the new service is starting');
  t.same(h.decidedBy(), ['a'], 'meanwhile the running router decides');
  t.equal(h.lc.router.retryAfterSeconds, 1);
  t.equal(h.lc.discovery.current(), first.snapshot);
  second.emitRound();
  t.equal(rounds, 1, "a starting service's rounds are not forwarded");

  second.finishStart();
  const r = await done;
  t.same(r, { result: 'applied', generation: 2, changed: ['apiservers', 'routing'] });
  t.same(h.decidedBy(), ['a', 'b'], 'the new router decides');
  t.equal(h.lc.router.retryAfterSeconds, 4);
  t.equal(h.lc.parts.discovery, second);
  t.equal(h.lc.discovery.current(), second.snapshot);
  t.same(heard, [second.snapshot], 'discovery listeners are told the new snapshot');
  t.ok(first.closed, 'the old service is closed');
  first.emitRound();
  second.emitRound();
  t.equal(rounds, 2, 'only the new service is followed');
  t.equal(h.lc.generation, 2);
  t.same(h.results, [r]);
  t.same(h.applied, [{ level: 'info', changed: ['apiservers', 'routing'] }]);
  t.match(
    h.logs.lines.find((l) => l['msg'] === 'config reloaded'),
    { level: 30, changed: ['apiservers', 'routing'], generation: 2, trigger: 'test' },
  );
  t.match(
    h.logs.lines.find((l) => l['level'] === 40),
    { msg: /apiservers changed as Envoy's bootstrap names them/ },
    'adding an apiserver says Envoy must be rendered again',
  );
});

t.test('refused: invalid, restart_required and unchanged leave the running parts alone', async (t) => {
  const h = live();
  await h.lc.start();
  const invalid = await h.lc.reload(
    () => {
      throw new ConfigError('/etc/skewgate/skewgate.yaml', [
        { path: 'apiservers[0].url', message: 'must be an https:// URL' },
        { path: 'discovery.interval', message: '"often" is not a duration' },
      ]);
    },
    { trigger: 'SIGHUP' },
  );
  t.match(invalid, { result: 'invalid', generation: 1, problems: [{ path: 'apiservers[0].url' }, { path: 'discovery.interval' }] });
  t.match(h.logs.lines.at(-1), {
    level: 50,
    msg: 'config reload refused',
    result: 'invalid',
    trigger: 'SIGHUP',
    problems: ['apiservers[0].url: must be an https:// URL', 'discovery.interval: "often" is not a duration'],
  });

  const restart = await h.lc.reload(config({ servers: ['a', 'b'], listen: '127.0.0.1:9003' }));
  t.same(restart, { result: 'restart_required', generation: 1, fields: ['extproc.listen'] });
  t.match(h.logs.lines.at(-1), { level: 50, msg: 'config reload refused', fields: ['extproc.listen'] });

  const same = await h.lc.reload(config());
  t.same(same, { result: 'unchanged', generation: 1 });

  t.equal(h.built.length, 1, 'nothing was built');
  t.same(h.decidedBy(), ['a']);
  t.same(
    h.results.map((r) => r.result),
    ['invalid', 'restart_required', 'unchanged'],
  );
});

t.test('failed: a new service that cannot start is closed, the running one stays', async (t) => {
  const h = live(['fails']);
  await h.lc.start();
  const r = await h.lc.reload(config({ servers: ['b'] }));
  t.match(r, { result: 'failed', generation: 1, error: /did not start: no credentials/ });
  t.ok(h.built[1]?.closed);
  t.notOk(h.built[0]?.closed);
  t.same(h.decidedBy(), ['a']);
  t.match(h.logs.lines.at(-1), { level: 50, msg: 'config reload failed' });
});

t.test('the log level alone is applied without a new discovery service', async (t) => {
  const h = live();
  await h.lc.start();
  t.same(await h.lc.reload(config({ level: 'debug' })), { result: 'applied', generation: 2, changed: ['log.level'] });
  t.equal(h.built.length, 1);
  t.notOk(h.built[0]?.closed);
  t.same(h.applied, [{ level: 'debug', changed: ['log.level'] }]);
  t.equal(h.lc.parts.config.log.level, 'debug', 'the next reload compares with it');
  t.same(await h.lc.reload(config({ level: 'debug' })), { result: 'unchanged', generation: 2 });
});

t.test('reloads asked for during one are merged into one more, with the latest config', async (t) => {
  const h = live(['held', 'now']);
  await h.lc.start();
  const first = h.lc.reload(config({ servers: ['a', 'b'] }));
  await flush();
  const second = h.lc.reload(config({ servers: ['a', 'c'] }));
  const third = h.lc.reload(config({ servers: ['a', 'd'] }));
  await flush();
  t.equal(h.built.length, 2, 'nothing else is built while one reload runs');
  h.built[1]?.finishStart();
  const [r1, r2, r3] = await Promise.all([first, second, third]);
  t.match(r1, { result: 'applied', generation: 2 });
  t.match(r2, { result: 'applied', generation: 3 });
  t.equal(r3, r2, 'one run answers both');
  t.equal(h.built.length, 3, 'two reloads ran, not three');
  t.same(h.decidedBy(), ['a', 'd'], 'the latest config won');
  t.equal(h.results.length, 2, 'one result per run');
});

t.test('a reload asked for before start runs once start is over', async (t) => {
  const h = live();
  const r = h.lc.reload(config({ servers: ['b'] }));
  await flush();
  t.equal(h.built.length, 1, 'waits for start');
  await h.lc.start();
  t.match(await r, { result: 'applied', generation: 2 });
});

t.test('shutting down during a reload: the starting service is closed, queued reloads answered, the running one closed last', async (t) => {
  const h = live(['held']);
  await h.lc.start();
  const inFlight = h.lc.reload(config({ servers: ['a', 'b'] }));
  await flush();
  const queued = h.lc.reload(config({ servers: ['a', 'c'] }));
  const candidate = h.built[1] as FakeDiscovery;
  const ended = h.lc.endReloads();
  t.ok(candidate.closed, 'the starting service is closed at once');
  t.match(await queued, { result: 'failed', error: 'skewgate is shutting down' });
  t.match(await inFlight, { result: 'failed', error: 'skewgate is shutting down' });
  await ended;
  t.same(h.decidedBy(), ['a'], 'the running parts keep deciding while the server drains');
  t.notOk(h.built[0]?.closed, 'endReloads leaves the running service alone');
  t.match(await h.lc.reload(config({ servers: ['z'] })), { result: 'failed', error: 'skewgate is shutting down' });
  await Promise.all([h.lc.close(), h.lc.close()]);
  t.ok(h.built[0]?.closed);
  t.equal(h.built.length, 2);
});
