// `skewgate gateway-cert`: issues the gateway's serving certificate (envoy.tls.certFile/keyFile)
// from a CA the clients already trust (kubeadm: /etc/kubernetes/pki/ca.{crt,key}), with the names
// clients connect to as SANs. openssl does the work (src/pki/openssl.ts).
import { X509Certificate } from 'node:crypto';
import { access, mkdir, readFile } from 'node:fs/promises';
import { isIP } from 'node:net';
import { resolve } from 'node:path';
import { EXIT_BAD_CONFIG, EXIT_OK } from '../constants.js';
import { issueCert } from '../pki/openssl.js';

export interface GatewayCertOptions {
  readonly caCert: string;
  readonly caKey: string;
  readonly sans: readonly string[];
  readonly out: string;
  readonly days: number;
  readonly name: string;
}

const DNS_NAME = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/i;

/** "DNS:name", "IP:addr", or a bare name or address → openssl's subjectAltName form; null if invalid. Pure. */
export function sanEntry(raw: string): string | null {
  const v = raw.trim();
  const m = /^(DNS|IP):(.+)$/i.exec(v);
  const kind = m ? (m[1] as string).toUpperCase() : isIP(v) !== 0 ? 'IP' : 'DNS';
  const value = m ? (m[2] as string) : v;
  if (kind === 'IP') return isIP(value) !== 0 ? `IP:${value}` : null;
  return DNS_NAME.test(value) && value.length <= 253 ? `DNS:${value.toLowerCase()}` : null;
}

export async function runGatewayCert(o: GatewayCertOptions): Promise<number> {
  const problems: string[] = [];
  const sans = o.sans.map((s) => [s, sanEntry(s)] as const);
  for (const [raw, entry] of sans)
    if (entry === null) problems.push(`--san ${JSON.stringify(raw)}: not a DNS name or IP address (DNS:name, IP:addr)`);
  if (o.sans.length === 0) problems.push('--san: name at least one DNS name or IP address clients connect to');
  if (!Number.isInteger(o.days) || o.days < 1) problems.push(`--days ${o.days}: a whole number of days, at least 1`);
  if (!/^[a-z0-9][a-z0-9._-]*$/i.test(o.name)) problems.push(`--name ${JSON.stringify(o.name)}: a file name without a folder`);
  for (const [flag, file] of [
    ['--ca-cert', o.caCert],
    ['--ca-key', o.caKey],
  ] as const) {
    await access(file).catch(() => problems.push(`${flag} ${file}: cannot read`));
  }
  if (problems.length === 0) {
    try {
      const ca = new X509Certificate(await readFile(o.caCert));
      if (!ca.ca) problems.push(`--ca-cert ${o.caCert}: not a CA certificate`);
    } catch (err) {
      problems.push(`--ca-cert ${o.caCert}: not a PEM certificate (${(err as Error).message})`);
    }
  }
  if (problems.length > 0) {
    process.stderr.write(
      `skewgate gateway-cert: ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
    return EXIT_BAD_CONFIG;
  }
  const dir = resolve(o.out);
  await mkdir(dir, { recursive: true });
  const entries = sans.map(([, e]) => e as string);
  const files = await issueCert({
    dir,
    name: o.name,
    subject: '/CN=skewgate-gateway',
    usage: 'server',
    ca: { certFile: o.caCert, keyFile: o.caKey },
    sans: entries,
    days: o.days,
  });
  const cert = new X509Certificate(await readFile(files.certFile));
  process.stdout.write(
    `wrote ${files.certFile} and ${files.keyFile}\n` +
      `  subjectAltName: ${cert.subjectAltName ?? '-'}\n  valid until:    ${new Date(Date.parse(cert.validTo)).toISOString()}\n` +
      `  issuer:         ${cert.issuer.replaceAll('\n', ', ')}\n` +
      'set them as envoy.tls.certFile and envoy.tls.keyFile\n',
  );
  return EXIT_OK;
}
