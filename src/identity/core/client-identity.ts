// From Envoy's x-forwarded-client-cert to the identity kube-apiserver would have given the client
// had it connected directly (x509 authenticator: user = CN, groups = O, UID from the Kubernetes
// UID attribute, extra credential-id = the certificate's SHA-256), or the reason it cannot be
// stated. Envoy has verified the certificate already; skewgate verifies it again against the same
// CA bundle, so that no Envoy configuration (a custom one forwarding a client's XFCC, say) can
// make skewgate state an identity from a certificate nobody verified. Pure: the clock is passed in.
import { createHash, X509Certificate } from 'node:crypto';
import { goSubject, OID_KUBERNETES_UID, SubjectParseError, subjectAttributes } from './x509-subject.js';
import { parseXfcc } from './xfcc.js';

/** kube-apiserver's user.CredentialIDKey; the x509 authenticator sets it to "X509SHA256=<hex>". */
export const CREDENTIAL_ID_EXTRA = 'authentication.kubernetes.io/credential-id';

const EKU_CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const EKU_ANY = '2.5.29.37.0';
/** Longer chains than this are not built (Envoy's default verify depth is 100; real client chains are 1-2). */
const MAX_CHAIN = 8;

/** The user an apiserver is told about, as front-proxy headers carry it. */
export interface ClientIdentity {
  readonly user: string;
  /** The Kubernetes UID attribute of the subject, when the certificate has one. */
  readonly uid: string | null;
  readonly groups: readonly string[];
  readonly extra: readonly (readonly [key: string, values: readonly string[]])[];
  /** SHA-256 of the leaf certificate's DER, lower-case hex. */
  readonly fingerprint: string;
}

export type IdentityResult =
  /** No client certificate: whatever credential the request carries goes to the apiserver as is. */
  | { readonly kind: 'none' }
  | { readonly kind: 'stated'; readonly identity: ClientIdentity }
  /** A certificate was presented but its identity cannot be stated faithfully: 401, never a guess. */
  | { readonly kind: 'unstated'; readonly problem: string };

/** The CA certificates client certificates must chain to (the cluster's --client-ca-file). */
export interface ClientTrust {
  readonly cas: readonly X509Certificate[];
  /** Where they came from, for messages. */
  readonly source: string;
}

const NONE: IdentityResult = Object.freeze({ kind: 'none' });

function unstated(problem: string): IdentityResult {
  return { kind: 'unstated', problem };
}

/** Every certificate of a PEM text, in order. Throws when a block does not parse. */
export function parsePemCertificates(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]*?-----END CERTIFICATE-----/g) ?? [];
  return blocks.map((b) => new X509Certificate(b));
}

function decodePem(field: string, value: string): X509Certificate[] | string {
  let pem: string;
  try {
    pem = decodeURIComponent(value);
  } catch {
    return `the ${field} field of x-forwarded-client-cert is not URL-encoded PEM`;
  }
  try {
    const certs = parsePemCertificates(pem);
    return certs.length > 0 ? certs : `the ${field} field of x-forwarded-client-cert holds no certificate`;
  } catch (err) {
    return `the ${field} field of x-forwarded-client-cert does not parse: ${(err as Error).message}`;
  }
}

function issuedBy(cert: X509Certificate, issuer: X509Certificate): boolean {
  try {
    return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
  } catch {
    return false;
  }
}

/** leaf → … → a trusted CA, through the intermediates the client sent; null if there is none. */
function buildChain(leaf: X509Certificate, intermediates: readonly X509Certificate[], trust: ClientTrust): X509Certificate[] | null {
  const chain = [leaf];
  let current = leaf;
  for (let depth = 0; depth < MAX_CHAIN; depth++) {
    const root = trust.cas.find((ca) => issuedBy(current, ca));
    if (root !== undefined) return [...chain, root];
    const next = intermediates.find((c) => c.ca && !chain.includes(c) && issuedBy(current, c));
    if (next === undefined) return null;
    chain.push(next);
    current = next;
  }
  return null;
}

/** Go's checkChainForKeyUsage for ClientAuth: every certificate that lists usages must allow it. */
function allowsClientAuth(chain: readonly X509Certificate[]): boolean {
  return chain.every((c) => {
    const eku = c.keyUsage;
    return eku === undefined || eku.length === 0 || eku.includes(EKU_CLIENT_AUTH) || eku.includes(EKU_ANY);
  });
}

/**
 * HTTP drops leading and trailing whitespace of a field value and cannot carry control
 * characters: such a value would reach the apiserver as another name (" admin" as "admin").
 */
function headerSafe(v: string): boolean {
  // eslint-disable-next-line no-control-regex
  return !/[\u0000-\u001f\u007f]/.test(v) && v.trim() === v && v.length > 0;
}

