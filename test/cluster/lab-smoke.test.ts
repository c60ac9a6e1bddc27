// The lab with real parts: etcd, kube-apiserver KUBE_OLD and KUBE_NEW (built by `npm run
// lab:build`), Envoy with and without skewgate, and the built kubectl. Fails, never skips, when a
// part is missing. Uses the addresses of its lab slot (harness/lab/slots.ts), so that it can run
// while a `skewgate-lab lab up` (slot 0) is up.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { performance } from 'node:perf_hooks';
import { Agent, request } from 'undici';
import { Lab, freePort } from '../../harness/lab/lab.js';
import { labBinary } from '../../harness/lab/versions.js';
import { judge, readStat, sample, type ProcIdentity } from '../../harness/lab/procfs.js';
import { APISERVER_STOP_GRACE_MS, SHUTDOWN_DELAY_MS, apiServerArgs, etcdArgs } from '../../harness/lab/flags.js';
import { MEDIA_AGGREGATED_V2, MEDIA_AGGREGATED_V2_NOPEER, REASON_HEADER } from '../../src/constants.js';
import { eventually } from '../helpers/http.js';
import { requireLabParts } from '../helpers/lab-parts.js';

const run = promisify(execFile);
const MAP = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';

// Missing parts fail here, with the command that provides them.
const { versions, kubectl } = requireLabParts();

const dir = await mkdtemp(join(tmpdir(), 'skewgate-lab-smoke-'));
/** The lab's progress lines, kept: a stop that ran out of grace says so here ("… did not stop within …: SIGKILL"). */
const labLines: string[] = [];
const slot = claimLabSlot();
const lab = await Lab.open({
  dir,
  killOnExit: true,
  addresses: slot,
  log: (l) => {
    labLines.push(l);
    t.comment(l);
  },
});
const ca = await readFile(lab.pki.caFile, 'utf8');
const agent = new Agent({ connect: { ca } });
t.teardown(async () => {
  await agent.close();
  await lab.down({ kill: true }).catch((err: unknown) => t.fail(`down: ${(err as Error).message}`));
  await rm(dir, { recursive: true, force: true });
});

