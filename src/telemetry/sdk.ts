// The OpenTelemetry SDK objects: tracer provider with its OTLP exporter, meter provider with the
// Prometheus endpoint and the OTLP push. Loaded with import() only when telemetry is on, so a
// skewgate without telemetry never loads or creates any of it.
import type { ErrorCode } from '../errors/catalog.js';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import * as grpc from '@grpc/grpc-js';
import type { Attributes, Context, Link, Meter, SpanKind, Tracer } from '@opentelemetry/api';
import { resourceFromAttributes, type Resource } from '@opentelemetry/resources';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  SamplingDecision,
  SimpleSpanProcessor,
  TraceIdRatioBasedSampler,
  TracerProvider,
  type Sampler,
  type SamplingResult,
  type SpanExporter,
  type SpanProcessor,
} from '@opentelemetry/sdk-trace';
import { MeterProvider, PeriodicExportingMetricReader, type MetricReader, type PushMetricExporter } from '@opentelemetry/sdk-metrics';
import { OTLPTraceExporter as OtlpGrpcTraceExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as OtlpHttpTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPMetricExporter as OtlpGrpcMetricExporter } from '@opentelemetry/exporter-metrics-otlp-grpc';
import { OTLPMetricExporter as OtlpHttpMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { PrometheusExporter } from '@opentelemetry/exporter-prometheus';
import { skewgateVersion } from '../util/version.js';
import { ATTR, SCOPE } from './core/names.js';
import type { OtlpTarget, SamplerSpec, TelemetrySettings } from './core/settings.js';

export interface SdkOptions {
  /** Tests: spans go here, one by one (SimpleSpanProcessor), besides any OTLP export. */
  readonly spanExporter?: SpanExporter;
  /** Tests: more metric readers, e.g. one collected on demand. */
  readonly metricReaders?: readonly MetricReader[];
}

export interface TelemetrySdk {
  /** null when tracing is off (and no test exporter was given). */
  readonly tracer: Tracer | null;
  /** null when metrics are off (and no test reader was given). */
  readonly meter: Meter | null;
  /** The bound port of /metrics, or null. */
  readonly prometheusPort: number | null;
  forceFlush(): Promise<void>;
  /** Flushes spans and metrics, then stops exporters and the /metrics server. Idempotent. */
  shutdown(): Promise<void>;
}

export class TelemetryStartError extends Error {
  readonly code = 'SKEWGATE_ERR_TELEMETRY' satisfies ErrorCode;
  constructor(message: string) {
    super(message);
    this.name = 'TelemetryStartError';
  }
}

/**
 * The configured sampler, plus one rule: a discovery round that changed an apiserver's view is
 * always kept, because that is how an upgrade shows up in a trace.
 */
export class SkewgateSampler implements Sampler {
  private readonly base: Sampler;
  constructor(spec: SamplerSpec) {
    const root: Sampler =
      spec.ratio >= 1 ? new AlwaysOnSampler() : spec.ratio <= 0 ? new AlwaysOffSampler() : new TraceIdRatioBasedSampler(spec.ratio);
    this.base = spec.parentBased ? new ParentBasedSampler({ root }) : root;
  }
  shouldSample(ctx: Context, traceId: string, name: string, kind: SpanKind, attributes: Attributes, links: Link[]): SamplingResult {
    if (attributes[ATTR.discoveryViewChanged] === true) return { decision: SamplingDecision.RECORD_AND_SAMPLED };
    return this.base.shouldSample(ctx, traceId, name, kind, attributes, links);
  }
  toString(): string {
    return `SkewgateSampler{${this.base.toString()}}`;
  }
}

function readCa(target: OtlpTarget): Buffer | undefined {
  if (target.caFile === undefined) return undefined;
  try {
    return readFileSync(target.caFile);
  } catch (err) {
    throw new TelemetryStartError(`cannot read the OTLP CA file ${target.caFile}: ${(err as Error).message}`);
  }
}

function grpcOptions(target: OtlpTarget): { url: string; metadata: grpc.Metadata; credentials?: grpc.ChannelCredentials } {
  const metadata = new grpc.Metadata();
  for (const [k, v] of Object.entries(target.headers)) metadata.set(k.toLowerCase(), v);
  const ca = readCa(target);
  return { url: target.url, metadata, ...(ca && target.url.startsWith('https:') ? { credentials: grpc.credentials.createSsl(ca) } : {}) };
}

function httpOptions(target: OtlpTarget): { url: string; headers: Record<string, string>; httpAgentOptions?: { ca: Buffer } } {
  const ca = readCa(target);
  return { url: target.url, headers: { ...target.headers }, ...(ca ? { httpAgentOptions: { ca } } : {}) };
}

function traceExporter(target: OtlpTarget): SpanExporter {
  return target.protocol === 'grpc' ? new OtlpGrpcTraceExporter(grpcOptions(target)) : new OtlpHttpTraceExporter(httpOptions(target));
}

function metricExporter(target: OtlpTarget): PushMetricExporter {
  return target.protocol === 'grpc' ? new OtlpGrpcMetricExporter(grpcOptions(target)) : new OtlpHttpMetricExporter(httpOptions(target));
}

function resource(settings: TelemetrySettings, version: string): Resource {
  return resourceFromAttributes({ ...settings.resourceAttributes, 'service.name': settings.serviceName, 'service.version': version });
}

/** /metrics in the Prometheus text format; anything else 404. */
async function servePrometheus(exporter: PrometheusExporter, host: string, port: number): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0];
    if ((req.method === 'GET' || req.method === 'HEAD') && path === '/metrics') {
      exporter.getMetricsRequestHandler(req, res);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are at /metrics\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err) => reject(new TelemetryStartError(`cannot serve Prometheus metrics on ${host}:${port}: ${err.message}`)));
    server.listen({ host, port }, () => resolve());
  });
  return server;
}

