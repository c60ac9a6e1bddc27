// deploy/monitoring's alert rules, checked by the REAL promtool (lab/build-promtool.sh, from the
// Go module proxy): `check rules` (syntax, PromQL, templates) and `test rules` (the rules fire,
// and stay quiet, as skewgate-alerts.test.yaml says, annotations included). Missing promtool →
// the test fails with the command that builds it; it never skips.
import t from 'tap';
import { execFile } from 'node:child_process';
import { accessSync, constants as fsConstants, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { packageRoot } from '../../src/util/package-root.js';
import { labBinDir, parseEnvFile, VERSIONS_FILE_RELATIVE } from '../../harness/lab/versions.js';

const ROOT = packageRoot();
const version = parseEnvFile(readFileSync(join(ROOT, VERSIONS_FILE_RELATIVE), 'utf8')).get('PROMETHEUS_VERSION');
const promtool = join(labBinDir(), `promtool-${version ?? '?'}`);
const MONITORING = join(ROOT, 'deploy/monitoring');

async function run(...args: string[]): Promise<{ code: number; out: string }> {
  try {
    const r = await promisify(execFile)(promtool, args, { cwd: MONITORING, timeout: 60_000 });
    return { code: 0, out: r.stdout + r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string; message: string };
    return { code: typeof e.code === 'number' ? e.code : -1, out: `${e.stdout ?? ''}${e.stderr ?? e.message}` };
  }
}

t.test('promtool is built', async (t) => {
  t.ok(version, `${VERSIONS_FILE_RELATIVE} pins PROMETHEUS_VERSION`);
  t.doesNotThrow(() => accessSync(promtool, fsConstants.X_OK), `${promtool} exists (bash lab/build-promtool.sh builds it)`);
});

t.test('promtool check rules: the alert rules are valid', async (t) => {
  const r = await run('check', 'rules', 'skewgate-alerts.yaml');
  t.equal(r.code, 0, r.out);
  t.match(r.out, /SUCCESS: \d+ rules found/);
});

t.test('promtool test rules: each alert fires when it should, and not before', async (t) => {
  const r = await run('test', 'rules', 'skewgate-alerts.test.yaml');
  t.equal(r.code, 0, r.out);
  t.match(r.out, /SUCCESS/);
});

t.test('promtool check rules: every query of the dashboard (panels and annotations) is valid PromQL', async (t) => {
  const dashboard = JSON.parse(readFileSync(join(MONITORING, 'skewgate-dashboard.json'), 'utf8')) as {
    panels: { title: string; targets: { expr: string }[] }[];
    annotations: { list: { name: string; expr: string }[] };
  };
  // Grafana's variable, as "All" gives it.
  const exprs = [...dashboard.panels.flatMap((p) => p.targets.map((q) => q.expr)), ...dashboard.annotations.list.map((a) => a.expr)].map(
    (e) => e.replaceAll('$instance', '.*'),
  );
  const dir = mkdtempSync(join(tmpdir(), 'sg-promtool-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'dashboard.yaml');
  const rules = exprs.map((e, i) => `      - record: dashboard:query${i}\n        expr: ${JSON.stringify(e)}\n`).join('');
  writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules}`);
  const r = await run('check', 'rules', file);
  t.equal(r.code, 0, r.out);
  t.match(r.out, new RegExp(`SUCCESS: ${exprs.length} rules found`));
});

t.test('a broken rule is caught (the check can fail)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sg-promtool-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'broken.yaml');
  writeFileSync(file, 'groups:\n  - name: broken\n    rules:\n      - alert: Broken\n        expr: rate(skewgate_decisions_total[5m]\n');
  const r = await run('check', 'rules', file);
  t.not(r.code, 0, 'an unclosed parenthesis is refused');
  t.match(r.out, /FAILED/);
});