async function get(url: string, accept = 'application/json'): Promise<{ status: number; body: string }> {
  const res = await request(url, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${lab.pki.adminToken}`, accept },
    signal: AbortSignal.timeout(10_000),
  });
  return { status: res.statusCode, body: await res.body.text() };
}

interface DiscoveryList {
  items: { metadata: { name?: string }; versions: { version: string; resources: { resource: string }[] }[] }[];
}

/** Every group/version/resource a server's own aggregated discovery lists (core group as ""). */
async function resources(base: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (const path of ['/api', '/apis']) {
    const res = await get(`${base}${path}`, MEDIA_AGGREGATED_V2_NOPEER);
    const doc = JSON.parse(res.body) as DiscoveryList;
    for (const g of doc.items)
      for (const v of g.versions) for (const r of v.resources) out.add(`${g.metadata.name ?? ''}/${v.version}/${r.resource}`);
  }
  return out;
}

let gatewayUrl = '';
const OLD = { name: 'kas-old', version: versions.kubeOld, ip: slot.loopback(4), port: 6443 };
const NEW = { name: 'kas-new', version: versions.kubeNew, ip: slot.loopback(5), port: 6443 };

await t.test('every flag the lab passes exists in both kube-apiserver builds and in etcd', async (t) => {
  const flagsOf = async (bin: string): Promise<Set<string>> =>
    new Set((await run(bin, ['--help'], { maxBuffer: 8 << 20 })).stdout.match(/--[a-z0-9-]+/g) ?? []);
  const names = (args: readonly string[]): string[] => [...new Set(args.map((a) => a.split('=')[0] as string))];
  // Every optional flag switched on, so that all of them are checked.
  const all = apiServerArgs(
    {
      name: 'x',
      version: versions.kubeOld,
      ip: '127.0.0.1',
      port: 6443,
      runtimeConfig: 'batch/v1=false',
      peerProxy: true,
      tracingConfigFile: 't.yaml',
    },
    lab.pki,
    'http://127.0.0.1:1',
    { certDir: 'c', auditLog: 'a.log', auditPolicyFile: 'p.yaml' },
  );
  for (const version of [versions.kubeOld, versions.kubeNew]) {
    const known = await flagsOf(labBinary('kube-apiserver', version));
    t.same(
      names(all).filter((f) => !known.has(f)),
      [],
      `kube-apiserver v${version} knows all ${names(all).length} flags`,
    );
  }
  const etcdKnown = await flagsOf(labBinary('etcd', versions.etcd));
  const etcd = etcdArgs({ name: 'x', dataDir: 'd', ip: '127.0.0.1', clientPort: 1, peerPort: 2 });
  t.same(
    names(etcd).filter((f) => !etcdKnown.has(f)),
    [],
    `etcd ${versions.etcd} knows all ${names(etcd).length} flags`,
  );
});

await t.test('ownership by pid + start time + boot: an exec (empty command line) is not an exit', async (t) => {
  const id: ProcIdentity = { pid: 42, startTime: '1000', bootId: 'b1', marker: '--cert-dir=/lab/run/kas-1/certs' };
  const alive = { state: 'S', startTime: '1000' };
  const chain = ['unshare', '--uts', 'sh', '-c', 'x', 'sh', 'kas-1', '/bin/kube-apiserver', id.marker];
  t.equal(judge(id, { stat: alive, cmdline: chain, bootId: 'b1' }).verdict, 'ours', 'unshare');
  t.equal(judge(id, { stat: alive, cmdline: chain.slice(2), bootId: 'b1' }).verdict, 'ours', 'sh');
  t.equal(judge(id, { stat: alive, cmdline: [], bootId: 'b1' }).verdict, 'ours', 'mid-exec: empty command line');
  t.equal(judge(id, { stat: alive, cmdline: null, bootId: 'b1' }).verdict, 'ours', 'mid-exec: unreadable command line');
  t.equal(judge(id, { stat: alive, cmdline: chain.slice(7), bootId: 'b1' }).verdict, 'ours', 'kube-apiserver');
  t.equal(judge(id, { stat: { state: 'Z', startTime: '1000' }, cmdline: [], bootId: 'b1' }).verdict, 'gone', 'zombie');
  t.equal(judge(id, { stat: null, cmdline: null, bootId: 'b1' }).verdict, 'gone', 'no such pid');
  t.equal(judge(id, { stat: { state: 'S', startTime: '2000' }, cmdline: chain, bootId: 'b1' }).verdict, 'gone', 'pid reused');
  t.equal(judge(id, { stat: alive, cmdline: chain, bootId: 'b2' }).verdict, 'gone', 'another boot');
  const legacy: ProcIdentity = { pid: 42, startTime: '1000', marker: id.marker };
  t.equal(
    judge(legacy, { stat: alive, cmdline: [], bootId: 'b1' }).verdict,
    'unsure',
    'no boot id: an empty command line is looked at again',
  );
  t.equal(judge(legacy, { stat: alive, cmdline: ['/bin/other'], bootId: 'b1' }).verdict, 'gone', 'no boot id: a foreign command line');
});

/**
 * Samples the run dir's records of `names` as fast as it can while they start: a process alive
 * with its recorded start time must never be judged gone (the exec chain included).
 */
function watchStarts(names: readonly string[]): {
  stop: () => Promise<{ samples: number; perName: Map<string, number>; empty: number; programs: Set<string>; misjudged: string[] }>;
} {
  let stopped = false;
  const result = { samples: 0, perName: new Map<string, number>(), empty: 0, programs: new Set<string>(), misjudged: [] as string[] };
  const done = (async () => {
    const firstSeen = new Map<string, number>();
    while (!stopped) {
      for (const name of names) {
        const text = await readFile(join(dir, 'run', `${name}.json`), 'utf8').catch(() => '');
        if (text === '') continue;
        const rec = JSON.parse(text) as ProcIdentity;
        const seen = firstSeen.get(name) ?? Date.now();
        firstSeen.set(name, seen);
        if (Date.now() - seen > 4000) continue; // the execs are over by then
        const s = await sample(rec.pid);
        result.samples++;
        result.perName.set(name, (result.perName.get(name) ?? 0) + 1);
        if (s.cmdline !== null && s.cmdline.length === 0) result.empty++;
        if (s.cmdline?.[0] !== undefined) result.programs.add(s.cmdline[0].replace(/^.*\//, ''));
        const live = s.stat !== null && s.stat.state !== 'Z' && s.stat.startTime === rec.startTime;
        const v = judge(rec, s);
        if (live && v.verdict !== 'ours')
          result.misjudged.push(`${name}: ${v.verdict} (${v.detail}) argv ${JSON.stringify(s.cmdline?.slice(0, 2))}`);
      }
      await new Promise((r) => setImmediate(r));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await done;
      return result;
    },
  };
}

await t.test('etcd and two kube-apiservers of different versions', async (t) => {
  const etcdUrl = await lab.startEtcd();
  t.equal(etcdUrl, `http://127.0.0.1:${slot.etcdClientPort}`, "on the slot's etcd port");
  const started = Date.now();
  const watcher = watchStarts([OLD.name, NEW.name]);
  try {
    await Promise.all([lab.startApiServer(OLD), lab.startApiServer(NEW)]);
  } finally {
    const w = await watcher.stop();
    t.comment(
      `exec chain while starting: ${w.samples} samples, ${w.empty} with an empty command line, programs seen ${[...w.programs].join(', ')}`,
    );
    // Without samples of each, "never misjudged" would hold of nothing.
    for (const name of [OLD.name, NEW.name])
      t.ok((w.perName.get(name) ?? 0) > 0, `${name} was sampled while it started (${w.perName.get(name) ?? 0} samples)`);
    t.same(w.misjudged, [], 'a live apiserver is never judged gone while it starts (exec chain included)');
  }
  t.comment(`both apiservers ready ${((Date.now() - started) / 1000).toFixed(1)} s after start (in parallel)`);
  const recorded = JSON.parse(await readFile(join(dir, 'apiservers.json'), 'utf8')) as { name: string }[];
  t.same(recorded.map((s) => s.name).sort(), ['kas-new', 'kas-old'], 'apiservers.json holds both parallel starts');
  for (const s of [OLD, NEW]) {
    const res = await get(`${lab.apiServerUrl(s.name)}/version`);
    t.equal(res.status, 200);
    t.equal((JSON.parse(res.body) as { gitVersion: string }).gitVersion, `v${s.version}`, `${s.name} reports its real gitVersion`);
  }
  const status = await lab.status();
  t.same(
    status
      .filter((r) => r.alive)
      .map((r) => r.name)
      .sort(),
    ['etcd', 'kas-new', 'kas-old'],
  );
});

