// The docker-compose demo, run for real: a Docker engine on this machine, the images of
// docker-compose.yml (upstream's where present, else scripts/demo-images.sh's local stand-ins),
// `docker-compose up`, the client's tally, docs/demo.md's upgrade step, Jaeger's traces, the user
// every container runs as, a second build that takes every layer from the cache, and `down -v`
// leaving nothing running (the built images stay, for the next run).
// The test reaches the stack only through the ports the compose file publishes on 127.0.0.1; the
// containers reach each other only on the compose network of this project. Fails, never skips,
// when the engine or an image is missing (`npm run test:compose` builds them first).
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parse } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';

const exec = promisify(execFile);
const ROOT = packageRoot();
// One project name for every run: the images compose builds are tagged <project>_<service>, so a
// run finds the previous run's images and their layers (the legacy builder's cache) and, with an
// unchanged tree, rebuilds none of them (checked below).
const PROJECT = 'skewgate-ci';
const ROUNDS = 12;
const COMPOSE = process.env.SKEWGATE_COMPOSE ?? 'docker-compose';
const t0 = Date.now();
const elapsed = (): string => `${((Date.now() - t0) / 1000).toFixed(1)} s`;
t.setTimeout(25 * 60_000);

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** A command to completion; a non-zero exit is returned, not thrown. */
async function run(cmd: string, args: readonly string[], timeoutMs = 10 * 60_000): Promise<Run> {
  try {
    const r = await exec(cmd, [...args], { cwd: ROOT, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string; message: string };
    return { code: typeof e.code === 'number' ? e.code : -1, stdout: e.stdout ?? '', stderr: e.stderr ?? e.message };
  }
}
/** docker-compose on this project; `upgrade` adds the upgrade profile (kas-1-upgraded), as docs/demo.md's step does. */
const compose = (args: readonly string[], timeoutMs?: number, upgrade = false): Promise<Run> =>
  run(COMPOSE, ['-p', PROJECT, ...(upgrade ? ['--profile', 'upgrade'] : []), ...args], timeoutMs);
const tail = (s: string, n = 15): string => s.trim().split('\n').slice(-n).join('\n');

/** The tally line demo.sh prints for one gateway. */
function tally(stdout: string, label: string): { ok: number; notFound: number; noType: number; other: number } | undefined {
  const m = new RegExp(`^\\[demo\\]\\s+${label}\\s+\\S+\\s+OK (\\d+)\\s+404 (\\d+)\\s+no-type (\\d+)\\s+other (\\d+)$`, 'm').exec(stdout);
  return m ? { ok: Number(m[1]), notFound: Number(m[2]), noType: Number(m[3]), other: Number(m[4]) } : undefined;
}

/** The images docker-compose.yml names, and which are stand-ins. */
const composeDoc = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')) as {
  services: Record<string, { image?: string; build?: unknown; user?: string; ports?: string[] }>;
};
const images = [...new Set(Object.values(composeDoc.services).flatMap((s) => (s.image ? [s.image] : [])))];

/** docs/demo.md's "who runs as whom" table (moved there from the README): | `service` | uid | ... */
function readmeUsers(readme: string): Map<string, number> {
  const section = readme.slice(readme.indexOf('<!-- compose-users -->'), readme.indexOf('<!-- /compose-users -->'));
  const users = new Map<string, number>();
  for (const m of section.matchAll(/^\| `([a-z0-9-]+)` \| (\d+) \|/gm)) users.set(m[1] ?? '', Number(m[2]));
  return users;
}

const info = await run('docker', ['info', '--format', '{{.ServerVersion}}'], 30_000);
if (info.code !== 0) {
  t.fail(`no Docker engine answers (${tail(info.stderr, 3)}): start one, e.g. scripts/demo-images.sh (it starts dockerd)`);
  process.exit(1);
}
t.comment(`Docker engine ${info.stdout.trim()}, ${COMPOSE} ${(await run(COMPOSE, ['version', '--short'])).stdout.trim()}`);

t.teardown(async () => {
  // Whatever the outcome, nothing of this project is left running. Its images stay: they carry the
  // layers the next run builds from (one name per service, so runs do not pile them up).
  await compose(['down', '-v', '--remove-orphans', '--timeout', '5'], undefined, true);
});
// A run that died before its teardown leaves containers under the same project name.
await compose(['down', '-v', '--remove-orphans', '--timeout', '5'], undefined, true);

/**
 * The filesystem layers of each image compose builds (the services with a `build:` section). Not
 * the image id: the legacy builder never caches a metadata-only step such as `ENTRYPOINT []`, so
 * the id changes on every build while no layer does.
 */
async function builtImageLayers(): Promise<Map<string, string>> {
  const layers = new Map<string, string>();
  for (const [service, spec] of Object.entries(composeDoc.services)) {
    if (spec.build === undefined) continue;
    const r = await run('docker', ['image', 'inspect', '-f', '{{json .RootFS.Layers}}', `${PROJECT}_${service}`]);
    layers.set(service, r.code === 0 ? r.stdout.trim() : '(absent)');
  }
  return layers;
}

