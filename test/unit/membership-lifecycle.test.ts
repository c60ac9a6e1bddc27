// Where apiservers join and leave (src/membership/lifecycle.ts): the actions reconcile() decides for
// the members as they stand and what the seed and the sources call for, and admission() of a
// probed candidate. Tables over plain values; no timer, no clock of its own.
import t from 'tap';
import { admission, reconcile, type MemberRecord } from '../../src/membership/lifecycle.js';
import type { DesiredMember, MemberRole, MemberSpec } from '../../src/membership/members.js';

const spec = (name: string, hostname?: string): MemberSpec =>
  ({ name, url: `https://${name}:6443`, ...(hostname === undefined ? {} : { hostname }) }) as MemberSpec;
const member = (name: string, role: MemberRole, ready: boolean | null = true, o: Partial<MemberRecord> = {}): MemberRecord => ({
  spec: spec(name),
  role,
  seed: false,
  sources: ['nodes'],
  ready,
  ...o,
});
const want = (name: string, o: Partial<DesiredMember> = {}): DesiredMember => ({ spec: spec(name), seed: false, sources: ['nodes'], ...o });
const NOW = 1_000_000;
const DRAIN = 30_000;

interface Row {
  readonly what: string;
  readonly members: readonly MemberRecord[];
  readonly desired: readonly DesiredMember[];
  readonly actions: readonly unknown[];
  readonly changed: boolean;
  readonly drained?: boolean;
  readonly postponed?: boolean;
}

const rows: readonly Row[] = [
  {
    what: 'nothing to do',
    members: [member('a', 'member')],
    desired: [want('a')],
    actions: [],
    changed: false,
  },
  {
    what: 'a learnt address is probed first',
    members: [member('a', 'member')],
    desired: [want('a'), want('b')],
    actions: [{ kind: 'add', spec: spec('b'), role: 'probing', seed: false, sources: ['nodes'] }],
    changed: true,
  },
  {
    what: 'a seed that comes back is a member at once',
    members: [member('b', 'member')],
    desired: [want('a', { seed: true, sources: ['config'] }), want('b')],
    actions: [{ kind: 'add', spec: spec('a'), role: 'member', seed: true, sources: ['config'] }],
    changed: true,
  },
  {
    what: 'a member that left every source drains until now + drainTimeout, another being ready',
    members: [member('a', 'member'), member('b', 'member')],
    desired: [want('b')],
    actions: [{ kind: 'drain', name: 'a', until: NOW + DRAIN }],
    changed: true,
    drained: true,
  },
  {
    what: 'the last ready member is kept (no other is ready)',
    members: [member('a', 'member'), member('b', 'member', false)],
    desired: [want('b')],
    actions: [{ kind: 'keep', name: 'a' }],
    changed: false,
    postponed: true,
  },
  {
    what: 'a new member not yet probed does not let the old one go',
    members: [member('a', 'member')],
    desired: [want('b')],
    actions: [
      { kind: 'add', spec: spec('b'), role: 'probing', seed: false, sources: ['nodes'] },
      { kind: 'keep', name: 'a' },
    ],
    changed: true,
    postponed: true,
  },
  {
    what: 'a draining member named again is a member; it counts as ready for another that leaves',
    members: [member('a', 'draining'), member('b', 'member')],
    desired: [want('a', { sources: ['endpointSlice'] })],
    actions: [
      { kind: 'undrain', name: 'a', sources: ['endpointSlice'] },
      { kind: 'drain', name: 'b', until: NOW + DRAIN },
    ],
    changed: true,
    drained: true,
  },
  {
    what: 'a candidate that left every source is forgotten, a draining one left alone',
    members: [member('a', 'member'), member('p', 'probing', null), member('j', 'joining'), member('d', 'draining')],
    desired: [want('a')],
    actions: [
      { kind: 'forget', name: 'p' },
      { kind: 'forget', name: 'j' },
    ],
    changed: true,
  },
  {
    what: 'the sources that name a member change: told, not a routing change',
    members: [member('a', 'member')],
    desired: [want('a', { sources: ['endpointSlice', 'nodes'] })],
    actions: [{ kind: 'sources', name: 'a', sources: ['endpointSlice', 'nodes'] }],
    changed: false,
  },
  {
    what: 'a hostname learnt: its identity changes the merge',
    members: [member('a', 'member')],
    desired: [{ spec: spec('a', 'cp-1'), seed: false, sources: ['nodes'] }],
    actions: [{ kind: 'respec', name: 'a', spec: spec('a', 'cp-1') }],
    changed: true,
  },
];

for (const r of rows)
  t.test(r.what, async (t) => {
    const plan = reconcile(r.members, r.desired, NOW, DRAIN);
    t.same(plan.actions, r.actions, 'actions');
    t.equal(plan.changed, r.changed, 'changed');
    t.equal(plan.drained, r.drained ?? false, 'drained');
    t.equal(plan.postponed, r.postponed ?? false, 'postponed');
    t.ok(Object.isFrozen(plan) && Object.isFrozen(plan.actions), 'the plan is frozen');
  });

t.test('admission of a probed candidate', async (t) => {
  const ok = { viewed: true, consecutiveFailures: 0, ready: true };
  const table: [string, MemberRole, typeof ok, number, string][] = [
    ['verified, no join delay: a member', 'probing', ok, 0, 'join'],
    ['verified, with a join delay: joining first', 'probing', ok, 500, 'joining'],
    ['no view yet', 'probing', { ...ok, viewed: false }, 0, 'not-verified'],
    ['its last round failed', 'probing', { ...ok, consecutiveFailures: 1 }, 0, 'not-verified'],
    ['/readyz not ok', 'probing', { ...ok, ready: false }, 0, 'not-verified'],
    ['/readyz not probed yet', 'probing', { ...ok, ready: null as unknown as boolean }, 0, 'not-verified'],
    ['already a member', 'member', ok, 0, 'none'],
    ['joining already', 'joining', ok, 500, 'none'],
  ];
  for (const [what, role, state, delay, step] of table) t.equal(admission({ role }, state, delay), step, what);
});