await t.test('their APIs differ as the versions do', async (t) => {
  const [oldSet, newSet] = await Promise.all([resources(lab.apiServerUrl(OLD.name)), resources(lab.apiServerUrl(NEW.name))]);
  const onlyNew = [...newSet].filter((r) => !oldSet.has(r)).sort();
  const onlyOld = [...oldSet].filter((r) => !newSet.has(r)).sort();
  t.comment(`only on v${NEW.version}: ${onlyNew.join(', ') || '-'}; only on v${OLD.version}: ${onlyOld.join(', ') || '-'}`);
  t.ok(onlyNew.includes('admissionregistration.k8s.io/v1/mutatingadmissionpolicies'), 'mutatingadmissionpolicies only on the new one');
  t.ok(onlyNew.includes('admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings'));
  t.same(onlyOld, [], 'the new version serves everything the old one does');
  t.equal((await get(`${lab.apiServerUrl(OLD.name)}${MAP}`)).status, 404, 'the old one answers 404 itself');
  t.equal((await get(`${lab.apiServerUrl(NEW.name)}${MAP}`)).status, 200);
  const res = await request(`${lab.apiServerUrl(OLD.name)}/version`, {
    dispatcher: agent,
    headers: { authorization: `Bearer ${lab.pki.adminToken}` },
  });
  await res.body.text();
  const auditId = res.headers['audit-id'];
  t.type(auditId, 'string', 'the apiserver answers with an Audit-Id');
  let audit = '';
  // The audit log is buffered: the entry appears shortly after the answer.
  for (
    const deadline = Date.now() + 10_000;
    Date.now() < deadline && !audit.includes(String(auditId));
    await new Promise((r) => setTimeout(r, 200))
  ) {
    audit = await readFile(lab.auditLogFile(OLD.name), 'utf8').catch(() => '');
  }
  t.ok(audit.includes(`"auditID":"${String(auditId)}"`), `${OLD.name}'s audit log (lab.auditLogFile) has the request`);
});

