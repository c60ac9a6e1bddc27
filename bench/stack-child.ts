// (c) child process: the demo stack (3 fake apiservers + one skewgate) behind three real Envoys:
// one on filesystem xDS running skewgate's fast-path routes, one without xDS (every request
// through ext_proc), and a baseline without the ext_proc filter. Kept out of the load generator's
// process so that the generator's timers are not delayed by the fakes' and skewgate's work, and
// the other way round.
import { readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parse } from 'yaml';
import { startStack, type Stack } from '../harness/demo/stack.js';
import { withoutExtProc } from '../harness/baseline-envoy.js';
import { packageRoot } from '../src/util/package-root.js';
import { parseConfig } from '../src/config/load.js';
import { runningRoutesVersion } from '../src/envoy-runtime/admin-routes.js';
import { renderBootstrap } from '../src/envoy/bootstrap.js';
import { FAST_PATH_ROUTE_PREFIX } from '../src/envoy/fast-routes.js';
import { startEnvoy, type EnvoyHandle } from '../src/envoy-runtime/process.js';
import { RDS_FILE } from '../src/envoy/xds.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../harness/fake/index.js';
import { serveParent } from './child-ipc.js';
import { STACK_DIR, type EnvoyArm, type FastPathState, type StackChildReady, type StackCpuSample } from './protocol.js';
import { procCpuUs } from './proc-cpu.js';

const ARMS: readonly EnvoyArm[] = ['fast', 'every', 'baseline'];
const STREAMS_STARTED = 'http.skewgate.ext_proc.streams_started';

/** Envoy's own counters about the ext_proc filter, its gRPC cluster and route reloads, non-zero ones only. */
async function extProcStats(
  adminUrl: string,
  filter = 'ext_proc\\.|skewgate-extproc\\.(upstream_(cx|rq)_|internal)|\\.rds\\.[^.]+\\.(update_(attempt|success|rejected|failure|empty)|config_reload)$',
): Promise<Record<string, number>> {
  const res = await fetch(`${adminUrl}/stats?format=json&filter=${encodeURIComponent(filter)}`);
  const body = (await res.json()) as { stats?: { name?: string; value?: number }[] };
  const out: Record<string, number> = {};
  for (const s of body.stats ?? []) {
    if (typeof s.name === 'string' && typeof s.value === 'number' && s.value !== 0) out[s.name] = s.value;
  }
  return out;
}

/** The fast arm's route state: rds.json holds fast-path routes, and Envoy runs that version. */
async function fastPathState(xdsDir: string, adminUrl: string): Promise<FastPathState> {
  const text = await readFile(join(xdsDir, RDS_FILE), 'utf8').catch(() => '');
  type Rds = {
    version_info?: string;
    resources?: {
      virtual_hosts?: { routes?: { name?: string; match?: { safe_regex?: { regex?: string } }; route?: { cluster?: string } }[] }[];
    }[];
  };
  let file: Rds = {};
  try {
    file = JSON.parse(text) as Rds;
  } catch {
    // being written or absent: not ready
  }
  const fast = (file.resources ?? [])
    .flatMap((r) => r.virtual_hosts ?? [])
    .flatMap((v) => v.routes ?? [])
    .filter((r) => r.name?.startsWith(FAST_PATH_ROUTE_PREFIX) === true);
  const routes = fast.map((r) => ({ name: r.name ?? '', regexChars: r.match?.safe_regex?.regex?.length ?? 0 }));
  const runningVersion = await runningRoutesVersion(adminUrl, AbortSignal.timeout(2000)).catch(() => null);
  return {
    written: routes.length > 0,
    fileVersion: file.version_info ?? null,
    runningVersion,
    routes,
    cluster: fast[0]?.route?.cluster ?? null,
  };
}

