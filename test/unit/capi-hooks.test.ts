// The gate as a Cluster API Runtime Extension, its pure part (src/gate/core/capi-hooks.ts): paths,
// discovery, the question each hook asks and the answers. The published types' own check of these
// answers is test/integration/capi-hooks.test.ts (lab/capi-hooks, built from the SDK's Go module).
import t from 'tap';
import {
  discoveryResponse,
  failureResponse,
  GATED_HOOKS,
  hookCallOf,
  hookResponse,
  HOOKS_API_VERSION,
  questionOf,
} from '../../src/gate/core/capi-hooks.js';
import type { GateAnswer } from '../../src/gate/core/verdict.js';

const s = { handlerName: 'skewgate-gate', timeoutSeconds: 10, failurePolicy: 'Fail' as const };
const P = `/${HOOKS_API_VERSION}`;

t.test('paths: discovery, each hook by its lower-case name and the handler; anything else named', async (t) => {
  t.same(hookCallOf(`${P}/discovery`, s), { kind: 'discovery' });
  t.same(hookCallOf(`${P}/beforecontrolplaneupgrade/skewgate-gate`, s), { kind: 'hook', hook: 'BeforeControlPlaneUpgrade' });
  t.same(hookCallOf(`${P}/aftercontrolplaneupgrade/skewgate-gate`, s), { kind: 'hook', hook: 'AfterControlPlaneUpgrade' });
  t.match(hookCallOf(`${P}/aftercontrolplaneupgrade/other`, s), { kind: 'unknown', problem: /this extension's is skewgate-gate/ });
  t.match(hookCallOf(`${P}/beforeclustercreate/skewgate-gate`, s), { kind: 'unknown', problem: /no hook beforeclustercreate/ });
  t.match(hookCallOf('/apis/v1', s), { kind: 'unknown', problem: /not a Runtime SDK path/ });
  t.match(hookCallOf(`${P}/discovery/x`, s), { kind: 'unknown' });
});

t.test('discovery: every gated hook, one handler each, the settings given', async (t) => {
  const d = discoveryResponse(s) as { handlers: { name: string; requestHook: { hook: string; apiVersion: string } }[] };
  t.match(d, { apiVersion: HOOKS_API_VERSION, kind: 'DiscoveryResponse', status: 'Success' });
  t.same(
    d.handlers.map((h) => h.requestHook.hook),
    Object.keys(GATED_HOOKS),
  );
  t.ok(d.handlers.every((h) => h.name === 'skewgate-gate' && h.requestHook.apiVersion === HOOKS_API_VERSION));
});

t.test('questions: AfterControlPlaneUpgrade waits for its version; a body of another kind is refused, named', async (t) => {
  const req = (hook: string, extra: object = {}): object => ({
    apiVersion: HOOKS_API_VERSION,
    kind: `${hook}Request`,
    cluster: {},
    ...extra,
  });
  t.same(questionOf('AfterControlPlaneUpgrade', req('AfterControlPlaneUpgrade', { kubernetesVersion: 'v1.36.3' })), { version: 'v1.36.3' });
  t.same(questionOf('BeforeControlPlaneUpgrade', req('BeforeControlPlaneUpgrade', { toKubernetesVersion: 'v1.36.3' })), {});
  t.equal(questionOf('AfterControlPlaneUpgrade', req('AfterControlPlaneUpgrade')), 'kubernetesVersion: missing');
  t.match(
    questionOf('BeforeClusterUpgrade', req('AfterControlPlaneUpgrade')),
    /kind BeforeClusterUpgradeRequest; got .*AfterControlPlaneUpgradeRequest/,
  );
  t.equal(questionOf('BeforeClusterUpgrade', [1]), 'the request body is not a JSON object');
});

const answer = (verdict: 'proceed' | 'hold'): GateAnswer =>
  ({
    verdict,
    holds: verdict === 'hold' ? [{ reason: 'member_not_ready', detail: 'kas-2 is not ready' }] : [],
    retryAfterSeconds: 12,
  }) as unknown as GateAnswer;

t.test('answers: proceed is Success with no retry; hold is Success with retryAfterSeconds and the reasons', async (t) => {
  t.same(hookResponse('BeforeControlPlaneUpgrade', answer('proceed')), {
    apiVersion: HOOKS_API_VERSION,
    kind: 'BeforeControlPlaneUpgradeResponse',
    status: 'Success',
    message: 'skewgate: proceed',
    retryAfterSeconds: 0,
  });
  t.same(hookResponse('AfterControlPlaneUpgrade', answer('hold')), {
    apiVersion: HOOKS_API_VERSION,
    kind: 'AfterControlPlaneUpgradeResponse',
    status: 'Success',
    message: 'skewgate: hold: member_not_ready: kas-2 is not ready',
    retryAfterSeconds: 12,
  });
  t.match(failureResponse('X', 'y'.repeat(5000)), { status: 'Failure', message: /^skewgate: y+$/ });
  t.equal((failureResponse('X', 'y'.repeat(5000)).message as string).length, 1024, 'bounded');
});
