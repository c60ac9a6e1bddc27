// Unmodified real clients through a gateway kubeconfig: the kubectl built for the lab and
// @kubernetes/client-node. Each check is one thing a user does; ok says whether it worked.
import { execFile, spawn } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CoreV1Api, CustomObjectsApi, KubeConfig, Watch } from '@kubernetes/client-node';
import { MEDIA_AGGREGATED_V2 } from '../../src/constants.js';
import type { Clock } from './clock.js';
import { ARM_LABEL, type ResourceSpec } from './workload.js';

export interface ClientCheck {
  readonly client: 'kubectl' | 'client-node';
  readonly what: string;
  readonly ok: boolean;
  readonly detail: string;
  readonly ms: number;
  /** The check needs the client's API discovery (GET /apis) to list the skewed resource. */
  readonly viaDiscovery?: boolean;
}

export interface ClientChecksOptions {
  readonly kubeconfig: string;
  /** A folder of this run for manifests and kubectl's discovery cache. */
  readonly workDir: string;
  /** A short label for object names ("p1"). */
  readonly tag: string;
  readonly namespace: string;
  readonly skewed: ResourceSpec;
  readonly common: ResourceSpec;
  /** Whether some apiserver serves the skewed resource now (kubectl apply/get of it only then). */
  readonly skewedServed: boolean;
  readonly clock: Clock;
}

const short = (s: string): string => s.replace(/\s+/g, ' ').trim().slice(0, 240);

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

function run(bin: string, args: readonly string[], timeoutMs = 30_000): Promise<Run> {
  return new Promise((resolve) => {
    execFile(bin, args, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : null) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
  });
}

/**
 * Starts `kubectl get <resource> --watch -o name`, then runs `trigger` once the watch is up, and
 * waits until the output names the object trigger created. Killed afterwards (bounded).
 */
function kubectlWatch(
  bin: string,
  args: readonly string[],
  trigger: () => Promise<string>,
  timeoutMs: number,
): Promise<{ ok: boolean; detail: string }> {
  return new Promise((resolve) => {
    const child = spawn(bin, [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    let expected: string | undefined;
    let done = false;
    const finish = (ok: boolean, detail: string): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      child.kill('SIGKILL');
      resolve({ ok, detail });
    };
    const timer = setTimeout(
      () => finish(false, `no event for ${expected ?? '(trigger not done)'} within ${timeoutMs} ms; out: ${short(out)} err: ${short(err)}`),
      timeoutMs,
    );
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (expected !== undefined && out.includes(expected)) finish(true, `saw ${expected}`);
    });
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
    });
    child.once('exit', (code) => finish(false, `kubectl exited (${String(code)}) before the event; err: ${short(err)}`));
    // Give the watch a moment to be established; events before it would come as the initial list anyway.
    setTimeout(() => {
      trigger().then(
        (name) => {
          expected = name;
          if (out.includes(name)) finish(true, `saw ${name}`);
        },
        (e: unknown) => finish(false, `trigger failed: ${String(e)}`),
      );
    }, 1500);
  });
}

function kindOf(spec: ResourceSpec): string {
  const k = spec.body().kind;
  return typeof k === 'string' ? k : spec.resource;
}

/** `<resource>.<version>.<group>`: kubectl's fully qualified resource name. */
function qualified(spec: ResourceSpec): string {
  return spec.group === '' ? spec.resource : `${spec.resource}.${spec.version}.${spec.group}`;
}

function manifest(spec: ResourceSpec, name: string, namespace: string): Record<string, unknown> {
  const body = spec.body();
  return { ...body, metadata: { name, ...(spec.namespaced ? { namespace } : {}), labels: { [ARM_LABEL]: 'clients' } } };
}

