// `skewgate skew`'s verdict: never "no skew" when something was not compared (the views of real
// servers are covered through the CLI against fake apiservers, test/integration/cli.test.ts).
import t from 'tap';
import { skewVerdict } from '../../src/inspect/skew-report.js';
import { initialSnapshot } from '../../src/discovery/core/snapshot.js';

t.test('no apiserver answered: cannot compare, exit 1, each named', async (t) => {
  const v = skewVerdict(
    initialSnapshot([
      { name: 'a', url: 'https://10.0.0.1:6443' },
      { name: 'b', url: 'https://10.0.0.2:6443' },
    ]),
  );
  t.equal(v.verdict, 'cannot_compare');
  t.equal(v.summary, 'cannot compare: no apiserver answered discovery (a, b)');
  t.same(
    v.notCompared.map((n) => n.name),
    ['a', 'b'],
  );
  t.notMatch(v.summary, /no skew/);
});

t.test('a running apiserver not in the config is named as not compared', async (t) => {
  const v = skewVerdict(initialSnapshot([{ name: 'a', url: 'https://10.0.0.1:6443' }]), ['kube-apiserver-x (hostname cp-4)']);
  t.same(
    v.notCompared.map((n) => n.name),
    ['a', 'kube-apiserver-x (hostname cp-4)'],
  );
  t.equal(v.verdict, 'cannot_compare', 'a has no view either');
  t.same(
    v.notCompared.map((n) => n.member),
    [true, false],
    'the configured one is a member, the running stranger is not',
  );
});

t.test('no apiserver configured at all is not "no skew"', async (t) => {
  const v = skewVerdict(initialSnapshot([]));
  t.equal(v.summary, 'cannot compare: no apiserver answered discovery (none configured)');
  t.equal(v.verdict, 'cannot_compare');
});
