import t from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseConfig } from '../../src/config/load.js';
import { gatewayConfigDocument } from '../../harness/lab/gateway-config.js';
import { labPkiFiles, type LabPki } from '../../harness/lab/pki.js';
import { FAST_OFF, FAST_ON, accessLogRoutes, fastByPhaseText, skewgateArmOptions } from '../helpers/fast-path-arms.js';

t.test("accessLogRoutes counts an Envoy access log's fast-path lines, from a moment on, grouped", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'fast-path-arms-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, 'envoy.log');
  const line = (start: string, route: string, path: string): string => JSON.stringify({ start, route, path, status: '200' });
  await writeFile(
    file,
    [
      '\n==== 2026-12-01T10:00:00.000Z envoy -c envoy.yaml',
      line('2026-12-01T10:00:00.500Z', 'fast-path-read', '/api/v1/namespaces/a/configmaps/x'), // before sinceMs
      '[2026-12-01 10:00:01.000][1][warning][config] a warning line of Envoy, not JSON',
      line('2026-12-01T10:00:01.000Z', 'fast-path-read', '/api/v1/namespaces/a/configmaps/x'),
      line('2026-12-01T10:00:01.100Z', 'fast-path-create', '/api/v1/namespaces/a/configmaps'),
      line('2026-12-01T10:00:01.200Z', '-', '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies'),
      line('2026-12-01T10:00:02.000Z', 'default', '/api/v1/namespaces/a/configmaps/x'),
      '{"not":"an access log line"}',
      '{broken json',
    ].join('\n'),
  );
  const since = Date.parse('2026-12-01T10:00:01.000Z');
  const all = await accessLogRoutes(file, since);
  t.equal(all.requests, 4, 'lines from sinceMs on, access-log lines only');
  t.equal(all.fast, 2, 'on a fast-path-* route');
  t.equal(fastByPhaseText(all), 'all 2/4');
  const split = Date.parse('2026-12-01T10:00:01.500Z');
  const grouped = await accessLogRoutes(
    file,
    since,
    (at, path) => `${at < split ? 'early' : 'late'}-${path.includes('/configmaps') ? 'cm' : 'map'}`,
  );
  t.same(Object.fromEntries(grouped.byPhase), { 'early-cm': 2, 'early-map': 1, 'late-cm': 1 });
  t.same(Object.fromEntries(grouped.fastByPhase), { 'early-cm': 2 });
  t.equal(fastByPhaseText(grouped), 'early-cm 2/2, early-map 0/1, late-cm 0/1');
});

t.test('the two arms: the fast path on with xds, off by routing.fastPath with or without xds', async (t) => {
  const pki: LabPki = { ...labPkiFiles('/pki'), adminToken: 'a', janeToken: 'j', skewgateToken: 's' };
  const doc = (xds: boolean, fastPath: boolean | undefined): ReturnType<typeof parseConfig> =>
    parseConfig(
      gatewayConfigDocument({
        pki,
        apiservers: [{ name: 'kas-1', url: 'https://127.0.0.1:6443' }],
        extprocListen: 'unix:/run/x.sock',
        port: 1,
        ...(xds ? { xdsDir: '/run/xds' } : {}),
        ...(fastPath === undefined ? {} : { fastPath }),
      }),
      'lab.yaml',
      '/',
    );
  const on = skewgateArmOptions(FAST_ON, 1);
  t.equal(on.xds, true);
  const onConfig = doc(on.xds === true, on.fastPath);
  t.ok(onConfig.envoy.xds !== undefined && onConfig.routing.fastPath, 'on: xds and fastPath (the default)');
  for (const offXds of [false, true]) {
    const off = skewgateArmOptions(FAST_OFF, 1, offXds);
    t.equal(off.xds === true, offXds, `off ${offXds ? 'with' : 'without'} xds`);
    t.equal(doc(off.xds === true, off.fastPath).routing.fastPath, false, 'off: routing.fastPath false');
  }
});
