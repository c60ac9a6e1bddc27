// A throw-away PKI for the fake control plane and the gateway, made with the openssl CLI.
import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { issueCert, type KeyPairFiles } from '../openssl.js';
import { ensurePkiSet } from '../pki-set.js';

export type { KeyPairFiles };

/** Client certificates for identity tests, beside the admin one. */
export interface TestClientCerts {
  /** CN=jane, O=dev-viewers, O=team-b: a limited user with two groups (client CA, clientAuth). */
  readonly limited: KeyPairFiles;
  /** CN="doe, jane", O=team-c: a comma in the CN must survive XFCC and the re-statement. */
  readonly comma: KeyPairFiles;
  /** O=team-b and no CN: names no user, so its identity cannot be stated. */
  readonly noCommonName: KeyPairFiles;
  /** From the client CA but serverAuth only: kube-apiserver would not accept it as a client certificate. */
  readonly serverOnly: KeyPairFiles;
  /** CN=system:admin, O=system:masters from an unrelated CA: must fail the handshake. */
  readonly foreign: KeyPairFiles;
}

export interface Pki {
  readonly dir: string;
  readonly caFile: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  readonly clientCertFile: string;
  readonly clientKeyFile: string;
  readonly gatewayCertFile: string;
  readonly gatewayKeyFile: string;
  /**
   * The front-proxy CA (kube-apiserver --requestheader-client-ca-file; not the client CA) and the
   * client certificate it issued, CN=front-proxy-client (--requestheader-allowed-names), that Envoy
   * presents when it states client-certificate identity as X-Remote-* headers.
   */
  readonly frontProxyCaFile: string;
  readonly frontProxyClientCertFile: string;
  readonly frontProxyClientKeyFile: string;
  readonly clients: TestClientCerts;
  readonly token: string;
  readonly tokenFile: string;
  readonly kubeconfigFile: string;
}

const SANS = [
  'DNS:localhost',
  'DNS:kubernetes',
  'DNS:kubernetes.default.svc',
  ...Array.from({ length: 9 }, (_, i) => `IP:127.0.0.${i + 1}`),
  'IP:::1',
];

const pair = (base: string): KeyPairFiles => ({ certFile: `${base}.crt`, keyFile: `${base}.key` });

function layout(dir: string, token: string): Pki {
  const f = (name: string): string => join(dir, name);
  return {
    dir,
    caFile: f('ca.crt'),
    serverCertFile: f('server.crt'),
    serverKeyFile: f('server.key'),
    clientCertFile: f('client.crt'),
    clientKeyFile: f('client.key'),
    gatewayCertFile: f('gateway.crt'),
    gatewayKeyFile: f('gateway.key'),
    frontProxyCaFile: f('front-proxy-ca.crt'),
    frontProxyClientCertFile: f('front-proxy-client.crt'),
    frontProxyClientKeyFile: f('front-proxy-client.key'),
    clients: {
      limited: pair(f('jane')),
      comma: pair(f('comma')),
      noCommonName: pair(f('no-cn')),
      serverOnly: pair(f('server-only')),
      foreign: pair(f('foreign')),
    },
    token,
    tokenFile: f('token'),
    kubeconfigFile: f('kubeconfig'),
  };
}

const KEY_PAIRS = [
  'ca',
  'server',
  'client',
  'gateway',
  'front-proxy-ca',
  'front-proxy-client',
  'jane',
  'comma',
  'no-cn',
  'server-only',
  'foreign-ca',
  'foreign',
] as const;

const FILES = [...KEY_PAIRS.flatMap((n) => [`${n}.crt`, `${n}.key`]), 'token', 'kubeconfig']; // kubeconfig last: it marks a complete set

/** Writes the set into tmp (kubeconfig last); its paths name the files where they will be, in dir. */
async function generate(tmp: string, dir: string): Promise<void> {
  const ca = await issueCert({ dir: tmp, name: 'ca', subject: '/CN=skewgate-fake-ca', usage: 'ca' });
  await issueCert({ dir: tmp, name: 'server', subject: '/CN=kube-apiserver', usage: 'server', ca, sans: SANS });
  await issueCert({ dir: tmp, name: 'gateway', subject: '/CN=skewgate-gateway', usage: 'server', ca, sans: SANS });
  await issueCert({ dir: tmp, name: 'client', subject: '/O=system:masters/CN=skewgate-admin', usage: 'client', ca });
  const frontProxyCa = await issueCert({ dir: tmp, name: 'front-proxy-ca', subject: '/CN=skewgate-fake-front-proxy-ca', usage: 'ca' });
  await issueCert({ dir: tmp, name: 'front-proxy-client', subject: '/CN=front-proxy-client', usage: 'client', ca: frontProxyCa });
  await issueCert({ dir: tmp, name: 'jane', subject: '/O=dev-viewers/O=team-b/CN=jane', usage: 'client', ca });
  await issueCert({ dir: tmp, name: 'comma', subject: '/O=team-c/CN=doe, jane', usage: 'client', ca });
  await issueCert({ dir: tmp, name: 'no-cn', subject: '/O=team-b', usage: 'client', ca });
  await issueCert({
    dir: tmp,
    name: 'server-only',
    subject: '/O=system:masters/CN=server-only',
    usage: 'server',
    ca,
    sans: ['DNS:server-only.example'],
  });
  const foreignCa = await issueCert({ dir: tmp, name: 'foreign-ca', subject: '/CN=skewgate-fake-foreign-ca', usage: 'ca' });
  await issueCert({ dir: tmp, name: 'foreign', subject: '/O=system:masters/CN=system:admin', usage: 'client', ca: foreignCa });
  const pki = layout(resolve(dir), randomBytes(24).toString('hex'));
  await writeFile(join(tmp, 'token'), pki.token, { mode: 0o600 });
  await writeFile(join(tmp, 'kubeconfig'), kubeconfig(pki), { mode: 0o600 });
}

function kubeconfig(p: Pki): string {
  return kubeconfigFor(p, 'https://127.0.0.1:1');
}

/** A kubeconfig with the set's token (context token, the current one) and client certificate (context cert) for `server`. */
export function kubeconfigFor(p: Pki, server: string): string {
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'skewgate', cluster: { server, 'certificate-authority': p.caFile } }],
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
 * processes from interleaving two half-written sets; a set about to expire is made again rather
 * than failing handshakes later.
 */
export async function createPki(dir: string): Promise<Pki> {
  const abs = resolve(dir);
  await ensurePkiSet(abs, { files: FILES, caFile: 'ca.crt', generate, label: 'createPki' });
  return load(abs);
}

async function load(dir: string): Promise<Pki> {
  return layout(dir, (await readFile(join(dir, 'token'), 'utf8')).trim());
}
