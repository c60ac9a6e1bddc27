// What telemetry does, resolved once from the config file and the standard OTEL_* environment
// variables. Pure: the environment is passed in. Precedence, per field: the config file, then the
// signal-specific variable (OTEL_EXPORTER_OTLP_TRACES_*), then the generic one, then the default.
// OTEL_SDK_DISABLED=true turns everything off.
import type { Config } from '../../config/core/schema.js';

export type Env = Readonly<Record<string, string | undefined>>;
export type OtlpProtocol = 'grpc' | 'http';

export interface OtlpTarget {
  readonly protocol: OtlpProtocol;
  /** grpc: http(s)://host:port; http: the full URL of the signal (…/v1/traces, …/v1/metrics). */
  readonly url: string;
  /** May hold secrets: never logged (describeTelemetry lists the names only). */
  readonly headers: Readonly<Record<string, string>>;
  readonly caFile: string | undefined;
}

/** always_on = { parentBased: false, ratio: 1 }; the config's samplerRatio is parent-based. */
export interface SamplerSpec {
  readonly parentBased: boolean;
  /** Fraction of root spans (or of all spans without parentBased) kept. */
  readonly ratio: number;
}

export interface TracingSettings {
  readonly otlp: OtlpTarget;
  readonly sampler: SamplerSpec;
  /** Batch export delay (OTEL_BSP_SCHEDULE_DELAY; default 5 s). */
  readonly batchDelayMs: number;
}

export interface MetricsSettings {
  readonly prometheus: { readonly host: string; readonly port: number } | null;
  readonly otlp: (OtlpTarget & { readonly intervalMs: number }) | null;
}

export interface TelemetrySettings {
  readonly serviceName: string;
  /** OTEL_RESOURCE_ATTRIBUTES, parsed. */
  readonly resourceAttributes: Readonly<Record<string, string>>;
  /** null: no tracer, no spans, no traceparent set on requests. */
  readonly tracing: TracingSettings | null;
  /** null: no meter, no /metrics. */
  readonly metrics: MetricsSettings | null;
  /** Environment variables that were not understood; logged once at start. */
  readonly warnings: readonly string[];
}

export const DEFAULT_SERVICE_NAME = 'skewgate';
export const DEFAULT_METRICS_INTERVAL_MS = 60_000;
export const DEFAULT_BATCH_DELAY_MS = 5000;
const DEFAULT_PROMETHEUS_PORT = 9464;
const DEFAULT_ENDPOINT: Readonly<Record<OtlpProtocol, string>> = { grpc: 'http://localhost:4317', http: 'http://localhost:4318' };
const SIGNAL_PATH = { traces: '/v1/traces', metrics: '/v1/metrics' } as const;
type Signal = keyof typeof SIGNAL_PATH;

type TelemetryConfig = Config['telemetry'];

/** True when nothing is to be created: skewgate then loads no OpenTelemetry SDK at all. */
export function telemetryDisabled(s: TelemetrySettings): boolean {
  return s.tracing === null && s.metrics === null;
}

function envValue(env: Env, name: string): string | undefined {
  const v = env[name]?.trim();
  return v === undefined || v === '' ? undefined : v;
}

function positiveNumber(text: string | undefined): number | undefined {
  const n = Number(text);
  return text !== undefined && Number.isFinite(n) && n > 0 ? n : undefined;
}

function envList(env: Env, name: string): string[] | undefined {
  return envValue(env, name)
    ?.split(',')
    .map((x) => x.trim().toLowerCase())
    .filter((x) => x !== '');
}

/** W3C Baggage-style "k=v,k2=v2" with percent-encoding, as OTEL_EXPORTER_OTLP_HEADERS is written. */
export function parseKeyValueList(text: string | undefined): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  if (text === undefined) return out;
  for (const part of text.split(',')) {
    const i = part.indexOf('=');
    if (i <= 0) continue;
    const decode = (s: string): string => {
      try {
        return decodeURIComponent(s.trim());
      } catch {
        return s.trim();
      }
    };
    const key = decode(part.slice(0, i));
    if (key !== '') out[key] = decode(part.slice(i + 1));
  }
  return out;
}

