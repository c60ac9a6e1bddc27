// The two images of the compose demo, checked as text (no Docker engine is needed or used): bases
// pinned, multi-stage, non-root, skewgate's command line, every file the final stage copies present
// in the repository or the local build, the build context allow-list, and demo.sh parsed by sh.
// The final stage's file set is then laid out in a temp dir the way the Dockerfile assembles it
// (production packages only, as `npm ci --omit=dev` installs them) and skewgate is run from there;
// so is the harness stage, with the compose demo's one-shots (the PKI, Envoy's bootstraps).
import t, { type Test } from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { cp, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, isAbsolute, join, posix, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse as parseYaml } from 'yaml';
import { packageRoot } from '../../src/util/package-root.js';
import { EXTPROC_PROTO_FILE, HEALTH_PROTO_FILE } from '../../src/extproc/proto.js';
import { labVersions } from '../../harness/lab/versions.js';

const root = packageRoot();
const ROOT_DOCKERFILE = 'Dockerfile';
const CLIENT_DIR = 'deploy/compose/client';
const CLIENT_DOCKERFILE = `${CLIENT_DIR}/Dockerfile`;
const DEMO_SH = `${CLIENT_DIR}/demo.sh`;

// ---- a small Dockerfile reader -----------------------------------------------------------------

interface Instruction {
  readonly keyword: string;
  readonly args: string;
}

interface Stage {
  readonly image: string;
  readonly name: string | undefined;
  readonly instructions: Instruction[];
  /** The earlier stage this one is built FROM, if any. */
  readonly parent: Stage | undefined;
}

