// kubectl's streaming verbs through the gateway to a pod on the node (issue 26, item 4; a suite of
// test/cluster/node.test.ts): the apiserver a request reaches proxies it to the node's kubelet,
// so the gateway carries an HTTP/1.1 upgrade (WebSocket, or SPDY/3.1 for older clients) or a long
// streamed answer for minutes. Asserted, with a token and with a client certificate (the identity
// skewgate states), over WebSocket and SPDY: `logs`, `exec`, `attach -i` and `port-forward` work,
// each answered 101 by the apiserver (kubectl's own record: no fallback from one protocol to the
// other) and carried by the gateway (Envoy's access log). Then an open `logs -f` and an open
// `exec -i` session across apiserver restarts: both carry data after another apiserver restarted;
// when their own apiserver stops, each ends with an error — measured from the SIGTERM and stated;
// new sessions open at once through the gateway.
import type { Test as Tap } from 'tap';
import { readFile } from 'node:fs/promises';
import { readAuditEvents } from '../../../harness/lab/audit-events.js';
import { SHUTDOWN_DELAY_MS } from '../../../harness/lab/flags.js';
import type { KubectlSession } from '../../helpers/kubectl-session.js';
import type { NodeLab, NodeSuite } from '../../helpers/node-lab.js';
import { TICK_MS, echoPod, tickTime } from '../../helpers/node-workload.js';
import { PROTOCOLS, kubectlAt, streamChecks, type Protocol } from '../../helpers/stream-checks.js';
import { waitMs } from '../../helpers/waits.js';

const NS = 'node-sessions';
const POD = 'echo';
/** kubeconfig contexts of the lab gateway: the admin token, the admin's client certificate. */
const CREDENTIALS = [
  { context: 'admin-token', what: 'a token' },
  { context: 'admin-cert', what: 'a client certificate' },
] as const;

interface PodList {
  items: { spec: { nodeName?: string }; status: { phase?: string } }[];
}

