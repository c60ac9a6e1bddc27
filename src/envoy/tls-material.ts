// Where Envoy's certificates, keys and CA bundles come from. Without filesystem xDS, the TLS
// contexts name the files (read once, at Envoy's start). With envoy.xds, every one is an SDS secret
// in its own file under <xds>/sds naming the same files, with a folder Envoy watches for moves:
// kubeadm renews certificates by writing them in place, which Envoy's own watch (moves only)
// misses, so skewgate, which sees the files change, renames a file into that folder and Envoy
// reads them again — a renewal served with no restart, and skewgate never reads a private key. Pure.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { Config } from '../config/core/schema.js';
import { servingPair } from '../config/core/files.js';
import type { JsonObject, PathFn } from './json.js';

export const SDS_SUBDIR = 'sds';

export interface CertificatePair {
  readonly certFile: string;
  readonly keyFile: string;
}

export type SecretSpec =
  | { readonly kind: 'certificate'; readonly name: string; readonly certFile: string; readonly keyFile: string }
  | { readonly kind: 'ca'; readonly name: string; readonly caFile: string };

const short = (...parts: string[]): string => createHash('sha256').update(parts.join('\0')).digest('hex').slice(0, 12);

export function certificateSecretName(p: CertificatePair): string {
  return `certificate-${short(p.certFile, p.keyFile)}`;
}

export function caSecretName(caFile: string): string {
  return `ca-${short(caFile)}`;
}

/** The folder of the SDS files, or null when Envoy reads the files itself (no envoy.xds). */
export function sdsDirectory(config: Config): string | null {
  return config.envoy.xds ? join(config.envoy.xds.directory, SDS_SUBDIR) : null;
}

/** Every certificate and CA bundle the bootstrap and the xDS files reference, each once. */
export function secretsOf(config: Config): readonly SecretSpec[] {
  const out = new Map<string, SecretSpec>();
  const pair = (p: CertificatePair | undefined): void => {
    if (p) out.set(certificateSecretName(p), { kind: 'certificate', name: certificateSecretName(p), certFile: p.certFile, keyFile: p.keyFile });
  };
  const ca = (f: string | undefined): void => {
    if (f) out.set(caSecretName(f), { kind: 'ca', name: caSecretName(f), caFile: f });
  };
  const e = config.envoy;
  pair(servingPair(config));
  ca(e.tls.clientCaFile);
  pair(e.upstreamClientCert);
  for (const s of config.apiservers) ca(s.caFile);
  ca(config.membership.template.caFile);
  if (e.extprocPeers) {
    pair(e.extprocPeers);
    ca(e.extprocPeers.caFile);
  }
  return [...out.values()];
}

function sdsConfig(name: string, dir: string, file: PathFn): JsonObject {
  return {
    name,
    sds_config: {
      path_config_source: { path: file(join(dir, `${name}.json`)), watched_directory: { path: file(dir) } },
      resource_api_version: 'V3',
    },
  };
}

/** The common_tls_context fields that present this certificate. */
export function certificateFields(config: Config, p: CertificatePair, file: PathFn): JsonObject {
  const dir = sdsDirectory(config);
  if (dir === null) return { tls_certificates: [{ certificate_chain: { filename: file(p.certFile) }, private_key: { filename: file(p.keyFile) } }] };
  return { tls_certificate_sds_secret_configs: [sdsConfig(certificateSecretName(p), dir, file)] };
}

/** The common_tls_context fields that verify the peer against this CA bundle (and, if given, these names). */
export function validationFields(config: Config, caFile: string, sans: readonly JsonObject[] | undefined, file: PathFn): JsonObject {
  const match: JsonObject = sans === undefined ? {} : { match_typed_subject_alt_names: [...sans] };
  const dir = sdsDirectory(config);
  if (dir === null) return { validation_context: { trusted_ca: { filename: file(caFile) }, ...match } };
  return {
    combined_validation_context: {
      default_validation_context: match,
      validation_context_sds_secret_config: sdsConfig(caSecretName(caFile), dir, file),
    },
  };
}

/** The folder whose moves make Envoy re-read one secret's files (skewgate renames a file into it). */
export function triggerDirectory(sdsDir: string, spec: SecretSpec): string {
  return join(sdsDir, TRIGGER_SUBDIR, spec.name);
}

export const TRIGGER_SUBDIR = 'reload';

/**
 * The SDS file of one secret: the files by name, and the folder whose changes make Envoy read
 * them again (and check a certificate against its key: a pair caught half-written is refused and
 * the last good one kept, until the next trigger).
 */
export function renderSecret(spec: SecretSpec, sdsDir: string, file: PathFn): JsonObject {
  const watched_directory = { path: file(triggerDirectory(sdsDir, spec)) };
  const secret: JsonObject =
    spec.kind === 'certificate'
      ? { tls_certificate: { certificate_chain: { filename: file(spec.certFile) }, private_key: { filename: file(spec.keyFile) }, watched_directory } }
      : { validation_context: { trusted_ca: { filename: file(spec.caFile) }, watched_directory } };
  return {
    version_info: '1',
    resources: [{ '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret', name: spec.name, ...secret }],
  };
}
