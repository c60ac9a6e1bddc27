// A throw-away PKI for the fake control plane and the gateway, made with the openssl CLI.
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rename, rm, rmdir, stat, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { stringify } from 'yaml';

const run = promisify(execFile);

export interface Pki {
  readonly dir: string;
  readonly caFile: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  readonly gatewayCertFile: string;
  readonly gatewayKeyFile: string;
  readonly token: string;
  readonly tokenFile: string;
  readonly kubeconfigFile: string;
}

const DAYS = '365';
const SANS = [
  'DNS:localhost', 'DNS:kubernetes', 'DNS:kubernetes.default.svc',
  ...Array.from({ length: 9 }, (_, i) => `IP:127.0.0.${i + 1}`), 'IP:::1',
].join(',');
/** A private config so the host's openssl.cnf defaults cannot add clashing extensions. */
const CONFIG = `[req]
distinguished_name = dn
prompt = no
[dn]
[ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = ${SANS}
[client]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
`;
const KEY_ARGS = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

function layout(dir: string, token: string): Pki {
  const f = (name: string): string => join(dir, name);
  return {
    dir, caFile: f('ca.crt'), serverCertFile: f('server.crt'), serverKeyFile: f('server.key'),
    clientCertFile: f('client.crt'), clientKeyFile: f('client.key'),
    gatewayCertFile: f('gateway.crt'), gatewayKeyFile: f('gateway.key'),
    token, tokenFile: f('token'), kubeconfigFile: f('kubeconfig'),
  };
}

const FILES = ['ca.crt', 'ca.key', 'server.crt', 'server.key', 'client.crt', 'client.key', 'gateway.crt',
  'gateway.key', 'token', 'kubeconfig'] as const; // kubeconfig last: it marks a complete set

async function complete(dir: string): Promise<boolean> {
  try {
    for (const name of FILES) if ((await stat(join(dir, name))).size === 0) return false;
    // A set about to expire is regenerated rather than failing handshakes later.
    await run('openssl', ['x509', '-checkend', '86400', '-noout', '-in', join(dir, 'ca.crt')]);
    return true;
  } catch {
    return false;
  }
}

async function generate(dir: string): Promise<void> {
  const tmp = await mkdtemp(join(dir, '.gen-'));
  try {
    const t = (name: string): string => join(tmp, name);
    await writeFile(t('openssl.cnf'), CONFIG);
    const cnf = ['-config', t('openssl.cnf')];
    await run('openssl', ['req', '-x509', '-new', ...KEY_ARGS, '-keyout', t('ca.key'), '-out', t('ca.crt'),
      '-days', DAYS, '-subj', '/CN=skewgate-fake-ca', ...cnf, '-extensions', 'ca']);
    const leaf = async (name: string, subj: string, ext: string): Promise<void> => {
      await run('openssl', ['req', '-new', ...KEY_ARGS, '-keyout', t(`${name}.key`), '-out', t(`${name}.csr`),
        '-subj', subj, ...cnf]);
      await run('openssl', ['x509', '-req', '-in', t(`${name}.csr`), '-CA', t('ca.crt'), '-CAkey', t('ca.key'),
        '-set_serial', `0x${randomBytes(16).toString('hex')}`, '-days', DAYS, '-out', t(`${name}.crt`),
        '-extfile', t('openssl.cnf'), '-extensions', ext]);
    };
    await leaf('server', '/CN=kube-apiserver', 'server');
    await leaf('gateway', '/CN=skewgate-gateway', 'server');
    await leaf('client', '/O=system:masters/CN=skewgate-admin', 'client');
    const pki = layout(resolve(dir), randomBytes(24).toString('hex'));
    await writeFile(t('token'), pki.token, { mode: 0o600 });
    await writeFile(t('kubeconfig'), kubeconfig(pki), { mode: 0o600 });
    for (const name of FILES) await rename(t(name), join(dir, name));
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

function kubeconfig(p: Pki): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'skewgate', cluster: { server: 'https://127.0.0.1:1', 'certificate-authority': p.caFile } }],
    users: [
      { name: 'token', user: { token: p.token } },
      { name: 'cert', user: { 'client-certificate': p.clientCertFile, 'client-key': p.clientKeyFile } },
    ],
    contexts: [
      { name: 'token', context: { cluster: 'skewgate', user: 'token' } },
      { name: 'cert', context: { cluster: 'skewgate', user: 'cert' } },
    ],
    'current-context': 'token',
  });
}

/**
 * Creates (or reuses, when complete) the PKI in dir. A lock directory keeps concurrent test
 * processes from interleaving two half-written sets.
 */
export async function createPki(dir: string): Promise<Pki> {
  const abs = resolve(dir);
  await mkdir(abs, { recursive: true });
  const lock = join(abs, '.lock');
  for (const started = Date.now(); ;) {
    if (await complete(abs)) return load(abs);
    try {
      await mkdir(lock);
    } catch {
      const age = await stat(lock).then((s) => Date.now() - s.mtimeMs, () => 0);
      if (age > 60_000) await rmdir(lock).catch(() => undefined); // left by a killed process
      if (Date.now() - started > 120_000) throw new Error(`createPki: ${lock} stays locked`);
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    try {
      if (!(await complete(abs))) {
        await rm(join(abs, 'kubeconfig'), { force: true });
        await generate(abs);
      }
    } finally {
      await rmdir(lock).catch(() => undefined);
    }
  }
}

async function load(dir: string): Promise<Pki> {
  return layout(dir, (await readFile(join(dir, 'token'), 'utf8')).trim());
}
