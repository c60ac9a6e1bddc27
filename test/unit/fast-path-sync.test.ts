// The order of Envoy's fast-path updates (src/envoy-runtime/xds-files.ts, src/envoy-runtime/fast-path-sync.ts):
// what a new snapshot takes away — routes, or members of the table's pool — is out of rds.json,
// and Envoy confirmed running it, before the snapshot is published; what it adds is written
// after; a new pool is a new cluster, which Envoy runs before any route names it. Envoy is played
// by the confirm callbacks, which record what the files held when they were asked.
import t from 'tap';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { SERVER_NAMES, syntheticPlane } from '../../bench/synthetic.js';
import { parseConfig } from '../../src/config/load.js';
import { type ApiServerConfig, type Config } from '../../src/config/core/schema.js';
import type { MemberEntry } from '../../src/membership/members.js';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import { gvrKey, type ServerState, type Snapshot } from '../../src/discovery/core/types.js';
import { FastPathSync } from '../../src/envoy-runtime/fast-path-sync.js';
import { FAST_PATH_ROUTE_PREFIX } from '../../src/envoy/fast-routes.js';
import { CDS_FILE, RDS_FILE } from '../../src/envoy/xds.js';
import { XdsWriter } from '../../src/envoy-runtime/xds-files.js';
import { compileFastPath } from '../../src/routing/fast-path.js';
import { fastClusterName } from '../../src/envoy/clusters.js';
import { eventually } from '../helpers/http.js';

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
      // requestTimeout bounds a request sent to a pool before its routes went: how long its cluster stays.
      envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' }, xds: { directory: join(dir, 'xds') }, requestTimeout: '1s' },
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
  clusters: (names: readonly string[]) => Promise<boolean>;
  asked: { version: string; rds: Rds; cds: string }[];
  askedClusters: { names: readonly string[]; rds: Rds; cds: string }[];
  hold: (p: Promise<void>) => void;
} {
  const asked: { version: string; rds: Rds; cds: string }[] = [];
  const askedClusters: { names: readonly string[]; rds: Rds; cds: string }[] = [];
  let gate: Promise<void> = Promise.resolve();
  return {
    asked,
    askedClusters,
    hold: (p) => (gate = p),
    confirm: async (version) => {
      asked.push({ version, rds: read(dir), cds: readFileSync(join(dir, CDS_FILE), 'utf8') });
      await gate;
      return true;
    },
    clusters: async (names) => {
      // The first write asks before any rds.json exists.
      const rds = existsSync(join(dir, RDS_FILE)) ? read(dir) : ({ version_info: '', resources: [] } as Rds);
      askedClusters.push({ names, rds, cds: readFileSync(join(dir, CDS_FILE), 'utf8') });
      return true;
    },
  };
}

/** The cluster the fast-path routes of an rds.json send to (undefined: none). */
const fastCluster = (rds: Rds): string | undefined => (fastRoutes(rds)[0] as { route?: { cluster?: string } } | undefined)?.route?.cluster;
const clusterNames = (cds: string): string[] => (JSON.parse(cds) as { resources: { name: string }[] }).resources.map((c) => c.name);
/** The apiservers a cluster of cds.json balances over (undefined: no such cluster). */
const poolIn = (cds: string, name: string): string[] | undefined =>
  (JSON.parse(cds) as { resources: { name: string; transport_socket_matches?: { name: string }[] }[] }).resources
    .find((c) => c.name === name)
    ?.transport_socket_matches?.map((m) => m.name);
const cdsNow = (dir: string): string => readFileSync(join(dir, CDS_FILE), 'utf8');

const podPath = '/api/v1/namespaces/default/pods/web-1';