function protocolFromEnv(env: Env, signal: Signal, warnings: string[]): OtlpProtocol | undefined {
  const name =
    envValue(env, `OTEL_EXPORTER_OTLP_${signal.toUpperCase()}_PROTOCOL`) !== undefined
      ? `OTEL_EXPORTER_OTLP_${signal.toUpperCase()}_PROTOCOL`
      : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const v = envValue(env, name)?.toLowerCase();
  if (v === undefined) return undefined;
  if (v === 'grpc') return 'grpc';
  if (v === 'http/protobuf') return 'http';
  warnings.push(`${name}=${v} is not supported (grpc or http/protobuf); using ${v.startsWith('http') ? 'http/protobuf' : 'grpc'}`);
  return v.startsWith('http') ? 'http' : 'grpc';
}

/** A base URL (config file, OTEL_EXPORTER_OTLP_ENDPOINT) gets the signal's path for OTLP/HTTP. */
function withSignalPath(base: string, protocol: OtlpProtocol, signal: Signal): string {
  if (protocol === 'grpc') return base;
  const path = SIGNAL_PATH[signal];
  const trimmed = base.replace(/\/+$/, '');
  return trimmed.endsWith(path) ? trimmed : `${trimmed}${path}`;
}

interface FileOtlp {
  readonly endpoint?: string | undefined;
  readonly protocol?: OtlpProtocol | undefined;
  readonly headers?: Readonly<Record<string, string>> | undefined;
  readonly caFile?: string | undefined;
}

function otlpTarget(file: FileOtlp, fallback: FileOtlp, env: Env, signal: Signal, warnings: string[]): OtlpTarget {
  const SIG = signal.toUpperCase();
  const protocol = file.protocol ?? fallback.protocol ?? protocolFromEnv(env, signal, warnings) ?? 'grpc';
  const fileEndpoint = file.endpoint ?? fallback.endpoint;
  let url: string;
  if (fileEndpoint !== undefined) url = withSignalPath(fileEndpoint, protocol, signal);
  else {
    // The signal-specific variable is a full URL, used as it is (OTel exporter spec).
    const specific = envValue(env, `OTEL_EXPORTER_OTLP_${SIG}_ENDPOINT`);
    const generic = envValue(env, 'OTEL_EXPORTER_OTLP_ENDPOINT');
    url = specific ?? withSignalPath(generic ?? DEFAULT_ENDPOINT[protocol], protocol, signal);
  }
  const headers = {
    ...parseKeyValueList(envValue(env, 'OTEL_EXPORTER_OTLP_HEADERS')),
    ...parseKeyValueList(envValue(env, `OTEL_EXPORTER_OTLP_${SIG}_HEADERS`)),
    ...(fallback.headers ?? {}),
    ...(file.headers ?? {}),
  };
  const caFile =
    file.caFile ??
    fallback.caFile ??
    envValue(env, `OTEL_EXPORTER_OTLP_${SIG}_CERTIFICATE`) ??
    envValue(env, 'OTEL_EXPORTER_OTLP_CERTIFICATE');
  return { protocol, url, headers, caFile };
}

function samplerFromEnv(env: Env, warnings: string[]): SamplerSpec | undefined {
  const name = envValue(env, 'OTEL_TRACES_SAMPLER')?.toLowerCase();
  if (name === undefined) return undefined;
  const argText = envValue(env, 'OTEL_TRACES_SAMPLER_ARG');
  const arg = argText === undefined ? 1 : Number(argText);
  const ratio = Number.isFinite(arg) && arg >= 0 && arg <= 1 ? arg : 1;
  if (argText !== undefined && ratio !== arg) warnings.push(`OTEL_TRACES_SAMPLER_ARG=${argText} is not a ratio in [0, 1]; using 1`);
  switch (name) {
    case 'always_on':
      return { parentBased: false, ratio: 1 };
    case 'always_off':
      return { parentBased: false, ratio: 0 };
    case 'traceidratio':
      return { parentBased: false, ratio };
    case 'parentbased_always_on':
      return { parentBased: true, ratio: 1 };
    case 'parentbased_always_off':
      return { parentBased: true, ratio: 0 };
    case 'parentbased_traceidratio':
      return { parentBased: true, ratio };
    default:
      warnings.push(`OTEL_TRACES_SAMPLER=${name} is not supported; using parentbased_always_on`);
      return undefined;
  }
}

