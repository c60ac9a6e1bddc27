// The order of Envoy's fast-path updates (src/envoy-runtime/xds-files.ts, src/envoy-runtime/fast-path-sync.ts):
// what a new snapshot takes away is out of rds.json, and Envoy confirmed running it, before the
// snapshot is published and before the balanced pool changes; what it adds is written after.
// Envoy is played by the confirm callback, which records what the files held when it was asked.
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { syntheticPlane } from '../../bench/synthetic.js';
import { parseConfig } from '../../src/config/load.js';
import { type ApiServerConfig, type Config } from '../../src/config/core/schema.js';
import type { MemberEntry } from '../../src/membership/members.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import type { ServerState, Snapshot } from '../../src/discovery/core/types.js';
import { FastPathSync } from '../../src/envoy-runtime/fast-path-sync.js';
import { FAST_PATH_ROUTE_PREFIX } from '../../src/envoy/fast-routes.js';
import { CDS_FILE, RDS_FILE } from '../../src/envoy/xds.js';
import { XdsWriter } from '../../src/envoy-runtime/xds-files.js';
import { compileFastPath } from '../../src/routing/fast-path.js';

const quiet = pino({ level: 'silent' });
// The writer's and the sync's timers are unref'd (they never hold a process up): hold this one.
const alive = setInterval(() => undefined, 1000);
t.teardown(() => clearInterval(alive));
const dirs: string[] = [];
t.teardown(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

function setup(fastPath = true): { config: Config; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), 'sg-fast-'));
  dirs.push(dir);
  const config = parseConfig(
    {
      apiservers: [{ name: 'apiserver-a', url: 'https://127.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } }],
      envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' }, xds: { directory: join(dir, 'xds') } },
      routing: { fastPath },
      discovery: { interval: '1s', staleAfter: '3s' },
    },
    join(dir, 'skewgate.yaml'),
    dir,
  );
  return { config, dir: join(dir, 'xds') };
}

const NOW = 1_800_000_000_000;
const plane = syntheticPlane(42, NOW);
const spec = (s: ServerState): ApiServerConfig =>
  ({ name: s.name, url: s.url, caFile: '/ca.crt', credentials: { tokenFile: 'token' } }) as ApiServerConfig;
const entry = (s: ServerState, role: MemberEntry['role'] = 'member'): MemberEntry => ({
  spec: spec(s),
  role,
  seed: false,
  sources: ['test'],
});
const OLD = plane.servers.slice(0, 2);
const snapOf = (servers: readonly ServerState[], generation: number): Snapshot => buildSnapshot(servers, generation);

interface Rds {
  readonly version_info: string;
  readonly resources: { virtual_hosts: { routes: { name: string; match: { safe_regex?: { regex: string } } }[] }[] }[];
}
const read = (dir: string): Rds => JSON.parse(readFileSync(join(dir, RDS_FILE), 'utf8')) as Rds;
const fastRoutes = (rds: Rds): { name: string; match: { safe_regex?: { regex: string } } }[] =>
  (rds.resources[0]?.virtual_hosts[0]?.routes ?? []).filter((r) => r.name.startsWith(FAST_PATH_ROUTE_PREFIX));
const compiled = new Map<string, RegExp>();
const rx = (source: string): RegExp => compiled.get(source) ?? (compiled.set(source, new RegExp(source)).get(source) as RegExp);
const fastFor = (rds: Rds, path: string): boolean => fastRoutes(rds).some((r) => rx(r.match.safe_regex?.regex ?? '$^').test(path));

/** Two small apiservers (pods and deployments), for the tests that time a withdrawal. */
function small(lastSuccessAt: number): ServerState[] {
  const cap = Object.freeze({
    verbs: new Set(['get', 'list', 'watch', 'create', 'update', 'patch', 'delete']),
    subresources: new Map([['status', new Set(['get', 'patch', 'update'])]]),
    namespaced: true,
  });
  return ['apiserver-a', 'apiserver-b'].map((name, i) =>
    Object.freeze({
      name,
      url: `https://127.0.0.${i + 1}:6443`,
      view: Object.freeze({
        source: 'aggregated' as const,
        resources: new Map([
          ['/v1/pods', cap],
          ['apps/v1/deployments', cap],
        ]),
        groupVersions: new Set(['/v1', 'apps/v1']),
      }),
      lastSuccessAt,
      consecutiveFailures: 0,
      lastError: null,
      ready: true,
    }),
  );
}

/** Envoy as the writer sees it: every confirmation recorded with what the files held then. */
function envoy(dir: string): {
  confirm: (v: string) => Promise<boolean>;
  asked: { version: string; rds: Rds; cds: string }[];
  hold: (p: Promise<void>) => void;
} {
  const asked: { version: string; rds: Rds; cds: string }[] = [];
  let gate: Promise<void> = Promise.resolve();
  return {
    asked,
    hold: (p) => (gate = p),
    confirm: async (version) => {
      asked.push({ version, rds: read(dir), cds: readFileSync(join(dir, CDS_FILE), 'utf8') });
      await gate;
      return true;
    },
  };
}

const podPath = '/api/v1/namespaces/default/pods/web-1';

t.test('a member joining the pool: the fast-path routes go first, confirmed, then the pool changes', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, 5, e.confirm);
  t.teardown(() => writer.close());
  await writer.update(OLD.map((s) => entry(s)));
  const table = compileFastPath(snapOf(OLD, 3), { now: NOW, staleAfterMs: 3000, marginMs: 1000 });
  await writer.setFastPath(table);
  t.ok(fastFor(read(dir), podPath), 'the two old apiservers: pods are fast');
  t.equal(writer.fastPathWritten(), table, 'the writer knows what Envoy was given');
  t.equal(e.asked.length, 0, 'adding routes waits for nobody');
  const cdsBefore = readFileSync(join(dir, CDS_FILE), 'utf8');

  // The new apiserver joins: its own cluster and routes first (joining), then the pool.
  const c = plane.servers[2] as ServerState;
  await writer.update([...OLD.map((s) => entry(s)), entry(c, 'joining')]);
  t.equal(e.asked.length, 1, 'one confirmation asked');
  t.same(fastRoutes(e.asked[0]?.rds as Rds), [], 'Envoy was asked to run routes without the fast path');
  t.equal(e.asked[0]?.cds, cdsBefore, 'while the clusters were still as before');
  t.equal(e.asked[0]?.version, e.asked[0]?.rds.version_info, "by that file's version");
  t.same(fastRoutes(read(dir)), [], 'and none while one joins');
  await writer.update(plane.servers.map((s) => entry(s)));
  t.same(fastRoutes(read(dir)), [], 'a table over two apiservers is never written for a pool of three');
  t.equal(writer.fastPathWritten(), null);
});

