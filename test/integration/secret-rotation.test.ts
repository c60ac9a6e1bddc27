// SecretRotator on real files: envoy-config's SDS files name the certificate files and a reload
// folder; serve renames a file into that folder when the files behind a secret change (and on the
// next two ticks), never for an unchanged one, never for a certificate that does not parse.
import t from 'tap';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { parseConfig } from '../../src/config/load.js';
import { SecretRotator, writeSecretsSync } from '../../src/envoy-runtime/secret-rotation.js';
import { TRIGGER_SUBDIR, certificateSecretName, sdsDirectory, triggerDirectory, type SecretSpec } from '../../src/envoy/tls-material.js';
import { testPki } from '../helpers/discovery-fixtures.js';
import { eventually } from '../helpers/http.js';
import { waitMs } from '../helpers/waits.js';

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
const INTERVAL_MS = 50;
/**
 * What nothing may happen in: six ticks' worth. That nothing does cannot be waited for; on a slow
 * machine fewer ticks fit in it, which can only hide a fault, never invent one.
 */
const QUIET_MS = 6 * INTERVAL_MS;
const sequenceOf = (stamp: string): number => (stamp === 'none' ? 0 : Number(stamp.split(' ')[0]));
/** The sequence is the rotator's, shared by its secrets: the highest any reload file has. */
const highestSequence = (): number =>
  Math.max(
    0,
    ...readdirSync(join(sds, TRIGGER_SUBDIR)).map((d) => sequenceOf(readFileSync(join(sds, TRIGGER_SUBDIR, d, 'reload'), 'utf8'))),
  );
/**
 * A new file renamed over the old: one change, whenever the tick comes. Written in place, a tick
 * between the truncation and the write sees two changes, and rightly reloads for each.
 */
function replaceFile(file: string, content: string | Buffer): void {
  writeFileSync(`${file}.tmp`, content);
  renameSync(`${file}.tmp`, file);
}

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
  const r = new SecretRotator(config, log, { intervalMs: INTERVAL_MS });
  t.teardown(() => r.close());
  await r.start();
  const atStart = reloadStamp();
  t.not(atStart, 'none', 'at start: Envoy is made to re-read (a file may have changed while skewgate was down)');
  await sleep(QUIET_MS);
  t.equal(reloadStamp(), atStart, 'unchanged files: no reload');

  replaceFile(certFile, 'not a certificate');
  // The line is written by the tick that read the bad file, instead of its reload.
  await eventually(
    'the bad certificate to be noticed',
    () => lines.some((l) => l['msg'] === 'certificate file not usable; Envoy keeps the last good one'),
    waitMs(INTERVAL_MS),
  ).catch(() => undefined);
  // Its follow-up ticks read it again: room for them to reload or log it again, wrongly.
  await sleep(QUIET_MS);
  t.ok(
    lines.some((l) => l['msg'] === 'certificate file not usable; Envoy keeps the last good one'),
    'logged',
  );
  t.equal(reloadStamp(), atStart, 'a certificate that does not parse: no reload');
  t.equal(lines.filter((l) => l['msg'] === 'certificate file not usable; Envoy keeps the last good one').length, 1, 'once, not every tick');

  const base = highestSequence();
  replaceFile(certFile, readFileSync(pki.serverCertFile));
  // Counted by the stamp's sequence number, so that no reload is missed between two looks.
  const reloads = (): number => sequenceOf(reloadStamp()) - base;
  await eventually('three reloads', () => reloads() >= 3, waitMs(3 * INTERVAL_MS)).catch(() => undefined);
  t.equal(reloads(), 3, 'the change and two follow-ups (the key may come after its certificate)');
  const changed = lines.find((l) => l['msg'] === 'certificate files changed; Envoy reads them again');
  t.ok(changed, 'logged with the new serial');
  t.equal(typeof changed?.['serial'], 'string', 'the serial in the log line');
  t.ok(
    lines.some((l) => l['msg'] === 'certificate file usable again'),
    'the recovery logged',
  );
  const settled = reloadStamp();
  await sleep(QUIET_MS);
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
