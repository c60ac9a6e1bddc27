// Runs the real Envoy binary: start and wait until LIVE, stop, and `--mode validate`.
import type { ErrorCode } from '../errors/catalog.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, openSync, type WriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { stringify } from 'yaml';
import { findBinary } from '../util/find-binary.js';
import { TOOLS_DIR_ENV, toolsDir } from '../util/tools-dir.js';

/** Where scripts/install-envoy.sh puts the binary, relative to the tools directory. */
export const ENVOY_BIN_IN_TOOLS = 'envoy/current/envoy/_bin/envoy';
/** An Envoy of the operator's own (skewgate's tools directory is then not looked at). */
export const ENVOY_BIN_ENV = 'SKEWGATE_ENVOY_BIN';

export class EnvoyNotFoundError extends Error {
  readonly code = 'SKEWGATE_ERR_ENVOY_NOT_FOUND' satisfies ErrorCode;
  constructor(readonly path: string) {
    super(
      `Envoy binary not found or not executable at ${path}: run \`npm run setup\` (installs Envoy into $${TOOLS_DIR_ENV}/envoy, default .tools/envoy), or set ${ENVOY_BIN_ENV}`,
    );
    this.name = 'EnvoyNotFoundError';
  }
}

export class EnvoyStartError extends Error {
  readonly code = 'SKEWGATE_ERR_ENVOY_START' satisfies ErrorCode;
  constructor(
    message: string,
    readonly logTail: string,
  ) {
    super(`${message}\n--- envoy log (tail) ---\n${logTail}`);
    this.name = 'EnvoyStartError';
  }
}

/** Explicit path, else $SKEWGATE_ENVOY_BIN, else the tools directory's install. Throws when not executable. */
export function findEnvoyBinary(explicit?: string): string {
  return findBinary({
    explicit,
    env: ENVOY_BIN_ENV,
    fallback: () => join(toolsDir(), ENVOY_BIN_IN_TOOLS),
    missing: (bin) => new EnvoyNotFoundError(bin),
  });
}

export interface StartEnvoyOptions {
  /** Bootstrap as YAML text or as the object renderBootstrap returns. */
  readonly bootstrap: string | object;
  readonly envoyBin?: string;
  /** Envoy's stdout (access log) and stderr are also appended here. */
  readonly logFile?: string;
  /** Fixed base id; by default a dynamic one, so that several Envoys run side by side. */
  readonly baseId?: number;
  readonly logLevel?: string;
  /** Working directory: relative paths in the bootstrap are resolved from here. */
  readonly cwd?: string;
  /** How long to wait for /ready to say LIVE (default 20 s). */
  readonly readyTimeoutMs?: number;
}

export interface EnvoyHandle {
  /** e.g. http://127.0.0.1:9901 */
  readonly adminUrl: string;
  /** Port of the first listener (the gateway), useful when the bootstrap asked for port 0. */
  readonly listenPort?: number;
  readonly process: ChildProcess;
  /** The last lines Envoy wrote (stdout and stderr). */
  logTail(): string;
  /** SIGTERM, SIGKILL after 2 s; resolves once the process is gone. Idempotent. */
  stop(): Promise<void>;
}

const TAIL_BYTES = 16_384;

function toYaml(bootstrap: string | object): string {
  return typeof bootstrap === 'string' ? bootstrap : stringify(bootstrap, { lineWidth: 0 });
}

