// A real Jaeger v2 (built by lab/build-jaeger.sh) on loopback ports with in-memory storage, and
// a small client for its query HTTP API. Used by the tracing end-to-end test and the lab.
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { request } from 'undici';
import { stringify } from 'yaml';
import { requireExecutable } from '../src/util/find-binary.js';
import { packageRoot } from '../src/util/package-root.js';
import { TOOLS_DIR_ENV } from '../src/util/tools-dir.js';
import { labBinDir, parseEnvFile, VERSIONS_FILE_RELATIVE } from './lab/versions.js';

export class JaegerNotFoundError extends Error {
  readonly code = 'SKEWGATE_ERR_JAEGER_NOT_FOUND';
  constructor(readonly path: string) {
    super(
      `Jaeger not found at ${path}: build it with \`bash lab/build-jaeger.sh\` (into $${TOOLS_DIR_ENV}/lab/bin, default .tools/lab/bin)`,
    );
    this.name = 'JaegerNotFoundError';
  }
}

/** The version pinned in lab/versions.env (JAEGER_VERSION=…). */
export function pinnedJaegerVersion(root = packageRoot()): string {
  const version = parseEnvFile(readFileSync(join(root, VERSIONS_FILE_RELATIVE), 'utf8')).get('JAEGER_VERSION');
  if (!version) throw new Error(`${VERSIONS_FILE_RELATIVE} has no JAEGER_VERSION line`);
  return version;
}

/** Explicit path, else <tools>/lab/bin/jaeger-<pinned version>. */
export function findJaegerBinary(explicit?: string): string {
  return requireExecutable(explicit ?? join(labBinDir(), `jaeger-${pinnedJaegerVersion()}`), (bin) => new JaegerNotFoundError(bin));
}

/** A span as Jaeger's query API returns it, with tags flattened. */
export interface JaegerSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** CHILD_OF reference, or null for a root span. */
  readonly parentSpanId: string | null;
  readonly operationName: string;
  readonly serviceName: string;
  readonly startTime: number;
  readonly tags: Readonly<Record<string, unknown>>;
  readonly logs: readonly { readonly timestamp: number; readonly fields: Readonly<Record<string, unknown>> }[];
}

export interface JaegerTrace {
  readonly traceId: string;
  readonly spans: readonly JaegerSpan[];
}

export interface JaegerHandle {
  /** OTLP/gRPC receiver, http://127.0.0.1:<port>. */
  readonly otlpGrpcUrl: string;
  /** OTLP/HTTP receiver base URL (…/v1/traces is appended by exporters). */
  readonly otlpHttpUrl: string;
  /** Query HTTP API (and the UI, when the binary has it). */
  readonly queryUrl: string;
  readonly logFile: string;
  trace(traceId: string): Promise<JaegerTrace | null>;
  traces(query: { service: string; operation?: string; tags?: Record<string, string>; limit?: number }): Promise<JaegerTrace[]>;
  services(): Promise<string[]>;
  stop(): Promise<void>;
}

export interface StartJaegerOptions {
  /** Folder for the generated config and the log. */
  readonly dir: string;
  readonly binary?: string;
  readonly startTimeoutMs?: number;
}

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** All-in-one with in-memory storage; no self-tracing (it would dial localhost:4317). */
function jaegerConfig(p: { grpc: number; http: number; query: number; queryGrpc: number; health: number }): object {
  const ep = (port: number): string => `127.0.0.1:${port}`;
  return {
    service: {
      extensions: ['jaeger_storage', 'jaeger_query', 'healthcheckv2'],
      pipelines: { traces: { receivers: ['otlp'], processors: ['batch'], exporters: ['jaeger_storage_exporter'] } },
      telemetry: { metrics: { level: 'none' }, logs: { level: 'info' } },
    },
    extensions: {
      jaeger_query: {
        storage: { traces: 'memstore' },
        enable_tracing: false,
        http: { endpoint: ep(p.query) },
        grpc: { endpoint: ep(p.queryGrpc) },
      },
      jaeger_storage: { backends: { memstore: { memory: { max_traces: 100_000 } } } },
      healthcheckv2: { use_v2: true, http: { endpoint: ep(p.health) } },
    },
    receivers: { otlp: { protocols: { grpc: { endpoint: ep(p.grpc) }, http: { endpoint: ep(p.http) } } } },
    // Short batches: tests query right after the spans were sent.
    processors: { batch: { timeout: '100ms' } },
    exporters: { jaeger_storage_exporter: { trace_storage: 'memstore' } },
  };
}

