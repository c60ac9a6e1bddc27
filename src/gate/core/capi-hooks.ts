// The gate as a Cluster API Runtime Extension (docs/cluster-api.md): the Runtime SDK's discovery
// and lifecycle hooks, their paths, what each asks the gate, and the answers in the shape the
// SDK's published types (sigs.k8s.io/cluster-api/api/runtime/hooks/v1alpha1) define — a hold is a
// Success with retryAfterSeconds, which the hook's caller waits out and asks again; a Failure is
// kept for a request skewgate cannot read. Pure. lab/capi-hooks checks these against those types.
import type { GateAnswer, GateQuestion } from './verdict.js';

export const HOOKS_API_VERSION = 'hooks.runtime.cluster.x-k8s.io/v1alpha1';
const PREFIX = `/${HOOKS_API_VERSION}/`;

/** The blocking hooks the gate answers, and the version the answer waits for. */
export const GATED_HOOKS = Object.freeze({
  // Before any apiserver moves: the plane as it is must be sound.
  BeforeClusterUpgrade: null,
  BeforeControlPlaneUpgrade: null,
  // After the control plane moved: every member runs the new version, and the plane is sound.
  AfterControlPlaneUpgrade: 'kubernetesVersion',
  BeforeWorkersUpgrade: null,
} as const satisfies Record<string, string | null>);
export type GatedHook = keyof typeof GATED_HOOKS;

export interface HookSettings {
  /** The handler's name: a DNS-1123 label, the last element of its path. */
  readonly handlerName: string;
  readonly timeoutSeconds: number;
  readonly failurePolicy: 'Fail' | 'Ignore';
}

export type HookCall =
  | { readonly kind: 'discovery' }
  | { readonly kind: 'hook'; readonly hook: GatedHook }
  | { readonly kind: 'unknown'; readonly problem: string };

/** The call a POST path names: /hooks.runtime.cluster.x-k8s.io/v1alpha1/discovery or …/<hook>/<handler>. */
export function hookCallOf(path: string, s: HookSettings): HookCall {
  if (!path.startsWith(PREFIX)) return { kind: 'unknown', problem: `not a Runtime SDK path (${PREFIX}…)` };
  const [hook = '', handler, ...rest] = path.slice(PREFIX.length).split('/');
  if (hook === 'discovery' && handler === undefined) return { kind: 'discovery' };
  const named = (Object.keys(GATED_HOOKS) as GatedHook[]).find((h) => h.toLowerCase() === hook);
  if (named === undefined || rest.length > 0)
    return { kind: 'unknown', problem: `no hook ${hook} here; discovery lists the ones there are` };
  if (handler !== s.handlerName)
    return { kind: 'unknown', problem: `no handler ${handler ?? '(none)'} for ${named}; this extension's is ${s.handlerName}` };
  return { kind: 'hook', hook: named };
}

export function discoveryResponse(s: HookSettings): Record<string, unknown> {
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: 'DiscoveryResponse',
    status: 'Success',
    handlers: (Object.keys(GATED_HOOKS) as GatedHook[]).map((hook) => ({
      name: s.handlerName,
      requestHook: { apiVersion: HOOKS_API_VERSION, hook },
      timeoutSeconds: s.timeoutSeconds,
      failurePolicy: s.failurePolicy,
    })),
  };
}

/** What the gate is asked for a hook's request body, or why the body cannot be read. */
export function questionOf(hook: GatedHook, body: unknown): GateQuestion | string {
  const b = body as Record<string, unknown> | null;
  if (b === null || typeof b !== 'object' || Array.isArray(b)) return 'the request body is not a JSON object';
  if (b['apiVersion'] !== HOOKS_API_VERSION || b['kind'] !== `${hook}Request`)
    return `expected apiVersion ${HOOKS_API_VERSION}, kind ${hook}Request; got ${String(b['apiVersion'])}, ${String(b['kind'])}`;
  const field = GATED_HOOKS[hook];
  if (field === null) return {};
  const version = b[field];
  if (typeof version !== 'string' || version === '') return `${field}: missing`;
  return { version };
}

/** The longest message sent: it ends up in the Cluster's conditions. */
const MESSAGE_MAX = 1024;

/** A gate answer as the hook's response: proceed, or hold (retry after) with the reasons. */
export function hookResponse(hook: GatedHook, g: GateAnswer): Record<string, unknown> {
  const message =
    g.verdict === 'proceed' ? 'skewgate: proceed' : `skewgate: hold: ${g.holds.map((h) => `${h.reason}: ${h.detail}`).join('; ')}`;
  return {
    apiVersion: HOOKS_API_VERSION,
    kind: `${hook}Response`,
    status: 'Success',
    message: message.length <= MESSAGE_MAX ? message : `${message.slice(0, MESSAGE_MAX - 1)}…`,
    retryAfterSeconds: g.verdict === 'proceed' ? 0 : Math.max(1, g.retryAfterSeconds),
  };
}

/** The answer to a request that cannot be read: a Failure of the kind asked for. */
export function failureResponse(kind: string, message: string): Record<string, unknown> {
  return { apiVersion: HOOKS_API_VERSION, kind, status: 'Failure', message: `skewgate: ${message}`.slice(0, MESSAGE_MAX) };
}