export async function startSdk(settings: TelemetrySettings, options: SdkOptions = {}): Promise<TelemetrySdk> {
  const version = skewgateVersion();
  const res = resource(settings, version);
  const stops: (() => Promise<void>)[] = [];
  let tracerProvider: TracerProvider | null = null;
  let meterProvider: MeterProvider | null = null;
  try {
    if (settings.tracing || options.spanExporter) {
      const processors: SpanProcessor[] = [];
      if (settings.tracing)
        processors.push(
          new BatchSpanProcessor({ exporter: traceExporter(settings.tracing.otlp), scheduledDelayMillis: settings.tracing.batchDelayMs }),
        );
      if (options.spanExporter) processors.push(new SimpleSpanProcessor({ exporter: options.spanExporter }));
      tracerProvider = new TracerProvider({
        resource: res,
        sampler: new SkewgateSampler(settings.tracing?.sampler ?? { parentBased: true, ratio: 1 }),
        spanProcessors: processors,
      });
    }

    let prometheusPort: number | null = null;
    const readers: MetricReader[] = [...(options.metricReaders ?? [])];
    let prometheus: { exporter: PrometheusExporter; host: string; port: number } | null = null;
    if (settings.metrics?.prometheus) {
      // Its own server would turn port 0 into 9464; skewgate serves the handler itself.
      const exporter = new PrometheusExporter({ preventServerStart: true, withoutScopeInfo: true });
      readers.push(exporter);
      prometheus = { exporter, ...settings.metrics.prometheus };
    }
    if (settings.metrics?.otlp) {
      readers.push(
        new PeriodicExportingMetricReader({
          exporter: metricExporter(settings.metrics.otlp),
          exportIntervalMillis: settings.metrics.otlp.intervalMs,
        }),
      );
    }
    if (readers.length > 0) meterProvider = new MeterProvider({ resource: res, readers });
    if (prometheus) {
      const server = await servePrometheus(prometheus.exporter, prometheus.host, prometheus.port);
      stops.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
      server.closeIdleConnections();
      prometheusPort = (server.address() as AddressInfo).port;
    }

    let stopped: Promise<void> | null = null;
    return {
      tracer: tracerProvider?.getTracer(SCOPE, version) ?? null,
      meter: meterProvider?.getMeter(SCOPE, version) ?? null,
      prometheusPort,
      async forceFlush() {
        await Promise.all([tracerProvider?.forceFlush(), meterProvider?.forceFlush()]);
      },
      shutdown() {
        stopped ??= (async () => {
          // Spans first: they are what an operator misses most after a restart.
          await tracerProvider?.shutdown().catch(() => undefined);
          await meterProvider?.shutdown().catch(() => undefined);
          for (const s of stops.splice(0).reverse()) await s();
        })();
        return stopped;
      },
    };
  } catch (err) {
    await tracerProvider?.shutdown().catch(() => undefined);
    await meterProvider?.shutdown().catch(() => undefined);
    for (const s of stops.splice(0).reverse()) await s().catch(() => undefined);
    throw err;
  }
}