function tracingEnabled(file: TelemetryConfig['tracing'], env: Env): boolean {
  if (file.enabled !== undefined) return file.enabled;
  // Unset in the file: the environment may turn tracing on by naming a collector.
  const exporters = envList(env, 'OTEL_TRACES_EXPORTER');
  if (exporters?.includes('none')) return false;
  if (exporters?.includes('otlp')) return true;
  return envValue(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') !== undefined || envValue(env, 'OTEL_EXPORTER_OTLP_ENDPOINT') !== undefined;
}

function prometheusSettings(file: TelemetryConfig['metrics'], env: Env, exporters: string[] | undefined): MetricsSettings['prometheus'] {
  if (file.prometheus) {
    const m = /^\[?(.*?)\]?:(\d+)$/.exec(file.prometheus.listen);
    return { host: m?.[1] ?? '127.0.0.1', port: Number(m?.[2] ?? DEFAULT_PROMETHEUS_PORT) };
  }
  if (!exporters?.includes('prometheus')) return null;
  const port = Number(envValue(env, 'OTEL_EXPORTER_PROMETHEUS_PORT') ?? DEFAULT_PROMETHEUS_PORT);
  return {
    host: envValue(env, 'OTEL_EXPORTER_PROMETHEUS_HOST') ?? '127.0.0.1',
    port: Number.isInteger(port) ? port : DEFAULT_PROMETHEUS_PORT,
  };
}

export function resolveTelemetrySettings(file: TelemetryConfig, env: Env): TelemetrySettings {
  const warnings: string[] = [];
  const serviceName = file.serviceName ?? envValue(env, 'OTEL_SERVICE_NAME') ?? DEFAULT_SERVICE_NAME;
  const resourceAttributes = parseKeyValueList(envValue(env, 'OTEL_RESOURCE_ATTRIBUTES'));
  if (envValue(env, 'OTEL_SDK_DISABLED')?.toLowerCase() === 'true') {
    return { serviceName, resourceAttributes, tracing: null, metrics: null, warnings };
  }
  const t = file.tracing;
  const tracing: TracingSettings | null = tracingEnabled(t, env)
    ? {
        otlp: otlpTarget(t, {}, env, 'traces', warnings),
        sampler:
          t.samplerRatio !== undefined
            ? { parentBased: true, ratio: t.samplerRatio }
            : (samplerFromEnv(env, warnings) ?? { parentBased: true, ratio: 1 }),
        batchDelayMs: positiveNumber(envValue(env, 'OTEL_BSP_SCHEDULE_DELAY')) ?? DEFAULT_BATCH_DELAY_MS,
      }
    : null;

  const m = file.metrics;
  const exporters = envList(env, 'OTEL_METRICS_EXPORTER');
  const prometheus = prometheusSettings(m, env, exporters);
  const otlpOn = m.otlp?.enabled ?? (m.otlp !== undefined || exporters?.includes('otlp') === true);
  const otlp = otlpOn
    ? {
        // Unset fields follow the tracing settings in the file: one collector for both.
        ...otlpTarget(m.otlp ?? {}, t, env, 'metrics', warnings),
        intervalMs: m.otlp?.interval ?? positiveNumber(envValue(env, 'OTEL_METRIC_EXPORT_INTERVAL')) ?? DEFAULT_METRICS_INTERVAL_MS,
      }
    : null;
  const metrics = prometheus || otlp ? { prometheus, otlp } : null;
  return { serviceName, resourceAttributes, tracing, metrics, warnings };
}

/** For the start-up log line: where things go, header names but never their values. */
export function describeTelemetry(s: TelemetrySettings): Record<string, unknown> {
  const target = (o: OtlpTarget): Record<string, unknown> => ({
    protocol: o.protocol,
    url: o.url,
    headers: Object.keys(o.headers),
    ...(o.caFile ? { caFile: o.caFile } : {}),
  });
  return {
    serviceName: s.serviceName,
    tracing: s.tracing ? { ...target(s.tracing.otlp), sampler: s.tracing.sampler } : 'off',
    metrics: s.metrics
      ? {
          prometheus: s.metrics.prometheus ? `${s.metrics.prometheus.host}:${s.metrics.prometheus.port}` : 'off',
          otlp: s.metrics.otlp ? { ...target(s.metrics.otlp), intervalMs: s.metrics.otlp.intervalMs } : 'off',
        }
      : 'off',
  };
}
