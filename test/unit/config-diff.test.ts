// reloadPlan: which changes a running skewgate swaps in, which need a restart, and that one of the
// latter refuses the whole reload.
import t from 'tap';
import { changesEnvoyUpstreams, differingPaths, reloadPlan, sameValue, type ReloadPlan } from '../../src/config/core/diff.js';
import { parseConfig } from '../../src/config/load.js';
import { type Config } from '../../src/config/core/schema.js';

const base = {
  apiservers: [
    { name: 'a', url: 'https://10.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } },
    { name: 'b', url: 'https://10.0.0.2:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } },
  ],
  discovery: { interval: '1s' },
  extproc: { listen: '127.0.0.1:9002' },
  envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' } },
  log: { level: 'info' },
};
type Doc = Record<string, unknown>;

function config(edit: (d: Doc) => void = () => undefined, source = '/etc/skewgate/skewgate.yaml'): Config {
  const doc = structuredClone(base) as Doc;
  edit(doc);
  return parseConfig(doc, source, '/etc/skewgate');
}
const running = config();
const servers = (d: Doc): Doc[] => d['apiservers'] as Doc[];
const section = (d: Doc, k: string): Doc => (d[k] ??= {}) as Doc;

const cases: { desc: string; edit: (d: Doc) => void; source?: string; want: ReloadPlan }[] = [
  { desc: 'the same file', edit: () => undefined, want: { kind: 'unchanged' } },
  { desc: 'only the source differs', edit: () => undefined, source: '/elsewhere/skewgate.yaml', want: { kind: 'unchanged' } },
  {
    desc: 'a default written out is no change',
    edit: (d) => (section(d, 'routing')['retryAfterSeconds'] = 1),
    want: { kind: 'unchanged' },
  },
  {
    desc: 'an apiserver added',
    edit: (d) => servers(d).push({ name: 'c', url: 'https://10.0.0.3:6443', credentials: { tokenFile: 'token' } }),
    want: { kind: 'swap', changed: ['apiservers'] },
  },
  { desc: 'an apiserver removed', edit: (d) => servers(d).pop(), want: { kind: 'swap', changed: ['apiservers'] } },
  {
    desc: "an apiserver's URL",
    edit: (d) => ((servers(d)[1] as Doc)['url'] = 'https://10.0.0.9:6443'),
    want: { kind: 'swap', changed: ['apiservers'] },
  },
  {
    desc: 'a credential file',
    edit: (d) => ((servers(d)[0] as Doc)['credentials'] = { tokenFile: 'other-token' }),
    want: { kind: 'swap', changed: ['apiservers'] },
  },
  {
    desc: 'the discovery interval',
    edit: (d) => (section(d, 'discovery')['interval'] = '2s'),
    want: { kind: 'swap', changed: ['discovery'] },
  },
  {
    desc: 'staleAfter, written or derived',
    edit: (d) => (section(d, 'discovery')['staleAfter'] = '10s'),
    want: { kind: 'swap', changed: ['discovery'] },
  },
  { desc: 'Retry-After', edit: (d) => (section(d, 'routing')['retryAfterSeconds'] = 5), want: { kind: 'swap', changed: ['routing'] } },
  { desc: 'the log level', edit: (d) => (section(d, 'log')['level'] = 'debug'), want: { kind: 'swap', changed: ['log.level'] } },
  {
    desc: 'several swappable sections at once, listed in order',
    edit: (d) => {
      section(d, 'routing')['retryAfterSeconds'] = 3;
      section(d, 'log')['level'] = 'warn';
      servers(d).pop();
      section(d, 'discovery')['watch'] = false;
    },
    want: { kind: 'swap', changed: ['apiservers', 'discovery', 'log.level', 'routing'] },
  },
  {
    desc: 'the ext_proc listener',
    edit: (d) => (section(d, 'extproc')['listen'] = '127.0.0.1:9003'),
    want: { kind: 'restart_required', fields: ['extproc.listen'] },
  },
  {
    desc: 'shutdownGrace and failureMode, each named',
    edit: (d) => Object.assign(section(d, 'extproc'), { shutdownGrace: '9s', failureMode: 'closed' }),
    want: { kind: 'restart_required', fields: ['extproc.failureMode', 'extproc.shutdownGrace'] },
  },
  {
    desc: "Envoy's client CA, with the front-proxy certificate it needs",
    edit: (d) =>
      Object.assign(section(d, 'envoy'), {
        tls: { certFile: 'gw.crt', keyFile: 'gw.key', clientCaFile: 'client-ca.crt' },
        upstreamClientCert: { certFile: 'fp.crt', keyFile: 'fp.key' },
      }),
    want: {
      kind: 'restart_required',
      fields: ['envoy.tls.clientCaFile', 'envoy.upstreamClientCert'],
    },
  },
  {
    desc: 'a nested Envoy field',
    edit: (d) => (section(d, 'envoy')['healthCheck'] = { interval: '5s' }),
    want: { kind: 'restart_required', fields: ['envoy.healthCheck.interval'] },
  },
  {
    desc: 'telemetry turned on',
    edit: (d) => (d['telemetry'] = { metrics: { prometheus: { listen: '127.0.0.1:9464' } } }),
    want: { kind: 'restart_required', fields: ['telemetry.metrics.prometheus'] },
  },
  {
    desc: 'one restart-needing change refuses the swappable ones with it',
    edit: (d) => {
      servers(d).pop();
      section(d, 'log')['level'] = 'debug';
      section(d, 'extproc')['listen'] = 'unix:/run/sg.sock';
    },
    want: { kind: 'restart_required', fields: ['extproc.listen'] },
  },
];

for (const c of cases) {
  t.test(c.desc, async (t) => {
    t.same(reloadPlan(running, config(c.edit, c.source)), c.want);
  });
}

// Sections Config does not know yet (parseConfig would refuse them): built by hand.
const withKey = (c: Config, key: string, value: unknown): Config => ({ ...c, [key]: value }) as Config;

t.test('a membership section (another change adds it) is swapped, compared by value', async (t) => {
  const m = { extraIdentities: ['kube-apiserver-x'] };
  t.same(reloadPlan(running, withKey(running, 'membership', m)), { kind: 'swap', changed: ['membership'] });
  t.same(reloadPlan(withKey(running, 'membership', m), withKey(running, 'membership', structuredClone(m))), { kind: 'unchanged' });
  t.same(reloadPlan(withKey(running, 'membership', m), running), { kind: 'swap', changed: ['membership'] }, 'removed');
});

t.test('any other unknown top-level section needs a restart', async (t) => {
  t.same(reloadPlan(running, withKey(running, 'gateway', { port: 1 })), { kind: 'restart_required', fields: ['gateway'] });
  t.same(reloadPlan(withKey(running, 'gateway', { port: 1 }), withKey(running, 'gateway', { port: 2 })), {
    kind: 'restart_required',
    fields: ['gateway.port'],
  });
});

t.test('differingPaths and sameValue', async (t) => {
  const rows: { a: unknown; b: unknown; want: string[] }[] = [
    { a: { x: 1 }, b: { x: 1 }, want: [] },
    { a: { x: 1, y: undefined }, b: { x: 1 }, want: [] },
    { a: { x: { y: 1, z: 2 } }, b: { x: { y: 1, z: 3 } }, want: ['s.x.z'] },
    { a: [{ n: 1 }, { n: 2 }], b: [{ n: 1 }, { n: 3 }], want: ['s[1].n'] },
    { a: [1, 2], b: [1, 2, 3], want: ['s'] },
    { a: { x: 1 }, b: { y: 1 }, want: ['s.x', 's.y'] },
    { a: 1, b: '1', want: ['s'] },
    { a: null, b: {}, want: ['s'] },
  ];
  for (const r of rows) {
    t.same(differingPaths(r.a, r.b, 's'), r.want, JSON.stringify(r));
    t.equal(sameValue(r.a, r.b), r.want.length === 0, `sameValue ${JSON.stringify(r)}`);
  }
});

t.test("changesEnvoyUpstreams: only what Envoy's clusters and routes hold", async (t) => {
  const rows: { desc: string; edit: (d: Doc) => void; want: boolean }[] = [
    { desc: 'nothing', edit: () => undefined, want: false },
    { desc: 'a discovery credential', edit: (d) => ((servers(d)[0] as Doc)['credentials'] = { tokenFile: 'other' }), want: false },
    { desc: 'the lease hostname', edit: (d) => ((servers(d)[0] as Doc)['hostname'] = 'cp-1'), want: false },
    {
      desc: 'an apiserver added',
      edit: (d) => servers(d).push({ name: 'c', url: 'https://10.0.0.3:6443', credentials: { tokenFile: 'token' } }),
      want: true,
    },
    { desc: 'a URL', edit: (d) => ((servers(d)[0] as Doc)['url'] = 'https://10.0.0.7:6443'), want: true },
    { desc: 'serverName', edit: (d) => ((servers(d)[0] as Doc)['serverName'] = 'kubernetes'), want: true },
    { desc: 'caFile', edit: (d) => ((servers(d)[0] as Doc)['caFile'] = 'other-ca.crt'), want: true },
  ];
  for (const r of rows) t.equal(changesEnvoyUpstreams(running, config(r.edit)), r.want, r.desc);
});
