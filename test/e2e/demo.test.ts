// The demo a newcomer runs (issue 30, item 6), as they run it: `skewgate-lab demo` with a real
// Envoy. Its terminal shows the self-check and what to try, never skewgate's log lines (those go
// to skewgate.log beside envoy.log); the fast path is on, as in production; its kubeconfig reaches
// the gateway without --server, and whoami through it names the client certificate's user; u and
// r move an apiserver to v1.36 and back, and the running gateway's skew follows.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { parse as parseYaml } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';
import { startDemo } from '../helpers/demo-run.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-demo-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const CLI = join(packageRoot(), 'dist/src/cli/main.js');
const SKEWED = 'admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

/** `skewgate skew -o name` against the running demo: the skewed resources, one per line. */
const skewNames = (): Promise<string> =>
  new Promise((resolve) =>
    execFile(process.execPath, [CLI, 'skew', '-o', 'name', '--config', join(dir, 'skewgate.yaml')], { timeout: 30_000 }, (_e, stdout) =>
      resolve(stdout),
    ),
  );

t.test('the demo: self-check, logs in files, fast path, its kubeconfig, and a playable upgrade', async (t) => {
  const demo = await startDemo(dir);
  t.teardown(() => void demo.child.kill('SIGKILL'));
  let at = await demo.until(/keys: u upgrades/);
  const first = demo.stdout();
  t.match(
    first,
    /GET \/apis\/admissionregistration\.k8s\.io\/v1\/mutatingadmissionpolicies\n {4}through skewgate: {2}12× 200 from apiserver-c\n/,
    'through skewgate: every one 200',
  );
  t.match(first, /plain balanced: .*404 from apiserver-[ab]/, 'the plain balancer: false 404s');
  t.same(
    first.split('\n').filter((l) => l.startsWith('{') || /^\S+Z (INFO|WARN|ERROR)/.test(l)),
    [],
    'no log line on the terminal',
  );
  t.equal(demo.stderr(), '', 'nothing on stderr either');
  const log = readFileSync(join(dir, 'skewgate.log'), 'utf8');
  t.match(log, /"msg":"skewgate serving ext_proc"/, "skewgate's log is skewgate.log, in the demo's folder");
  t.match(log, /"msg":"fast path: routes written; these group\/versions go straight to the balanced pool"/, 'the fast path is on');

  // The kubeconfig it names: the gateway, no --server needed; the cert context's user stated by skewgate.
  t.match(first, new RegExp(`kubectl --kubeconfig \\S*kubeconfig --context cert auth whoami`), 'it suggests whoami');
  const kc = parseYaml(readFileSync(join(dir, 'kubeconfig'), 'utf8')) as {
    clusters: { cluster: { server: string; 'certificate-authority': string } }[];
    users: { name: string; user: { 'client-certificate'?: string; 'client-key'?: string } }[];
  };
  const server = kc.clusters[0]?.cluster.server ?? '';
  t.match(first, `gateway (Envoy + skewgate):  ${server}\n`, "the kubeconfig's server is the gateway");
  const cert = kc.users.find((u) => u.name === 'cert')?.user;
  const agent = new Agent({
    connect: {
      ca: readFileSync(kc.clusters[0]?.cluster['certificate-authority'] ?? ''),
      cert: readFileSync(cert?.['client-certificate'] ?? ''),
      key: readFileSync(cert?.['client-key'] ?? ''),
    },
  });
  t.teardown(() => agent.close());
  const review = await request(`${server}/apis/authentication.k8s.io/v1/selfsubjectreviews`, {
    dispatcher: agent,
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
  });
  t.equal(review.statusCode, 201, 'whoami through the gateway: 201');
  const who = (await review.body.json()) as { status: { userInfo: { username: string } } };
  t.equal(who.status.userInfo.username, 'skewgate-admin', "the certificate's user, as skewgate stated it");

  // The upgrade, played: the skew the running gateway reports follows each key.
  t.match(await skewNames(), `${SKEWED}\n`, 'before: mutatingadmissionpolicies skewed');
  demo.press('u');
  at = await demo.until(/apiserver-a restarted as v1\.36\.0 \(1 still at v1\.35\.2\)\n/, at);
  at = await demo.until(/\(skewgate status and skew show it too\)\n/, at);
  t.match(await skewNames(), `${SKEWED}\n`, 'one old apiserver left: still skewed');
  demo.press('u');
  at = await demo.until(/apiserver-b restarted as v1\.36\.0: every apiserver runs it now\n/, at);
  at = await demo.until(/through skewgate: .*\n/, at);
  at = await demo.until(/\(skewgate status and skew show it too\)\n/, at);
  t.equal(await skewNames(), '', 'every apiserver at v1.36: no skew');
  t.match(
    demo.stdout().slice(demo.stdout().lastIndexOf('plain balanced:')),
    /^plain balanced: +(\d+× 200 from apiserver-[abc](, )?)+\n/,
    'and no false 404 through the plain balancer either',
  );
  demo.press('r');
  at = await demo.until(/apiserver-b rolled back to v1\.35\.2\n/, at);
  await demo.until(/\(skewgate status and skew show it too\)\n/, at);
  t.match(await skewNames(), `${SKEWED}\n`, 'rolled back: skewed again');
  t.equal(await demo.stop(), 0, 'q stops it, exit 0');
});
