// The compose demo's client script (deploy/compose/client/demo.sh), run for real against the lab
// (suite of test/cluster/mixed-versions.test.ts: kube-apiserver KUBE_OLD twice and KUBE_NEW once,
// so mutatingadmissionpolicies is served by one of three), through the shape's skewgate arm with
// the fast path on and its plain round-robin baseline, with the built kubectl. `demo.sh setup`
// applies the lab's RBAC objects; `demo.sh demo` must exit 0 with every request through skewgate
// OK and 404s through the baseline, and leave its MutatingAdmissionPolicy (inert: no binding) in
// etcd. Fails, never skips, when a part is missing.
import type { Test } from 'tap';
import { spawn } from 'node:child_process';
import { accessSync, constants as fsConstants } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { stringify } from 'yaml';
import { packageRoot } from '../../../src/util/package-root.js';
import { labRbacObjects } from '../../../harness/lab/rbac.js';
import { freePort } from '../../../harness/lab/lab.js';
import { FAST_ON } from '../../helpers/fast-path-arms.js';
import type { ShapeLab, Suite } from '../../helpers/shape-lab.js';

const DEMO = join(packageRoot(), 'deploy/compose/client/demo.sh');
const POLICY_PATH = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/skewgate-demo';
const ROUNDS = 12;