async function main(): Promise<void> {
  let stack: Stack | undefined;
  const extra: Partial<Record<EnvoyArm, EnvoyHandle>> = {};
  const envoyOf = (arm: EnvoyArm): EnvoyHandle | undefined => (arm === 'fast' ? stack?.envoy : extra[arm]);
  const dir = join(packageRoot(), STACK_DIR);
  const xdsDir = join(dir, 'xds');
  const ipc = serveParent(
    {
      cpu: (): StackCpuSample => {
        const u = process.cpuUsage();
        const envoyUs = Object.fromEntries(ARMS.map((a) => [a, procCpuUs(envoyOf(a)?.process.pid ?? -1)])) as Record<EnvoyArm, number>;
        return { nodeUs: u.user + u.system, envoyUs };
      },
      /** ext_proc streams started so far in the two Envoys that have the filter. */
      streams: async (): Promise<Record<string, number>> => {
        const out: Record<string, number> = {};
        for (const a of ['fast', 'every'] as const) {
          const admin = envoyOf(a)?.adminUrl;
          out[a] =
            admin === undefined
              ? Number.NaN
              : ((await extProcStats(admin, `^${STREAMS_STARTED.replaceAll('.', '\\.')}$`))[STREAMS_STARTED] ?? 0);
        }
        return out;
      },
      envoyStats: async (): Promise<Record<string, number>> => {
        const out: Record<string, number> = {};
        for (const a of ['fast', 'every'] as const) {
          const admin = envoyOf(a)?.adminUrl;
          if (admin === undefined) continue;
          for (const [k, v] of Object.entries(await extProcStats(admin))) out[`${a}: ${k}`] = v;
        }
        return out;
      },
      fastPath: async (): Promise<FastPathState> => {
        const admin = stack?.envoy.adminUrl;
        return admin === undefined
          ? { written: false, fileVersion: null, runningVersion: null, routes: [], cluster: null }
          : fastPathState(xdsDir, admin);
      },
      /** One apiserver stopped, or started again on its port (a restart, for the restart phase). */
      stopServer: async (name: unknown) => {
        await stack?.apiservers.find((a) => a.name === name)?.close();
        return true;
      },
      startServer: async (name: unknown) => {
        await stack?.apiservers.find((a) => a.name === name)?.start();
        return true;
      },
      // The fakes record every request for the tests; a long run does not need that memory.
      clear: () => {
        for (const a of stack?.apiservers ?? []) a.clearRequests();
        return true;
      },
    },
    async () => {
      for (const e of Object.values(extra)) await e.stop().catch(() => undefined);
      await stack?.close();
    },
  );
  try {
    // Fresh access logs each run (Envoy appends), and no xDS files (nor members) from a previous run.
    await Promise.all(
      ['envoy.log', 'envoy-every.log', 'envoy-baseline.log', 'xds'].map((f) => rm(join(dir, f), { force: true, recursive: true })),
    );
    // The stack's own Envoy is the fast arm: envoy.xds, routing.fastPath at its default (true).
    stack = await startStack({
      dir,
      logLevel: 'warn',
      envoy: { xds: { directory: xdsDir } },
      servers: [
        { name: 'apiserver-a', builtins: BUILTINS_OLD },
        { name: 'apiserver-b', builtins: BUILTINS_OLD },
        { name: 'apiserver-c', builtins: BUILTINS_NEW },
      ],
    });
    // The other two from the same config without xDS (static routes: every request meets ext_proc
    // in one, the filter taken out in the other), on ports of their own, the same skewgate behind.
    const doc = parse(await readFile(stack.configFile, 'utf8')) as { envoy: Record<string, unknown> & { listen: Record<string, unknown> } };
    delete doc.envoy.xds;
    doc.envoy.listen = { ...doc.envoy.listen, port: 0 };
    const staticBootstrap = renderBootstrap(parseConfig(doc, stack.configFile, dir));
    extra.every = await startEnvoy({ bootstrap: staticBootstrap, logFile: join(dir, 'envoy-every.log') });
    extra.baseline = await startEnvoy({ bootstrap: withoutExtProc(staticBootstrap), logFile: join(dir, 'envoy-baseline.log') });
    // A few objects, so that the lists carry a body of realistic size.
    for (let i = 0; i < 8; i++) {
      stack.cluster.create({ group: '', resource: 'configmaps' }, 'default', {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name: `bench-${i}`, namespace: 'default', labels: { app: 'bench', index: String(i) } },
        data: { 'config.yaml': `key: value-${i}\n`.repeat(20) },
      });
      stack.cluster.create({ group: 'admissionregistration.k8s.io', resource: 'mutatingadmissionpolicies' }, '', {
        apiVersion: 'admissionregistration.k8s.io/v1',
        kind: 'MutatingAdmissionPolicy',
        metadata: { name: `bench-${i}` },
        spec: { failurePolicy: 'Fail', reinvocationPolicy: 'Never' },
      });
    }
    const url = (e: EnvoyHandle): string => `https://127.0.0.1:${e.listenPort ?? 0}`;
    const handles: Record<EnvoyArm, EnvoyHandle> = { fast: stack.envoy, every: extra.every, baseline: extra.baseline };
    ipc.ready({
      urls: { fast: stack.gatewayUrl, every: url(handles.every), baseline: url(handles.baseline) },
      pids: Object.fromEntries(ARMS.map((a) => [a, handles[a].process.pid ?? -1])) as Record<EnvoyArm, number>,
      caFile: stack.pki.caFile,
      token: stack.pki.token,
    } satisfies StackChildReady);
  } catch (err) {
    ipc.failed(err);
  }
}

void main();
