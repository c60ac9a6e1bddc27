// The one YAML config file: read, parsed, validated once with every problem listed by path, its
// relative paths resolved against its folder, then frozen. The files it names are checked by
// src/config/core/files.ts (CA bundles) and src/config/tls.ts (TLS material); src/config/check.ts is
// the one check `serve` (at start and on every reload), `envoy-config` and `validate` run. The
// one-shot commands that only read the config to reach a gateway or apiservers (status, skew,
// explain, health) load it here: fields and CA files, not the TLS material they do not use.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { configSchema, type ConfigUse } from './core/checks.js';
import { caFileProblems, looseFileFields, type FileFields } from './core/files.js';
import { ConfigError, type ConfigProblem } from './core/problems.js';
import type { ApiServerConfig, Config } from './core/schema.js';

function formatPath(path: readonly PropertyKey[]): string {
  return path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i === 0 ? '' : '.'}${String(p)}`)).join('');
}

/** Validates an already-parsed document. Pure apart from resolving relative paths against baseDir. */
export function parseConfig(doc: unknown, source: string, baseDir: string, use: ConfigUse = 'serve'): Config {
  const result = configSchema(use).safeParse(doc ?? {});
  if (!result.success) {
    throw new ConfigError(
      source,
      result.error.issues.map((i) => ({ path: formatPath(i.path), message: i.message })),
    );
  }
  const c = result.data;
  const abs = (p: string): string => resolve(baseDir, p);
  const absOpt = (p: string | undefined): string | undefined => (p === undefined ? undefined : abs(p));
  const resolveCredentials = (cr: ApiServerConfig['credentials']): ApiServerConfig['credentials'] =>
    cr && {
      ...cr,
      tokenFile: absOpt(cr.tokenFile),
      clientCertFile: absOpt(cr.clientCertFile),
      clientKeyFile: absOpt(cr.clientKeyFile),
      kubeconfig: absOpt(cr.kubeconfig),
    };
  const resolved = {
    ...c,
    source,
    apiservers: c.apiservers.map((s) => ({
      ...s,
      caFile: absOpt(s.caFile),
      credentials: resolveCredentials(s.credentials),
    })),
    membership: {
      ...c.membership,
      template: {
        ...c.membership.template,
        caFile: absOpt(c.membership.template.caFile),
        credentials: resolveCredentials(c.membership.template.credentials),
      },
    },
    discovery: { ...c.discovery, staleAfter: c.discovery.staleAfter ?? Math.max(3 * c.discovery.interval, 3000) },
    extproc: {
      ...c.extproc,
      listen:
        c.extproc.listen.startsWith('unix:') && !c.extproc.listen.startsWith('unix:/')
          ? `unix:${abs(c.extproc.listen.slice(5))}`
          : c.extproc.listen,
      peer: c.extproc.peer && {
        ...c.extproc.peer,
        certFile: abs(c.extproc.peer.certFile),
        keyFile: abs(c.extproc.peer.keyFile),
        clientCaFile: abs(c.extproc.peer.clientCaFile),
      },
    },
    admin: c.admin && {
      listen:
        c.admin.listen.startsWith('unix:') && !c.admin.listen.startsWith('unix:/')
          ? `unix:${abs(c.admin.listen.slice(5))}`
          : c.admin.listen,
    },
    envoy: {
      ...c.envoy,
      tls: { certFile: absOpt(c.envoy.tls.certFile), keyFile: absOpt(c.envoy.tls.keyFile), clientCaFile: absOpt(c.envoy.tls.clientCaFile) },
      xds: c.envoy.xds && { directory: abs(c.envoy.xds.directory) },
      upstreamClientCert: c.envoy.upstreamClientCert && {
        certFile: abs(c.envoy.upstreamClientCert.certFile),
        keyFile: abs(c.envoy.upstreamClientCert.keyFile),
      },
      extprocPeers: c.envoy.extprocPeers && {
        ...c.envoy.extprocPeers,
        certFile: abs(c.envoy.extprocPeers.certFile),
        keyFile: abs(c.envoy.extprocPeers.keyFile),
        caFile: abs(c.envoy.extprocPeers.caFile),
      },
    },
    telemetry: {
      ...c.telemetry,
      tracing: { ...c.telemetry.tracing, caFile: absOpt(c.telemetry.tracing.caFile) },
      metrics: {
        ...c.telemetry.metrics,
        otlp: c.telemetry.metrics.otlp && { ...c.telemetry.metrics.otlp, caFile: absOpt(c.telemetry.metrics.otlp.caFile) },
      },
    },
  };
  return deepFreeze(resolved) as Config;
}

/**
 * Reads, parses and validates a YAML config file for a use: the fields and the use's needs, and
 * the CA files named, every problem of both in one ConfigError. src/config/check.ts adds the TLS
 * material for the commands that act on it.
 */
export function loadConfig(file: string, use: ConfigUse = 'serve'): Config {
  const read = readConfig(file, use);
  const problems = [...read.problems, ...configFileProblems(read.files)];
  if (read.config === null || problems.length > 0) throw new ConfigError(read.source, problems);
  return read.config;
}

/** A config file read and parsed: the config when its fields are valid, else their problems. */
export interface ConfigRead {
  readonly source: string;
  readonly config: Config | null;
  readonly problems: readonly ConfigProblem[];
  /** The fields that name files: the config's, or (fields invalid) what the document gives of them. */
  readonly files: FileFields;
}

/**
 * The first stage: read, YAML, the fields and the use's needs. An unreadable file or bad YAML
 * throws (nothing else can be checked); the fields' problems are returned, so that the files
 * they name can still be checked and every problem listed at once.
 */
export function readConfig(file: string, use: ConfigUse = 'serve'): ConfigRead {
  const source = resolve(file);
  let text: string;
  try {
    text = readFileSync(source, 'utf8');
  } catch (err) {
    throw new ConfigError(source, [{ path: '', message: `cannot read: ${(err as Error).message}` }]);
  }
  let doc: unknown;
  try {
    doc = parseYaml(text, { prettyErrors: true });
  } catch (err) {
    const msg = err instanceof YAMLParseError ? err.message : String(err);
    throw new ConfigError(source, [{ path: '', message: `not valid YAML: ${msg}` }]);
  }
  try {
    const config = parseConfig(doc, source, dirname(source), use);
    return { source, config, problems: [], files: config };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    return { source, config: null, problems: err.problems, files: looseFileFields(doc, dirname(source)) };
  }
}

/** The second stage, on the files the fields name: the CA bundles' contents. */
export function configFileProblems(files: FileFields): ConfigProblem[] {
  return caFileProblems(files, (f) => {
    try {
      return readFileSync(f, 'utf8');
    } catch {
      return null;
    }
  });
}

function deepFreeze<T>(v: T): T {
  if (v && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