interface RawSpan {
  traceID: string;
  spanID: string;
  operationName: string;
  references?: { refType: string; traceID: string; spanID: string }[];
  startTime: number;
  tags?: { key: string; value: unknown }[];
  logs?: { timestamp: number; fields?: { key: string; value: unknown }[] }[];
  processID: string;
}
interface RawTrace {
  traceID: string;
  spans: RawSpan[];
  processes: Record<string, { serviceName: string }>;
}

const kv = (list: { key: string; value: unknown }[] | undefined): Record<string, unknown> =>
  Object.fromEntries((list ?? []).map((t) => [t.key, t.value]));

function toTrace(raw: RawTrace): JaegerTrace {
  return {
    traceId: raw.traceID,
    spans: raw.spans.map((s) => ({
      traceId: s.traceID,
      spanId: s.spanID,
      parentSpanId: s.references?.find((r) => r.refType === 'CHILD_OF')?.spanID ?? null,
      operationName: s.operationName,
      serviceName: raw.processes[s.processID]?.serviceName ?? '',
      startTime: s.startTime,
      tags: kv(s.tags),
      logs: (s.logs ?? []).map((l) => ({ timestamp: l.timestamp, fields: kv(l.fields) })),
    })),
  };
}

export async function startJaeger(o: StartJaegerOptions): Promise<JaegerHandle> {
  const bin = findJaegerBinary(o.binary);
  const ports = {
    grpc: await freePort(),
    http: await freePort(),
    query: await freePort(),
    queryGrpc: await freePort(),
    health: await freePort(),
  };
  const configFile = join(o.dir, 'jaeger.yaml');
  const logFile = join(o.dir, 'jaeger.log');
  writeFileSync(configFile, stringify(jaegerConfig(ports)));
  const log = createWriteStream(logFile);
  const child: ChildProcess = spawn(bin, ['--config', configFile], { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  let dead = false;
  void exited.then(() => (dead = true));

  const queryUrl = `http://127.0.0.1:${ports.query}`;
  const stop = async (): Promise<void> => {
    if (!dead) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
    await new Promise<void>((r) => log.end(r));
  };

  const getJson = async (path: string): Promise<unknown> => {
    const res = await request(`${queryUrl}${path}`, { headersTimeout: 5000, bodyTimeout: 5000 });
    const text = await res.body.text();
    if (res.statusCode === 404) return null;
    if (res.statusCode !== 200) throw new Error(`Jaeger ${path}: HTTP ${res.statusCode}: ${text.slice(0, 200)}`);
    return JSON.parse(text) as unknown;
  };

  const deadline = Date.now() + (o.startTimeoutMs ?? 20_000);
  for (;;) {
    if (dead) {
      await stop();
      throw new Error(`Jaeger exited during start; see ${logFile}:\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
    }
    try {
      const res = await request(`http://127.0.0.1:${ports.health}/status`, { headersTimeout: 1000, bodyTimeout: 1000 });
      const body = await res.body.text();
      if (res.statusCode === 200 && /"healthy":\s*true/.test(body)) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`Jaeger did not become healthy within ${o.startTimeoutMs ?? 20_000} ms; see ${logFile}`);
    }
    await delay(100);
  }

  return {
    otlpGrpcUrl: `http://127.0.0.1:${ports.grpc}`,
    otlpHttpUrl: `http://127.0.0.1:${ports.http}`,
    queryUrl,
    logFile,
    async trace(traceId) {
      const doc = (await getJson(`/api/traces/${encodeURIComponent(traceId)}`)) as { data?: RawTrace[] } | null;
      const raw = doc?.data?.[0];
      return raw ? toTrace(raw) : null;
    },
    async traces(q) {
      const params = new URLSearchParams({ service: q.service, limit: String(q.limit ?? 100), lookback: '1h' });
      if (q.operation) params.set('operation', q.operation);
      if (q.tags) params.set('tags', JSON.stringify(q.tags));
      const doc = (await getJson(`/api/traces?${params.toString()}`)) as { data?: RawTrace[] } | null;
      return (doc?.data ?? []).map(toTrace);
    },
    async services() {
      const doc = (await getJson('/api/services')) as { data?: string[] | null } | null;
      return doc?.data ?? [];
    },
    stop,
  };
}