export const composeDemoSuite: Suite = {
  title: "the compose demo's client script (demo.sh) through skewgate and through plain round robin",
  run: async (t: Test, { parts: { versions, kubectl }, lab, gateways }: ShapeLab) => {
    accessSync(DEMO, fsConstants.R_OK);
    const dir = await mkdtemp(join(tmpdir(), 'skewgate-compose-demo-'));
    const agent = new Agent({ connect: { ca: await readFile(lab.pki.caFile, 'utf8') } });
    t.teardown(async () => {
      await agent.close();
      await rm(dir, { recursive: true, force: true });
    });

    interface Run {
      readonly code: number | null;
      readonly stdout: string;
      readonly stderr: string;
    }

    /** demo.sh under sh with the given environment (and PATH, HOME only: no ambient KUBECONFIG etc.). */
    function demo(mode: string, env: Record<string, string>, timeoutMs = 300_000): Promise<Run> {
      return new Promise((resolve, reject) => {
        const child = spawn('sh', [DEMO, mode], {
          env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, TMPDIR: dir, KUBECTL: kubectl, PKI_DIR: lab.pki.dir, ...env },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c: Buffer) => {
          stdout += c.toString('utf8');
        });
        child.stderr.on('data', (c: Buffer) => {
          stderr += c.toString('utf8');
        });
        const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
        child.once('error', (err) => {
          clearTimeout(timer);
          reject(err);
        });
        child.once('close', (code) => {
          clearTimeout(timer);
          t.comment(`demo.sh ${mode} exited ${String(code)}\n${stdout}${stderr}`);
          resolve({ code, stdout, stderr });
        });
      });
    }

    interface Tally {
      readonly ok: number;
      readonly notFound: number;
      readonly noType: number;
      readonly other: number;
    }

    /** The tally line demo.sh prints for one gateway. */
    function tally(stdout: string, label: string, url: string): Tally | undefined {
      const m = new RegExp(
        `^\\[demo\\]\\s+${label}\\s+${url.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s+OK (\\d+)\\s+404 (\\d+)\\s+no-type (\\d+)\\s+other (\\d+)$`,
        'm',
      ).exec(stdout);
      return m ? { ok: Number(m[1]), notFound: Number(m[2]), noType: Number(m[3]), other: Number(m[4]) } : undefined;
    }

    async function get(base: string, path: string): Promise<{ status: number; body: string }> {
      const res = await request(`${base}${path}`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${lab.pki.adminToken}`, accept: 'application/json' },
        signal: AbortSignal.timeout(10_000),
      });
      return { status: res.statusCode, body: await res.body.text() };
    }

    await t.test('a gateway that never becomes ready: exit 1 with a clear error, in bounded time', async (t) => {
      const url = `https://127.0.0.1:${await freePort()}`;
      const started = Date.now();
      const run = await demo('demo', { GATEWAY_URL: url, BASELINE_URL: url, READY_TIMEOUT: '4' });
      t.equal(run.code, 1, 'exit 1');
      t.match(
        run.stderr,
        `[demo] error: skewgate gateway ${url}: not ready within 4 s (READY_TIMEOUT)`,
        'says which endpoint and how long',
      );
      t.match(run.stderr, /last answer: .*refused/, 'and the last answer');
      t.match(run.stdout, /not ready yet \(\d+ s of 4 s\)/, 'progress while waiting');
      t.ok(Date.now() - started < 30_000, `gave up after ${((Date.now() - started) / 1000).toFixed(1)} s`);
    });

    const gateway = gateways[FAST_ON];
    const baseline = gateways.baseline;

    await t.test('the ground truth: only kas-3 serves mutatingadmissionpolicies, no demo policy yet', async (t) => {
      const kas1 = await get(lab.apiServerUrl('kas-1'), '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies');
      const kas3 = await get(lab.apiServerUrl('kas-3'), '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies');
      t.equal(kas1.status, 404, `kas-1 (v${versions.kubeOld}) does not serve mutatingadmissionpolicies`);
      t.equal(kas3.status, 200, `kas-3 (v${versions.kubeNew}) does`);
      t.equal((await get(lab.apiServerUrl('kas-3'), POLICY_PATH)).status, 404, 'no demo policy yet');
    });

    await t.test('demo.sh setup applies the RBAC file through the gateway', async (t) => {
      const rbacFile = join(dir, 'rbac.yaml');
      const objects = labRbacObjects();
      await writeFile(rbacFile, objects.map((o) => stringify(o.body)).join('---\n'));
      // SETUP_URL unset: it defaults to GATEWAY_URL, as in the compose file's contract.
      const run = await demo('setup', {
        GATEWAY_URL: gateway.url ?? '',
        BASELINE_URL: baseline.url ?? '',
        RBAC_FILE: rbacFile,
        READY_TIMEOUT: '60',
      });
      t.equal(run.code, 0, `exit 0 (stderr: ${run.stderr.trim()})`);
      t.match(run.stdout, `setup target ${gateway.url ?? ''}: ready after`);
      t.match(run.stdout, /^\[setup\] done$/m);
      for (const o of objects) {
        const name = (o.body.metadata as { name: string }).name;
        t.match(
          run.stdout,
          new RegExp(`/${name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} (configured|unchanged|created)`),
          `kubectl reports ${o.path} ${name}`,
        );
        // The lab POSTed these without kubectl's annotation: its presence shows the apply reached the store.
        const res = await get(lab.apiServerUrl('kas-1'), `${o.path}/${encodeURIComponent(name)}`);
        const annotations = (JSON.parse(res.body) as { metadata?: { annotations?: Record<string, string> } }).metadata?.annotations ?? {};
        t.ok('kubectl.kubernetes.io/last-applied-configuration' in annotations, `${name}: applied by kubectl (read straight from kas-1)`);
      }
    });

    await t.test('demo.sh demo: all OK through skewgate, 404s through plain round robin', async (t) => {
      const gw = gateway.url ?? '';
      const base = baseline.url ?? '';
      const run = await demo('demo', { GATEWAY_URL: gw, BASELINE_URL: base, ROUNDS: String(ROUNDS), READY_TIMEOUT: '60' });
      t.equal(run.code, 0, `exit 0 (stderr: ${run.stderr.trim()})`);
      t.equal(run.stdout.match(/^\[demo\] round +\d+\/\d+ /gm)?.length, ROUNDS, `${ROUNDS} rounds printed`);
      const sg = tally(run.stdout, 'skewgate', gw);
      const bl = tally(run.stdout, 'baseline', base);
      t.same(sg, { ok: ROUNDS, notFound: 0, noType: 0, other: 0 }, 'through skewgate: every request OK');
      t.ok(bl, 'a tally for the baseline');
      t.comment(`baseline: ${JSON.stringify(bl)}`);
      t.ok((bl?.notFound ?? 0) >= 1, `through plain round robin: ${bl?.notFound ?? 0} × 404`);
      t.equal(bl?.other, 0, 'the baseline fails only with not-founds');
      t.equal((bl?.ok ?? 0) + (bl?.notFound ?? 0) + (bl?.noType ?? 0) + (bl?.other ?? 0), ROUNDS, 'every baseline round counted');
      t.match(
        run.stdout,
        /mutatingadmissionpolicy\.admissionregistration\.k8s\.io\/skewgate-demo (created|unchanged|configured)/,
        'kubectl apply of the policy',
      );
      for (const link of ['http://localhost:16686', 'http://localhost:9901', 'http://localhost:9464/metrics'])
        t.match(run.stdout, link, `points at ${link}`);

      const direct = await get(lab.apiServerUrl('kas-3'), POLICY_PATH);
      t.equal(direct.status, 200, 'the MutatingAdmissionPolicy is there, read straight from kas-3 (1.36)');
      t.equal((JSON.parse(direct.body) as { kind?: string }).kind, 'MutatingAdmissionPolicy');
    });

    await t.test('demo.sh demo fails (exit 1) when its "skewgate" is plain round robin', async (t) => {
      const base = baseline.url ?? '';
      const run = await demo('demo', { GATEWAY_URL: base, BASELINE_URL: base, ROUNDS: String(ROUNDS), READY_TIMEOUT: '60' });
      t.equal(run.code, 1, 'exit 1');
      // Either the policy's apply or some of the rounds hit an apiserver without the resource.
      t.match(
        run.stderr,
        /\[demo\] error: (kubectl apply of MutatingAdmissionPolicy skewgate-demo through skewgate failed|\d+ of 12 requests through skewgate did not succeed)/,
      );
    });
  },
};
