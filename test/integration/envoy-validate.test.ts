// Rendered bootstraps pass the REAL Envoy's `--mode validate`; envoy/envoy.yaml, the rendering of
// examples/skewgate.yaml, is current and validates. It is the one committed bootstrap: a reader
// finds what Envoy is given without a build, and a renderer change shows as one diff of real
// Envoy config in review (the deployments render theirs at start).
import t from 'tap';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { loadConfig } from '../../src/config/load.js';
import { renderBootstrap } from '../../src/envoy/bootstrap.js';
import { writeSeedXds } from '../../src/envoy-runtime/xds-disk.js';
import { renderBootstrapYaml } from '../../src/envoy/render.js';
import { findEnvoyBinary, validateBootstrap } from '../../src/envoy-runtime/process.js';
import { packageRoot } from '../../src/util/package-root.js';
import { scratchDir, sharedPki, testConfig } from '../helpers/envoy-fixtures.js';

const execFileP = promisify(execFile);
const pki = await sharedPki();
const scratch = scratchDir();
t.teardown(() => scratch.cleanup());
const root = packageRoot();

t.test('the Envoy binary is installed', async (t) => {
  t.doesNotThrow(() => findEnvoyBinary(), 'run `npm run setup` if this fails');
});

t.test('findEnvoyBinary names the fix when the binary is missing', async (t) => {
  t.throws(() => findEnvoyBinary(join(scratch.dir, 'no-such-envoy')), /npm run setup/);
});

const variants = [
  { name: 'tcp processor, fail open', extprocListen: '127.0.0.1:9002', failureMode: 'open', clientCert: false, host: '127.0.0.1' },
  {
    name: 'unix processor, fail closed',
    extprocListen: `unix:${join(scratch.dir, 'x.sock')}`,
    failureMode: 'closed',
    clientCert: false,
    host: '127.0.0.1',
  },
  {
    name: 'tcp processor, fail closed, upstream client certificate',
    extprocListen: '127.0.0.1:9002',
    failureMode: 'closed',
    clientCert: true,
    host: '127.0.0.1',
  },
  {
    name: 'unix processor, fail open, client certificate, DNS apiservers',
    extprocListen: `unix:${join(scratch.dir, 'y.sock')}`,
    failureMode: 'open',
    clientCert: true,
    host: 'localhost',
  },
  {
    name: 'client certificates verified and re-stated (XFCC, backstop route, front-proxy certificate)',
    extprocListen: '127.0.0.1:9002',
    failureMode: 'open',
    clientCert: false,
    clientCa: true,
    host: '127.0.0.1',
  },
  {
    name: 'peer skewgates behind the local one (mutual TLS, retry on another), the health listener',
    extprocListen: `unix:${join(scratch.dir, 'z.sock')}`,
    failureMode: 'open',
    clientCert: false,
    clientCa: true,
    host: '127.0.0.1',
    extprocPeers: ['10.0.0.2:9444', '[fd00::3]:9444'],
    healthPort: 16444,
  },
] as const;

for (const v of variants) {
  t.test(`envoy --mode validate: ${v.name}`, async (t) => {
    const cfg = testConfig(pki, {
      apiservers: [
        { name: 'apiserver-a', url: `https://${v.host}:16441` },
        { name: 'apiserver-b', url: `https://${v.host}:16442` },
        { name: 'apiserver-c', url: `https://${v.host}:16443` },
      ],
      extprocListen: v.extprocListen,
      failureMode: v.failureMode,
      clientCert: v.clientCert,
      clientCa: 'clientCa' in v && v.clientCa,
      ...('extprocPeers' in v ? { extprocPeers: v.extprocPeers, healthPort: v.healthPort } : {}),
    });
    const res = await validateBootstrap(renderBootstrapYaml(cfg));
    t.ok(res.ok, `valid:\n${res.output}`);
  });
}

t.test('envoy --mode validate: filesystem xDS, with the seed files envoy-config writes', async (t) => {
  const dir = join(scratch.dir, 'xds');
  const cfg = testConfig(pki, {
    apiservers: [
      { name: 'apiserver-a', url: 'https://127.0.0.1:16441' },
      { name: 'apiserver-b', url: 'https://127.0.0.1:16442' },
    ],
    extprocListen: '127.0.0.1:9002',
    failureMode: 'open',
    clientCa: true,
    xdsDir: dir,
  });
  const written = writeSeedXds(cfg).written;
  t.same(
    written.filter((w) => !w.startsWith('sds/')),
    ['cds.json', 'rds.json'],
  );
  t.ok(written.some((w) => w.startsWith('sds/certificate-')) && written.some((w) => w.startsWith('sds/ca-')), 'and the SDS secrets');
  const res = await validateBootstrap(renderBootstrapYaml(cfg));
  t.ok(res.ok, `valid:\n${res.output}`);
});

t.test('validation really loads the files the bootstrap names', async (t) => {
  const cfg = testConfig(pki, {
    apiservers: [{ name: 'apiserver-a', url: 'https://127.0.0.1:16441' }],
    extprocListen: '127.0.0.1:9002',
    failureMode: 'open',
  });
  const broken = JSON.parse(JSON.stringify(renderBootstrap(cfg)).replaceAll(pki.caFile, join(scratch.dir, 'missing-ca.crt'))) as object;
  const res = await validateBootstrap(broken);
  t.notOk(res.ok, 'a missing CA file fails validation');
  t.match(res.output, /missing-ca\.crt/);
});

const EXAMPLE = 'envoy/envoy.yaml';
/** The command that regenerates it: package.json's envoy:render, which runs the build and then the command below. */
const REGENERATE = `npm run envoy:render (npm run build && node dist/src/cli/main.js envoy-config --config examples/skewgate.yaml --relative-to . > ${EXAMPLE})`;

t.test(`${EXAMPLE} is the output of \`skewgate envoy-config\` for examples/skewgate.yaml`, async (t) => {
  const cli = join(root, 'dist/src/cli/main.js');
  const { stdout: expected } = await execFileP(
    process.execPath,
    [cli, 'envoy-config', '--config', 'examples/skewgate.yaml', '--relative-to', '.'],
    { cwd: root },
  );
  t.equal(
    expected,
    renderBootstrapYaml(loadConfig(join(root, 'examples/skewgate.yaml')), { relativeTo: root }),
    "the command prints the renderer's output",
  );
  const file = join(root, EXAMPLE);
  let actual = '';
  try {
    actual = readFileSync(file, 'utf8');
  } catch {
    // compared below
  }
  t.equal(
    actual,
    expected,
    `${EXAMPLE} is not what \`skewgate envoy-config\` prints for examples/skewgate.yaml: review the difference, then regenerate it: ${REGENERATE}`,
  );

  // Envoy resolves its relative paths from the working directory: give it a stand-in repo root.
  const cwd = mkdtempSync(join(tmpdir(), 'skewgate-example-'));
  t.teardown(() => rmSync(cwd, { recursive: true, force: true }));
  mkdirSync(join(cwd, 'examples/pki'), { recursive: true });
  const stand = {
    'ca.crt': pki.caFile,
    'gateway.crt': pki.gatewayCertFile,
    'gateway.key': pki.gatewayKeyFile,
    'front-proxy-client.crt': pki.frontProxyClientCertFile,
    'front-proxy-client.key': pki.frontProxyClientKeyFile,
  };
  for (const [name, src] of Object.entries(stand)) copyFileSync(src, join(cwd, 'examples/pki', name));
  const res = await validateBootstrap(actual, { cwd });
  t.ok(res.ok, `${EXAMPLE} validates from the repository root:\n${res.output}`);
});
