// A TLS serving certificate signed by a CA, without the openssl CLI: the X.509 structures from
// @peculiar/asn1-x509 (DER encoding), the signature from Node's crypto with the CA's own key. No
// file or clock is touched here: the keys, the validity and the serial number come in, the DER
// certificate goes out, and the CLI (src/cli/gateway-cert.ts) does the reading and writing.
import { AsnConvert, OctetString } from '@peculiar/asn1-schema';
import {
  AlgorithmIdentifier,
  AttributeTypeAndValue,
  AttributeValue,
  AuthorityKeyIdentifier,
  BasicConstraints,
  Certificate,
  ExtendedKeyUsage,
  Extension,
  Extensions,
  GeneralName,
  KeyIdentifier,
  KeyUsage,
  KeyUsageFlags,
  Name,
  RelativeDistinguishedName,
  SubjectAlternativeName,
  SubjectKeyIdentifier,
  SubjectPublicKeyInfo,
  TBSCertificate,
  Validity,
  Version,
  id_ce_authorityKeyIdentifier,
  id_ce_basicConstraints,
  id_ce_extKeyUsage,
  id_ce_keyUsage,
  id_ce_subjectAltName,
  id_ce_subjectKeyIdentifier,
  id_kp_serverAuth,
} from '@peculiar/asn1-x509';
import { createHash, sign, type KeyObject } from 'node:crypto';
import { certificateNames } from './der.js';

export class IssueError extends Error {}

export interface ServingCertificateRequest {
  /** The CA certificate, DER. */
  readonly caCertDer: Uint8Array;
  /** The CA's private key (checked against the certificate by the caller). */
  readonly caKey: KeyObject;
  /** The new certificate's public key. */
  readonly publicKey: KeyObject;
  readonly commonName: string;
  /** "DNS:name" or "IP:addr" entries (sanEntry's form). */
  readonly sans: readonly string[];
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** 1–20 bytes, positive (the first bit clear); random in practice. */
  readonly serial: Uint8Array;
}

interface Signer {
  readonly algorithm: AlgorithmIdentifier;
  readonly digest: string | null;
}

