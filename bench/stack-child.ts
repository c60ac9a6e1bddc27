// (c) child process: the demo stack (3 fake apiservers + skewgate + a real Envoy with ext_proc +
// a baseline Envoy without it). Kept out of the load generator's process so that the
// generator's timers are not delayed by the fakes' and skewgate's work, and the other way round.
import { readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { startStack, type Stack } from '../harness/demo/stack.js';
import { packageRoot } from '../src/package-root.js';
import { BUILTINS_NEW, BUILTINS_OLD } from '../harness/fake/index.js';
import { serveParent } from './child-ipc.js';
import { STACK_DIR, type StackChildReady, type StackCpuSample } from './protocol.js';

const clockTicks = ((): number => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** utime + stime of a whole process from /proc (Linux); NaN elsewhere. */
function procCpuUs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1e6) / clockTicks;
  } catch {
    return Number.NaN;
  }
}

/** Envoy's own counters about the ext_proc filter and its gRPC cluster, non-zero ones only. */
async function extProcStats(adminUrl: string): Promise<Record<string, number>> {
  const res = await fetch(
    `${adminUrl}/stats?format=json&filter=${encodeURIComponent('ext_proc\\.|skewgate-extproc\\.(upstream_(cx|rq)_|internal)')}`,
  );
  const body = (await res.json()) as { stats?: { name?: string; value?: number }[] };
  const out: Record<string, number> = {};
  for (const s of body.stats ?? []) {
    if (typeof s.name === 'string' && typeof s.value === 'number' && s.value !== 0) out[s.name] = s.value;
  }
  return out;
}

async function main(): Promise<void> {
  let stack: Stack | undefined;
  const ipc = serveParent(
    {
      cpu: (): StackCpuSample => {
        const u = process.cpuUsage();
        return {
          nodeUs: u.user + u.system,
          envoyUs: procCpuUs(stack?.envoy.process.pid ?? -1),
          baselineEnvoyUs: procCpuUs(stack?.baselineEnvoy?.process.pid ?? -1),
        };
      },
      envoyStats: async (): Promise<Record<string, number>> => {
        const admin = stack?.envoy.adminUrl;
        return admin === undefined ? {} : extProcStats(admin);
      },
      // The fakes record every request for the tests; a long run does not need that memory.
      clear: () => {
        for (const a of stack?.apiservers ?? []) a.clearRequests();
        return true;
      },
    },
    async () => {
      await stack?.close();
    },
  );
  try {
    // Fresh access logs each run (Envoy appends).
    const dir = join(packageRoot(), STACK_DIR);
    await Promise.all(['envoy.log', 'envoy-baseline.log'].map((f) => rm(join(dir, f), { force: true })));
    stack = await startStack({
      dir,
      baseline: true,
      logLevel: 'warn',
      servers: [
        { name: 'apiserver-a', builtins: BUILTINS_OLD },
        { name: 'apiserver-b', builtins: BUILTINS_OLD },
        { name: 'apiserver-c', builtins: BUILTINS_NEW },
      ],
    });
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
    const baselineUrl = stack.baselineUrl;
    const baselineEnvoyPid = stack.baselineEnvoy?.process.pid;
    if (baselineUrl === undefined || baselineEnvoyPid === undefined) throw new Error('the stack started without its baseline Envoy');
    ipc.ready({
      gatewayUrl: stack.gatewayUrl,
      baselineUrl,
      caFile: stack.pki.caFile,
      token: stack.pki.token,
      envoyPid: stack.envoy.process.pid ?? -1,
      baselineEnvoyPid,
    } satisfies StackChildReady);
  } catch (err) {
    ipc.failed(err);
  }
}

void main();
