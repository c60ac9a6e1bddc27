// `skewgate gateway-cert`: a serving certificate for the gateway with the SANs asked for, issued by
// the given CA; every problem of the flags listed at once.
import { execFile } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { sanEntry } from '../../src/cli/gateway-cert.js';
import { packageRoot } from '../../src/package-root.js';
import { checkServingTls } from '../../src/envoy/tls-check.js';
import { parseConfig } from '../../src/config.js';
import { issueCert } from '../../src/pki/openssl.js';

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
      apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443' }],
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