await t.test('each apiserver has its own identity lease (own hostname)', async (t) => {
  const selector = encodeURIComponent('apiserver.kubernetes.io/identity=kube-apiserver');
  let hostnames: string[] = [];
  let names: string[] = [];
  // The identity controller writes its lease shortly after /readyz turns 200.
  for (const deadline = Date.now() + 20_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 250))) {
    const res = await get(
      `${lab.apiServerUrl(OLD.name)}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases?labelSelector=${selector}`,
    );
    const items = (JSON.parse(res.body) as { items: { metadata: { name: string; labels?: Record<string, string> } }[] }).items;
    names = items.map((i) => i.metadata.name);
    hostnames = items.map((i) => i.metadata.labels?.['kubernetes.io/hostname'] ?? '').sort();
    if (items.length >= 2) break;
  }
  t.equal(new Set(names).size, 2, `two distinct leases: ${names.join(', ')}`);
  t.same(hostnames, ['kas-new', 'kas-old'], 'hostnames from the UTS namespaces');
});

await t.test('skewgate routes the skewed resource; plain Envoy gives false 404s', async (t) => {
  const [gwPort, basePort] = [await freePort(), await freePort()];
  const gw = await lab.startGateway({ name: 'gateway', withSkewgate: true, port: gwPort });
  gatewayUrl = gw.url;
  const base = await lab.startGateway({ name: 'baseline', withSkewgate: false, port: basePort });
  const tally = async (url: string): Promise<Record<number, number>> => {
    const counts: Record<number, number> = {};
    for (let i = 0; i < 20; i++) {
      const { status } = await get(`${url}${MAP}`);
      counts[status] = (counts[status] ?? 0) + 1;
    }
    return counts;
  };
  const through = await tally(gw.url);
  t.same(through, { 200: 20 }, 'through skewgate: 200 every time');
  const plain = await tally(base.url);
  t.comment(`plain Envoy: ${JSON.stringify(plain)}`);
  t.ok((plain[404] ?? 0) > 0, 'plain round-robin Envoy gives some false 404s');
  t.ok((plain[200] ?? 0) > 0, 'and some 200s');

  const k = (...args: string[]) => run(kubectl, ['--kubeconfig', gw.kubeconfigFile, '--cache-dir', join(dir, 'kubectl-cache'), ...args]);
  const apiResources = await k('api-resources');
  t.match(apiResources.stdout, /^namespaces\s+ns\s+v1\s+false\s+Namespace$/m, 'kubectl api-resources through the gateway');
  for (let i = 0; i < 5; i++) {
    const raw = await k('get', '--raw', MAP);
    t.equal((JSON.parse(raw.stdout) as { kind: string }).kind, 'MutatingAdmissionPolicyList', `kubectl get --raw ${MAP} (${i + 1})`);
  }
  // kubectl resolves the resource name through /apis. skewgate answers it with the merged
  // document (listing the resource the old apiserver lacks) once it has a current view of every
  // ready apiserver; before that the balanced pool answers and the old apiserver's own /apis would
  // make kubectl say the type does not exist. Wait for the merged answer (the only retry), then
  // kubectl must work every time, each with a fresh discovery cache.
  await eventually(
    'the merged /apis at the gateway',
    async () => {
      const res = await request(`${gw.url}/apis`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${lab.pki.adminToken}`, accept: `${MEDIA_AGGREGATED_V2},application/json` },
        signal: AbortSignal.timeout(10_000),
      });
      await res.body.text();
      return res.headers[REASON_HEADER] === 'merged_apis';
    },
    30_000,
    250,
  );
  for (let i = 0; i < 5; i++) {
    const got = await k('--cache-dir', join(dir, `kubectl-cache-${i}`), 'get', 'mutatingadmissionpolicies').catch((err: unknown) => ({
      stdout: '',
      stderr: `failed: ${(err as { stderr?: string }).stderr?.trim() ?? String(err)}`,
    }));
    t.match(
      got.stderr,
      /No resources found/,
      `kubectl get mutatingadmissionpolicies through the gateway, try ${i + 1} of 5 (fresh discovery cache)`,
    );
  }
});

/** Rounds of the stop's record that must show the window (/readyz failing, requests served): it lasts SHUTDOWN_DELAY_MS. */
const MIN_WINDOW_ROUNDS = 3;

await t.test(
  'a graceful stop with open watches: served with /readyz failing for --shutdown-delay-duration, then ended on its own',
  async (t) => {
    t.ok(gatewayUrl, 'the gateway is up');
    const watchPath = '/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=600';
    const abort = new AbortController();
    // Direct, and through the gateway (Envoy keeps its upstream connections open: the case that took 60 s).
    for (const base of [lab.apiServerUrl(NEW.name), gatewayUrl, gatewayUrl, gatewayUrl]) {
      const res = await request(`${base}${watchPath}`, {
        dispatcher: agent,
        headers: { authorization: `Bearer ${lab.pki.adminToken}` },
        signal: abort.signal,
      });
      t.equal(res.statusCode, 200, `watch open via ${base}`);
      res.body.text().catch(() => undefined); // runs until the server ends it or the abort below
    }
    // From the SIGTERM until the process is gone, rounds of /readyz then /version, straight to it; every round kept.
    const base = lab.apiServerUrl(NEW.name);
    const rounds: { readyz: number; shutdownFailing: boolean; version: number }[] = [];
    const linesBefore = labLines.length;
    const started = performance.now();
    let gone = false;
    const stopped = lab.stopApiServer(NEW.name).finally(() => {
      gone = true;
    });
    try {
      while (!gone) {
        const readyz = await get(`${base}/readyz`).catch(() => ({ status: 0, body: '' }));
        const version = await get(`${base}/version`).catch(() => ({ status: 0, body: '' }));
        rounds.push({ readyz: readyz.status, shutdownFailing: readyz.body.includes('[-]shutdown failed'), version: version.status });
        await new Promise((r) => setTimeout(r, 100));
      }
      await stopped;
    } finally {
      abort.abort();
    }
    const took = performance.now() - started;
    const window = rounds.filter((r) => r.shutdownFailing && r.version === 200).length;
    t.comment(`${NEW.name} stopped in ${(took / 1000).toFixed(1)} s with watches open; ${rounds.length} rounds, ${window} in the window`);
    // The apiserver's own promise: /readyz fails from the SIGTERM on while it still serves.
    t.ok(
      window >= MIN_WINDOW_ROUNDS,
      `${window} rounds (at least ${MIN_WINDOW_ROUNDS}) saw /readyz fail on shutdown while /version answered 200`,
    );
    const firstFailing = rounds.findIndex((r) => r.shutdownFailing);
    t.same(
      rounds.slice(Math.max(0, firstFailing)).flatMap((r, i) => (r.readyz === 200 ? [firstFailing + i] : [])),
      [],
      'once /readyz failed on shutdown, it never answered 200 again',
    );
    // A lower bound a slow machine cannot break: it sleeps the delay before it stops listening.
    t.ok(took >= SHUTDOWN_DELAY_MS, `ran on for at least --shutdown-delay-duration (${SHUTDOWN_DELAY_MS / 1000} s) after the SIGTERM`);
    // The upper bound is the lab's: SIGKILL after APISERVER_STOP_GRACE_MS. Ending on its own before it means the open
    // watches were ended by --shutdown-watch-termination-grace-period (without it they hold the server 60 s).
    t.same(
      labLines.slice(linesBefore).filter((l) => l.includes('did not stop within')),
      [],
      `ended on its own, before the lab's SIGKILL at ${APISERVER_STOP_GRACE_MS / 1000} s`,
    );
    t.notOk((await lab.status()).find((r) => r.name === NEW.name)?.alive, `${NEW.name} is stopped`);
  },
);

await t.test('down leaves no process running, even one without a record', async (t) => {
  const before = (await lab.status()).filter((r) => r.alive && r.pid !== null);
  t.equal(before.length, 5, `etcd, 1 apiserver, skewgate + Envoy, baseline Envoy: ${before.map((r) => r.name).join(', ')}`);
  // A lab that lost track of a process: the baseline Envoy's record is gone.
  await rm(join(dir, 'run', 'envoy-baseline.json'));
  await rm(join(dir, 'run', 'envoy-baseline.pid'));
  const other = await Lab.open({ dir, addresses: slot, log: (l) => t.comment(`(second Lab) ${l}`) });
  t.notOk(
    (await other.status()).some((r) => r.name === 'envoy-baseline'),
    'the second Lab has no record of envoy-baseline',
  );
  const started = Date.now();
  await other.down();
  t.comment(`down in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  for (const r of before) {
    const stat = await readStat(r.pid as number);
    t.ok(stat === null || stat.state === 'Z', `${r.name} (pid ${r.pid}) is gone`);
  }
  t.same(
    (await lab.status()).filter((r) => r.alive),
    [],
    'status: nothing alive',
  );
  await lab.down();
  t.pass('down of the first Lab finds nothing left');
});