// RFC 5758 (ECDSA) and RFC 4055 (RSA) signature algorithms; RFC 8410 (Ed25519).
function signerFor(key: KeyObject): Signer {
  const type = key.asymmetricKeyType;
  if (type === 'rsa')
    return { algorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.113549.1.1.11', parameters: null }), digest: 'sha256' };
  if (type === 'ec') {
    const curve = key.asymmetricKeyDetails?.namedCurve;
    if (curve === 'prime256v1') return { algorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.10045.4.3.2' }), digest: 'sha256' };
    if (curve === 'secp384r1') return { algorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.10045.4.3.3' }), digest: 'sha384' };
    if (curve === 'secp521r1') return { algorithm: new AlgorithmIdentifier({ algorithm: '1.2.840.10045.4.3.4' }), digest: 'sha512' };
    throw new IssueError(`an EC key on curve ${curve ?? '?'} is not one skewgate signs with (P-256, P-384, P-521)`);
  }
  if (type === 'ed25519') return { algorithm: new AlgorithmIdentifier({ algorithm: '1.3.101.112' }), digest: null };
  throw new IssueError(`a ${type ?? 'unknown'} key is not one skewgate signs with (RSA, ECDSA, Ed25519)`);
}

/** Why skewgate cannot sign with this key, or null when it can. */
export function signingProblem(key: KeyObject): string | null {
  try {
    signerFor(key);
    return null;
  } catch (err) {
    if (err instanceof IssueError) return err.message;
    throw err;
  }
}

const extension = (extnID: string, critical: boolean, value: unknown): Extension =>
  new Extension({ extnID, critical, extnValue: new OctetString(AsnConvert.serialize(value)) });

/** RFC 5280 4.2.1.2 method 1: the SHA-1 of the subjectPublicKey bit string. */
function keyId(spki: SubjectPublicKeyInfo): ArrayBuffer {
  const digest = createHash('sha1').update(new Uint8Array(spki.subjectPublicKey)).digest();
  return digest.buffer.slice(digest.byteOffset, digest.byteOffset + digest.byteLength);
}

function generalName(san: string): GeneralName {
  const m = /^(DNS|IP):(.+)$/.exec(san);
  if (!m) throw new IssueError(`subjectAltName ${JSON.stringify(san)}: not DNS:name or IP:addr`);
  return m[1] === 'DNS' ? new GeneralName({ dNSName: m[2] }) : new GeneralName({ iPAddress: m[2] });
}

/** The DER certificate. Throws IssueError for a CA key skewgate cannot sign with. */
export function issueServingCertificate(r: ServingCertificateRequest): Buffer {
  const signer = signerFor(r.caKey);
  const ca = AsnConvert.parse(r.caCertDer, Certificate);
  const spki = AsnConvert.parse(r.publicKey.export({ type: 'spki', format: 'der' }), SubjectPublicKeyInfo);
  const caSki = ca.tbsCertificate.extensions?.find((e) => e.extnID === id_ce_subjectKeyIdentifier)?.extnValue.buffer;
  const authorityKeyId = caSki
    ? AsnConvert.parse(caSki, SubjectKeyIdentifier)
    : new KeyIdentifier(keyId(ca.tbsCertificate.subjectPublicKeyInfo));
  const serial = r.serial.slice();
  const tbs = new TBSCertificate({
    version: Version.v3,
    serialNumber: serial.buffer.slice(serial.byteOffset, serial.byteOffset + serial.byteLength),
    signature: signer.algorithm,
    // The CA's subject exactly as encoded in its certificate (re-encoded from its parse: the same
    // string types; checked byte for byte below).
    issuer: ca.tbsCertificate.subject,
    validity: new Validity({ notBefore: r.notBefore, notAfter: r.notAfter }),
    subject: commonNameOnly(r.commonName),
    subjectPublicKeyInfo: spki,
    extensions: new Extensions([
      extension(id_ce_basicConstraints, true, new BasicConstraints({ cA: false })),
      extension(id_ce_keyUsage, true, new KeyUsage(KeyUsageFlags.digitalSignature | KeyUsageFlags.keyEncipherment)),
      extension(id_ce_extKeyUsage, false, new ExtendedKeyUsage([id_kp_serverAuth])),
      extension(id_ce_subjectAltName, false, new SubjectAlternativeName(r.sans.map(generalName))),
      extension(id_ce_subjectKeyIdentifier, false, new SubjectKeyIdentifier(keyId(spki))),
      extension(id_ce_authorityKeyIdentifier, false, new AuthorityKeyIdentifier({ keyIdentifier: authorityKeyId })),
    ]),
  });
  const tbsDer = Buffer.from(AsnConvert.serialize(tbs));
  const signature = sign(signer.digest, tbsDer, r.caKey);
  const cert = new Certificate({ tbsCertificate: tbs, signatureAlgorithm: signer.algorithm, signatureValue: bufferOf(signature) });
  const der = Buffer.from(AsnConvert.serialize(cert));
  const issued = certificateNames(der).issuer;
  const caSubject = certificateNames(r.caCertDer).subject;
  if (!Buffer.from(issued).equals(Buffer.from(caSubject)))
    throw new IssueError("the issuer name could not be written byte for byte as the CA's subject (clients would not find the CA)");
  return der;
}

/** CN=<name>, a UTF8String (as openssl and Go write it). */
function commonNameOnly(cn: string): Name {
  return new Name([
    new RelativeDistinguishedName([new AttributeTypeAndValue({ type: '2.5.4.3', value: new AttributeValue({ utf8String: cn }) })]),
  ]);
}

function bufferOf(b: Buffer): ArrayBuffer {
  return b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
}
