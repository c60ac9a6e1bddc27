// `skewgate health`: the grpc.health.v1 Check that Envoy's health checker makes, from the command
// line — for a kubelet exec probe (a kubelet grpc probe dials the pod IP and cannot reach a unix
// socket) or an operator. With --envoy, also Envoy's own readiness (GET /ready on its admin
// address, which may listen on loopback only). Exit 0 when all is well, 1 otherwise.
import * as grpc from '@grpc/grpc-js';
import { loadConfig } from '../config/load.js';
import { EXIT_OK, EXIT_PROBLEMS, EXTPROC_SERVICE_NAME } from '../constants.js';
import { loadProtos } from '../extproc/proto.js';

/** Where a client reaches a listen address: a wildcard host becomes loopback. Pure. */
export function healthTarget(listen: string): string {
  if (listen.startsWith('unix:')) return listen;
  const m = /^\[?(.*?)\]?:(\d+)$/.exec(listen);
  if (!m) return listen;
  const host =
    m[1] === '0.0.0.0' || m[1] === ''
      ? '127.0.0.1'
      : m[1] === '::'
        ? '[::1]'
        : (m[1] as string).includes(':')
          ? `[${m[1]}]`
          : (m[1] as string);
  return `${host}:${m[2]}`;
}

/** Envoy's GET /ready on the config's admin address: null when ready, else why not. */
async function envoyReady(address: string, port: number, timeoutMs: number): Promise<string | null> {
  const url = `http://${healthTarget(`${address.includes(':') ? `[${address}]` : address}:${port}`)}/ready`;
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const body = (await res.text()).trim();
    return res.status === 200 ? null : `${url}: ${res.status} ${body}`;
  } catch (err) {
    return `${url}: ${(err as Error).message}`;
  }
}

export async function runHealth(configFile: string, timeoutMs: number, opts: { readonly envoy?: boolean } = {}): Promise<number> {
  const config = loadConfig(configFile);
  if (opts.envoy === true) {
    if (config.envoy.admin.port === 0) {
      // Envoy picked its admin port at start: nothing here can know it.
      process.stderr.write(
        'envoy not checked: envoy.admin.port is 0 (Envoy chose its admin port at start, and this config cannot say which); set a port to probe it with --envoy\n',
      );
      return EXIT_PROBLEMS;
    }
    const problem = await envoyReady(config.envoy.admin.address, config.envoy.admin.port, timeoutMs);
    if (problem !== null) {
      process.stderr.write(`envoy not ready: ${problem}\n`);
      return EXIT_PROBLEMS;
    }
    process.stdout.write('envoy: ready\n');
  }
  const target = healthTarget(config.extproc.listen);
  const { HealthClient } = loadProtos();
  const client = new HealthClient(target, grpc.credentials.createInsecure());
  try {
    const status = await new Promise<string>((resolve, reject) => {
      const check = client['Check'] as (
        r: { service: string },
        o: grpc.CallOptions,
        cb: (e: grpc.ServiceError | null, r?: { status?: string }) => void,
      ) => void;
      check.call(client, { service: EXTPROC_SERVICE_NAME }, { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(err) : resolve(res?.status ?? 'UNKNOWN'),
      );
    });
    if (status === 'SERVING') {
      process.stdout.write(`skewgate ext_proc at ${target}: SERVING\n`);
      return EXIT_OK;
    }
    process.stderr.write(`skewgate ext_proc at ${target}: ${status}\n`);
    return EXIT_PROBLEMS;
  } catch (err) {
    const e = err as grpc.ServiceError;
    process.stderr.write(`skewgate ext_proc at ${target}: no answer (${grpc.status[e.code] ?? 'error'}: ${e.details ?? e.message})\n`);
    return EXIT_PROBLEMS;
  } finally {
    client.close();
  }
}
