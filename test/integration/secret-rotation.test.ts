// SecretRotator on real files: envoy-config's SDS files name the certificate files and a reload
// folder; serve renames a file into that folder when the files behind a secret change (and on the
// next two ticks), never for an unchanged one, never for a certificate that does not parse.
import t from 'tap';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseConfig } from '../../src/config.js';
import { SecretRotator, writeSecretsSync } from '../../src/envoy/secret-rotation.js';
import { certificateSecretName, sdsDirectory, triggerDirectory, type SecretSpec } from '../../src/envoy/tls-material.js';
import { testPki } from '../helpers/discovery-fixtures.js';

const pki = await testPki();
const dir = mkdtempSync(join(tmpdir(), 'sg-rotation-'));
const certFile = join(dir, 'gw.crt');
const keyFile = join(dir, 'gw.key');
writeFileSync(certFile, readFileSync(pki.gatewayCertFile));
writeFileSync(keyFile, readFileSync(pki.gatewayKeyFile));
const config = parseConfig(
  {
    apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', caFile: pki.caFile, credentials: { tokenFile: 'token' } }],
    envoy: { tls: { certFile, keyFile }, xds: { directory: join(dir, 'xds') } },
  },
  join(dir, 'skewgate.yaml'),
  dir,
);

const lines: Record<string, unknown>[] = [];
const log = pino({ level: 'debug' }, { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
const sds = sdsDirectory(config) as string;
const spec: SecretSpec = { kind: 'certificate', name: certificateSecretName({ certFile, keyFile }), certFile, keyFile };
const reloadFile = join(triggerDirectory(sds, spec), 'reload');
/** The reload file's content: a sequence number and a time, new at every trigger. */
const reloadStamp = (): string => (existsSync(reloadFile) ? readFileSync(reloadFile, 'utf8') : 'none');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

t.test('envoy-config: one SDS file per secret, file names only', async (t) => {
  const written = writeSecretsSync(config);
  t.equal(written.length, 2, `the serving certificate and the apiserver CA: ${written.join(', ')}`);
  t.ok(written.includes(`${spec.name}.json`));
  const secret = JSON.parse(readFileSync(join(sds, `${spec.name}.json`), 'utf8')) as { resources: Record<string, unknown>[] };
  t.match(secret.resources[0], {
    name: spec.name,
    tls_certificate: {
      certificate_chain: { filename: certFile },
      private_key: { filename: keyFile },
      watched_directory: { path: triggerDirectory(sds, spec) },
    },
  });
  t.ok(existsSync(triggerDirectory(sds, spec)), 'the reload folder exists before Envoy starts');
});

t.test('serve: a reload at start, then only on change (and twice more), never for a bad certificate', async (t) => {
  const r = new SecretRotator(config, log, { intervalMs: 50 });
  t.teardown(() => r.close());
  await r.start();
  const atStart = reloadStamp();
  t.not(atStart, 'none', 'at start: Envoy is made to re-read (a file may have changed while skewgate was down)');
  await sleep(300);
  t.equal(reloadStamp(), atStart, 'unchanged files: no reload');

  writeFileSync(certFile, 'not a certificate');
  await sleep(300);
  t.equal(reloadStamp(), atStart, 'a certificate that does not parse: no reload');
  t.ok(
    lines.some((l) => l['msg'] === 'certificate file not usable; Envoy keeps the last good one'),
    'logged',
  );
  t.equal(lines.filter((l) => l['msg'] === 'certificate file not usable; Envoy keeps the last good one').length, 1, 'once, not every tick');

  const seen = new Set<string>();
  writeFileSync(certFile, readFileSync(pki.serverCertFile));
  // Sampled faster than the ticks until three new reloads are seen (or 5 s, on a slow machine).
  const until = Date.now() + 5_000;
  while (Date.now() < until && seen.size < 3) {
    const now = reloadStamp();
    if (now !== atStart) seen.add(now);
    await sleep(10);
  }
  t.equal(seen.size, 3, 'the change and two follow-ups (the key may come after its certificate)');
  const changed = lines.find((l) => l['msg'] === 'certificate files changed; Envoy reads them again');
  t.ok(changed, 'logged with the new serial');
  t.equal(typeof changed?.['serial'], 'string', 'the serial in the log line');
  t.ok(
    lines.some((l) => l['msg'] === 'certificate file usable again'),
    'the recovery logged',
  );
  const settled = reloadStamp();
  await sleep(300);
  t.equal(reloadStamp(), settled, 'then quiet again');
});

t.test('close is idempotent and stops the ticks', async (t) => {
  const r = new SecretRotator(config, log, { intervalMs: 20 });
  await r.start();
  await r.close();
  await r.close();
  const before = reloadStamp();
  writeFileSync(certFile, readFileSync(pki.gatewayCertFile));
  await sleep(150);
  t.equal(reloadStamp(), before, 'no reload after close');
});

t.test('without envoy.xds: no SDS files, nothing to watch', async (t) => {
  const plain = parseConfig(
    {
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', caFile: pki.caFile, credentials: { tokenFile: 'token' } }],
      envoy: { tls: { certFile, keyFile } },
    },
    'x.yaml',
    dir,
  );
  t.same(writeSecretsSync(plain), []);
  const r = new SecretRotator(plain, log);
  await r.start();
  await r.close();
  mkdirSync(join(dir, 'empty'), { recursive: true });
  t.pass('start and close do nothing');
});