t.test('FastPathSync: a withdrawal lands before the snapshot is published; an addition after', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, 5, e.confirm);
  t.teardown(() => writer.close());
  let current = snapOf(OLD, 1);
  const now = NOW;
  const sync = new FastPathSync({
    writer,
    current: () => current,
    staleAfterMs: () => config.discovery.staleAfter,
    enabled: () => config.routing.fastPath,
    logger: quiet,
    now: () => now,
  });
  t.teardown(() => sync.close());
  await writer.update(OLD.map((s) => entry(s)));
  sync.published(current);
  await sync.idle();
  t.ok(fastFor(read(dir), podPath), 'published: pods fast');

  // apiserver-b stops serving pods' status subresource (upgraded in place, say).
  const b = OLD[1] as ServerState;
  const view = b.view;
  if (view === null) throw new Error('a view');
  const pods = view.resources.get('/v1/pods');
  if (pods === undefined) throw new Error('pods');
  const subs = new Map(pods.subresources);
  subs.delete('status');
  const changed = new Map(view.resources);
  changed.set('/v1/pods', { ...pods, subresources: subs });
  const next = snapOf([OLD[0] as ServerState, { ...b, view: { ...view, resources: changed } }], 2);
  let release: () => void = () => undefined;
  e.hold(new Promise<void>((r) => (release = r)));
  let settled = false;
  const gate = sync.beforePublish(next).then(() => (settled = true));
  t.teardown(release);
  const until = Date.now() + 5000;
  while (e.asked.length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  t.equal(e.asked.length, 1, 'Envoy is asked to run the withdrawal');
  t.notOk(fastFor(e.asked[0]?.rds as Rds, podPath), 'core v1 is out of the routes Envoy is asked about');
  t.ok(fastRoutes(e.asked[0]?.rds as Rds).length > 0, 'what both snapshots allow stays fast meanwhile');
  await new Promise((r) => setTimeout(r, 50));
  t.notOk(settled, 'the snapshot is not published before Envoy confirms');
  release();
  await gate;
  t.ok(settled, 'published once Envoy confirmed');
  current = next;
  sync.published(next);
  await sync.idle();
  t.notOk(fastFor(read(dir), podPath), 'after publication: still not fast');
  t.equal(e.asked.length, 1, 'nothing more to confirm: nothing was taken away');

  // b serves status again: additions need no confirmation and come after publication.
  const back = snapOf(OLD, 3);
  await sync.beforePublish(back);
  t.notOk(fastFor(read(dir), podPath), 'before publication nothing is added');
  current = back;
  sync.published(back);
  await sync.idle();
  t.ok(fastFor(read(dir), podPath), 'after it, pods are fast again');
  t.equal(e.asked.length, 1, 'without asking Envoy');
});