t.test('a member joining: the fast path stays on its pool; a pool that grows is a new cluster, run before routes name it', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, { settleMs: 5, confirm: e.confirm, clustersConfirm: e.clusters });
  t.teardown(() => writer.close());
  await writer.update(OLD.map((s) => entry(s)));
  const opts = { now: NOW, staleAfterMs: 3000, marginMs: 1000 };
  const table = compileFastPath(snapOf(OLD, 3), opts);
  await writer.setFastPath(table);
  const ab = fastClusterName(['apiserver-a', 'apiserver-b']);
  t.ok(fastFor(read(dir), podPath), 'the two old apiservers: pods are fast');
  t.equal(fastCluster(read(dir)), ab, 'sent to the pool of the two');
  t.equal(writer.fastPathWritten(), table, 'the writer knows what Envoy was given');
  t.equal(e.asked.length, 0, 'adding routes waits for nobody');
  t.same(
    e.askedClusters.map((a) => a.names),
    [['apiserver-a', 'apiserver-b'], [ab]],
    "the members' clusters at the first write, then the pool's, before the routes named it",
  );
  t.equal(fastCluster(e.askedClusters[1]?.rds as Rds), undefined, 'no fast route named it yet when Envoy was asked');

  // The new apiserver joins, then becomes a member: the table (over a and b) holds throughout.
  const c = plane.servers[2] as ServerState;
  await writer.update([...OLD.map((s) => entry(s)), entry(c, 'joining')]);
  await writer.update(plane.servers.map((s) => entry(s)));
  t.equal(e.asked.length, 0, 'nothing withdrawn: the routes never send to the newcomer');
  t.ok(fastFor(read(dir), podPath), 'pods still fast');
  t.equal(fastCluster(read(dir)), ab, 'on the pool of the two');

  // Its view current and it ready: the table over three, where core v1 is skewed.
  const three = compileFastPath(snapOf(plane.servers, 4), opts);
  const abc = fastClusterName(SERVER_NAMES);
  const switched = Date.now();
  await writer.setFastPath(three);
  t.equal(e.asked.length, 1, 'taking core v1 away is confirmed');
  t.notOk(fastFor(e.asked[0]?.rds as Rds, podPath), 'Envoy was asked to run routes without pods');
  t.equal(fastCluster(e.asked[0]?.rds as Rds), ab, 'still on the old pool (the withdrawal adds no member)');
  const grow = e.askedClusters.find((a) => a.names.includes(abc));
  t.ok(grow, 'the pool of three is asked for');
  t.ok(clusterNames(grow?.cds ?? '{"resources":[]}').includes(abc), 'it is in cds.json when Envoy is asked');
  t.equal(fastCluster(grow?.rds as Rds), ab, 'and no route names it yet');
  t.equal(fastCluster(read(dir)), abc, 'then the routes send to the three');
  // A request Envoy sent to the pool of two may still retry there (a retry looks the cluster up again).
  t.same(poolIn(cdsNow(dir), ab), ['apiserver-a', 'apiserver-b'], 'the pool of two stays, for the requests already sent to it');
  await eventually('the pool of two gone', () => poolIn(cdsNow(dir), ab) === undefined, 10_000, 20);
  t.ok(
    Date.now() - switched >= config.envoy.requestTimeout,
    'and goes once they are over (envoy.requestTimeout), with nothing else written',
  );
});

t.test('a member in doubt: the pool shrinks before the snapshot is published, and what the rest serve is added after', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, { settleMs: 5, confirm: e.confirm, clustersConfirm: e.clusters });
  t.teardown(() => writer.close());
  let current = snapOf(plane.servers, 1);
  const sync = new FastPathSync({
    writer,
    current: () => current,
    staleAfterMs: () => config.discovery.staleAfter,
    enabled: () => config.routing.fastPath,
    logger: quiet,
    now: () => NOW,
  });
  t.teardown(() => sync.close());
  await writer.update(plane.servers.map((s) => entry(s)));
  sync.published(current);
  await sync.idle();
  t.equal(fastCluster(read(dir)), fastClusterName(SERVER_NAMES), 'all three ready: the pool of three');
  t.notOk(fastFor(read(dir), podPath), 'core v1 skewed: pods not fast');

  // The new apiserver restarts (its round fails): it leaves the pool before routing hears of it.
  const restarting = snapOf(
    plane.servers.map((s) => (s.name === 'apiserver-c' ? { ...s, ready: false, consecutiveFailures: 1 } : s)),
    2,
  );
  const ab = fastClusterName(['apiserver-a', 'apiserver-b']);
  const before = e.asked.length;
  await sync.beforePublish(restarting);
  t.equal(e.asked.length, before + 1, 'one withdrawal confirmed before publication');
  t.equal(fastCluster(e.asked.at(-1)?.rds as Rds), ab, "Envoy was asked to run routes on a and b's pool");
  t.ok(
    e.askedClusters.some((a) => a.names.includes(ab) && fastCluster(a.rds) === fastClusterName(SERVER_NAMES)),
    'whose cluster it ran before any route named it',
  );
  t.notOk(fastFor(read(dir), podPath), 'nothing added before publication');
  current = restarting;
  sync.published(restarting);
  await sync.idle();
  t.ok(fastFor(read(dir), podPath), 'after it: pods fast, between the old two');
  t.equal(fastCluster(read(dir)), ab, 'on their pool');
  t.same(
    poolIn(cdsNow(dir), fastClusterName(SERVER_NAMES)),
    ['apiserver-a', 'apiserver-b'],
    'the pool of three stays for the requests sent to it, without the apiserver in doubt: a retry goes only where a new request would',
  );

  // Back as another version (core v1 as the old ones serve it, say): it rejoins only with a current view.
  current = snapOf(plane.servers, 3);
  await sync.beforePublish(current);
  t.equal(fastCluster(e.asked.at(-1)?.rds as Rds), ab, 'pods withdrawn first, still on the two');
  t.notOk(fastFor(e.asked.at(-1)?.rds as Rds, podPath), 'without pods');
  sync.published(current);
  await sync.idle();
  t.equal(fastCluster(read(dir)), fastClusterName(SERVER_NAMES), 'then the three again');
  t.same(poolIn(cdsNow(dir), fastClusterName(SERVER_NAMES)), SERVER_NAMES, 'its cluster over the three again');
});

