// The Go-oracle certificate fixtures (test/fixtures/x509-identity) made afresh with their keys, for
// tests that present them over TLS, and certificates of any subject signed by the fixtures' client
// CA (jane's key, another subject), for tests that go beyond the fixtures.
import { execFile } from 'node:child_process';
import { createPrivateKey, sign, X509Certificate } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { AsnConvert } from '@peculiar/asn1-schema';
import { AttributeTypeAndValue, AttributeValue, Certificate, Name, RelativeDistinguishedName } from '@peculiar/asn1-x509';
import { packageRoot } from '../../src/util/package-root.js';

export const FIXTURES = join(packageRoot(), 'test/fixtures/x509-identity');

/** kube-apiserver's verdict on a fixture (oracle/main.go). */
export interface OracleVerdict {
  readonly authenticated: boolean;
  readonly user?: {
    readonly name: string;
    readonly uid: string;
    readonly groups: readonly string[] | null;
    readonly extra?: Readonly<Record<string, readonly string[]>>;
  };
}

export function oracleVerdicts(): Record<string, OracleVerdict> {
  return JSON.parse(readFileSync(join(FIXTURES, 'expected.json'), 'utf8')) as Record<string, OracleVerdict>;
}

/** The certificate file to present for a fixture: the chained one also sends its intermediate. */
export function fixtureCertFile(dir: string, name: string): string {
  return join(dir, name === 'via-intermediate' ? 'via-intermediate-chain.crt' : `${name}.crt`);
}

function pem(der: Buffer): string {
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n')}\n-----END CERTIFICATE-----\n`;
}

/**
 * jane's certificate with `mutate` applied to its subject, signed again by the fixtures' client CA,
 * written as `<name>.crt` with jane's key as `<name>.key`.
 */
export function resignedJane(dir: string, name: string, mutate: (subject: Name) => Name): void {
  const cert = AsnConvert.parse(new X509Certificate(readFileSync(join(dir, 'jane.crt'))).raw, Certificate);
  cert.tbsCertificate.subject = mutate(cert.tbsCertificate.subject);
  const tbs = Buffer.from(AsnConvert.serialize(cert.tbsCertificate));
  cert.signatureValue = new Uint8Array(sign('sha256', tbs, createPrivateKey(readFileSync(join(dir, 'client-ca.key'))))).buffer;
  writeFileSync(join(dir, `${name}.crt`), pem(Buffer.from(AsnConvert.serialize(cert))));
  writeFileSync(join(dir, `${name}.key`), readFileSync(join(dir, 'jane.key')));
}

/** One subject attribute with its value's DER given whole (any tag, any bytes). */
export function rawAttribute(oid: string, valueDer: Uint8Array): AttributeTypeAndValue {
  return new AttributeTypeAndValue({ type: oid, value: new AttributeValue({ anyValue: new Uint8Array(valueDer).buffer }) });
}

export function nameOf(rdns: readonly (readonly AttributeTypeAndValue[])[]): Name {
  return new Name(rdns.map((atvs) => new RelativeDistinguishedName([...atvs])));
}

/**
 * The fixtures in `dir` (oracle/make-certs.sh, keys kept), plus the chain the intermediate's
 * client presents and `universal`: jane's with its CN a UniversalString, a string type Go's x509
 * refuses ("unsupported string type": kube-apiserver fails the handshake) and BoringSSL reads.
 */
export async function makeFixtureCerts(dir: string): Promise<void> {
  await promisify(execFile)('bash', [join(FIXTURES, 'oracle/make-certs.sh'), dir], { env: { ...process.env, KEEP_KEYS: '1' } });
  writeFileSync(
    join(dir, 'via-intermediate-chain.crt'),
    readFileSync(join(dir, 'via-intermediate.crt'), 'utf8') + readFileSync(join(dir, 'intermediate.crt'), 'utf8'),
  );
  resignedJane(dir, 'universal', (subject) => {
    for (const rdn of subject)
      for (const atv of rdn) if (atv.type === '2.5.4.3') atv.value = new AttributeValue({ universalString: 'jane' });
    return subject;
  });
}