export async function kubectlChecks(kubectl: string, o: ClientChecksOptions): Promise<ClientCheck[]> {
  const checks: ClientCheck[] = [];
  const base = ['--kubeconfig', o.kubeconfig, '--cache-dir', join(o.workDir, 'kubectl-cache'), '--request-timeout=20s'];
  const check = async (what: string, args: readonly string[], okIf: (r: Run) => string | null, viaDiscovery = false): Promise<Run> => {
    const start = o.clock();
    const r = await run(kubectl, [...base, ...args]);
    const problem = r.code !== 0 ? `exit ${String(r.code)}: ${short(r.stderr || r.stdout)}` : okIf(r);
    checks.push({
      client: 'kubectl',
      what,
      ok: problem === null,
      detail: problem ?? short(r.stdout.split('\n').slice(0, 2).join(' | ')),
      ms: o.clock() - start,
      ...(viaDiscovery ? { viaDiscovery } : {}),
    });
    return r;
  };

  await check('api-resources', ['api-resources'], (r) => (r.stdout.includes(o.common.resource) ? null : `${o.common.resource} not listed`));
  const targets = o.skewedServed ? [o.common, o.skewed] : [o.common];
  for (const spec of targets) {
    const name = `kubectl-${o.tag}-${spec.resource.slice(0, 8)}`;
    const file = join(o.workDir, `${name}.json`);
    await writeFile(file, JSON.stringify(manifest(spec, name, o.namespace)));
    const nsArgs = spec.namespaced ? ['-n', o.namespace] : [];
    // kubectl maps kinds and resource names through discovery: for the skewed resource that needs
    // the gateway's GET /apis to list it, whichever apiserver answers.
    const viaDiscovery = spec === o.skewed;
    await check(
      `apply -f (${kindOf(spec)})`,
      ['apply', '-f', file],
      (r) => (r.stdout.includes(name) ? null : `unexpected output: ${short(r.stdout)}`),
      viaDiscovery,
    );
    await check(
      `get ${spec.resource}`,
      ['get', qualified(spec), ...nsArgs, '-o', 'name'],
      (r) => (r.stdout.includes(name) ? null : `${name} not in the list`),
      viaDiscovery,
    );

    const start = o.clock();
    const watchName = `${name}-w`;
    const watchFile = join(o.workDir, `${watchName}.json`);
    await writeFile(watchFile, JSON.stringify(manifest(spec, watchName, o.namespace)));
    const w = await kubectlWatch(
      kubectl,
      [...base, 'get', qualified(spec), ...nsArgs, '--watch', '-o', 'name'],
      async () => {
        const r = await run(kubectl, [...base, 'apply', '-f', watchFile]);
        if (r.code !== 0) throw new Error(`apply for the watch: ${short(r.stderr)}`);
        return watchName;
      },
      20_000,
    );
    checks.push({
      client: 'kubectl',
      what: `get --watch ${spec.resource}`,
      ok: w.ok,
      detail: w.detail,
      ms: o.clock() - start,
      ...(viaDiscovery ? { viaDiscovery } : {}),
    });
  }
  return checks;
}