export const nodeSessionsSuite: NodeSuite = {
  title: 'kubectl logs, exec, attach and port-forward through the gateway to a pod on the node; open sessions across apiserver restarts',
  run: async (t, l) => {
    const began = Date.now();
    const created = await l.api(l.gw.url, 'POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: NS } });
    t.equal(created.status, 201, `namespace ${NS} created through the gateway`);
    await l.namespaceReady(NS);
    const pod = await l.api(
      l.gw.url,
      'POST',
      `/api/v1/namespaces/${NS}/pods`,
      echoPod({ name: POD, namespace: NS, image: l.parts.workloadImage }),
    );
    t.equal(pod.status, 201, `pod ${POD} (${l.parts.workloadImage}) created through the gateway`);
    const running = await l.until(`pod ${POD} Running`, 120_000, async () => {
      const r = await l.api(l.gw.url, 'GET', `/api/v1/namespaces/${NS}/pods?labelSelector=app%3D${POD}`);
      const p = (r.json as PodList).items?.[0];
      return p?.status.phase === 'Running' ? p : undefined;
    });
    t.equal(running.spec.nodeName, l.nodeName, `scheduled onto ${l.nodeName}`);
    // Running comes before the program's first line: the one-shots begin once it has printed.
    const first = await l.until(`the pod's first line`, waitMs(TICK_MS), async () => {
      const r = await l.api(l.gw.url, 'GET', `/api/v1/namespaces/${NS}/pods/${POD}/log?tailLines=1`);
      return r.status === 200 && tickTime(String(r.json)) !== undefined ? String(r.json) : undefined;
    });
    t.ok(first, `its log through the gateway: ${first.trim()}`);
    for (const cred of CREDENTIALS)
      for (const proto of PROTOCOLS) await t.test(`with ${cred.what}, over ${proto.name}`, (st) => oneShots(st, l, cred.context, proto));
    await t.test('open logs -f and exec -i sessions across apiserver restarts', (st) => acrossRestarts(st, l));
    // Envoy's clock and this one are the same machine's.
    const lines = await gatewayLines(l, `/namespaces/${NS}/pods/${POD}/`, began - 1000);
    t.same(
      lines.filter((x) => x.status === 404),
      [],
      `no 404 among the ${lines.length} requests to the pod's subresources the gateway logged`,
    );
    const gone = await l.api(l.gw.url, 'DELETE', `/api/v1/namespaces/${NS}`);
    t.equal(gone.status, 200, `namespace ${NS} deleted`);
  },
};

function kubectl(l: NodeLab, context: string, args: readonly string[]): KubectlSession {
  return kubectlAt({ kubectl: l.kubectl, kubeconfig: l.gw.kubeconfigFile, context, namespace: NS, pod: POD }, args);
}

/** Envoy's access-log lines (written when a stream ends) of the lab gateway for `pathPart`. */
async function gatewayLines(l: NodeLab, pathPart: string, sinceMs = 0): Promise<{ method: string; status: number; path: string }[]> {
  const text = await readFile(l.lab.logFile('envoy-gateway'), 'utf8');
  return text
    .split('\n')
    .filter((x) => x.startsWith('{') && x.includes(pathPart))
    .map((x) => JSON.parse(x) as { method: string; status: number; path: string; start: string })
    .filter((x) => Date.parse(x.start) >= sinceMs);
}

async function oneShots(t: Tap, l: NodeLab, context: string, proto: Protocol): Promise<void> {
  const mark = `${context}-${proto.verb.toLowerCase()}-${Date.now()}`;
  const limit = waitMs(TICK_MS);
  const target = { kubectl: l.kubectl, kubeconfig: l.gw.kubeconfigFile, context, namespace: NS, pod: POD };
  for (const c of await streamChecks(target, proto, mark, limit)) t.ok(c.ok, `${c.what}${c.ok ? '' : `: ${c.detail}`}`);
  // Envoy writes a stream's line when it ends: the exec's (its command carries the mark) must be there.
  const lines = await l.until('the exec in the gateway access log', limit, async () => {
    const found = await gatewayLines(l, mark);
    return found.length > 0 ? found : undefined;
  });
  t.same(
    lines.map((x) => [x.method, x.status]),
    [[proto.verb, 101]],
    `the gateway carried the exec: ${proto.verb} ${lines[0]?.path.split('?')[0] ?? ''} → 101`,
  );
}

/** The apiserver whose audit log has the long-running request whose URI contains `part` (its ResponseStarted). */
async function servingServer(l: NodeLab, part: string): Promise<string> {
  return l.until(`the apiserver serving ${part}`, waitMs(TICK_MS), async () => {
    const events = await readAuditEvents(l.servers.map((s) => ({ server: s.name, file: l.lab.auditLogFile(s.name) })));
    const hit = [...events.values()].flat().find((e) => e.event.stage === 'ResponseStarted' && (e.event.requestURI ?? '').includes(part));
    return hit?.server;
  });
}

/**
 * The SIGKILL of a stopping apiserver, as its supervisor (a kubelet: the pod's grace period) would
 * send it: after the shutdown delay and the watch drain, with room to spare. Shorter than the lab's
 * default, so that the open `logs -f` it waits for costs this test less; the verdicts are orderings.
 */
const STOP_GRACE_MS = SHUTDOWN_DELAY_MS + 10_000;

async function restart(l: NodeLab, name: string): Promise<{ sigterm: number; gone: number; ready: number }> {
  const spec = l.servers.find((s) => s.name === name);
  if (spec === undefined) throw new Error(`no apiserver ${name}`);
  const sigterm = Date.now();
  await l.lab.stopApiServer(name, STOP_GRACE_MS);
  const gone = Date.now();
  await l.lab.startApiServer(spec);
  return { sigterm, gone, ready: Date.now() };
}

async function acrossRestarts(t: Tap, l: NodeLab): Promise<void> {
  const limit = waitMs(TICK_MS);
  const open = (n: number): { logs: KubectlSession; exec: KubectlSession; execPart: string; logsPart: string } => {
    // Unique request URIs, to find each session's apiserver in the audit logs.
    const stamp = Date.now();
    const execTag = `session-${n}-${stamp}`;
    return {
      // --limit-bytes far above what a run prints: only there to make the URI unique.
      logs: kubectl(l, 'admin-token', ['logs', '-f', POD, '--tail=1', `--limit-bytes=${stamp}`]),
      exec: kubectl(l, 'admin-token', ['exec', '-i', POD, '--', 'sh', '-c', 'exec cat', execTag]),
      logsPart: `limitBytes=${stamp}`,
      execPart: `command=${execTag}`,
    };
  };
  const live = async (s: ReturnType<typeof open>, what: string): Promise<void> => {
    await s.logs.waitFor(/^tick /, limit);
    s.exec.send(what);
    await s.exec.waitFor(new RegExp(`^${what}$`), limit);
  };

  const first = open(1);
  await live(first, 'hello-1');
  const logsServer = await servingServer(l, first.logsPart);
  const execServer = await servingServer(l, first.execPart);
  t.comment(`logs -f through the gateway is served by ${logsServer}, exec -i by ${execServer}`);
  const other = l.servers.find((s) => s.name !== logsServer && s.name !== execServer)?.name;
  if (other === undefined) throw new Error('the shape needs an apiserver serving neither session (three apiservers)');

  const r = await restart(l, other);
  t.comment(
    `${other} restarted: stopped in ${((r.gone - r.sigterm) / 1000).toFixed(1)} s, ready again ${((r.ready - r.sigterm) / 1000).toFixed(1)} s after its SIGTERM`,
  );
  const fromLine = first.logs.lines.length;
  const tick = await first.logs.waitFor(/^tick /, limit, fromLine);
  t.ok(
    (tickTime(tick.text) ?? 0) > r.ready,
    `logs -f still streams after ${other} restarted: a line the pod printed after it was ready again`,
  );
  first.exec.send('after-other-restart');
  t.ok(await first.exec.waitFor(/^after-other-restart$/, limit), `exec -i still carries stdin and stdout after ${other} restarted`);
  t.equal(first.logs.done, undefined, 'the logs -f session is still open');
  t.equal(first.exec.done, undefined, 'the exec -i session is still open');

  // Their own apiservers stop (both at once when they differ): what each session does, measured.
  const owners = [...new Set([logsServer, execServer])];
  const stops = new Map(await Promise.all(owners.map(async (name) => [name, await restart(l, name)] as const)));
  for (const [what, s, owner] of [
    ['logs -f', first.logs, logsServer],
    ['exec -i', first.exec, execServer],
  ] as const) {
    const stop = stops.get(owner);
    if (stop === undefined) continue;
    const end = await s.ended(waitMs(STOP_GRACE_MS));
    const error = s.lines.filter((x) => x.stream === 'stderr' && /error/i.test(x.text)).at(-1)?.text ?? '';
    t.not(end.code, 0, `${what}: ends with an error when its own apiserver ${owner} stops (exit ${end.code}: ${error.trim()})`);
    t.ok(end.at >= stop.sigterm, `${what}: ended after ${owner}'s SIGTERM, not before`);
    t.comment(
      `${what}: ended ${((end.at - stop.sigterm) / 1000).toFixed(1)} s after ${owner}'s SIGTERM; ${owner} was gone ` +
        `${((stop.gone - stop.sigterm) / 1000).toFixed(1)} s after it (shutdown delay ${SHUTDOWN_DELAY_MS / 1000} s, SIGKILL at ${STOP_GRACE_MS / 1000} s)`,
    );
  }

  const second = open(2);
  await live(second, 'hello-2');
  t.pass('new logs -f and exec -i sessions open through the gateway once the apiservers are back');
  await Promise.all([second.logs.stop(), second.exec.stop()]);
}
