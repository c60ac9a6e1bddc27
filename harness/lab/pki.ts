// The lab's PKI, laid out like kubeadm's /etc/kubernetes/pki: cluster CA, apiserver serving cert,
// front-proxy CA and client, service-account key pair, admin client cert, the apiservers' client
// cert for kubelets, the scheduler's and kube-proxy's, the gateway's serving cert and a static
// token file; plus the client certificates the identity tests present (a
// limited user, a UID, a hard subject, and two that must not authenticate). Made once per run dir
// and reused while complete.
import { createHash, randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { generateRsaKeyPair, issueCert } from '../openssl.js';
import { ensurePkiSet } from '../pki-set.js';

export interface LabPki extends LabPkiFiles {
  readonly adminToken: string;
  readonly janeToken: string;
  readonly skewgateToken: string;
}

/** Where every file of the set is: known before the set is made (e.g. /pki in a container). */
export interface LabPkiFiles {
  readonly dir: string;
  /** Cluster CA: signs serving certs and client certs (--client-ca-file, --peer-ca-file). */
  readonly caFile: string;
  readonly caKeyFile: string;
  readonly serverCertFile: string;
  readonly serverKeyFile: string;
  /** --requestheader-client-ca-file */
  readonly frontProxyCaFile: string;
  /** CN=front-proxy-client: --proxy-client-cert-file, and the gateway's front-proxy identity. */
  readonly frontProxyClientCertFile: string;
  readonly frontProxyClientKeyFile: string;
  readonly saKeyFile: string;
  readonly saPubFile: string;
  /** CN=kubernetes-admin, O=system:masters */
  readonly adminCertFile: string;
  readonly adminKeyFile: string;
  /** CN=jane, O=dev-viewers, O=team-b: a limited user (lab.ts grants a Role in `default`). */
  readonly janeCertFile: string;
  readonly janeKeyFile: string;
  /** CN=bob, O=uid-testers and the UID attribute (OID 1.3.6.1.4.1.57683.2) = bob-uid-42. */
  readonly bobCertFile: string;
  readonly bobKeyFile: string;
  /** TRICKY_SUBJECT: punctuation and non-ASCII in the CN, several O values, a multi-valued RDN. */
  readonly trickyCertFile: string;
  readonly trickyKeyFile: string;
  /** Issued by the cluster CA for serverAuth only, subject as the admin's: not a client certificate. */
  readonly serverOnlyCertFile: string;
  readonly serverOnlyKeyFile: string;
  /** A clientAuth certificate (CN=kubernetes-admin, O=system:masters) from a CA nobody trusts. */
  readonly foreignCaFile: string;
  readonly foreignCertFile: string;
  readonly foreignKeyFile: string;
  /**
   * CN=kube-apiserver-kubelet-client, O=system:masters: what an apiserver presents to a kubelet
   * (--kubelet-client-certificate) for logs, exec, attach and port-forward.
   */
  readonly kubeletClientCertFile: string;
  readonly kubeletClientKeyFile: string;
  /** CN=system:kube-scheduler: the scheduler's identity (the apiservers' bootstrap RBAC binds it). */
  readonly schedulerCertFile: string;
  readonly schedulerKeyFile: string;
  /** CN=system:kube-proxy: kube-proxy's identity (bound to system:node-proxier by bootstrap RBAC). */
  readonly kubeProxyCertFile: string;
  readonly kubeProxyKeyFile: string;
  /** Envoy's downstream serving certificate (same SANs as the apiservers'). */
  readonly gatewayCertFile: string;
  readonly gatewayKeyFile: string;
  /** --token-auth-file: the admin token (system:masters), jane's and skewgate's discovery token. */
  readonly tokenAuthFile: string;
  readonly adminTokenFile: string;
  readonly janeTokenFile: string;
  readonly skewgateTokenFile: string;
}

/** The user and group of skewgate's token; lab.ts binds the group to a discovery-reader role. */
export const SKEWGATE_USER = 'skewgate';
export const SKEWGATE_GROUP = 'skewgate:discovery';
export const ADMIN_USER = 'kubernetes-admin';
export const JANE_USER = 'jane';
export const JANE_GROUPS: readonly string[] = Object.freeze(['dev-viewers', 'team-b']);
export const BOB_USER = 'bob';
export const BOB_GROUP = 'uid-testers';
export const BOB_UID = 'bob-uid-42';
/** kube-apiserver reads a user's UID from this subject attribute (AllowParsingUserUIDFromCertAuth). */
export const KUBERNETES_UID_OID = '1.3.6.1.4.1.57683.2';
/**
 * openssl -subj form (`\+` is a literal plus, a bare `+` joins attributes into one RDN). The CN
 * carries a comma, a plus and non-ASCII letters; the two O values of the multi-valued RDN are
 * written out of DER order (DER sorts a SET), and an OU sits among the O values.
 */
export const TRICKY_SUBJECT = "/C=DE/O=zz-team+O=aa-team/O=Ünïcødé Örg/OU=not-a-group/O=dev-viewers/CN=Zoë O'Brien, Jr. \\+ 1";
export const FRONT_PROXY_CLIENT_CN = 'front-proxy-client';
export const KUBELET_CLIENT_CN = 'kube-apiserver-kubelet-client';
/** The users kube-apiserver's bootstrap RBAC binds: system:kube-scheduler, system:kube-proxy (system:node-proxier). */
export const SCHEDULER_USER = 'system:kube-scheduler';
export const KUBE_PROXY_USER = 'system:kube-proxy';
/** First address of --service-cluster-ip-range (10.96.0.0/16): the `kubernetes` Service IP. */
export const KUBERNETES_SERVICE_IP = '10.96.0.1';
/** Lab apiservers and gateways may use 127.0.0.1 up to this address's last byte. */
export const LAB_MAX_LOOPBACK = 16;

/** Every loopback address a lab apiserver may use, and the names in-cluster clients would use. */
export const LAB_SANS: readonly string[] = Object.freeze([
  'DNS:localhost',
  'DNS:kubernetes',
  'DNS:kubernetes.default',
  'DNS:kubernetes.default.svc',
  'DNS:kubernetes.default.svc.cluster.local',
  ...Array.from({ length: LAB_MAX_LOOPBACK }, (_, i) => `IP:127.0.0.${i + 1}`),
  `IP:${KUBERNETES_SERVICE_IP}`,
]);

export interface LabPkiOptions {
  /**
   * subjectAltName entries ("DNS:kas-1", "IP:172.31.250.11") added to the serving certificates
   * (apiserver and gateway) after LAB_SANS, e.g. the names of a compose network.
   */
  readonly extraSans?: readonly string[];
}

const MARKER = '.complete';
/**
 * Written into the marker: a set made by an older layout (other SANs, fewer certificates) is
 * made again even when every file it had is present.
 */
const LAYOUT = 'skewgate-lab-pki/4';

/** The file paths of a set in dir (nothing is read or written). */
export function labPkiFiles(dir: string): LabPkiFiles {
  const f = (name: string): string => join(dir, name);
  return {
    dir,
    caFile: f('ca.crt'),
    caKeyFile: f('ca.key'),
    serverCertFile: f('apiserver.crt'),
    serverKeyFile: f('apiserver.key'),
    frontProxyCaFile: f('front-proxy-ca.crt'),
    frontProxyClientCertFile: f('front-proxy-client.crt'),
    frontProxyClientKeyFile: f('front-proxy-client.key'),
    saKeyFile: f('sa.key'),
    saPubFile: f('sa.pub'),
    adminCertFile: f('admin.crt'),
    adminKeyFile: f('admin.key'),
    janeCertFile: f('jane.crt'),
    janeKeyFile: f('jane.key'),
    bobCertFile: f('bob.crt'),
    bobKeyFile: f('bob.key'),
    trickyCertFile: f('tricky.crt'),
    trickyKeyFile: f('tricky.key'),
    serverOnlyCertFile: f('server-only.crt'),
    serverOnlyKeyFile: f('server-only.key'),
    foreignCaFile: f('foreign-ca.crt'),
    foreignCertFile: f('foreign.crt'),
    foreignKeyFile: f('foreign.key'),
    kubeletClientCertFile: f('apiserver-kubelet-client.crt'),
    kubeletClientKeyFile: f('apiserver-kubelet-client.key'),
    schedulerCertFile: f('kube-scheduler.crt'),
    schedulerKeyFile: f('kube-scheduler.key'),
    kubeProxyCertFile: f('kube-proxy.crt'),
    kubeProxyKeyFile: f('kube-proxy.key'),
    gatewayCertFile: f('gateway.crt'),
    gatewayKeyFile: f('gateway.key'),
    tokenAuthFile: f('tokens.csv'),
    adminTokenFile: f('admin.token'),
    janeTokenFile: f('jane.token'),
    skewgateTokenFile: f('skewgate.token'),
  };
}

/** Every file of a complete set; the marker last (generate() moves them in this order). */
export const LAB_PKI_FILES: readonly string[] = Object.freeze([
  'ca.crt',
  'ca.key',
  'apiserver.crt',
  'apiserver.key',
  'front-proxy-ca.crt',
  'front-proxy-ca.key',
  'front-proxy-client.crt',
  'front-proxy-client.key',
  'sa.key',
  'sa.pub',
  'admin.crt',
  'admin.key',
  'jane.crt',
  'jane.key',
  'bob.crt',
  'bob.key',
  'tricky.crt',
  'tricky.key',
  'server-only.crt',
  'server-only.key',
  'foreign-ca.crt',
  'foreign-ca.key',
  'foreign.crt',
  'foreign.key',
  'apiserver-kubelet-client.crt',
  'apiserver-kubelet-client.key',
  'kube-scheduler.crt',
  'kube-scheduler.key',
  'kube-proxy.crt',
  'kube-proxy.key',
  'gateway.crt',
  'gateway.key',
  'tokens.csv',
  'admin.token',
  'jane.token',
  'skewgate.token',
  MARKER,
]);

export interface StaticToken {
  readonly token: string;
  readonly user: string;
  readonly uid: string;
  readonly groups: readonly string[];
}

/** The static tokens of the lab, in --token-auth-file order. Pure. */
export function labStaticTokens(t: { admin: string; jane: string; skewgate: string }): StaticToken[] {
  return [
    { token: t.admin, user: ADMIN_USER, uid: `uid-${ADMIN_USER}`, groups: ['system:masters'] },
    { token: t.jane, user: JANE_USER, uid: `uid-${JANE_USER}`, groups: [...JANE_GROUPS] },
    { token: t.skewgate, user: SKEWGATE_USER, uid: `uid-${SKEWGATE_USER}`, groups: [SKEWGATE_GROUP] },
  ];
}

/** --token-auth-file lines: token,user,uid,"group1,group2". Pure. */
export function tokenAuthCsv(tokens: readonly StaticToken[]): string {
  for (const t of tokens) {
    for (const v of [t.token, t.user, t.uid, ...t.groups])
      if (/[",\n\r]/.test(v)) throw new Error(`token file value ${JSON.stringify(v)} needs CSV quoting`);
  }
  return tokens.map((t) => `${t.token},${t.user},${t.uid},"${t.groups.join(',')}"\n`).join('');
}

/**
 * openssl config (issueCert's utf8Config) for a client certificate whose subject the default
 * config cannot write: -subj read as UTF-8 (not Latin-1), and a name for kube-apiserver's UID
 * attribute (openssl skips an attribute type it has no name for). Pure.
 */
export function subjectCertOpensslConfig(): string {
  return [
    'oid_section = oids',
    '[oids]',
    `kubernetesUID = ${KUBERNETES_UID_OID}`,
    '[req]',
    'distinguished_name = dn',
    'prompt = no',
    'utf8 = yes',
    'string_mask = utf8only',
    '[dn]',
    '[ext]',
    'basicConstraints = critical,CA:FALSE',
    'keyUsage = critical,digitalSignature',
    'extendedKeyUsage = clientAuth',
    '',
  ].join('\n');
}

/**
 * The marker's third word: a digest of the extra SANs ("" without any, as markers written before
 * extra SANs existed), so that a set made for other names is made again.
 */
export function extraSansTag(extraSans: readonly string[]): string {
  return extraSans.length === 0 ? '' : `sans-${createHash('sha256').update(extraSans.join('\n')).digest('hex').slice(0, 16)}`;
}

/** Throws unless every entry is openssl's "DNS:name" or "IP:address" form. Pure. */
export function checkSanEntries(sans: readonly string[]): void {
  for (const san of sans) {
    if (!/^(DNS:[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?|IP:[0-9A-Fa-f.:]+)$/.test(san))
      throw new Error(`subjectAltName "${san}": write DNS:name or IP:address`);
  }
}

/** A complete set is reused only when its marker names this layout and the same extra SANs. */
async function sameLayout(dir: string, extraSans: readonly string[]): Promise<boolean> {
  const marker = (await readFile(join(dir, MARKER), 'utf8').catch(() => '')).trim().split(' ');
  return marker[0] === LAYOUT && (marker[2] ?? '') === extraSansTag(extraSans);
}

/** Writes the set into tmp, the marker last. */
async function generate(tmp: string, extraSans: readonly string[]): Promise<void> {
  const ca = await issueCert({ dir: tmp, name: 'ca', subject: '/CN=skewgate-lab-ca', usage: 'ca' });
  const fpCa = await issueCert({ dir: tmp, name: 'front-proxy-ca', subject: '/CN=skewgate-lab-front-proxy-ca', usage: 'ca' });
  const foreignCa = await issueCert({ dir: tmp, name: 'foreign-ca', subject: '/CN=not-the-cluster-ca', usage: 'ca' });
  const sans = [...LAB_SANS, ...extraSans];
  await issueCert({ dir: tmp, name: 'apiserver', subject: '/CN=kube-apiserver', usage: 'server', ca, sans });
  await issueCert({ dir: tmp, name: 'gateway', subject: '/CN=skewgate-gateway', usage: 'server', ca, sans });
  await issueCert({ dir: tmp, name: 'front-proxy-client', subject: `/CN=${FRONT_PROXY_CLIENT_CN}`, usage: 'client', ca: fpCa });
  await issueCert({ dir: tmp, name: 'admin', subject: `/O=system:masters/CN=${ADMIN_USER}`, usage: 'client', ca });
  await issueCert({
    dir: tmp,
    name: 'jane',
    subject: `${JANE_GROUPS.map((g) => `/O=${g}`).join('')}/CN=${JANE_USER}`,
    usage: 'client',
    ca,
  });
  await issueCert({
    dir: tmp,
    name: 'bob',
    subject: `/O=${BOB_GROUP}/CN=${BOB_USER}/kubernetesUID=${BOB_UID}`,
    usage: 'client',
    ca,
    utf8Config: subjectCertOpensslConfig(),
  });
  await issueCert({ dir: tmp, name: 'tricky', subject: TRICKY_SUBJECT, usage: 'client', ca, utf8Config: subjectCertOpensslConfig() });
  await issueCert({ dir: tmp, name: 'server-only', subject: `/O=system:masters/CN=${ADMIN_USER}`, usage: 'server', ca });
  await issueCert({ dir: tmp, name: 'foreign', subject: `/O=system:masters/CN=${ADMIN_USER}`, usage: 'client', ca: foreignCa });
  await issueCert({
    dir: tmp,
    name: 'apiserver-kubelet-client',
    subject: `/O=system:masters/CN=${KUBELET_CLIENT_CN}`,
    usage: 'client',
    ca,
  });
  await issueCert({ dir: tmp, name: 'kube-scheduler', subject: `/CN=${SCHEDULER_USER}`, usage: 'client', ca });
  await issueCert({ dir: tmp, name: 'kube-proxy', subject: `/CN=${KUBE_PROXY_USER}`, usage: 'client', ca });
  await generateRsaKeyPair(join(tmp, 'sa.key'), join(tmp, 'sa.pub'));
  const tokens = {
    admin: randomBytes(24).toString('hex'),
    jane: randomBytes(24).toString('hex'),
    skewgate: randomBytes(24).toString('hex'),
  };
  await writeFile(join(tmp, 'admin.token'), tokens.admin, { mode: 0o600 });
  await writeFile(join(tmp, 'jane.token'), tokens.jane, { mode: 0o600 });
  await writeFile(join(tmp, 'skewgate.token'), tokens.skewgate, { mode: 0o600 });
  await writeFile(join(tmp, 'tokens.csv'), tokenAuthCsv(labStaticTokens(tokens)), { mode: 0o600 });
  const tag = extraSansTag(extraSans);
  await writeFile(join(tmp, MARKER), `${LAYOUT} ${new Date().toISOString()}${tag === '' ? '' : ` ${tag}`}\n`);
}

/**
 * Creates the PKI in dir, or reuses a complete one made with the same extra SANs (a lock keeps
 * concurrent callers apart). Every file belongs to the calling user; keys and tokens are readable
 * by that user only (openssl and writeFile create them 0600), certificates by everyone.
 */
export async function createLabPki(dir: string, options: LabPkiOptions = {}): Promise<LabPki> {
  const extraSans = [...(options.extraSans ?? [])];
  checkSanEntries(extraSans);
  const abs = resolve(dir);
  await ensurePkiSet(abs, {
    files: LAB_PKI_FILES,
    caFile: 'ca.crt',
    label: 'createLabPki',
    reusable: (d) => sameLayout(d, extraSans),
    generate: (tmp) => generate(tmp, extraSans),
  });
  const read = async (name: string): Promise<string> => (await readFile(join(abs, name), 'utf8')).trim();
  return {
    ...labPkiFiles(abs),
    adminToken: await read('admin.token'),
    janeToken: await read('jane.token'),
    skewgateToken: await read('skewgate.token'),
  };
}
