// An operator's cordons (src/cordon/core/cordons.ts): the table, its file, the order routing and
// Envoy hear of a change, and the admin request's checks.
import t from 'tap';
import {
  cordonFileText,
  cordonOrder,
  cordonRequestOf,
  NO_CORDONS,
  parseCordonFile,
  withCordon,
  withoutCordon,
  type Cordon,
} from '../../src/cordon/core/cordons.js';
import { cordonTransition } from '../../src/history/core/transitions.js';

const c = (apiserver: string, over: Partial<Cordon> = {}): Cordon => ({
  apiserver,
  mode: 'cordon',
  by: 'alice@cp-1',
  reason: 'bad build',
  at: '2026-12-05T10:00:00.000Z',
  ...over,
});

t.test('the table: replaced, never changed; removing what is absent gives the same table', async (t) => {
  const one = withCordon(NO_CORDONS, c('kas-2'));
  t.equal(NO_CORDONS.size, 0, 'the empty table stays empty');
  t.equal(one.get('kas-2')?.mode, 'cordon');
  const drained = withCordon(one, c('kas-2', { mode: 'drain' }));
  t.equal(one.get('kas-2')?.mode, 'cordon', 'the earlier table is untouched');
  t.equal(drained.get('kas-2')?.mode, 'drain');
  t.equal(withoutCordon(drained, 'kas-9'), drained, 'nothing to remove: the very same table');
  t.equal(withoutCordon(drained, 'kas-2').size, 0);
});

t.test('the file: round trip, sorted; what cannot be read is named and skipped, never fatal', async (t) => {
  const table = withCordon(withCordon(NO_CORDONS, c('kas-3', { mode: 'drain', reason: '' })), c('kas-1'));
  const text = cordonFileText(table);
  t.match(text, /"apiserver": "kas-1"[\s\S]*"apiserver": "kas-3"/, 'sorted by apiserver');
  const back = parseCordonFile(text);
  t.same(back.problems, []);
  t.same(
    [...back.table.values()],
    [...table.values()].sort((a, b) => a.apiserver.localeCompare(b.apiserver)),
  );
  t.match(parseCordonFile('{').problems[0], /^not JSON/);
  t.match(parseCordonFile('{"kind":"Other","version":1,"cordons":[]}').problems[0], /not a SkewgateCordons document/);
  const mixed = parseCordonFile(
    JSON.stringify({
      kind: 'SkewgateCordons',
      version: 1,
      cordons: [c('kas-1'), { apiserver: 'kas-2', mode: 'fence', at: '2026-12-05T10:00:00Z' }, { apiserver: '', mode: 'cordon' }, 7],
    }),
  );
  t.same([...mixed.table.keys()], ['kas-1'], 'the good entry kept');
  t.same(mixed.problems, ['cordons[1]: mode: must be one of cordon, drain', 'cordons[2]: apiserver: missing', 'cordons[3]: not an object']);
});

t.test('order: an apiserver losing its routes tells routing first; one getting them back tells Envoy first', async (t) => {
  const rows: [Parameters<typeof cordonOrder>[0], Parameters<typeof cordonOrder>[1], string][] = [
    [undefined, 'cordon', 'together'],
    ['cordon', undefined, 'together'],
    [undefined, 'drain', 'routing first'],
    ['cordon', 'drain', 'routing first'],
    ['drain', undefined, 'envoy first'],
    ['drain', 'cordon', 'envoy first'],
    ['drain', 'drain', 'together'],
    [undefined, undefined, 'together'],
  ];
  for (const [before, after, want] of rows) t.equal(cordonOrder(before, after), want, `${before ?? 'open'} → ${after ?? 'open'}`);
});

t.test('the admin request: every problem at once; defaults', async (t) => {
  t.same(
    cordonRequestOf({ apiserver: 'kas-2' }, false),
    { apiserver: 'kas-2', mode: 'cordon', by: '', reason: '' },
    'mode defaults to cordon',
  );
  t.same(cordonRequestOf({ apiserver: 'kas-2', by: 'bob' }, true), { apiserver: 'kas-2', by: 'bob', reason: '' }, 'uncordon has no mode');
  t.same(cordonRequestOf({ apiserver: 'kas-2', mode: 'drain' }, true), ['unknown field "mode"'], 'uncordon refuses a mode');
  t.same(cordonRequestOf({ mode: 'fence', by: 'x'.repeat(300), extra: 1 }, false), [
    'unknown field "extra"',
    'apiserver: the name of a member, as `skewgate status` lists it',
    'mode: one of cordon, drain',
    'by: a string of at most 256 characters',
  ]);
  t.same(cordonRequestOf([], false), ['the body must be a JSON object']);
});

t.test('the history: a change as an event, no event for no change', async (t) => {
  const base = { apiserver: 'kas-2', by: 'alice', reason: 'r', peer: 'unix socket' };
  t.match(cordonTransition({ ...base, before: null, after: 'drain' }, 0), { kind: 'cordoned', mode: 'drain', by: 'alice' });
  t.match(cordonTransition({ ...base, before: 'cordon', after: null }, 0), { kind: 'uncordoned', mode: 'cordon' });
  t.equal(cordonTransition({ ...base, before: 'cordon', after: 'cordon' }, 0), null);
  t.equal(cordonTransition({ ...base, before: null, after: null }, 0), null);
});
