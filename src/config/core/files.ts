// Pure: the second stage of config validation, over the files the config names (read by the
// caller). A CA bundle must hold certificates, never a private key: a key given as caFile would
// otherwise surface as an obscure TLS failure at the first connection, or be copied into places
// (Envoy's bootstrap, a ConfigMap) that were never meant to hold it. The stage runs on a valid
// config, and also on one whose fields have problems (`looseFileFields`), so that a config's
// problems are listed at once, whichever stage finds them.
import { resolve } from 'node:path';
import type { ConfigProblem } from './problems.js';

interface Pair {
  readonly certFile: string;
  readonly keyFile: string;
}

/** The fields that name files, as a valid Config holds them (paths resolved) and as a partly invalid one may. */
export interface FileFields {
  readonly apiservers: readonly { readonly caFile?: string | undefined }[];
  readonly membership: { readonly template: { readonly caFile?: string | undefined } };
  readonly envoy: {
    readonly tls: {
      readonly certFile?: string | undefined;
      readonly keyFile?: string | undefined;
      readonly clientCaFile?: string | undefined;
    };
    readonly upstreamClientCert?: Pair | undefined;
    readonly extprocPeers?: { readonly caFile: string } | undefined;
  };
  readonly extproc: { readonly peer?: { readonly clientCaFile: string } | undefined };
  readonly telemetry: {
    readonly tracing: { readonly caFile?: string | undefined };
    readonly metrics: { readonly otlp?: { readonly caFile?: string | undefined } | undefined };
  };
  /** The Cluster API Runtime Extension's serving pair (gate.runtimeExtension). */
  readonly gate?: { readonly runtimeExtension?: Pair | undefined } | undefined;
}

/** Every config field that names a CA bundle, with its value. */
export function caFiles(c: FileFields): readonly { readonly path: string; readonly file: string }[] {
  const out: { path: string; file: string }[] = [];
  const add = (path: string, file: string | undefined): void => {
    if (file !== undefined) out.push({ path, file });
  };
  c.apiservers.forEach((s, i) => add(`apiservers[${i}].caFile`, s.caFile));
  add('membership.template.caFile', c.membership.template.caFile);
  add('envoy.tls.clientCaFile', c.envoy.tls.clientCaFile);
  add('envoy.extprocPeers.caFile', c.envoy.extprocPeers?.caFile);
  add('extproc.peer.clientCaFile', c.extproc.peer?.clientCaFile);
  add('telemetry.tracing.caFile', c.telemetry.tracing.caFile);
  add('telemetry.metrics.otlp.caFile', c.telemetry.metrics.otlp?.caFile);
  return out;
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----/;
const PEM_PRIVATE_KEY = /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;

/**
 * The problems of the CA files that could be read (`read` answers null for one that cannot: its
 * absence is reported where it is used, since a file may appear after the config is written).
 */
export function caFileProblems(c: FileFields, read: (file: string) => string | null): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  for (const { path, file } of caFiles(c)) {
    const text = read(file);
    if (text === null) continue;
    if (PEM_PRIVATE_KEY.test(text))
      problems.push({
        path,
        message: `${file} holds a private key: a CA file holds the CA's certificates only (never its key: give skewgate and Envoy only what they verify with)`,
      });
    else if (!PEM_CERTIFICATE.test(text))
      problems.push({ path, message: `${file} holds no PEM certificate ("-----BEGIN CERTIFICATE-----")` });
  }
  return problems;
}

/**
 * The file fields of a document whose fields have problems: each that is a string, resolved as
 * parseConfig would (against `baseDir`); anything else is left out (its own problem is listed).
 */
export function looseFileFields(doc: unknown, baseDir: string): FileFields {
  const at = (v: unknown, ...keys: string[]): unknown =>
    keys.reduce<unknown>((o, k) => (typeof o === 'object' && o !== null ? (o as Record<string, unknown>)[k] : undefined), v);
  const file = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? resolve(baseDir, v) : undefined);
  const pair = (v: unknown): Pair | undefined => {
    const certFile = file(at(v, 'certFile'));
    const keyFile = file(at(v, 'keyFile'));
    return certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile };
  };
  const servers = at(doc, 'apiservers');
  const peerCa = file(at(doc, 'envoy', 'extprocPeers', 'caFile'));
  const clientCa = file(at(doc, 'extproc', 'peer', 'clientCaFile'));
  return {
    apiservers: Array.isArray(servers) ? servers.map((s) => ({ caFile: file(at(s, 'caFile')) })) : [],
    membership: { template: { caFile: file(at(doc, 'membership', 'template', 'caFile')) } },
    envoy: {
      tls: {
        certFile: file(at(doc, 'envoy', 'tls', 'certFile')),
        keyFile: file(at(doc, 'envoy', 'tls', 'keyFile')),
        clientCaFile: file(at(doc, 'envoy', 'tls', 'clientCaFile')),
      },
      upstreamClientCert: pair(at(doc, 'envoy', 'upstreamClientCert')),
      extprocPeers: peerCa === undefined ? undefined : { caFile: peerCa },
    },
    extproc: { peer: clientCa === undefined ? undefined : { clientCaFile: clientCa } },
    telemetry: {
      tracing: { caFile: file(at(doc, 'telemetry', 'tracing', 'caFile')) },
      metrics: { otlp: { caFile: file(at(doc, 'telemetry', 'metrics', 'otlp', 'caFile')) } },
    },
    gate: { runtimeExtension: pair(at(doc, 'gate', 'runtimeExtension')) },
  };
}

/** The gateway's serving certificate and key (envoy.tls), when both are given: `serve` needs neither. */
export function servingPair(config: Pick<FileFields, 'envoy'>): Pair | undefined {
  const { certFile, keyFile } = config.envoy.tls;
  return certFile === undefined || keyFile === undefined ? undefined : { certFile, keyFile };
}