t.test('FastPathSync: a withdrawal lands before the snapshot is published; an addition after', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, { settleMs: 5, confirm: e.confirm });
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

t.test("an earlier pool's cluster goes at once when the routes stop matching a request it was given", async (t) => {
  const { config, dir } = setup();
  // The writer's clock stands still: the pool of two could stay for ever but for what it was given.
  const writer = new XdsWriter(config, quiet, { settleMs: 5, now: () => NOW });
  t.teardown(() => writer.close());
  const opts = { now: NOW, staleAfterMs: 3000, marginMs: 1000 };
  await writer.update(plane.servers.map((s) => entry(s)));
  await writer.setFastPath(compileFastPath(snapOf(OLD, 1), opts));
  const ab = fastClusterName(['apiserver-a', 'apiserver-b']);
  const three = compileFastPath(snapOf(plane.servers, 2), opts);
  await writer.setFastPath(three);
  t.equal(fastCluster(read(dir)), fastClusterName(SERVER_NAMES), 'the routes send to the three');
  t.same(poolIn(cdsNow(dir), ab), ['apiserver-a', 'apiserver-b'], 'the pool of two stays for what was sent to it');

  // apiserver-b stops serving a resource both tables route (upgraded in place, say).
  const gv = three.groupVersions[0];
  const gone = gv?.resources[0];
  const b = plane.servers[1] as ServerState;
  if (gv === undefined || gone === undefined || b.view === null) throw new Error('a routed resource and a view');
  const resources = new Map(b.view.resources);
  t.ok(resources.delete(gvrKey(gv.group, gv.version, gone.resource)), `b listed ${gv.group}/${gv.version} ${gone.resource}`);
  const changed = plane.servers.map((s) => (s === b ? { ...b, view: { ...b.view, resources } } : s)) as ServerState[];
  await writer.setFastPath(compileFastPath(snapOf(changed, 3), opts));
  t.notOk(fastFor(read(dir), `/apis/${gv.group}/${gv.version}/${gone.resource}`), 'the routes no longer match it');
  t.equal(poolIn(cdsNow(dir), ab), undefined, 'and the pool of two is gone: a retry there could reach b');
});

t.test('FastPathSync: the expiry timer withdraws what ageing views no longer prove', async (t) => {
  const { config, dir } = setup();
  const e = envoy(dir);
  const writer = new XdsWriter(config, quiet, { settleMs: 5, confirm: e.confirm });
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
  const w1 = new XdsWriter(off.config, quiet, { settleMs: 5 });
  await w1.update(OLD.map((s) => entry(s)));
  await w1.setFastPath(compileFastPath(snapOf(OLD, 1), { now: NOW, staleAfterMs: 3000, marginMs: 1000 }));
  t.same(fastRoutes(read(off.dir)), [], 'routing.fastPath false: never written');
  await w1.close();

  const on = setup();
  const w2 = new XdsWriter(on.config, quiet, { settleMs: 5 });
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
  const w3 = new XdsWriter(crashed.config, quiet, { settleMs: 5 });
  await w3.update(OLD.map((s) => entry(s)));
  await w3.setFastPath(compileFastPath(snapOf(OLD, 1), { now: NOW, staleAfterMs: 3000, marginMs: 1000 }));
  t.ok(fastRoutes(read(crashed.dir)).length > 0, 'a run wrote them and died without closing');
  const w4 = new XdsWriter(crashed.config, quiet, { settleMs: 5 });
  await w4.update(OLD.map((s) => entry(s)));
  t.same(fastRoutes(read(crashed.dir)), [], 'the first write of the next run has none');
  await w4.close();
});
