// The snapshot as the ext_proc workers receive it (workers/core/snapshot-transfer.ts), through the
// structured clone that postMessage applies: the same decisions, large parts sent once, parts no
// longer named dropped, a part never sent refused.
import t from 'tap';
import { serialize } from 'node:v8';
import { buildSnapshot } from '../../src/discovery/core/snapshot.js';
import { parseAggregatedDiscovery } from '../../src/discovery/core/parse.js';
import type { ServerView, Snapshot } from '../../src/discovery/core/types.js';
import { NO_CLIENT_CA, routeRequest } from '../../src/routing/router.js';
import { SnapshotDecoder, SnapshotEncoder, SnapshotTransferError, type SnapshotMessage } from '../../src/workers/core/snapshot-transfer.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { aggregatedList, groupDocs } from '../../harness/fake/discovery-docs.js';
import type { FakeResource } from '../../harness/fake/cluster.js';
import { readyState } from '../helpers/server-states.js';

const NOW = 1_800_000_000_000;

function viewOf(resources: readonly FakeResource[]): ServerView {
  return parseAggregatedDiscovery(
    aggregatedList(groupDocs(resources.filter((r) => r.group === ''))),
    aggregatedList(groupDocs(resources.filter((r) => r.group !== ''))),
  );
}
const OLD = viewOf(BUILTINS_OLD);
const NEW = viewOf(BUILTINS_NEW);

function snapshot(generation: number, views: readonly ServerView[], previous?: Snapshot, at = NOW): Snapshot {
  return buildSnapshot(
    views.map((v, i) => readyState(`apiserver-${i}`, v, at)),
    generation,
    previous,
  );
}
/** What postMessage does to a message. */
const posted = (m: SnapshotMessage): SnapshotMessage => structuredClone(m);
const hasValues = (m: SnapshotMessage): string[] =>
  [
    ...m.servers.filter((s) => s.view?.value !== undefined).map((s) => `view ${s.name}`),
    ...(['resources', 'groupVersions', 'peerDiscovery', 'documents'] as const).filter((k) => m[k].value !== undefined),
  ].sort();

const PATHS = [
  '/api/v1/namespaces/default/configmaps',
  '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies',
  '/apis/nothing.example/v1/widgets',
  '/apis',
  '/apis/apps/v1',
  '/openapi/v3',
];
const decisions = (snap: Snapshot): unknown[] =>
  PATHS.map((p) => {
    const r = routeRequest('GET', p, new Map([['accept', 'application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList']]), snap, {
      now: NOW,
      staleAfterMs: 60_000,
      rng: () => 0,
      clientIdentity: NO_CLIENT_CA,
    });
    return { path: p, decision: r.decision, generation: r.generation };
  });

t.test('a snapshot crosses whole: the same data, the same decisions, the /apis body a Buffer', async (t) => {
  const snap = snapshot(7, [OLD, OLD, NEW]);
  const got = new SnapshotDecoder().decode(posted(new SnapshotEncoder().encode(snap)));
  t.same(got.servers, snap.servers);
  t.same(got.resources, snap.resources);
  t.same(got.groupVersions, snap.groupVersions);
  t.same(got.documents, snap.documents);
  t.same(got.membership, snap.membership);
  t.equal(got.peerDiscovery.ok, true, 'the merged /apis is there');
  if (got.peerDiscovery.ok && snap.peerDiscovery.ok) {
    t.ok(Buffer.isBuffer(got.peerDiscovery.document.body), 'a Buffer again');
    t.ok(got.peerDiscovery.document.body.equals(snap.peerDiscovery.document.body), 'the same bytes');
    t.equal(got.peerDiscovery.document.etag, snap.peerDiscovery.document.etag);
  }
  t.same(decisions(got), decisions(snap), 'every path decided alike');
  t.ok(Object.isFrozen(got) && Object.isFrozen(got.servers), 'immutable on arrival');
});

t.test('the usual round (timestamps only): no large part is sent again', async (t) => {
  const enc = new SnapshotEncoder();
  const dec = new SnapshotDecoder();
  const first = snapshot(1, [OLD, NEW]);
  const m1 = enc.encode(first);
  t.same(hasValues(m1), ['documents', 'groupVersions', 'peerDiscovery', 'resources', 'view apiserver-0', 'view apiserver-1'].sort());
  const got1 = dec.decode(posted(m1));
  const next = snapshot(2, [OLD, NEW], first, NOW + 1000);
  t.equal(next.resources, first.resources, 'the build reused the merged indexes');
  const m2 = enc.encode(next);
  t.same(hasValues(m2), [], 'only ids for the large parts');
  t.ok(serialize(m2).length < 2000, `a small message (${serialize(m2).length} bytes, first ${serialize(m1).length})`);
  t.ok(serialize(m1).length > 20 * serialize(m2).length);
  const got2 = dec.decode(posted(m2));
  t.equal(got2.generation, 2);
  t.equal(got2.servers[0]?.lastSuccessAt, NOW + 1000 - 100, 'the new timestamps');
  t.equal(got2.resources, got1.resources, 'the parts kept are the same objects on the receiving side');
  t.equal(got2.servers[1]?.view, got1.servers[1]?.view);
  t.same(decisions(got2), decisions(next));
});

t.test('a changed view: that view and what is merged from it are sent, the rest named', async (t) => {
  const enc = new SnapshotEncoder();
  const dec = new SnapshotDecoder();
  const first = snapshot(1, [OLD, OLD]);
  dec.decode(posted(enc.encode(first)));
  // apiserver-1 upgraded: a new view object.
  const upgraded = snapshot(2, [OLD, NEW], first);
  const m = enc.encode(upgraded);
  t.same(hasValues(m), ['documents', 'groupVersions', 'peerDiscovery', 'resources', 'view apiserver-1'].sort());
  const got = dec.decode(posted(m));
  t.same(decisions(got), decisions(upgraded));
  t.notSame(
    decisions(got)[1],
    decisions(dec.decode(posted(new SnapshotEncoder().encode(first))))[1],
    'the skewed resource is decided otherwise after the upgrade',
  );
});

t.test('the receiver keeps only what the last message named, and refuses a part never sent', async (t) => {
  const enc = new SnapshotEncoder();
  const dec = new SnapshotDecoder();
  const a = snapshot(1, [OLD, OLD]);
  const ma = posted(enc.encode(a));
  dec.decode(ma);
  const b = snapshot(2, [NEW, NEW], a);
  dec.decode(posted(enc.encode(b)));
  // A message naming a's resources by id alone: the receiver dropped them with b.
  const stale: SnapshotMessage = { ...ma, resources: { id: ma.resources.id } };
  t.throws(() => dec.decode(stale), SnapshotTransferError);
  t.throws(() => dec.decode(stale), /snapshot 1: resources part \d+ was never sent/);
  t.throws(() => new SnapshotDecoder().decode(posted(enc.encode(b))), /was never sent/, 'a new receiver with an old sender: refused');
  // A failed decode leaves the receiver as it was.
  t.same(decisions(dec.decode(posted(enc.encode(snapshot(3, [NEW, NEW], b))))), decisions(snapshot(3, [NEW, NEW], b)));
});
