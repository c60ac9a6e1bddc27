// `skewgate gateway-cert`: issues the gateway's serving certificate (envoy.tls.certFile/keyFile)
// from a CA the clients already trust (kubeadm: /etc/kubernetes/pki/ca.{crt,key}), with the names
// clients connect to as SANs. Node's crypto and src/pki/serving-certificate.ts do the work (no
// openssl CLI). Every problem with the flags is listed at once; nothing is half-written (each file
// is written beside its target and renamed); existing files are kept unless --force.
import { X509Certificate, createPrivateKey, generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat } from 'node:fs/promises';
import { isIP } from 'node:net';
import { join, resolve } from 'node:path';
import { EXIT_BAD_CONFIG, EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import { IssueError, issueServingCertificate, signingProblem } from '../pki/serving-certificate.js';

export interface GatewayCertOptions {
  readonly caCert: string;
  readonly caKey: string;
  readonly sans: readonly string[];
  readonly out: string;
  /** As typed: a whole number of days. */
  readonly days: string;
  readonly name: string;
  readonly force: boolean;
}

const DNS_NAME = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;
const DAY_MS = 86_400_000;
const MAX_DAYS = 3650;
// Backdated a little: a node whose clock is behind must not see a certificate from the future.
const BACKDATE_MS = 5 * 60_000;
const COMMON_NAME = 'skewgate-gateway';

/** "DNS:name", "IP:addr", or a bare name or address → the subjectAltName entry; null if invalid. Pure. */
export function sanEntry(raw: string): string | null {
  const v = raw.trim();
  const m = /^(DNS|IP):(.+)$/i.exec(v);
  const kind = m ? (m[1] as string).toUpperCase() : isIP(v) !== 0 ? 'IP' : 'DNS';
  const value = m ? (m[2] as string) : v;
  if (kind === 'IP') return isIP(value) !== 0 ? `IP:${value}` : null;
  return DNS_NAME.test(value) && value.length <= 253 ? `DNS:${value.toLowerCase()}` : null;
}

/** `--days` as typed → whole days, or a problem. Pure. */
export function parseDays(raw: string): number | string {
  if (!/^\d+$/.test(raw.trim())) return `--days ${JSON.stringify(raw)}: a whole number of days, 1 to ${MAX_DAYS}`;
  const days = Number(raw.trim());
  return days >= 1 && days <= MAX_DAYS ? days : `--days ${raw}: a whole number of days, 1 to ${MAX_DAYS}`;
}

const exists = (file: string): Promise<boolean> =>
  stat(file).then(
    () => true,
    () => false,
  );

interface Ca {
  readonly cert: X509Certificate;
  readonly key: KeyObject;
}

/** The CA certificate and key, or the problems with them. */
async function loadCa(o: GatewayCertOptions, problems: string[]): Promise<Ca | null> {
  const certPem = await readFile(o.caCert).catch((err: NodeJS.ErrnoException) => {
    problems.push(`--ca-cert ${o.caCert}: cannot read (${err.code ?? err.message})`);
    return null;
  });
  const keyPem = await readFile(o.caKey).catch((err: NodeJS.ErrnoException) => {
    problems.push(`--ca-key ${o.caKey}: cannot read (${err.code ?? err.message})`);
    return null;
  });
  let cert: X509Certificate | null = null;
  if (certPem !== null) {
    try {
      cert = new X509Certificate(certPem);
      if (!cert.ca) problems.push(`--ca-cert ${o.caCert}: not a CA certificate (basicConstraints CA:FALSE or absent)`);
      else if (Date.parse(cert.validTo) <= Date.now())
        problems.push(`--ca-cert ${o.caCert}: expired on ${new Date(cert.validTo).toISOString()}`);
    } catch {
      problems.push(`--ca-cert ${o.caCert}: not a PEM certificate`);
    }
  }
  let key: KeyObject | null = null;
  if (keyPem !== null) {
    try {
      key = createPrivateKey(keyPem);
    } catch {
      problems.push(`--ca-key ${o.caKey}: not a PEM private key (PKCS#8, PKCS#1 or SEC 1; unencrypted)`);
    }
  }
  if (key !== null) {
    const unsupported = signingProblem(key);
    if (unsupported !== null) problems.push(`--ca-key ${o.caKey}: ${unsupported}`);
  }
  if (cert !== null && key !== null && cert.ca && !cert.checkPrivateKey(key))
    problems.push(`--ca-key ${o.caKey}: not the private key of --ca-cert ${o.caCert} (their public keys differ)`);
  return cert !== null && key !== null && problems.length === 0 ? { cert, key } : null;
}

/** Writes `data` to `file` through a temporary file beside it: the file is whole or absent. */
async function writeWhole(file: string, data: string, mode: number, force: boolean): Promise<string> {
  const tmp = `${file}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`;
  const fh = await open(tmp, 'wx', mode);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  if (!force && (await exists(file))) {
    await rm(tmp, { force: true });
    throw new Error(`${file} appeared meanwhile; not replaced`);
  }
  return tmp;
}

export async function runGatewayCert(o: GatewayCertOptions): Promise<number> {
  const problems: string[] = [];
  const sans = o.sans.map((s) => [s, sanEntry(s)] as const);
  for (const [raw, entry] of sans)
    if (entry === null) problems.push(`--san ${JSON.stringify(raw)}: not a DNS name or IP address (DNS:name, IP:addr)`);
  if (o.sans.length === 0) problems.push('--san: name at least one DNS name or IP address clients connect to');
  const days = parseDays(o.days);
  if (typeof days === 'string') problems.push(days);
  if (!/^[a-z0-9][a-z0-9._-]*$/i.test(o.name)) problems.push(`--name ${JSON.stringify(o.name)}: a file name without a folder`);
  const dir = resolve(o.out);
  const certFile = join(dir, `${o.name}.crt`);
  const keyFile = join(dir, `${o.name}.key`);
  const outStat = await stat(dir).catch(() => null);
  if (outStat !== null && !outStat.isDirectory()) problems.push(`--out ${o.out}: not a folder`);
  if (!o.force) for (const f of [certFile, keyFile]) if (await exists(f)) problems.push(`${f} exists: not replaced without --force`);
  const ca = await loadCa(o, problems);
  const notBefore = new Date(Date.now() - BACKDATE_MS);
  const notAfter = new Date(Date.now() + (typeof days === 'number' ? days : 0) * DAY_MS);
  if (ca !== null && typeof days === 'number' && notAfter.getTime() > Date.parse(ca.cert.validTo)) {
    const left = Math.floor((Date.parse(ca.cert.validTo) - Date.now()) / DAY_MS);
    problems.push(
      `--days ${days}: the certificate would outlive its CA (valid until ${new Date(ca.cert.validTo).toISOString()}); at most ${left} days`,
    );
  }
  if (problems.length > 0 || ca === null) {
    process.stderr.write(
      `skewgate gateway-cert: ${problems.length} problem${problems.length === 1 ? '' : 's'}, nothing written:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT_BAD_CONFIG;
  }

  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const serial = randomBytes(16);
  serial[0] = ((serial[0] as number) & 0x7f) | 0x01; // positive, and never a leading zero byte
  let der: Buffer;
  try {
    der = issueServingCertificate({
      caCertDer: ca.cert.raw,
      caKey: ca.key,
      publicKey,
      commonName: COMMON_NAME,
      sans: sans.map(([, e]) => e as string),
      notBefore,
      notAfter,
      serial,
    });
  } catch (err) {
    if (!(err instanceof IssueError)) throw err;
    process.stderr.write(`skewgate gateway-cert: ${err.message}; nothing written\n`);
    return EXIT_PROBLEMS;
  }
  const cert = new X509Certificate(der);
  if (!cert.verify(ca.cert.publicKey) || !cert.checkIssued(ca.cert)) {
    process.stderr.write('skewgate gateway-cert: the new certificate does not verify against the CA; nothing written\n');
    return EXIT_PROBLEMS;
  }
  const keyPem = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  const tmps: string[] = [];
  try {
    await mkdir(dir, { recursive: true });
    const keyTmp = await writeWhole(keyFile, keyPem, 0o600, o.force);
    tmps.push(keyTmp);
    const certTmp = await writeWhole(certFile, cert.toString(), 0o644, o.force);
    tmps.push(certTmp);
    await rename(keyTmp, keyFile);
    await rename(certTmp, certFile);
  } catch (err) {
    await Promise.all(tmps.map((t) => rm(t, { force: true })));
    process.stderr.write(`skewgate gateway-cert: cannot write into ${dir}: ${(err as Error).message}\n`);
    return EXIT_PROBLEMS;
  }
  process.stdout.write(
    `wrote ${certFile} and ${keyFile}\n` +
      `  subjectAltName: ${cert.subjectAltName ?? '-'}\n  valid until:    ${new Date(Date.parse(cert.validTo)).toISOString()}\n` +
      `  issuer:         ${cert.issuer.replaceAll('\n', ', ')}\n` +
      'set them as envoy.tls.certFile and envoy.tls.keyFile\n',
  );
  return EXIT_OK;
}
