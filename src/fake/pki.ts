// A throw-away PKI for the fake control plane and the gateway, made with the openssl CLI.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { certValidFor, ensureGenerated, filesPresent, issueCert } from '../pki/openssl.js';

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

const SANS = [
  'DNS:localhost', 'DNS:kubernetes', 'DNS:kubernetes.default.svc',
  ...Array.from({ length: 9 }, (_, i) => `IP:127.0.0.${i + 1}`), 'IP:::1',
];

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
  // A set about to expire is regenerated rather than failing handshakes later.
  return (await filesPresent(FILES.map((name) => join(dir, name)))) && certValidFor(join(dir, 'ca.crt'), 86_400);
}

async function generate(dir: string): Promise<void> {
  const tmp = await mkdtemp(join(dir, '.gen-'));
  try {
    const ca = await issueCert({ dir: tmp, name: 'ca', subject: '/CN=skewgate-fake-ca', usage: 'ca' });
    await issueCert({ dir: tmp, name: 'server', subject: '/CN=kube-apiserver', usage: 'server', ca, sans: SANS });
    await issueCert({ dir: tmp, name: 'gateway', subject: '/CN=skewgate-gateway', usage: 'server', ca, sans: SANS });
    await issueCert({ dir: tmp, name: 'client', subject: '/O=system:masters/CN=skewgate-admin', usage: 'client', ca });
    const pki = layout(resolve(dir), randomBytes(24).toString('hex'));
    await writeFile(join(tmp, 'token'), pki.token, { mode: 0o600 });
    await writeFile(join(tmp, 'kubeconfig'), kubeconfig(pki), { mode: 0o600 });
    for (const name of FILES) await rename(join(tmp, name), join(dir, name));
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
  await ensureGenerated(abs, () => complete(abs), async () => {
    await rm(join(abs, 'kubeconfig'), { force: true });
    await generate(abs);
  }, 'createPki');
  return load(abs);
}

async function load(dir: string): Promise<Pki> {
  return layout(dir, (await readFile(join(dir, 'token'), 'utf8')).trim());
}
