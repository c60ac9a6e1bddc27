// The TLS checks behind `skewgate validate` and `skewgate serve`: the gateway's serving certificate
// and the front-proxy safety check. The certificate files are read here (I/O at the edge), the
// judgement is pure (servingCertProblems, frontProxyProblems).
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { ConfigProblem } from './core/problems.js';
import type { ConfigUse } from './core/checks.js';
import type { FileFields } from './core/files.js';
import { servingPair } from './core/files.js';

const EKU_SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const EKU_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const EKU_ANY = '2.5.29.37.0';

const CA_PATH = 'envoy.tls.clientCaFile';
const CERT_PATH = 'envoy.upstreamClientCert.certFile';
const KEY_PATH = 'envoy.upstreamClientCert.keyFile';
const SERVING_CERT_PATH = 'envoy.tls.certFile';
const SERVING_KEY_PATH = 'envoy.tls.keyFile';

/** The parsed files the check judges. */
export interface FrontProxyMaterial {
  /** Every certificate of envoy.tls.clientCaFile. */
  readonly clientCas: readonly X509Certificate[];
  /** envoy.upstreamClientCert.certFile: the leaf first, then any intermediates Envoy also presents. */
  readonly chain: readonly X509Certificate[];
}

function issuedBy(cert: X509Certificate, ca: X509Certificate): boolean {
  try {
    return cert.checkIssued(ca) && cert.verify(ca.publicKey);
  } catch {
    return false;
  }
}

/**
 * Why the front-proxy certificate is unsafe or unusable, at time `now` (ms). Pure.
 * - Issued by a client CA: the apiservers' x509 authenticator would accept it as a client
 *   certificate, so a request reaching them without X-Remote-User (a gap in the gateway) would
 *   authenticate as the front proxy's CN instead of failing. Intermediates count too: Envoy
 *   presents them and the apiserver builds its chain through them.
 * - No clientAuth usage: the apiservers (Go's x509, ExtKeyUsageClientAuth) refuse it.
 * - Expired or not yet valid: every identity-stating request would fail authentication.
 */
export function frontProxyProblems(m: FrontProxyMaterial, now: number): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const leaf = m.chain[0];
  if (leaf === undefined) return [{ path: CERT_PATH, message: 'holds no certificate' }];
  const name = (c: X509Certificate): string => JSON.stringify(c.subject.replaceAll('\n', ', '));
  const cn =
    leaf.subject
      .split('\n')
      .filter((l) => l.startsWith('CN='))
      .pop()
      ?.slice(3) ?? '';
  m.chain.forEach((cert, i) => {
    const ca = m.clientCas.find((c) => issuedBy(cert, c));
    if (ca === undefined) return;
    const what = i === 0 ? 'the front-proxy client certificate' : `the intermediate ${name(cert)} presented with it`;
    problems.push({
      path: CERT_PATH,
      message: `${what} is issued by ${name(ca)}, a CA in ${CA_PATH}: an apiserver would accept it as an ordinary client certificate, so a request whose identity is not stated would authenticate as the front proxy's own user ${JSON.stringify(cn)} instead of failing. Issue it from a separate front-proxy CA (the apiservers' --requestheader-client-ca-file)`,
    });
  });
  // No extended key usage at all means any usage, to Go as to BoringSSL.
  const eku = leaf.keyUsage ?? [];
  if (eku.length > 0 && !eku.includes(EKU_CLIENT_AUTH) && !eku.includes(EKU_ANY)) {
    problems.push({
      path: CERT_PATH,
      message: `the front-proxy client certificate lacks the clientAuth extended key usage (it has ${eku.join(', ')}): the apiservers' requestheader authenticator refuses it`,
    });
  }
  const validTo = Date.parse(leaf.validTo);
  const validFrom = Date.parse(leaf.validFrom);
  if (now > validTo)
    problems.push({ path: CERT_PATH, message: `the front-proxy client certificate expired on ${new Date(validTo).toISOString()}` });
  if (now < validFrom)
    problems.push({
      path: CERT_PATH,
      message: `the front-proxy client certificate is not valid before ${new Date(validFrom).toISOString()}`,
    });
  return problems;
}

/**
 * The gateway's serving certificate (the first in envoy.tls.certFile): usable for a TLS server
 * and valid now. Its names are the operator's choice (the ones clients connect to); they are
 * reported by `skewgate validate`, not judged.
 */
export function servingCertProblems(chain: readonly X509Certificate[], now: number): ConfigProblem[] {
  const leaf = chain[0];
  if (leaf === undefined) return [{ path: SERVING_CERT_PATH, message: 'holds no certificate' }];
  const problems: ConfigProblem[] = [];
  const eku = leaf.keyUsage ?? [];
  if (eku.length > 0 && !eku.includes(EKU_SERVER_AUTH) && !eku.includes(EKU_ANY)) {
    problems.push({
      path: SERVING_CERT_PATH,
      message: `the gateway's serving certificate lacks the serverAuth extended key usage (it has ${eku.join(', ')}): clients refuse it`,
    });
  }
  if (leaf.subjectAltName === undefined) {
    problems.push({
      path: SERVING_CERT_PATH,
      message: "the gateway's serving certificate has no subjectAltName: kubectl and client-go (Go's TLS) verify names only there",
    });
  }
  if (now > Date.parse(leaf.validTo))
    problems.push({
      path: SERVING_CERT_PATH,
      message: `the gateway's serving certificate expired on ${new Date(Date.parse(leaf.validTo)).toISOString()}`,
    });
  if (now < Date.parse(leaf.validFrom))
    problems.push({
      path: SERVING_CERT_PATH,
      message: `the gateway's serving certificate is not valid before ${new Date(Date.parse(leaf.validFrom)).toISOString()}`,
    });
  return problems;
}

