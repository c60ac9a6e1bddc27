// Pure: the second stage of config validation, over the files the config names (read by the
// caller): a CA bundle must hold certificates, never a private key. A key given as caFile would
// otherwise surface as an obscure TLS failure at the first connection, or be copied into places
// (Envoy's bootstrap, a ConfigMap) that were never meant to hold it.
import type { Config, ConfigProblem } from './config.js';

/** Every config field that names a CA bundle, with its value. */
export function caFiles(c: Config): readonly { readonly path: string; readonly file: string }[] {
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
export function caFileProblems(c: Config, read: (file: string) => string | null): ConfigProblem[] {
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