/** Stages in order; continuation lines joined, comment lines dropped (also inside a continuation, as Docker does). */
function parseDockerfile(text: string): Stage[] {
  const stages: Stage[] = [];
  let pending = '';
  const flush = (): void => {
    const line = pending.trim();
    pending = '';
    if (line === '') return;
    const m = /^(\S+)\s*(.*)$/s.exec(line);
    if (!m) return;
    const keyword = (m[1] as string).toUpperCase();
    const args = (m[2] as string).trim();
    if (keyword === 'FROM') {
      const from = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(args);
      if (!from) throw new Error(`cannot read FROM ${args}`);
      const image = from[1] as string;
      stages.push({ image, name: from[2]?.toLowerCase(), instructions: [], parent: stages.find((s) => s.name === image.toLowerCase()) });
      return;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`${keyword} before any FROM`);
    stage.instructions.push({ keyword, args });
  };
  for (const raw of text.split('\n')) {
    if (/^\s*#/.test(raw)) continue;
    if (/\\\s*$/.test(raw)) {
      pending += `${raw.replace(/\\\s*$/, '')} `;
      continue;
    }
    pending += raw;
    flush();
  }
  flush();
  return stages;
}

/** An exact release tag (1.2.3, v1.2.3, 1.2.3-alpine3.22) or a digest; never latest, a bare major or major.minor. */
function pinned(image: string): boolean {
  if (/@sha256:[0-9a-f]{64}$/.test(image)) return true;
  const slash = image.lastIndexOf('/');
  const colon = image.lastIndexOf(':');
  if (colon <= slash) return false; // no tag at all means latest
  return /^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/.test(image.slice(colon + 1));
}

interface Copy {
  readonly from: string | undefined;
  readonly sources: string[];
  readonly dest: string;
}

function copies(stage: Stage): Copy[] {
  return stage.instructions
    .filter((i) => i.keyword === 'COPY' || i.keyword === 'ADD')
    .map((i) => {
      const words = i.args.split(/\s+/);
      const from = words
        .find((w) => w.startsWith('--from='))
        ?.slice('--from='.length)
        .toLowerCase();
      const paths = words.filter((w) => !w.startsWith('--'));
      return { from, sources: paths.slice(0, -1), dest: paths.at(-1) as string };
    });
}

/** The image a stage makes: its own instructions after those of the stages it is built FROM. */
function effective(stage: Stage): Stage {
  if (stage.parent === undefined) return stage;
  const base = effective(stage.parent);
  return { image: base.image, name: stage.name, instructions: [...base.instructions, ...stage.instructions], parent: undefined };
}

/** The stage's WORKDIR after each of its instructions (the node images start in /; a stage built FROM another starts in that one's). */
function workdirs(stage: Stage): string[] {
  const parent = stage.parent;
  let wd = parent === undefined ? '/' : (workdirs(parent).at(-1) ?? '/');
  return stage.instructions.map((i) => {
    if (i.keyword === 'WORKDIR') wd = posix.resolve(wd, i.args);
    return wd;
  });
}

/** Where a COPY lands in the image, per source (a trailing slash or several sources: into the folder). */
function copyTargets(stage: Stage): { copy: Copy; source: string; target: string }[] {
  const wds = workdirs(stage);
  const out: { copy: Copy; source: string; target: string }[] = [];
  let idx = 0;
  for (const [n, i] of stage.instructions.entries()) {
    if (i.keyword !== 'COPY' && i.keyword !== 'ADD') continue;
    const copy = copies(stage)[idx++] as Copy;
    const dest = posix.resolve(wds[n] as string, copy.dest);
    const intoDir = copy.dest.endsWith('/') || copy.sources.length > 1;
    for (const source of copy.sources) out.push({ copy, source, target: intoDir ? posix.join(dest, posix.basename(source)) : dest });
  }
  return out;
}

function execForm(stage: Stage, keyword: string): string[] | undefined {
  const i = stage.instructions.filter((x) => x.keyword === keyword).at(-1);
  return i === undefined ? undefined : (JSON.parse(i.args) as string[]);
}

function lastUser(stage: Stage): string | undefined {
  return stage.instructions.filter((i) => i.keyword === 'USER').at(-1)?.args;
}

const isRoot = (user: string): boolean => ['root', '0'].includes(user.split(':')[0] as string);

// ---- .dockerignore, as Docker reads it ---------------------------------------------------------

/** Patterns in order; the last one matching a path or one of its parent folders decides. */
function dockerignore(text: string): (path: string) => boolean {
  const rules = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((l) => {
      const negate = l.startsWith('!');
      const pattern = posix
        .normalize((negate ? l.slice(1) : l).trim())
        .replace(/^\/+/, '')
        .replace(/\/+$/, '');
      const re = new RegExp(
        `^${pattern
          .split('**')
          .map((part) =>
            part
              .split('*')
              .map((s) =>
                s
                  .split('?')
                  .map((c) => c.replace(/[.+^${}()|[\]\\]/g, '\\$&'))
                  .join('[^/]'),
              )
              .join('[^/]*'),
          )
          .join('.*')}$`,
      );
      return { negate, re };
    });
  return (path: string): boolean => {
    const parts = path.split('/');
    const candidates = parts.map((_, i) => parts.slice(0, i + 1).join('/'));
    let excluded = false;
    for (const r of rules) if (candidates.some((c) => r.re.test(c))) excluded = !r.negate;
    return excluded;
  };
}

// ---- the checks ----------------------------------------------------------------------------------

const read = (p: string): string => readFileSync(join(root, p), 'utf8');
const rootStages = parseDockerfile(read(ROOT_DOCKERFILE));
/** The service image: the final stage with what it inherits. */
const serviceImage = effective(rootStages.at(-1) as Stage);
const clientStages = parseDockerfile(read(CLIENT_DOCKERFILE));

t.test('the pin check itself tells pinned from floating', async (t) => {
  for (const ok of ['node:20.19.4-alpine3.22', 'registry.k8s.io/kubectl:v1.36.3', 'alpine:3.22.2', `alpine@sha256:${'a'.repeat(64)}`])
    t.ok(pinned(ok), ok);
  for (const bad of [
    'node',
    'node:latest',
    'node:20',
    'node:20-alpine',
    'alpine:3',
    'alpine:3.22',
    'registry.k8s.io:5000/kubectl',
    'node:lts-alpine3.22',
  ])
    t.notOk(pinned(bad), bad);
});

for (const [file, stages] of [
  [ROOT_DOCKERFILE, rootStages],
  [CLIENT_DOCKERFILE, clientStages],
] as const) {
  t.test(`${file}: pinned bases, multi-stage, non-root`, async (t) => {
    t.ok(stages.length >= 2, `${stages.length} stages`);
    const names = new Set(stages.map((s) => s.name).filter((n) => n !== undefined));
    for (const s of stages) {
      if (names.has(s.image.toLowerCase())) continue; // FROM an earlier stage
      t.ok(pinned(s.image), `FROM ${s.image} is pinned to an exact version`);
    }
    const final = effective(stages.at(-1) as Stage);
    const user = lastUser(final);
    t.ok(user !== undefined && !isRoot(user), `final stage runs as ${user ?? '(no USER: root)'}`);
    for (const c of copies(final)) {
      if (c.from !== undefined) t.ok(names.has(c.from), `COPY --from=${c.from} names a stage of this file`);
    }
  });
}

t.test(`${ROOT_DOCKERFILE}: skewgate's command line`, async (t) => {
  const final = serviceImage;
  const argv = [...(execForm(final, 'ENTRYPOINT') ?? []), ...(execForm(final, 'CMD') ?? [])];
  t.same(argv, ['node', '/app/dist/src/cli/main.js', 'serve', '--config', '/deploy/skewgate.yaml'], 'ENTRYPOINT + CMD (exec form)');
  t.equal(lastUser(final), 'node', 'USER node (uid 1000 in the node images)');
  // `kubectl exec … -- skewgate status` (issue 30): the CLI script executable and linked onto PATH.
  t.ok(
    final.instructions.some(
      (i) =>
        i.keyword === 'RUN' &&
        /\bchmod 0755 \/app\/dist\/src\/cli\/main\.js\b/.test(i.args) &&
        /\bln -s \/app\/dist\/src\/cli\/main\.js \/usr\/local\/bin\/skewgate\b/.test(i.args),
    ),
    'skewgate on PATH: /usr/local/bin/skewgate → the executable CLI script',
  );
  t.match(
    readFileSync(join(root, 'dist/src/cli/main.js'), 'utf8').split('\n')[0],
    /^#!\/usr\/bin\/env node$/,
    'which starts with its interpreter line',
  );
  t.equal(workdirs(final).at(-1), '/app');
  t.notOk(
    final.instructions.some((i) => i.keyword === 'RUN' && /\bopenssl\b/.test(i.args)),
    "no openssl in the service image: gateway-cert signs with Node's crypto",
  );
  t.notOk(
    final.instructions.some((i) => i.keyword === 'RUN' && /\bnpm\b/.test(i.args)),
    'no npm in the final stage: it copies built results only',
  );
  t.notOk(
    final.instructions.some((i) => i.keyword === 'HEALTHCHECK'),
    "no HEALTHCHECK in the image (the config path is the deployment's; compose and deploy/ run skewgate health)",
  );
});

t.test(`${ROOT_DOCKERFILE}: installs from the lock file, production packages only in the final stage`, async (t) => {
  const byName = new Map(rootStages.filter((s) => s.name !== undefined).map((s) => [s.name as string, s]));
  const final = serviceImage;
  const nodeModules = copyTargets(final).find((c) => c.target === '/app/node_modules');
  t.ok(nodeModules?.copy.from, 'node_modules comes from a stage');
  const depsStage = byName.get(nodeModules?.copy.from ?? '');
  const installs = depsStage?.instructions.filter((i) => i.keyword === 'RUN' && /\bnpm (ci|install|i)\b/.test(i.args)) ?? [];
  t.equal(installs.length, 1, 'one install in that stage');
  t.match(installs[0]?.args ?? '', /\bnpm ci\b.*--omit=dev/, 'npm ci --omit=dev (lock file, no dev dependencies)');
  t.ok(
    copies(depsStage as Stage).some((c) => c.sources.includes('package-lock.json')),
    'the lock file is copied in before it',
  );
  for (const s of rootStages) {
    for (const i of s.instructions) {
      if (i.keyword === 'RUN')
        t.notMatch(i.args, /\bnpm (install|i)\b/, `FROM ${s.image}${s.name ? ` AS ${s.name}` : ''}: npm ci only, never npm install`);
    }
  }
});

t.test('every file a COPY names exists (repository, build output) and the context sends it', async (t) => {
  const ignored = dockerignore(read('.dockerignore'));
  const check = (file: string, stages: Stage[], context: string): void => {
    const byName = new Map(stages.filter((s) => s.name !== undefined).map((s) => [s.name as string, s]));
    for (const stage of stages) {
      for (const { copy, source } of copyTargets(stage)) {
        if (copy.from === undefined) {
          t.ok(existsSync(join(root, context, source)), `${file}: COPY ${source} exists in ${context || 'the repository root'}`);
          if (context === '')
            t.notOk(ignored(posix.normalize(source).replace(/\/$/, '')), `${file}: ${source} is not excluded by .dockerignore`);
          continue;
        }
        const from = byName.get(copy.from) as Stage;
        if (from.instructions.length === 0) continue; // a plain image (kubectl): checked below
        // A build stage works in a copy of the repository's layout (its WORKDIR), so its results
        // have a local counterpart made by the same commands (npm ci, tsc).
        const wd = workdirs(from).at(-1) as string;
        const rel = posix.relative(wd, source);
        t.ok(!rel.startsWith('..') && !isAbsolute(rel), `${file}: COPY --from=${copy.from} ${source} is under its WORKDIR ${wd}`);
        t.ok(existsSync(join(root, rel)), `${file}: COPY --from=${copy.from} ${source}: ${rel} exists in the local build`);
      }
    }
  };
  check(ROOT_DOCKERFILE, rootStages, '');
  check(CLIENT_DOCKERFILE, clientStages, CLIENT_DIR);

  const final = serviceImage;
  const targets = copyTargets(final)
    .map((c) => c.target)
    .sort();
  t.same(
    targets,
    ['/app/dist/src', '/app/node_modules', '/app/package.json', '/app/proto'],
    'the final stage holds only what runs skewgate (no dist/harness)',
  );
  t.ok(existsSync(join(root, 'dist/src/cli/main.js')), 'the entry point is in the local build');
  for (const p of [EXTPROC_PROTO_FILE, HEALTH_PROTO_FILE])
    t.ok(existsSync(join(root, 'proto', p)), `proto/${p} (loaded at run time) is in the copied folder`);
});

t.test('.dockerignore keeps the build context to what the image needs', async (t) => {
  const ignored = dockerignore(read('.dockerignore'));
  for (const p of [
    'node_modules',
    'node_modules/yaml/package.json',
    'dist',
    'dist/src/cli/main.js',
    '.tools',
    '.tools/envoy/current',
    '.cache',
    '.cache/lab/pki/ca.key',
    '.git',
    '.git/HEAD',
    'test/unit/dockerfiles.test.ts',
    'bench',
    'docs',
    'deploy/compose/client/demo.sh',
  ]) {
    t.ok(ignored(p), `${p} is excluded`);
  }
  for (const p of [
    'package.json',
    'package-lock.json',
    'tsconfig.json',
    'src/cli/main.ts',
    'harness/cli/main.ts',
    `proto/${EXTPROC_PROTO_FILE}`,
  ])
    t.notOk(ignored(p), `${p} is sent`);
});

t.test(`${CLIENT_DOCKERFILE}: kubectl of the lab's newest version, demo.sh`, async (t) => {
  const kubectlStage = clientStages.find((s) => s.image.startsWith('registry.k8s.io/kubectl:'));
  t.equal(
    kubectlStage?.image,
    `registry.k8s.io/kubectl:v${labVersions().kubeNew}`,
    'the same kubectl version as lab/versions.env KUBE_NEW',
  );
  const final = clientStages.at(-1) as Stage;
  t.equal(final.image, serviceImage.image, "the same base as skewgate's image (its sh, dash, runs demo.sh)");
  const targets = copyTargets(final);
  t.ok(
    targets.some((c) => c.copy.from === kubectlStage?.name && c.source === '/bin/kubectl' && c.target === '/usr/local/bin/kubectl'),
    'kubectl copied onto the PATH',
  );
  t.ok(
    targets.some((c) => c.copy.from === undefined && c.source === 'demo.sh' && c.target === '/usr/local/bin/demo.sh'),
    'demo.sh copied onto the PATH',
  );
  t.same(execForm(final, 'CMD'), ['demo.sh', 'demo'], 'CMD demo.sh demo');
});

t.test('demo.sh: POSIX sh that parses, and refuses bad usage', async (t) => {
  const script = join(root, DEMO_SH);
  const text = readFileSync(script, 'utf8');
  t.match(text, /^#!\/bin\/sh\n/, 'plain sh shebang');
  t.match(text, /^set -eu$/m, 'set -eu');
  t.ok((statSync(script).mode & 0o111) !== 0, 'executable');
  const syntax = spawnSync('sh', ['-n', script], { encoding: 'utf8' });
  t.equal(syntax.status, 0, `sh -n: ${syntax.stderr}`);
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
  const noArgs = spawnSync('sh', [script], { encoding: 'utf8', env });
  t.equal(noArgs.status, 2, 'no mode: exit 2');
  t.match(noArgs.stderr, /usage: .* setup\|demo/);
  const noPki = spawnSync('sh', [script, 'demo'], {
    encoding: 'utf8',
    env: { ...env, PKI_DIR: join(tmpdir(), 'skewgate-no-such-pki'), KUBECTL: 'sh' },
  });
  t.equal(noPki.status, 2, 'missing PKI: exit 2');
  t.match(noPki.stderr, /skewgate-no-such-pki\/ca\.crt is missing/);
  const badRounds = spawnSync('sh', [script, 'demo'], { encoding: 'utf8', env: { ...env, ROUNDS: 'many' } });
  t.equal(badRounds.status, 2, 'ROUNDS=many: exit 2');
});

/** Production packages as `npm ci --omit=dev` lays them out: every lock entry not marked dev. */
function productionPackages(): string[] {
  const lock = JSON.parse(read('package-lock.json')) as { packages: Record<string, { dev?: boolean }> };
  return Object.entries(lock.packages)
    .filter(([k, v]) => k.startsWith('node_modules/') && v.dev !== true)
    .map(([k]) => k);
}

/** Lays a stage's COPYs out under `app` (its /app) from the repository and the local build. */
async function layOut(t: Test, stage: Stage, app: string): Promise<void> {
  const byName = new Map(rootStages.filter((s) => s.name !== undefined).map((s) => [s.name as string, s]));
  const prod = productionPackages();
  for (const { copy, source, target } of copyTargets(stage)) {
    t.ok(target.startsWith('/app/'), `${target} is in /app`);
    const dest = join(app, posix.relative('/app', target));
    await mkdir(dirname(dest), { recursive: true });
    if (target === '/app/node_modules') {
      for (const pkg of prod.filter((p) => !p.slice('node_modules/'.length).includes('/node_modules/'))) {
        const to = join(app, pkg);
        await mkdir(dirname(to), { recursive: true });
        await symlink(join(root, pkg), to);
      }
      continue;
    }
    const local = copy.from === undefined ? source : posix.relative(workdirs(byName.get(copy.from) as Stage).at(-1) as string, source);
    await cp(join(root, local), dest, { recursive: true });
  }
}

/** node inside a laid-out image: packages resolve their own imports inside this tree, not the repository's node_modules. */
function nodeIn(image: string): (args: string[]) => ReturnType<typeof spawnSync> {
  return (args) =>
    spawnSync(process.execPath, ['--preserve-symlinks', '--preserve-symlinks-main', ...args], {
      encoding: 'utf8',
      cwd: image,
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
    });
}

t.test('the final stage, laid out as the Dockerfile assembles it, runs skewgate', async (t) => {
  const image = await mkdtemp(join(tmpdir(), 'skewgate-image-'));
  t.teardown(() => rm(image, { recursive: true, force: true }));
  const app = join(image, 'app');
  const final = serviceImage;
  await layOut(t, final, app);
  const node = nodeIn(image);
  const help = node([join(app, 'dist/src/cli/main.js'), '--help']);
  t.equal(help.status, 0, `skewgate --help: ${String(help.stderr)}`);
  t.match(String(help.stdout), /\bserve\b/, 'lists the serve command');
  // Inside the tree, so that its bare import resolves in /app/node_modules as the image's would.
  const probe = join(app, 'probe.mjs');
  await writeFile(
    probe,
    [
      `const proto = await import(${JSON.stringify(pathToFileURL(join(app, 'dist/src/extproc/proto.js')).href)});`,
      `await import(${JSON.stringify(pathToFileURL(join(app, 'dist/src/cli/serve.js')).href)});`,
      `await import(${JSON.stringify(pathToFileURL(join(app, 'dist/src/telemetry/sdk.js')).href)});`,
      'let dev = "absent";',
      'try { await import("typescript"); dev = "present"; } catch {}',
      'console.log(JSON.stringify({ protoRoot: proto.loadProtos().protoRoot, dev }));',
    ].join('\n'),
  );
  const run = node([probe]);
  t.equal(run.status, 0, `loads the protos, serve and telemetry: ${String(run.stderr)}`);
  const out = JSON.parse(String(run.stdout).trim() || '{}') as { protoRoot?: string; dev?: string };
  t.equal(out.protoRoot, join(app, 'proto'), 'protos found at /app/proto');
  t.equal(out.dev, 'absent', 'a dev dependency (typescript) is not installed there');
  // The service image holds no harness: no lab, demo or compose command, no harness module.
  t.notOk(existsSync(join(app, 'dist/harness')), 'no dist/harness in the service image');
  t.notMatch(String(help.stdout), /^\s+(lab|demo|compose)\b/m, 'skewgate --help lists no harness command');
  t.comment(`${productionPackages().length} production packages; image tree at ${relative(tmpdir(), image)}`);
});

t.test(
  'the harness stage (compose one-shots) runs `skewgate-lab lab pki` and renders both bootstraps as the compose file asks',
  async (t) => {
    const found = rootStages.find((s) => s.name === 'harness');
    t.ok(found, 'the Dockerfile has a stage named harness');
    t.not(found, rootStages.at(-1), 'not the final (service) stage: `docker build .` never builds the harness in');
    const stage = effective(found as Stage);
    t.equal(lastUser(stage), 'node', 'USER node: it writes the PKI volume as uid 1000, as skewgate reads it');
    t.ok(
      stage.instructions.some(
        (i) => i.keyword === 'RUN' && /\bapt-get install\b.*\bopenssl\b.*rm -rf \/var\/lib\/apt\/lists/.test(i.args),
      ) && stage.instructions.some((i) => i.keyword === 'RUN' && /chown node:node \/pki \/run\/skewgate \/run\/envoy/.test(i.args)),
      'openssl (the lab PKI), and the three volume folders owned by node',
    );
    const image = await mkdtemp(join(tmpdir(), 'skewgate-pki-image-'));
    t.teardown(() => rm(image, { recursive: true, force: true }));
    const app = join(image, 'app');
    await layOut(t, stage, app);
    const entry = execForm(stage, 'ENTRYPOINT') ?? [];
    t.same(entry, ['node', '/app/dist/harness/cli/main.js'], 'ENTRYPOINT: the harness command');
    // With the host's openssl here.
    const pki = nodeIn(image)([
      join(app, posix.relative('/app', entry[1] ?? '')),
      'lab',
      'pki',
      '--dir',
      join(image, 'pki'),
      '--san',
      'DNS:kas-1',
    ]);
    t.equal(pki.status, 0, `skewgate-lab lab pki: ${String(pki.stderr)}`);
    t.ok(
      existsSync(join(image, 'pki', 'ca.crt')) && existsSync(join(image, 'pki', 'admin.token')),
      'lab pki wrote ca.crt and admin.token (what demo.sh reads)',
    );

    // The envoy-config service's line, as docker-compose.yml gives it, inside the laid-out image:
    // /app is the image's, /deploy the repository's deploy/compose, /run/envoy a folder of the image.
    const compose = parseYaml(read('docker-compose.yml'), { version: '1.1' }) as {
      services: Record<string, { entrypoint?: string[]; command?: string[] }>;
    };
    const envoyConfig = compose.services['envoy-config'];
    t.same(envoyConfig?.entrypoint, ['sh', '-c'], 'envoy-config: a shell line');
    const line = envoyConfig?.command?.[0] ?? '';
    const out = join(image, 'run', 'envoy');
    await mkdir(out, { recursive: true });
    const mapped = line
      .replaceAll('/app/', `${app}/`)
      .replaceAll('/deploy/', `${join(root, 'deploy/compose')}/`)
      .replaceAll('/run/envoy/', `${out}/`)
      .replace(/(^|&& )node /g, `$1${process.execPath} --preserve-symlinks --preserve-symlinks-main `);
    const rendered = spawnSync('sh', ['-c', mapped], {
      encoding: 'utf8',
      cwd: image,
      timeout: 60_000,
      env: { PATH: process.env.PATH ?? '', NODE_ENV: 'production' },
    });
    t.equal(rendered.status, 0, `envoy-config's line runs in the image: ${line}\n${String(rendered.stderr)}`);
    for (const f of ['envoy.yaml', 'envoy-baseline.yaml']) {
      const text = existsSync(join(out, f)) ? readFileSync(join(out, f), 'utf8') : '';
      t.match(text, /^static_resources:$/m, `${f} written: an Envoy bootstrap`);
    }
  },
);