/** Every certificate of a PEM file, or the problem reading it. */
async function readCertificates(path: string, file: string, what: string): Promise<X509Certificate[] | ConfigProblem> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return { path, message: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  const blocks = text.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) return { path, message: `${file} holds no PEM certificate (${what})` };
  try {
    return blocks.map((b) => new X509Certificate(b));
  } catch (err) {
    return { path, message: `${file}: a certificate does not parse: ${(err as Error).message}` };
  }
}

async function keyProblem(path: string, file: string, leaf: X509Certificate | undefined, certPath: string): Promise<ConfigProblem | null> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    return { path, message: `cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  }
  try {
    const key = createPrivateKey(pem);
    if (leaf !== undefined && !leaf.checkPrivateKey(key)) return { path, message: `${file} is not the private key of ${certPath}` };
  } catch (err) {
    return { path, message: `${file} is not a PEM private key: ${(err as Error).message}` };
  }
  return null;
}

/**
 * The serving certificate and key of the gateway: every problem. None without them: a config for
 * `serve` need not name them, and one for Envoy is refused by its validation first.
 */
export async function checkServingTls(config: FileFields, now: number = Date.now()): Promise<ConfigProblem[]> {
  const pair = servingPair(config);
  if (pair === undefined) return [];
  const chain = await readCertificates(SERVING_CERT_PATH, pair.certFile, "the gateway's serving certificate");
  if (!Array.isArray(chain)) return [chain];
  const key = await keyProblem(SERVING_KEY_PATH, pair.keyFile, chain[0], SERVING_CERT_PATH);
  return [...servingCertProblems(chain, now), ...(key === null ? [] : [key])];
}

/**
 * Reads the client CA bundle and the front-proxy certificate and key, and lists every problem.
 * Nothing to check without envoy.tls.clientCaFile (no identity is stated then); the config schema
 * already demands upstreamClientCert with it.
 */
export async function checkFrontProxyTls(
  config: FileFields,
  now: number = Date.now(),
  opts: { readonly key?: boolean } = {},
): Promise<ConfigProblem[]> {
  const caFile = config.envoy.tls.clientCaFile;
  const client = config.envoy.upstreamClientCert;
  if (caFile === undefined || client === undefined) return [];
  const [cas, chain] = await Promise.all([
    readCertificates(CA_PATH, caFile, 'the client CA bundle'),
    readCertificates(CERT_PATH, client.certFile, 'the front-proxy client certificate'),
  ]);
  const problems: ConfigProblem[] = [];
  if (!Array.isArray(cas)) problems.push(cas);
  if (!Array.isArray(chain)) problems.push(chain);
  if (Array.isArray(chain)) problems.push(...frontProxyProblems({ clientCas: Array.isArray(cas) ? cas : [], chain }, now));
  if (opts.key === false) return problems;
  const key = await keyProblem(KEY_PATH, client.keyFile, Array.isArray(chain) ? chain[0] : undefined, CERT_PATH);
  if (key !== null) problems.push(key);
  return problems;
}

/** The Cluster API Runtime Extension's certificate and key (gate.runtimeExtension): skewgate serves them itself. */
export async function checkRuntimeExtensionTls(config: FileFields, now: number = Date.now()): Promise<ConfigProblem[]> {
  const pair = config.gate?.runtimeExtension;
  if (pair === undefined) return [];
  const certPath = 'gate.runtimeExtension.certFile';
  const chain = await readCertificates(certPath, pair.certFile, "the Runtime Extension's serving certificate");
  if (!Array.isArray(chain)) return [chain];
  const problems: ConfigProblem[] = [];
  const leaf = chain[0];
  if (leaf === undefined) problems.push({ path: certPath, message: 'holds no certificate' });
  else if (now > Date.parse(leaf.validTo))
    problems.push({ path: certPath, message: `expired on ${new Date(Date.parse(leaf.validTo)).toISOString()}: Cluster API refuses it` });
  const key = await keyProblem('gate.runtimeExtension.keyFile', pair.keyFile, leaf, certPath);
  return key === null ? problems : [...problems, key];
}

/**
 * The TLS material a use acts on. `serve`: the front-proxy certificate against the client CA,
 * before any identity is stated; public files only (skewgate needs neither Envoy's serving key nor
 * the front-proxy key, and may run where they are not) — but for the Runtime Extension's pair, which it serves itself. `envoy-config`: none (Envoy reads them at
 * its start, and where the bootstrap is rendered they may not be yet). `validate`: every Envoy TLS
 * file, keys included.
 */
export async function tlsProblems(config: FileFields, use: ConfigUse, now: number = Date.now()): Promise<ConfigProblem[]> {
  switch (use) {
    case 'serve':
      return [...(await checkFrontProxyTls(config, now, { key: false })), ...(await checkRuntimeExtensionTls(config, now))];
    case 'envoy-config':
      return [];
    case 'validate':
      return [
        ...(await checkServingTls(config, now)),
        ...(await checkFrontProxyTls(config, now)),
        ...(await checkRuntimeExtensionTls(config, now)),
      ];
  }
}
