// `kubectl exec -i` sessions held open through a whole run, one per arm at any time: a session
// that ends is recorded (when, its exit, its last error) and a new one opened in its place. Each
// carries a piece of request URI only it has, to find the apiserver that served it in the audit
// logs.
import type { ServerAuditEvent } from '../../harness/lab/audit-events.js';
import type { KubectlSession } from './kubectl-session.js';
import { kubectlAt, type StreamTarget } from './stream-checks.js';

export interface HeldSession<A extends string> {
  readonly arm: A;
  readonly session: KubectlSession;
  readonly uriPart: string;
  readonly openedAt: number;
}

export interface SessionEnd<A extends string> {
  readonly held: HeldSession<A>;
  readonly at: number;
  readonly code: number | null;
  readonly error: string;
}

export class HeldExecs<A extends string> {
  readonly all: HeldSession<A>[] = [];
  readonly ended: SessionEnd<A>[] = [];
  private opened = 0;

  constructor(private readonly target: (arm: A) => StreamTarget) {}

  open(arm: A): HeldSession<A> {
    const tag = `s${Date.now()}${++this.opened}`;
    const t = this.target(arm);
    const held = {
      arm,
      session: kubectlAt(t, ['exec', '-i', t.pod, '--', 'sh', '-c', 'exec cat', tag]),
      uriPart: `command=${tag}`,
      openedAt: Date.now(),
    };
    this.all.push(held);
    return held;
  }

  /** Records the sessions that ended since the last call and opens new ones in their place. */
  tend(): void {
    for (const s of this.all.filter((x) => x.session.done !== undefined && !this.ended.some((e) => e.held === x))) {
      const error = s.session.lines.filter((x) => x.stream === 'stderr' && /error/i.test(x.text)).at(-1)?.text ?? '';
      this.ended.push({ held: s, at: s.session.done?.at ?? 0, code: s.session.done?.code ?? null, error: error.trim() });
      this.open(s.arm);
    }
  }

  /** The apiserver whose audit log has the session's ResponseStarted. */
  servedBy(events: readonly ServerAuditEvent[], s: HeldSession<A>): string | undefined {
    return events.find((e) => e.event.stage === 'ResponseStarted' && (e.event.requestURI ?? '').includes(s.uriPart))?.server;
  }

  async stopAll(): Promise<void> {
    for (const s of this.all) await s.session.stop();
  }
}
