// The gate as a Cluster API Runtime Extension, checked against the Runtime SDK's PUBLISHED types: a
// running skewgate (this process, fake apiservers) answers `lab/capi-hooks` — a Go program built
// from sigs.k8s.io/cluster-api/api, which sends each hook's request as those types marshal it and
// decodes every answer strictly into those types (an unknown field, a wrong kind or status fails
// it). A hold is Success with retryAfterSeconds > 0, a proceed Success with 0; AfterControlPlaneUpgrade
// waits for every member to run the request's version. A missing checker fails the test.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { BUILTINS_NEW, FakeApiServer, FakeCluster } from '../../harness/fake/index.js';
import { requireCapiHookCheck } from '../../harness/lab/versions.js';
import { createSkewgate } from '../../src/app/skewgate.js';
import { parseConfig } from '../../src/config/load.js';
import { HOOKS_API_VERSION } from '../../src/gate/core/capi-hooks.js';
import { createLogger } from '../../src/util/log.js';
import { sharedPki } from '../helpers/envoy-fixtures.js';

const checker = requireCapiHookCheck();
const pki = await sharedPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-capi-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const cluster = new FakeCluster();
const fakes = await Promise.all(
  ['kas-a', 'kas-b'].map(async (name) => {
    const s = new FakeApiServer({ name, pki, cluster, builtins: BUILTINS_NEW, gitVersion: 'v1.36.3', host: '127.0.0.1' });
    await s.start();
    t.teardown(() => s.close());
    return s;
  }),
);
const input = (window: string): Record<string, unknown> => ({
  apiservers: fakes.map((f) => ({ name: f.name, url: f.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile } })),
  discovery: { interval: '200ms', timeout: '2s' },
  extproc: { listen: `unix:${join(dir, 'extproc.sock')}` },
  admin: { listen: `unix:${join(dir, 'admin.sock')}` },
  gate: {
    // A window no start can outrun: the first answers hold for it; a reload shortens it (below).
    window,
    runtimeExtension: { listen: '127.0.0.1:0', certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile },
  },
  log: { level: 'warn' },
});
const config = parseConfig(input('10m'), join(dir, 'skewgate.yaml'), dir);
const sg = createSkewgate(config, createLogger('warn'));
t.teardown(() => sg.close({ drainMs: 0 }));
await sg.start();
const url = `https://127.0.0.1:${sg.runtimeExtensionPort() as number}`;

interface HookLine {
  hook: string;
  handler: string;
  status: string;
  message: string;
  retryAfterSeconds?: number;
}
function check(to: string): Promise<{ code: number; lines: HookLine[]; stderr: string }> {
  return new Promise((resolve) => {
    execFile(checker, ['--url', url, '--ca', pki.caFile, '--from', 'v1.35.4', '--to', to], { timeout: 30_000 }, (err, stdout, stderr) => {
      const code = err === null ? 0 : typeof err.code === 'number' ? err.code : 1;
      const lines = stdout
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as HookLine);
      resolve({ code, lines, stderr });
    });
  });
}
const byHook = (lines: HookLine[]): Record<string, HookLine> => Object.fromEntries(lines.map((l) => [l.hook, l]));

t.test('the published types read every answer; a young gateway holds, with a retry', async (t) => {
  const r = await check('v1.36.3');
  t.equal(r.code, 0, `the contract holds: ${r.stderr}`);
  t.same(
    r.lines.map((l) => l.hook).sort(),
    ['AfterControlPlaneUpgrade', 'BeforeClusterUpgrade', 'BeforeControlPlaneUpgrade', 'BeforeWorkersUpgrade'],
    'discovery lists the four blocking hooks, each answered',
  );
  t.ok(
    r.lines.every((l) => l.handler === 'skewgate-gate' && l.status === 'Success'),
    'one handler, Success (a hold is not a failure)',
  );
  const before = byHook(r.lines).BeforeControlPlaneUpgrade;
  t.ok((before?.retryAfterSeconds ?? 0) > 0, `within its first window the gate holds: retry after ${before?.retryAfterSeconds}s`);
  t.match(before?.message, /window_not_covered: this gateway has recorded \d+s of the 600s window/);
});

t.test('once the window is covered: proceed (retry 0); AfterControlPlaneUpgrade holds for a version not every member runs', async (t) => {
  // gate.* is applied on a reload; the extension's listener stays.
  t.match(await sg.reload(parseConfig(input('1s'), join(dir, 'skewgate.yaml'), dir)), { result: 'applied' });
  const deadline = Date.now() + 20_000;
  let r = await check('v1.36.3');
  while (byHook(r.lines).BeforeControlPlaneUpgrade?.retryAfterSeconds !== 0 && Date.now() < deadline) {
    await new Promise((res) => setTimeout(res, 500));
    r = await check('v1.36.3');
  }
  t.equal(r.code, 0, r.stderr);
  const h = byHook(r.lines);
  for (const hook of ['BeforeClusterUpgrade', 'BeforeControlPlaneUpgrade', 'BeforeWorkersUpgrade', 'AfterControlPlaneUpgrade'])
    t.match(h[hook], { status: 'Success', retryAfterSeconds: 0, message: 'skewgate: proceed' }, `${hook}: proceed`);
  const later = await check('v1.37.0');
  t.equal(later.code, 0, later.stderr);
  const after = byHook(later.lines).AfterControlPlaneUpgrade;
  t.ok((after?.retryAfterSeconds ?? 0) > 0, 'AfterControlPlaneUpgrade to v1.37.0: hold');
  t.match(after?.message, /version_not_reached: not every member runs v1\.37\.0: kas-a v1\.36\.3, kas-b v1\.36\.3/);
  t.equal(byHook(later.lines).BeforeControlPlaneUpgrade?.retryAfterSeconds, 0, 'the hooks before the move do not ask for the version');
});

t.test('a request it cannot read: 400, a Failure of the kind asked, saying why', async (t) => {
  const res = await request(`${url}/${HOOKS_API_VERSION}/aftercontrolplaneupgrade/skewgate-gate`, {
    method: 'POST',
    body: JSON.stringify({ apiVersion: HOOKS_API_VERSION, kind: 'AfterControlPlaneUpgradeRequest' }),
    headers: { 'content-type': 'application/json' },
    dispatcher: new Agent({ connect: { ca: readFileSync(pki.caFile) } }),
  });
  t.equal(res.statusCode, 400);
  t.match(await res.body.json(), { kind: 'AfterControlPlaneUpgradeResponse', status: 'Failure', message: /kubernetesVersion: missing/ });
});
