// The demo's kubeconfig with the real kubectl (issue 30, item 6): no --server, `get` through the
// gateway, and `auth whoami` — kubectl sends the SelfSubjectReview as protobuf — naming the token's
// user and the client certificate's, as skewgate states it. The rest of the demo: test/e2e/demo.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireLabParts } from '../helpers/lab-parts.js';
import { startDemo } from '../helpers/demo-run.js';

const { kubectl } = requireLabParts();
const dir = mkdtempSync(join(tmpdir(), 'sg-demo-kubectl-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));

const run = (args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  new Promise((resolve) =>
    execFile(
      kubectl,
      ['--kubeconfig', join(dir, 'kubeconfig'), '--cache-dir', join(dir, 'kubectl-cache'), ...args],
      { timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    ),
  );

t.test("kubectl with the demo's kubeconfig, as the demo suggests it", async (t) => {
  const demo = await startDemo(dir);
  t.teardown(() => void demo.child.kill('SIGKILL'));
  await demo.until(/keys: u upgrades/);
  const list = await run(['get', 'mutatingadmissionpolicies']);
  t.equal(list.code, 0, `kubectl get mutatingadmissionpolicies, no --server: ${list.stderr.trim()}`);
  for (const [context, user] of [
    ['token', 'fake-token-user'],
    ['cert', 'skewgate-admin'],
  ] as const) {
    const who = await run(['--context', context, 'auth', 'whoami', '-o', 'json']);
    t.equal(who.code, 0, `--context ${context} auth whoami: ${who.stderr.trim()}`);
    const username = (JSON.parse(who.stdout || '{}') as { status?: { userInfo?: { username?: string } } }).status?.userInfo?.username;
    t.equal(username, user, `--context ${context}: ${user}`);
  }
  t.equal(await demo.stop(), 0);
});