await t.test('every image the compose file names is present (upstream or a labelled stand-in)', async (t) => {
  for (const image of images) {
    const r = await run('docker', ['image', 'inspect', '-f', '{{index .Config.Labels "io.skewgate.stand-in"}}', image]);
    t.equal(r.code, 0, `${image} is present${r.code === 0 ? '' : ': run scripts/demo-images.sh'}`);
    t.comment(`${image}: ${r.stdout.trim() === 'true' ? 'local stand-in' : 'not a stand-in (upstream)'}`);
  }
});

let clientLog = '';
await t.test('docker-compose up: the whole demo, and the client tally', async (t) => {
  const up = await compose(['up', '-d', '--build'], 15 * 60_000);
  t.equal(up.code, 0, `up exits 0${up.code === 0 ? '' : `:\n${tail(up.stderr, 30)}`}`);
  t.comment(`[${elapsed()}] up`);
  const id = (await compose(['ps', '-q', 'client'])).stdout.trim();
  t.ok(id, 'the client container exists');
  const wait = await run('docker', ['wait', id], 10 * 60_000);
  const logs = await run('docker', ['logs', id]);
  clientLog = logs.stdout + logs.stderr;
  t.equal(wait.stdout.trim(), '0', `the client exits 0${wait.stdout.trim() === '0' ? '' : `:\n${tail(clientLog, 30)}`}`);
  t.comment(`[${elapsed()}] client:\n${tail(clientLog, 8)}`);
  t.same(tally(clientLog, 'skewgate'), { ok: ROUNDS, notFound: 0, noType: 0, other: 0 }, `${ROUNDS}/${ROUNDS} OK through skewgate`);
  const bl = tally(clientLog, 'baseline');
  t.ok(bl && bl.notFound + bl.noType >= 1, `false 404s through the baseline: ${JSON.stringify(bl)}`);
  t.equal(bl?.other, 0, 'the baseline fails only with not-founds');
});

await t.test("the runbook's commands in the demo: the running skewgate's admin endpoint, asked from its container", async (t) => {
  const sg = (args: readonly string[]): Promise<Run> =>
    // As docs/demo.md writes them: `skewgate` on the image's PATH, the config from SKEWGATE_CONFIG.
    compose(['exec', '-T', 'skewgate', 'skewgate', ...args], 60_000);
  const status = await sg(['status', '-o', 'json']);
  t.equal(status.code, 0, `status exits 0${status.code === 0 ? '' : `: ${tail(status.stdout + status.stderr)}`}`);
  const s = JSON.parse(status.stdout || '{}') as { members?: { name: string; ready: boolean | null }[] };
  t.same(
    (s.members ?? []).map((m) => [m.name, m.ready]),
    [
      ['kas-1', true],
      ['kas-2', true],
      ['kas-3', true],
    ],
    'every apiserver a ready member, as the gateway itself sees them',
  );
  const skew = await sg(['skew', '-o', 'name']);
  t.equal(skew.code, 1, 'skew exits 1: the demo is mid-upgrade');
  t.match(skew.stdout, /^admissionregistration\.k8s\.io\/v1\/mutatingadmissionpolicies$/m, 'naming what only the new apiserver serves');
});

await t.test('the upgrade step of docs/demo.md: kas-1 replaced by v1.36.3 on its name and address', async (t) => {
  const stop = await compose(['stop', 'kas-1']);
  t.equal(stop.code, 0, `stop kas-1${stop.code === 0 ? '' : `: ${tail(stop.stderr)}`}`);
  const up = await compose(['up', '-d', 'kas-1-upgraded'], 5 * 60_000, true);
  t.equal(up.code, 0, `up -d kas-1-upgraded${up.code === 0 ? '' : `: ${tail(up.stderr)}`}`);
  const again = await compose(['run', '--rm', 'client'], 10 * 60_000);
  const out = again.stdout + again.stderr;
  t.equal(again.code, 0, `the client again exits 0${again.code === 0 ? '' : `:\n${tail(out, 30)}`}`);
  t.same(tally(out, 'skewgate'), { ok: ROUNDS, notFound: 0, noType: 0, other: 0 }, `${ROUNDS}/${ROUNDS} OK through skewgate`);
  const bl = tally(out, 'baseline');
  t.comment(`baseline after the upgrade step (two of three serve it now): ${JSON.stringify(bl)}`);
  t.equal(bl?.other, 0, 'the baseline fails only with not-founds');
  const upgraded = (await compose(['ps', '-q', 'kas-1-upgraded'], undefined, true)).stdout.trim();
  const insp = await run('docker', ['inspect', '-f', '{{.Config.Image}} {{.Config.Hostname}} {{.State.Running}}', upgraded]);
  t.equal(insp.stdout.trim(), 'registry.k8s.io/kube-apiserver:v1.36.3 kas-1 true', 'kas-1-upgraded runs v1.36.3 as hostname kas-1');
  const old = (await compose(['ps', '-q', 'kas-1'])).stdout.trim();
  t.equal((await run('docker', ['inspect', '-f', '{{.State.Running}}', old])).stdout.trim(), 'false', 'the old kas-1 is stopped');
  const sg = (await compose(['logs', '--no-color', 'skewgate'])).stdout;
  t.match(sg, /"server":"kas-1".*"msg":"apiserver ready"/, 'skewgate saw kas-1 ready (after the replacement too)');
});

