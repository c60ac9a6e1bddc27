// Certificate issuance with the openssl CLI, for the harness's PKI sets
// (harness/pki-set.ts builds the fake and the lab PKI from these).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export const DEFAULT_DAYS = 365;

export interface KeyPairFiles {
  readonly certFile: string;
  readonly keyFile: string;
}

export type CertUsage = 'ca' | 'server' | 'client';

export interface IssueOptions {
  /** Folder the files are written to: `<name>.crt` and `<name>.key`. */
  readonly dir: string;
  readonly name: string;
  /** openssl -subj form, e.g. "/O=system:masters/CN=kubernetes-admin". */
  readonly subject: string;
  readonly usage: CertUsage;
  /** Signing CA; omitted for a self-signed CA. */
  readonly ca?: KeyPairFiles;
  /** subjectAltName entries, e.g. ["DNS:localhost", "IP:127.0.0.1"] (server and client usages). */
  readonly sans?: readonly string[];
  readonly days?: number;
  /**
   * A whole openssl config to use instead of the one made from usage and sans ([req] with
   * `distinguished_name = dn` and `prompt = no`, an empty [dn], the extensions in [ext]), with
   * -subj read as UTF-8: for subjects the default cannot write (non-ASCII, an attribute type that
   * needs a name from an oid_section).
   */
  readonly utf8Config?: string;
}

const KEY_ARGS = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

/** A private config so the host's openssl.cnf defaults cannot add clashing extensions. */
function opensslConfig(usage: CertUsage, sans: readonly string[] | undefined): string {
  const ext =
    usage === 'ca'
      ? ['basicConstraints = critical,CA:TRUE', 'keyUsage = critical,keyCertSign,cRLSign', 'subjectKeyIdentifier = hash']
      : [
          'basicConstraints = critical,CA:FALSE',
          'keyUsage = critical,digitalSignature',
          `extendedKeyUsage = ${usage === 'server' ? 'serverAuth' : 'clientAuth'}`,
          ...(sans !== undefined && sans.length > 0 ? [`subjectAltName = ${sans.join(',')}`] : []),
        ];
  return ['[req]', 'distinguished_name = dn', 'prompt = no', '[dn]', '[ext]', ...ext, ''].join('\n');
}

/** Writes `<dir>/<name>.crt` and `<dir>/<name>.key` (EC P-256); a CA is self-signed unless `ca` is given. */
export async function issueCert(o: IssueOptions): Promise<KeyPairFiles> {
  const f = (suffix: string): string => join(o.dir, `${o.name}.${suffix}`);
  const cnf = f('openssl.cnf');
  const days = String(o.days ?? DEFAULT_DAYS);
  const utf8 = o.utf8Config === undefined ? [] : ['-utf8'];
  await writeFile(cnf, o.utf8Config ?? opensslConfig(o.usage, o.sans));
  try {
    if (o.ca === undefined) {
      await run('openssl', [
        'req',
        '-x509',
        '-new',
        ...KEY_ARGS,
        ...utf8,
        '-keyout',
        f('key'),
        '-out',
        f('crt'),
        '-days',
        days,
        '-subj',
        o.subject,
        '-config',
        cnf,
        '-extensions',
        'ext',
      ]);
    } else {
      await run('openssl', [
        'req',
        '-new',
        ...KEY_ARGS,
        ...utf8,
        '-keyout',
        f('key'),
        '-out',
        f('csr'),
        '-subj',
        o.subject,
        '-config',
        cnf,
      ]);
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        f('csr'),
        '-CA',
        o.ca.certFile,
        '-CAkey',
        o.ca.keyFile,
        '-set_serial',
        `0x${randomBytes(16).toString('hex')}`,
        '-days',
        days,
        '-out',
        f('crt'),
        '-extfile',
        cnf,
        '-extensions',
        'ext',
      ]);
    }
  } finally {
    await rm(cnf, { force: true });
    await rm(f('csr'), { force: true });
  }
  return { certFile: f('crt'), keyFile: f('key') };
}

/** An RSA key pair (PKCS#8 private key, SubjectPublicKeyInfo public key), e.g. for service-account tokens. */
export async function generateRsaKeyPair(privateFile: string, publicFile: string, bits = 2048): Promise<void> {
  await run('openssl', ['genpkey', '-algorithm', 'RSA', '-pkeyopt', `rsa_keygen_bits:${bits}`, '-out', privateFile]);
  await run('openssl', ['pkey', '-in', privateFile, '-pubout', '-out', publicFile]);
}

/** True when the certificate is still valid in `seconds` (openssl x509 -checkend). */
export async function certValidFor(certFile: string, seconds: number): Promise<boolean> {
  try {
    await run('openssl', ['x509', '-checkend', String(seconds), '-noout', '-in', certFile]);
    return true;
  } catch {
    return false;
  }
}
