// `skewgate gateway-cert`: a serving certificate for the gateway with the SANs asked for, issued by
// the given CA (an EC one as openssl makes it, an RSA one with a PKCS#1 key as kubeadm's); every
// problem of the flags listed at once; nothing half-written; nothing replaced without --force.
import { execFile } from 'node:child_process';
import { X509Certificate, generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { parseDays, sanEntry } from '../../src/cli/gateway-cert.js';
import { certificateNames } from '../../src/pki/der.js';
import { packageRoot } from '../../src/util/package-root.js';
import { checkServingTls } from '../../src/config/tls.js';
import { parseConfig } from '../../src/config/load.js';
import { issueCert } from '../../harness/openssl.js';

const dir = mkdtempSync(join(tmpdir(), 'sg-gateway-cert-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const cli = join(packageRoot(), 'dist/src/cli/main.js');
const run = (...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> =>
  promisify(execFile)(process.execPath, [cli, 'gateway-cert', ...args], { timeout: 20_000 }).then(
    (r) => ({ code: 0, stdout: r.stdout, stderr: r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }),
  );

t.test('sanEntry', async (t) => {
  const cases: [string, string | null][] = [
    ['DNS:cp.example.com', 'DNS:cp.example.com'],
    ['cp.Example.com', 'DNS:cp.example.com'],
    ['IP:10.0.0.1', 'IP:10.0.0.1'],
    ['10.0.0.1', 'IP:10.0.0.1'],
    ['fd00::1', 'IP:fd00::1'],
    ['*.cp.example.com', 'DNS:*.cp.example.com'],
    ['ip:fd00::1', 'IP:fd00::1'],
    ['IP:cp.example.com', null],
    ['DNS:bad_name', null],
    ['', null],
    ['a..b', null],
    ['DNS:-x.example', null],
  ];
  for (const [raw, want] of cases) t.equal(sanEntry(raw), want, raw);
});

t.test('issues a serving certificate with the SANs, from the CA', async (t) => {
  const ca = await issueCert({ dir, name: 'ca', subject: '/CN=test-cluster-ca', usage: 'ca' });
  const res = await run(
    '--ca-cert',
    ca.certFile,
    '--ca-key',
    ca.keyFile,
    '--san',
    'cp.example.com',
    '--san',
    'IP:10.0.0.10',
    '--san',
    '127.0.0.1',
    '--out',
    join(dir, 'out'),
    '--days',
    '30',
  );
  t.equal(res.code, 0, res.stderr);
  t.match(res.stdout, /subjectAltName: DNS:cp\.example\.com, IP Address:10\.0\.0\.10, IP Address:127\.0\.0\.1/);
  const cert = new X509Certificate(readFileSync(join(dir, 'out/gateway.crt')));
  t.ok(cert.checkIssued(new X509Certificate(readFileSync(ca.certFile))), 'issued by the CA');
  t.ok(cert.checkHost('cp.example.com'), 'valid for the DNS name');
  t.ok(cert.checkIP('10.0.0.10'), 'valid for the IP');
  t.notOk(cert.checkHost('other.example.com'));
  t.ok(Date.parse(cert.validTo) - Date.now() < 31 * 86_400_000, '--days');
  const config = parseConfig(
    {
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', credentials: { tokenFile: 'token' } }],
      envoy: { tls: { certFile: join(dir, 'out/gateway.crt'), keyFile: join(dir, 'out/gateway.key') } },
    },
    join(dir, 'x.yaml'),
    dir,
  );
  t.same(await checkServingTls(config), [], 'what skewgate validate asks of a serving certificate');
});

t.test('every problem with the flags, exit code 2, nothing written', async (t) => {
  const res = await run(
    '--ca-cert',
    join(dir, 'missing.crt'),
    '--ca-key',
    join(dir, 'missing.key'),
    '--san',
    'bad_name',
    '--days',
    '0',
    '--out',
    join(dir, 'never'),
  );
  t.equal(res.code, 2);
  t.match(res.stderr, /4 problems/);
  t.match(res.stderr, /--san "bad_name": not a DNS name or IP address/);
  t.match(res.stderr, /--days 0/);
  t.match(res.stderr, /--ca-cert .*missing\.crt: cannot read/);
  t.match(res.stderr, /--ca-key .*missing\.key: cannot read/);
  const none = await run('--ca-cert', join(dir, 'ca.crt'), '--ca-key', join(dir, 'ca.key'));
  t.equal(none.code, 2);
  t.match(none.stderr, /--san: name at least one/);
  const leaf = await issueCert({
    dir,
    name: 'leaf',
    subject: '/CN=leaf',
    usage: 'server',
    ca: { certFile: join(dir, 'ca.crt'), keyFile: join(dir, 'ca.key') },
    sans: ['DNS:x'],
  });
  const notCa = await run('--ca-cert', leaf.certFile, '--ca-key', leaf.keyFile, '--san', 'x');
  t.equal(notCa.code, 2);
  t.match(notCa.stderr, /not a CA certificate/);
});

t.test('parseDays', async (t) => {
  t.equal(parseDays('30'), 30);
  t.equal(parseDays(' 7 '), 7);
  for (const bad of ['abc', '0', '-1', '1.5', '1e3', '', '3651']) t.type(parseDays(bad), 'string', `${JSON.stringify(bad)} refused`);
});

/** An RSA CA with a PKCS#1 key (how kubeadm writes ca.key) and a PrintableString subject (how Go writes it). */
async function rsaCa(name: string, days = 3650): Promise<{ certFile: string; keyFile: string }> {
  const keyFile = join(dir, `${name}.key`);
  const certFile = join(dir, `${name}.crt`);
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(keyFile, privateKey.export({ type: 'pkcs1', format: 'pem' }));
  const cnf = join(dir, `${name}.cnf`);
  writeFileSync(
    cnf,
    '[req]\ndistinguished_name = dn\nprompt = no\nstring_mask = default\n[dn]\n[ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\nsubjectKeyIdentifier = hash\n',
  );
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-new',
    '-key',
    keyFile,
    '-subj',
    '/CN=kubernetes',
    '-days',
    String(days),
    '-config',
    cnf,
    '-extensions',
    'ext',
    '-out',
    certFile,
  ]);
  return { certFile, keyFile };
}

t.test("an RSA CA with a PKCS#1 key, as kubeadm's: issued, the issuer byte for byte the CA's subject", async (t) => {
  const ca = await rsaCa('kubeadm-ca');
  const out = join(dir, 'rsa-out');
  const res = await run('--ca-cert', ca.certFile, '--ca-key', ca.keyFile, '--san', 'cp.example.com', '--out', out);
  t.equal(res.code, 0, res.stderr);
  const der = new X509Certificate(readFileSync(join(out, 'gateway.crt'))).raw;
  const caDer = new X509Certificate(readFileSync(ca.certFile)).raw;
  const issuer = Buffer.from(certificateNames(der).issuer);
  t.ok(issuer.equals(Buffer.from(certificateNames(caDer).subject)), 'issuer bytes = CA subject bytes (Go matches them so)');
  t.ok(issuer.includes(Buffer.from([0x13, 0x0a])), 'the CA subject kept its PrintableString');
  const cert = new X509Certificate(readFileSync(join(out, 'gateway.crt')));
  t.ok(cert.verify(new X509Certificate(readFileSync(ca.certFile)).publicKey), 'signed by the RSA CA');
  t.equal(readFileSync(join(out, 'gateway.key'), 'utf8').split('\n')[0], '-----BEGIN PRIVATE KEY-----', 'the key is PKCS#8 PEM');
});

t.test('bad input: a clear error, exit 2, nothing written', async (t) => {
  const a = await rsaCa('ca-a');
  const b = await rsaCa('ca-b');
  const out = join(dir, 'refused');
  const cases: [string, string[], RegExp][] = [
    [
      "another CA's key",
      ['--ca-cert', a.certFile, '--ca-key', b.keyFile, '--san', 'x'],
      /--ca-key .*ca-b\.key: not the private key of --ca-cert .*ca-a\.crt/,
    ],
    ['--days abc', ['--ca-cert', a.certFile, '--ca-key', a.keyFile, '--san', 'x', '--days', 'abc'], /--days "abc": a whole number of days/],
    [
      'a private key as the CA certificate',
      ['--ca-cert', a.keyFile, '--ca-key', a.keyFile, '--san', 'x'],
      /--ca-cert .*ca-a\.key: not a PEM certificate/,
    ],
    [
      'a certificate as the CA key',
      ['--ca-cert', a.certFile, '--ca-key', a.certFile, '--san', 'x'],
      /--ca-key .*ca-a\.crt: not a PEM private key/,
    ],
    [
      'longer than the CA',
      ['--ca-cert', a.certFile, '--ca-key', a.keyFile, '--san', 'x', '--days', '3650'],
      /would outlive its CA .*at most 3649 days/,
    ],
  ];
  for (const [what, args, message] of cases) {
    const res = await run(...args, '--out', out);
    t.equal(res.code, 2, `${what}: exit 2`);
    t.match(res.stderr, message, `${what}: says so`);
    t.match(res.stderr, /nothing written/, `${what}: nothing written`);
    t.notOk(res.stderr.includes('    at '), `${what}: no stack trace`);
  }
  t.same(existsSync(out) ? readdirSync(out) : [], [], 'no file, not even an empty one');
});

t.test('existing files are kept without --force, replaced with it; no temporary file is left', async (t) => {
  const ca = await rsaCa('ca-force');
  const out = join(dir, 'force');
  mkdirSync(out);
  writeFileSync(join(out, 'gateway.crt'), 'mine\n');
  const kept = await run('--ca-cert', ca.certFile, '--ca-key', ca.keyFile, '--san', 'x', '--out', out);
  t.equal(kept.code, 2, 'exit 2');
  t.match(kept.stderr, /gateway\.crt exists: not replaced without --force/);
  t.equal(readFileSync(join(out, 'gateway.crt'), 'utf8'), 'mine\n', 'untouched');
  t.notOk(existsSync(join(out, 'gateway.key')), 'and no key written beside it');
  const replaced = await run('--ca-cert', ca.certFile, '--ca-key', ca.keyFile, '--san', 'x', '--out', out, '--force');
  t.equal(replaced.code, 0, replaced.stderr);
  t.ok(new X509Certificate(readFileSync(join(out, 'gateway.crt'))).checkHost('x'), 'replaced by the new certificate');
  t.same(readdirSync(out).sort(), ['gateway.crt', 'gateway.key'], 'only the two files');
});