await t.test("Jaeger has skewgate's routed decisions in the same trace as the apiserver's spans", async (t) => {
  const tags = encodeURIComponent(JSON.stringify({ 'skewgate.outcome': 'routed' }));
  const url = `http://127.0.0.1:16686/api/traces?service=skewgate&operation=skewgate.decision&tags=${tags}&limit=100&lookback=1h`;
  interface Trace {
    traceID: string;
    spans: { operationName: string; processID: string; tags: { key: string; value: unknown }[] }[];
    processes: Record<string, { serviceName: string }>;
  }
  let joined: Trace[] = [];
  let seen = 0;
  // Spans are exported in batches: a few seconds after the requests.
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 2000))) {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) }).catch(() => null);
    if (!res?.ok) continue;
    const traces = ((await res.json()) as { data: Trace[] }).data;
    seen = traces.length;
    joined = traces.filter(
      (tr) =>
        tr.spans.some(
          (s) => s.operationName === 'skewgate.decision' && s.tags.some((g) => g.key === 'skewgate.outcome' && g.value === 'routed'),
        ) && tr.spans.some((s) => tr.processes[s.processID]?.serviceName === 'apiserver'),
    );
    if (joined.length > 0) break;
  }
  t.ok(seen > 0, `traces of routed skewgate.decision spans: ${seen}`);
  t.ok(joined.length > 0, `of them with the apiserver's own spans in the same trace: ${joined.length}`);
});

await t.test('every container runs as the user docs/demo.md says', async (t) => {
  const claimed = readmeUsers(await readFile(join(ROOT, 'docs/demo.md'), 'utf8'));
  t.ok(claimed.size >= 8, `docs/demo.md lists ${claimed.size} services`);
  const ids = (await compose(['ps', '-a', '-q'], undefined, true)).stdout.trim().split('\n').filter(Boolean);
  const seenServices = new Set<string>();
  for (const id of ids) {
    const r = await run('docker', [
      'inspect',
      '-f',
      '{{index .Config.Labels "com.docker.compose.service"}} {{.State.Running}} {{.State.Pid}} {{.Config.User}}',
      id,
    ]);
    const [service = '', running, pid, user = ''] = r.stdout.trim().split(' ');
    if (service === 'client' && running !== 'true' && seenServices.has('client')) continue;
    seenServices.add(service);
    const want = claimed.get(service);
    t.ok(want !== undefined, `docs/demo.md says whom ${service} runs as`);
    if (running === 'true') {
      // The process's real uid, as the kernel sees it.
      const status = await readFile(`/proc/${pid}/status`, 'utf8');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      t.equal(uid, want, `${service} (running) has uid ${uid}`);
    } else {
      // A one-shot that has exited: its configured user, or its image's.
      const image = (await run('docker', ['inspect', '-f', '{{.Image}}', id])).stdout.trim();
      const imageUser = (await run('docker', ['image', 'inspect', '-f', '{{.Config.User}}', image])).stdout.trim();
      const configured = user || imageUser;
      const uid = configured === '' || configured === 'root' ? 0 : configured === 'node' ? 1000 : Number(configured.split(':')[0]);
      t.equal(uid, want, `${service} (exited) was configured as ${configured || 'the default, root'}`);
    }
  }
  for (const s of claimed.keys()) t.ok(seenServices.has(s), `${s} ran`);
});

await t.test('an unchanged tree rebuilds no image layer', async (t) => {
  const before = await builtImageLayers();
  t.ok(before.size >= 3, `compose builds ${before.size} services' images (skewgate, the harness, the client)`);
  t.notOk([...before.values()].includes('(absent)'), `every built image is there after up --build: ${[...before.keys()].join(', ')}`);
  const build = await compose(['build'], 10 * 60_000, true);
  t.equal(build.code, 0, `build exits 0${build.code === 0 ? '' : `:\n${tail(build.stderr, 30)}`}`);
  t.same(await builtImageLayers(), before, 'a second build gives every image the same filesystem layers: each came from the cache');
  t.comment(`[${elapsed()}] rebuilt from the cache`);
});

await t.test('docker-compose down -v leaves nothing', async (t) => {
  const down = await compose(['down', '-v', '--remove-orphans', '--timeout', '20'], 5 * 60_000, true);
  t.equal(down.code, 0, `down -v exits 0${down.code === 0 ? '' : `: ${tail(down.stderr)}`}`);
  const label = `label=com.docker.compose.project=${PROJECT}`;
  for (const [what, args] of [
    ['containers', ['ps', '-a', '-q', '--filter', label]],
    ['volumes', ['volume', 'ls', '-q', '--filter', label]],
    ['networks', ['network', 'ls', '-q', '--filter', label]],
  ] as const) {
    const r = await run('docker', args);
    t.equal(r.code, 0, `docker ${args[0]} answers`);
    t.equal(r.stdout.trim(), '', `no ${what} of the project left`);
  }
  t.comment(`[${elapsed()}] done`);
});
