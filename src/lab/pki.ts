// The lab's PKI, laid out like kubeadm's /etc/kubernetes/pki: cluster CA, apiserver serving cert,
// front-proxy CA and client, service-account key pair, admin client cert, the gateway's serving
// cert and a static token file. Made once per run dir and reused while complete.
import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { certValidFor, ensureGenerated, filesPresent, generateRsaKeyPair, issueCert } from '../pki/openssl.js';

export interface LabPki {
  readonly dir: string;
  /** Cluster CA: signs serving certs and client certs (--client-ca-file, --peer-ca-file). */
  readonly caFile: string;
  readonly caKeyFile: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  /** --requestheader-client-ca-file */
  readonly frontProxyCaFile: string;
  /** CN=front-proxy-client: --proxy-client-cert-file, and later the gateway's front-proxy identity. */
  readonly frontProxyClientCertFile: string;
  readonly frontProxyClientKeyFile: string;
  readonly saKeyFile: string;
  readonly saPubFile: string;
  /** CN=kubernetes-admin, O=system:masters */
  readonly adminCertFile: string;
  readonly adminKeyFile: string;
  /** Envoy's downstream serving certificate (same SANs as the apiservers'). */
  readonly gatewayCertFile: string;
  readonly gatewayKeyFile: string;
  /** --token-auth-file: the admin token (system:masters) and skewgate's discovery token. */
  readonly tokenAuthFile: string;
  readonly adminToken: string;
  readonly adminTokenFile: string;
  readonly skewgateToken: string;
  readonly skewgateTokenFile: string;
}

/** The user and group of skewgate's token; lab.ts binds the group to a discovery-reader role. */
export const SKEWGATE_USER = 'skewgate';
export const SKEWGATE_GROUP = 'skewgate:discovery';
export const ADMIN_USER = 'kubernetes-admin';
export const FRONT_PROXY_CLIENT_CN = 'front-proxy-client';
/** First address of --service-cluster-ip-range (10.96.0.0/16): the `kubernetes` Service IP. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';

/** Every loopback address a lab apiserver may use, and the names in-cluster clients would use. */
export const LAB_SANS: readonly string[] = Object.freeze([
  'DNS:localhost', 'DNS:kubernetes', 'DNS:kubernetes.default', 'DNS:kubernetes.default.svc',
  'DNS:kubernetes.default.svc.cluster.local',
  ...Array.from({ length: 9 }, (_, i) => `IP:127.0.0.${i + 1}`), `IP:${KUBERNETES_SERVICE_IP}`,
]);

const MARKER = '.complete';

function layout(dir: string, adminToken: string, skewgateToken: string): LabPki {
  const f = (name: string): string => join(dir, name);
  return {
    dir,
    caFile: f('ca.crt'), caKeyFile: f('ca.key'),
    serverCertFile: f('apiserver.crt'), serverKeyFile: f('apiserver.key'),
    frontProxyCaFile: f('front-proxy-ca.crt'),
    frontProxyClientCertFile: f('front-proxy-client.crt'), frontProxyClientKeyFile: f('front-proxy-client.key'),
    saKeyFile: f('sa.key'), saPubFile: f('sa.pub'),
    adminCertFile: f('admin.crt'), adminKeyFile: f('admin.key'),
    gatewayCertFile: f('gateway.crt'), gatewayKeyFile: f('gateway.key'),
    tokenAuthFile: f('tokens.csv'),
    adminToken, adminTokenFile: f('admin.token'),
    skewgateToken, skewgateTokenFile: f('skewgate.token'),
  };
}

const FILES = ['ca.crt', 'ca.key', 'apiserver.crt', 'apiserver.key', 'front-proxy-ca.crt', 'front-proxy-ca.key',
  'front-proxy-client.crt', 'front-proxy-client.key', 'sa.key', 'sa.pub', 'admin.crt', 'admin.key',
  'gateway.crt', 'gateway.key', 'tokens.csv', 'admin.token', 'skewgate.token', MARKER] as const;

/** --token-auth-file lines: token,user,uid,"group1,group2". Pure. */
export function tokenAuthCsv(adminToken: string, skewgateToken: string): string {
  return `${adminToken},${ADMIN_USER},uid-${ADMIN_USER},"system:masters"\n${skewgateToken},${SKEWGATE_USER},uid-${SKEWGATE_USER},"${SKEWGATE_GROUP}"\n`;
}

async function complete(dir: string): Promise<boolean> {
  return (await filesPresent(FILES.map((n) => join(dir, n)))) && certValidFor(join(dir, 'ca.crt'), 86_400);
}

async function generate(dir: string): Promise<void> {
  const tmp = await mkdtemp(join(dir, '.gen-'));
  try {
    const ca = await issueCert({ dir: tmp, name: 'ca', subject: '/CN=skewgate-lab-ca', usage: 'ca' });
    const fpCa = await issueCert({ dir: tmp, name: 'front-proxy-ca', subject: '/CN=skewgate-lab-front-proxy-ca', usage: 'ca' });
    await issueCert({ dir: tmp, name: 'apiserver', subject: '/CN=kube-apiserver', usage: 'server', ca, sans: LAB_SANS });
    await issueCert({ dir: tmp, name: 'gateway', subject: '/CN=skewgate-gateway', usage: 'server', ca, sans: LAB_SANS });
    await issueCert({ dir: tmp, name: 'front-proxy-client', subject: `/CN=${FRONT_PROXY_CLIENT_CN}`, usage: 'client', ca: fpCa });
    await issueCert({ dir: tmp, name: 'admin', subject: `/O=system:masters/CN=${ADMIN_USER}`, usage: 'client', ca });
    await generateRsaKeyPair(join(tmp, 'sa.key'), join(tmp, 'sa.pub'));
    const adminToken = randomBytes(24).toString('hex');
    const skewgateToken = randomBytes(24).toString('hex');
    await writeFile(join(tmp, 'admin.token'), adminToken, { mode: 0o600 });
    await writeFile(join(tmp, 'skewgate.token'), skewgateToken, { mode: 0o600 });
    await writeFile(join(tmp, 'tokens.csv'), tokenAuthCsv(adminToken, skewgateToken), { mode: 0o600 });
    await writeFile(join(tmp, MARKER), `${new Date().toISOString()}\n`);
    for (const name of FILES) await rename(join(tmp, name), join(dir, name)); // the marker last
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}

/** Creates the PKI in dir, or reuses a complete one (a lock keeps concurrent callers apart). */
export async function createLabPki(dir: string): Promise<LabPki> {
  const abs = resolve(dir);
  await ensureGenerated(abs, () => complete(abs), async () => {
    await rm(join(abs, MARKER), { force: true });
    await generate(abs);
  }, 'createLabPki');
  const read = async (name: string): Promise<string> => (await readFile(join(abs, name), 'utf8')).trim();
  return layout(abs, await read('admin.token'), await read('skewgate.token'));
}