t.test('FastPathSync: the expiry timer withdraws what ageing views no longer prove', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, 5, e.confirm);
  t.teardown(() => writer.close());
  const start = Date.now();
  const servers = small(start);
  const fresh = snapOf(servers, 1);
  const sync = new FastPathSync({
    writer,
    current: () => fresh,
    staleAfterMs: () => 2500,
    enabled: () => true,
    logger: quiet,
    marginMs: 1000,
  });
  t.teardown(() => sync.close());
  await writer.update(servers.map((s) => entry(s)));
  sync.published(fresh);
  await sync.idle();
  t.ok(fastFor(read(dir), podPath), 'fast while the views are current');
  // Valid until start + 2500; the timer fires 1000 ms before that (room for a loaded machine before it).
  const deadline = Date.now() + 4000;
  while (Date.now() < deadline && fastRoutes(read(dir)).length > 0) await new Promise((r) => setTimeout(r, 20));
  const at = Date.now() - start;
  // The file is visible once renamed, a moment before the writer's continuation asks Envoy.
  while (Date.now() < deadline && e.asked.length === 0) await new Promise((r) => setTimeout(r, 5));
  t.same(fastRoutes(read(dir)), [], `withdrawn ${at} ms after the views' fetch`);
  t.ok(at < 2500, 'before the views went stale');
  t.equal(e.asked.length, 1, `and confirmed by Envoy (asked ${e.asked.length})`);
});

t.test('off, closed, restarted: no fast-path routes left behind', async (t) => {
  const off = setup(false);
  const w1 = new XdsWriter(off.config, quiet, 5, null);
  await w1.update(OLD.map((s) => entry(s)));
  await w1.setFastPath(compileFastPath(snapOf(OLD, 1), { now: NOW, staleAfterMs: 3000, marginMs: 1000 }));
  t.same(fastRoutes(read(off.dir)), [], 'routing.fastPath false: never written');
  await w1.close();

  const on = setup();
  const w2 = new XdsWriter(on.config, quiet, 5, null);
  const sync = new FastPathSync({
    writer: w2,
    current: () => snapOf(OLD, 1),
    staleAfterMs: () => 3_600_000,
    enabled: () => true,
    logger: quiet,
  });
  await w2.update(OLD.map((s) => entry(s)));
  sync.published(
    snapOf(
      OLD.map((s) => ({ ...s, lastSuccessAt: Date.now() })),
      1,
    ),
  );
  await sync.idle();
  t.ok(fastRoutes(read(on.dir)).length > 0, 'written');
  await sync.close();
  await sync.close();
  t.same(fastRoutes(read(on.dir)), [], 'close() withdraws them (idempotent)');
  await w2.close();

  // A run that crashed left them: the next run's first write replaces them.
  const crashed = setup();
  const w3 = new XdsWriter(crashed.config, quiet, 5, null);
  await w3.update(OLD.map((s) => entry(s)));
  await w3.setFastPath(compileFastPath(snapOf(OLD, 1), { now: NOW, staleAfterMs: 3000, marginMs: 1000 }));
  t.ok(fastRoutes(read(crashed.dir)).length > 0, 'a run wrote them and died without closing');
  const w4 = new XdsWriter(crashed.config, quiet, 5, null);
  await w4.update(OLD.map((s) => entry(s)));
  t.same(fastRoutes(read(crashed.dir)), [], 'the first write of the next run has none');
  await w4.close();
});