/** The identity of a verified leaf, or why it cannot be stated. Mirrors kube-apiserver's CommonNameUserConversion. */
function identityOf(leaf: X509Certificate): IdentityResult {
  let subject;
  try {
    subject = goSubject(subjectAttributes(new Uint8Array(leaf.raw)));
  } catch (err) {
    if (err instanceof SubjectParseError)
      return unstated(`the certificate subject cannot be read as kube-apiserver reads it: ${err.message}`);
    throw err;
  }
  // kube-apiserver ignores a certificate without a CN and tries the next authenticator; the
  // gateway cannot hand the request on as if no certificate were there, so it refuses.
  if (subject.commonName === '') return unstated('the client certificate has no common name (CN), so it names no user');
  const uids = subject.attributes.filter((a) => a.oid === OID_KUBERNETES_UID).map((a) => a.value);
  if (uids.length > 1) return unstated(`the client certificate carries ${uids.length} UID attributes; kube-apiserver accepts one`);
  const uid = uids[0] ?? null;
  if (uid === '') return unstated('the client certificate carries an empty UID attribute');
  const stated: (readonly [what: string, value: string])[] = [
    ['common name', subject.commonName],
    ...subject.organization.map((o) => ['organization', o] as const),
  ];
  if (uid !== null) stated.push(['UID', uid]);
  for (const [what, v] of stated) {
    if (!headerSafe(v))
      return unstated(
        `the client certificate's ${what} ${JSON.stringify(v)} cannot be carried in a header unchanged (empty, surrounding whitespace or control characters)`,
      );
  }
  const fingerprint = createHash('sha256').update(leaf.raw).digest('hex');
  return {
    kind: 'stated',
    identity: {
      user: subject.commonName,
      uid,
      groups: subject.organization,
      extra: [[CREDENTIAL_ID_EXTRA, [`X509SHA256=${fingerprint}`]]],
      fingerprint,
    },
  };
}

/** A verified certificate's identity and the window in which the verification holds. */
interface Verified {
  readonly result: IdentityResult;
  readonly notBefore: number;
  readonly notAfter: number;
}

/** Verification without the clock: the chain, usages and subject; the validity window is returned. */
function verify(xfcc: string, trust: ClientTrust | null): Verified | IdentityResult {
  const parsed = parseXfcc(xfcc);
  if (!parsed.ok) return unstated(`x-forwarded-client-cert is malformed: ${parsed.problem}`);
  if (parsed.elements.length !== 1)
    return unstated(`x-forwarded-client-cert holds ${parsed.elements.length} elements; the gateway's Envoy sets exactly one`);
  const element = parsed.elements[0] as ReadonlyMap<string, string>;
  const certField = element.get('cert');
  if (certField === undefined || certField === '')
    return unstated('x-forwarded-client-cert carries no Cert field (Envoy must set cert: true)');
  if (trust === null) return unstated('skewgate has no client CA (envoy.tls.clientCaFile) to verify the client certificate against');
  const leafs = decodePem('Cert', certField);
  if (typeof leafs === 'string') return unstated(leafs);
  const leaf = leafs[0] as X509Certificate;
  const chainField = element.get('chain');
  const sent = chainField === undefined || chainField === '' ? [] : decodePem('Chain', chainField);
  if (typeof sent === 'string') return unstated(sent);
  const chain = buildChain(
    leaf,
    sent.filter((c) => c.fingerprint256 !== leaf.fingerprint256),
    trust,
  );
  if (chain === null) return unstated(`the client certificate is not issued by a CA in ${trust.source}`);
  if (!allowsClientAuth(chain))
    return unstated('the client certificate (or a CA above it) does not allow client authentication (extended key usage)');
  const result = identityOf(leaf);
  if (result.kind !== 'stated') return result;
  return {
    result,
    notBefore: Math.max(...chain.map((c) => Date.parse(c.validFrom))),
    notAfter: Math.min(...chain.map((c) => Date.parse(c.validTo))),
  };
}

function atTime(v: Verified, now: number): IdentityResult {
  if (now < v.notBefore || now > v.notAfter) return unstated('the client certificate (or a CA above it) is expired or not yet valid');
  return v.result;
}

/** The identity behind an XFCC header at time `now` (ms). No header: 'none'. */
export function stateClientIdentity(xfcc: string | undefined, trust: ClientTrust | null, now: number): IdentityResult {
  if (xfcc === undefined || xfcc === '') return NONE;
  const v = verify(xfcc, trust);
  return 'kind' in v ? v : atTime(v, now);
}

/**
 * stateClientIdentity with the verification of each certificate done once: a client sends the
 * same certificate on every request, and a signature check costs tens of microseconds. Bound to
 * one trust bundle (a new bundle means a new verifier); only the clock is checked per request.
 */
export class ClientIdentityVerifier {
  private readonly cache = new Map<string, Verified | IdentityResult>();

  constructor(
    readonly trust: ClientTrust | null,
    private readonly maxEntries = 4096,
  ) {}

  state(xfcc: string | undefined, now: number): IdentityResult {
    if (xfcc === undefined || xfcc === '') return NONE;
    let v = this.cache.get(xfcc);
    if (v === undefined) {
      v = verify(xfcc, this.trust);
      if (this.cache.size >= this.maxEntries) this.cache.delete(this.cache.keys().next().value as string);
      this.cache.set(xfcc, v);
    }
    return 'kind' in v ? v : atTime(v, now);
  }

  get size(): number {
    return this.cache.size;
  }
}