function httpGet(url: string, timeoutMs: number): Promise<{ status: number; body: string }> {
  return new Promise((resolvePromise, reject) => {
    const req = request(url, { method: 'GET', timeout: timeoutMs }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolvePromise({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`timeout after ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function startEnvoy(options: StartEnvoyOptions): Promise<EnvoyHandle> {
  const bin = findEnvoyBinary(options.envoyBin);
  // Opened synchronously so that a bad log path fails here, not as a stray stream error later.
  const log: WriteStream | undefined =
    options.logFile === undefined ? undefined : createWriteStream('', { fd: openSync(resolve(options.logFile), 'a') });
  const dir = await mkdtemp(join(tmpdir(), 'skewgate-envoy-'));
  const configFile = join(dir, 'bootstrap.yaml');
  const adminPathFile = join(dir, 'admin-address');
  await writeFile(configFile, toYaml(options.bootstrap));

  const args = [
    '-c',
    configFile,
    '--log-level',
    options.logLevel ?? 'warn',
    '--disable-hot-restart',
    // Access log lines reach the log within 0.2 s instead of Envoy's default 10 s.
    '--file-flush-interval-msec',
    '200',
    '--admin-address-path',
    adminPathFile,
    '--base-id-path',
    join(dir, 'base-id'),
    ...(options.baseId === undefined ? ['--use-dynamic-base-id'] : ['--base-id', String(options.baseId)]),
  ];
  const child = spawn(bin, args, { cwd: options.cwd ?? process.cwd(), stdio: ['ignore', 'pipe', 'pipe'] });

  let tail = '';
  const onData = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-TAIL_BYTES);
    log?.write(chunk);
  };
  child.stdout?.on('data', onData);
  child.stderr?.on('data', onData);
  const logTail = (): string => tail;

  let exitInfo: string | undefined;
  const exited = new Promise<void>((r) => {
    child.once('exit', (code, signal) => {
      exitInfo = signal === null ? `exit code ${String(code)}` : `signal ${signal}`;
      r();
    });
    child.once('error', (err) => {
      exitInfo = `spawn error: ${err.message}`;
      r();
    });
  });
  // A test runner dying must not leave Envoy behind.
  const killOnExit = (): void => {
    if (exitInfo === undefined) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  let stopping: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopping ??= (async () => {
      if (exitInfo === undefined) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => {
          if (exitInfo === undefined) child.kill('SIGKILL');
        }, 2000);
        await exited;
        clearTimeout(timer);
      }
      process.removeListener('exit', killOnExit);
      await new Promise<void>((r) => (log ? log.end(r) : r()));
      await rm(dir, { recursive: true, force: true });
    })();
    return stopping;
  };

  const deadline = Date.now() + (options.readyTimeoutMs ?? 20_000);
  try {
    let adminUrl: string | undefined;
    let lastProblem = 'admin address not yet written';
    for (;;) {
      if (exitInfo !== undefined) throw new EnvoyStartError(`Envoy exited before it was ready (${exitInfo})`, tail);
      if (Date.now() > deadline)
        throw new EnvoyStartError(`Envoy not LIVE within ${options.readyTimeoutMs ?? 20_000} ms (${lastProblem})`, tail);
      if (adminUrl === undefined) {
        const addr = await readFile(adminPathFile, 'utf8').catch(() => '');
        if (addr.trim() !== '') adminUrl = `http://${addr.trim()}`;
      }
      if (adminUrl !== undefined) {
        try {
          const ready = await httpGet(`${adminUrl}/ready`, 1000);
          if (ready.status === 200 && ready.body.trim() === 'LIVE') break;
          lastProblem = `/ready answered ${ready.status} ${ready.body.trim()}`;
        } catch (err) {
          lastProblem = `/ready: ${(err as Error).message}`;
        }
      }
      await sleep(50);
    }
    const listenPort = await firstListenerPort(adminUrl);
    return { adminUrl, ...(listenPort === undefined ? {} : { listenPort }), process: child, logTail, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

interface ListenersJson {
  listener_statuses?: { local_address?: { socket_address?: { port_value?: number } } }[];
}

async function firstListenerPort(adminUrl: string): Promise<number | undefined> {
  const res = await httpGet(`${adminUrl}/listeners?format=json`, 2000);
  if (res.status !== 200) return undefined;
  const body = JSON.parse(res.body) as ListenersJson;
  return body.listener_statuses?.[0]?.local_address?.socket_address?.port_value;
}

export interface ValidateOptions {
  readonly envoyBin?: string;
  /** Working directory: relative paths in the bootstrap are resolved from here. */
  readonly cwd?: string;
}

/** `envoy --mode validate`: parses the bootstrap and loads every file it names, binds nothing. */
export async function validateBootstrap(
  bootstrap: string | object,
  options: ValidateOptions = {},
): Promise<{ ok: boolean; output: string }> {
  const bin = findEnvoyBinary(options.envoyBin);
  const dir = await mkdtemp(join(tmpdir(), 'skewgate-envoy-validate-'));
  try {
    const file = join(dir, 'bootstrap.yaml');
    await writeFile(file, toYaml(bootstrap));
    return await new Promise((resolvePromise, reject) => {
      const child = spawn(bin, ['--mode', 'validate', '-c', file, '--log-level', 'warn', '--disable-hot-restart'], {
        cwd: options.cwd ?? process.cwd(),
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let output = '';
      child.stdout.on('data', (c: Buffer) => (output += c.toString('utf8')));
      child.stderr.on('data', (c: Buffer) => (output += c.toString('utf8')));
      child.once('error', reject);
      child.once('close', (code) => resolvePromise({ ok: code === 0, output }));
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
