// deploy/monitoring: every metric the alert rules and the Grafana dashboard name is one a running
// skewgate (its /metrics) or its REAL Envoy (/stats/prometheus) exports, under that exact name; the
// dashboard is well-formed. (promtool's own check of the rules runs beside it, in
// test/e2e/promtool.test.ts when it exists; the names are the part promtool cannot check.)
// Envoy missing → the stack fixture throws and the test fails (it never skips).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { request } from 'undici';
import { packageRoot } from '../../src/util/package-root.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../../harness/fake/index.js';
import { send } from '../helpers/envoy-fixtures.js';
import { stackFixture } from '../helpers/stack-fixture.js';
import { waitMs } from '../helpers/waits.js';

const MONITORING = join(packageRoot(), 'deploy/monitoring');
const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

const fixture = stackFixture(t, 'monitoring', {
  servers: [
    { name: 'apiserver-a', builtins: BUILTINS_OLD },
    { name: 'apiserver-b', builtins: BUILTINS_NEW },
    { name: 'apiserver-c', builtins: BUILTINS_OLD },
  ],
  telemetry: { metrics: { prometheus: { listen: '127.0.0.1:0' } } },
});

interface Rules {
  groups: { name: string; rules: { alert?: string; expr: string; for?: string; labels?: Record<string, string> }[] }[];
}
interface Dashboard {
  title: string;
  uid: string;
  panels: { id: number; title: string; targets: { expr: string; refId: string }[] }[];
  templating: { list: { name: string; query?: unknown }[] };
  annotations: { list: { name: string; expr: string }[] };
}

const rules = parse(readFileSync(join(MONITORING, 'skewgate-alerts.yaml'), 'utf8')) as Rules;
const dashboard = JSON.parse(readFileSync(join(MONITORING, 'skewgate-dashboard.json'), 'utf8')) as Dashboard;

/** Metric names in a PromQL expression: identifiers of ours or Envoy's, not functions or labels. */
function metricNames(expr: string): string[] {
  return [...expr.matchAll(/\b((?:skewgate|process|nodejs|envoy)_[a-z0-9_]+)\b/g)].map((m) => m[1] as string);
}

/** The metric names in a Prometheus text exposition (one per sample line). */
function exposed(text: string): Set<string> {
  return new Set(
    text
      .split('\n')
      .filter((l) => l !== '' && !l.startsWith('#'))
      .map((l) => /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(l)?.[0] ?? ''),
  );
}

t.test('the alert rules and the dashboard name only metrics skewgate and Envoy export', async (t) => {
  const stack = fixture.stack();
  // Traffic, so that the decision series exist; an apiserver stopped, so that a discovery error does.
  const gateway = Number(new URL(stack.gatewayUrl).port);
  for (let i = 0; i < 5; i++) await send(gateway, stack.pki, 'GET', SKEWED, { authorization: `Bearer ${stack.pki.token}` });
  await stack.apiservers[2]?.close();
  const port = stack.skewgate()?.telemetry?.prometheusPort();
  t.ok(port, 'skewgate serves /metrics');
  let skewgate = new Set<string>();
  // Until the stopped apiserver's failed fetch is counted: a discovery round (1 s) and its timeout (2 s).
  for (const deadline = Date.now() + waitMs(1000, 2000); Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
    skewgate = exposed(await (await request(`http://127.0.0.1:${port}/metrics`)).body.text());
    if (skewgate.has('skewgate_discovery_fetch_errors_total')) break;
  }
  const envoy = exposed(await (await request(`${stack.envoy.adminUrl}/stats/prometheus`)).body.text());
  t.ok(envoy.size > 100, `Envoy exports ${envoy.size} series names`);

  const uses: [string, string][] = [
    ...rules.groups.flatMap((g) =>
      g.rules.flatMap((r) => metricNames(r.expr).map((n) => [`alert ${r.alert ?? '?'}`, n] as [string, string])),
    ),
    ...dashboard.panels.flatMap((p) =>
      p.targets.flatMap((q) => metricNames(q.expr).map((n) => [`panel "${p.title}"`, n] as [string, string])),
    ),
    ...dashboard.annotations.list.flatMap((a) => metricNames(a.expr).map((n) => [`annotation "${a.name}"`, n] as [string, string])),
    ...dashboard.templating.list.flatMap((v) =>
      typeof v.query === 'string' ? metricNames(v.query).map((n) => [`variable ${v.name}`, n] as [string, string]) : [],
    ),
  ];
  t.ok(uses.length > 15, `${uses.length} uses of metrics`);
  for (const [where, name] of uses) {
    const from = name.startsWith('envoy_') ? envoy : skewgate;
    t.ok(from.has(name), `${where}: ${name} is exported by ${name.startsWith('envoy_') ? 'Envoy' : 'skewgate'}`);
  }
});

t.test('the rules and the dashboard are well-formed', async (t) => {
  const alerts = rules.groups.flatMap((g) => g.rules);
  t.ok(alerts.length >= 6, `${alerts.length} alerts`);
  for (const a of ['SkewgateSkewPresent', 'SkewgateViewsStale', 'SkewgateFailingOpen', 'SkewgateAnswering503'])
    t.ok(
      alerts.some((r) => r.alert === a),
      `${a} is there`,
    );
  for (const r of alerts) t.ok(r.labels?.['severity'], `${r.alert ?? '?'} has a severity`);
  t.equal(dashboard.uid, 'skewgate');
  const ids = dashboard.panels.map((p) => p.id);
  t.equal(new Set(ids).size, ids.length, 'panel ids are unique');
  for (const p of dashboard.panels) t.ok(p.targets.length > 0, `panel "${p.title}" has a query`);
  t.same(
    dashboard.annotations.list.map((a) => a.name),
    ['apiserver version', 'apiserver not ready', 'skew changed'],
    'an upgrade marked on every panel: versions, readiness, skew',
  );
});
