// kubectl's streaming verbs against a pod of test/helpers/node-workload.ts, through whatever front
// the kubeconfig (or a server override) names: `logs`, `exec`, `attach -i` and `port-forward`, over
// WebSocket or SPDY/3.1. Each check is a result, never a throw: the node suites assert them, the
// upgrade test tabulates them per phase and front.
import { request } from 'undici';
import { KubectlSession } from './kubectl-session.js';
import { ECHO_PORT, tickTime } from './node-workload.js';

/** kubectl's switches back to SPDY/3.1 (WebSocket is its default for these verbs since 1.30/1.31). */
const SPDY_ENV = { KUBECTL_REMOTE_COMMAND_WEBSOCKETS: 'false', KUBECTL_PORT_FORWARD_WEBSOCKETS: 'false' };
export const PROTOCOLS = [
  { name: 'WebSocket', env: {}, verb: 'GET' },
  { name: 'SPDY/3.1', env: SPDY_ENV, verb: 'POST' },
] as const;
export type Protocol = (typeof PROTOCOLS)[number];

export interface StreamTarget {
  readonly kubectl: string;
  readonly kubeconfig: string;
  readonly context: string;
  /** Another front than the context's server (e.g. a TCP balancer), checked by this name. */
  readonly server?: { readonly url: string; readonly tlsServerName: string };
  readonly namespace: string;
  readonly pod: string;
}

export interface StreamCheck {
  readonly what: string;
  readonly ok: boolean;
  readonly detail: string;
}

export function kubectlAt(target: StreamTarget, args: readonly string[], env: Readonly<Record<string, string>> = {}): KubectlSession {
  const server = target.server === undefined ? [] : ['--server', target.server.url, '--tls-server-name', target.server.tlsServerName];
  return new KubectlSession(
    target.kubectl,
    ['--kubeconfig', target.kubeconfig, '--context', target.context, ...server, '-n', target.namespace, '-v=6', ...args],
    env,
  );
}

/** kubectl's own -v=6 record of the streaming request: its verb, URL and the status it got. */
export function upgradeAnswer(s: KubectlSession, subresource: string): { verb: string; status: string; url: string } | undefined {
  for (const line of s.lines) {
    const m = /"Response" verb="(\w+)" url="([^"]+)" status="([^"]+)"/.exec(line.text);
    if (m !== null && new URL(m[2] ?? '').pathname.endsWith(`/${subresource}`))
      return { verb: m[1] ?? '', url: m[2] ?? '', status: m[3] ?? '' };
  }
  return undefined;
}

const SWITCHED = '101 Switching Protocols';

/** The four verbs once each over `proto`; `mark` is printed by the exec and echoed by the attach. */
export async function streamChecks(target: StreamTarget, proto: Protocol, mark: string, limitMs: number): Promise<StreamCheck[]> {
  const checks: StreamCheck[] = [];
  const attempt = async (what: string, f: () => Promise<string | null>): Promise<void> => {
    try {
      const problem = await f();
      checks.push({ what, ok: problem === null, detail: problem ?? '' });
    } catch (err) {
      checks.push({ what, ok: false, detail: (err as Error).message.split('\n').slice(0, 4).join(' ') });
    }
  };
  const answered = (s: KubectlSession, sub: string): string | null => {
    const a = upgradeAnswer(s, sub);
    return a?.verb === proto.verb && a.status === SWITCHED
      ? null
      : `kubectl saw ${a === undefined ? 'no answer' : `${a.verb} → ${a.status}`}`;
  };

  await attempt('logs', async () => {
    // The whole log: its last lines may all be attach echoes, and the pod has ticked before any check.
    const s = kubectlAt(target, ['logs', target.pod]);
    const end = await s.ended(limitMs);
    return end.code === 0 && s.lines.some((x) => tickTime(x.text) !== undefined) ? null : `exit ${end.code}: ${s.transcript(3)}`;
  });
  await attempt(`exec (${proto.name})`, async () => {
    const s = kubectlAt(target, ['exec', target.pod, '--', 'sh', '-c', `echo "$0 from $(hostname)"`, mark], proto.env);
    const end = await s.ended(limitMs);
    if (end.code !== 0 || !s.lines.some((x) => x.text === `${mark} from ${target.pod}`)) return `exit ${end.code}: ${s.transcript(3)}`;
    return answered(s, 'exec');
  });
  await attempt(`attach -i (${proto.name})`, async () => {
    const s = kubectlAt(target, ['attach', '-i', target.pod], proto.env);
    try {
      await s.waitFor(/"Response" verb="\w+" url="[^"]+\/attach\?/, limitMs);
      s.send(mark);
      await s.waitFor(new RegExp(`^echo: ${mark}$`), limitMs);
      return answered(s, 'attach');
    } finally {
      await s.stop();
    }
  });
  await attempt(`port-forward (${proto.name})`, async () => {
    const s = kubectlAt(target, ['port-forward', `pod/${target.pod}`, `:${ECHO_PORT}`], proto.env);
    try {
      const fwd = await s.waitFor(/^Forwarding from 127\.0\.0\.1:(\d+) -> /, limitMs);
      const port = Number(/127\.0\.0\.1:(\d+)/.exec(fwd.text)?.[1]);
      const res = await request(`http://127.0.0.1:${port}/`, { signal: AbortSignal.timeout(limitMs) });
      const body = await res.body.text();
      if (body !== `hello from ${target.pod}\n`) return `the forwarded port answered ${JSON.stringify(body)}`;
      return answered(s, 'portforward');
    } finally {
      await s.stop();
    }
  });
  return checks;
}