export async function clientNodeChecks(o: ClientChecksOptions): Promise<ClientCheck[]> {
  const checks: ClientCheck[] = [];
  const kc = new KubeConfig();
  kc.loadFromFile(o.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const attempt = async (what: string, fn: () => Promise<string>): Promise<void> => {
    const start = o.clock();
    try {
      const detail = await fn();
      checks.push({ client: 'client-node', what, ok: true, detail, ms: o.clock() - start });
    } catch (err) {
      const e = err as { code?: number; body?: unknown; message?: string };
      checks.push({
        client: 'client-node',
        what,
        ok: false,
        detail: short(`${e.code ?? ''} ${e.message ?? String(err)}`),
        ms: o.clock() - start,
      });
    }
  };

  await attempt(
    'CoreV1Api.listNamespacedConfigMap',
    async () => `${(await core.listNamespacedConfigMap({ namespace: o.namespace })).items.length} items`,
  );
  await attempt('CoreV1Api.createNamespacedConfigMap', async () => {
    const cm = await core.createNamespacedConfigMap({
      namespace: o.namespace,
      body: { metadata: { name: `client-node-${o.tag}`, labels: { [ARM_LABEL]: 'clients' } }, data: { a: 'b' } },
    });
    return `created ${cm.metadata?.name ?? '?'}`;
  });
  if (o.skewedServed) {
    const s = o.skewed;
    const name = `client-node-${o.tag}-${s.resource.slice(0, 8)}`;
    const body = manifest(s, name, o.namespace);
    await attempt(`CustomObjectsApi create ${s.resource}`, async () => {
      const created = (
        s.namespaced
          ? await custom.createNamespacedCustomObject({
              group: s.group,
              version: s.version,
              namespace: o.namespace,
              plural: s.resource,
              body,
            })
          : await custom.createClusterCustomObject({ group: s.group, version: s.version, plural: s.resource, body })
      ) as { metadata?: { name?: string } };
      return `created ${created.metadata?.name ?? '?'}`;
    });
    await attempt(`CustomObjectsApi list ${s.resource}`, async () => {
      const list = (
        s.namespaced
          ? await custom.listNamespacedCustomObject({ group: s.group, version: s.version, namespace: o.namespace, plural: s.resource })
          : await custom.listClusterCustomObject({ group: s.group, version: s.version, plural: s.resource })
      ) as { items?: unknown[] };
      return `${list.items?.length ?? 0} items`;
    });
  }

  // Watch: an event for an object created after the watch started.
  const watchTarget = o.skewedServed ? o.skewed : o.common;
  await attempt(`Watch ${watchTarget.resource}`, async () => {
    const name = `client-node-${o.tag}-w-${watchTarget.resource.slice(0, 8)}`;
    const path = watchTarget.namespaced
      ? `${watchTarget.group === '' ? '/api/v1' : `/apis/${watchTarget.group}/${watchTarget.version}`}/namespaces/${o.namespace}/${watchTarget.resource}`
      : `/apis/${watchTarget.group}/${watchTarget.version}/${watchTarget.resource}`;
    let abort: AbortController | undefined;
    try {
      const seen = new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no event within 20 s')), 20_000);
        new Watch(kc)
          .watch(
            path,
            {},
            (type: string, obj: { metadata?: { name?: string } }) => {
              if (obj.metadata?.name === name) {
                clearTimeout(timer);
                resolve(`${type} ${name}`);
              }
            },
            (err: unknown) => {
              if (err) {
                clearTimeout(timer);
                reject(err instanceof Error ? err : new Error(String(err)));
              }
            },
          )
          .then(
            (a) => {
              abort = a;
            },
            (e: unknown) => {
              clearTimeout(timer);
              reject(e instanceof Error ? e : new Error(String(e)));
            },
          );
      });
      // The create below may fail first: the watch's own failure must not go unhandled meanwhile.
      seen.catch(() => undefined);
      await new Promise((r) => setTimeout(r, 1000));
      const body = manifest(watchTarget, name, o.namespace);
      if (watchTarget.kind === 'common') await core.createNamespacedConfigMap({ namespace: o.namespace, body });
      else if (watchTarget.namespaced)
        await custom.createNamespacedCustomObject({
          group: watchTarget.group,
          version: watchTarget.version,
          namespace: o.namespace,
          plural: watchTarget.resource,
          body,
        });
      else
        await custom.createClusterCustomObject({
          group: watchTarget.group,
          version: watchTarget.version,
          plural: watchTarget.resource,
          body,
        });
      return await seen;
    } finally {
      abort?.abort();
    }
  });
  return checks;
}

/**
 * How many of `tries` aggregated-discovery answers (GET /apis, as kubectl asks, without
 * profile=nopeer) through a gateway list the resource: all of them once the gateway (or the
 * apiservers) answer with the merged document.
 */
export async function discoveryListing(
  http: { send(method: string, url: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; text: string }> },
  gatewayUrl: string,
  spec: ResourceSpec,
  tries = 6,
): Promise<number> {
  let listed = 0;
  for (let i = 0; i < tries; i++) {
    const res = await http.send('GET', `${gatewayUrl}/apis`, undefined, { accept: MEDIA_AGGREGATED_V2 });
    if (res.status !== 200) continue;
    const doc = JSON.parse(res.text) as {
      items?: { metadata?: { name?: string }; versions?: { version?: string; resources?: { resource?: string }[] }[] }[];
    };
    const group = doc.items?.find((g) => (g.metadata?.name ?? '') === spec.group);
    const version = group?.versions?.find((v) => v.version === spec.version);
    if (version?.resources?.some((r) => r.resource === spec.resource)) listed++;
  }
  return listed;
}
