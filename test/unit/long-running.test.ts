// Which requests kube-apiserver ends at --request-timeout and which it lets run: a table through
// the real classifier, so that the path rules (watch prefix, ?watch=, subresources) are the real ones.
import t from 'tap';
import { classifyRequest } from '../../src/k8s/classify.js';
import { isLongRunning } from '../../src/k8s/long-running.js';

const CASES: readonly (readonly [method: string, path: string, longRunning: boolean])[] = [
  // Watches, both spellings.
  ['GET', '/api/v1/pods?watch=true', true],
  ['GET', '/api/v1/namespaces/default/pods?watch=1&resourceVersion=10', true],
  ['GET', '/apis/apps/v1/watch/deployments', true],
  ['GET', '/api/v1/watch/namespaces/default/pods/p', true],
  // Proxies, exec, attach, port-forward, logs.
  ['GET', '/api/v1/namespaces/default/pods/p/proxy/metrics', true],
  ['GET', '/api/v1/proxy/namespaces/default/services/s', true],
  ['GET', '/api/v1/nodes/n/proxy/stats', true],
  ['POST', '/api/v1/namespaces/default/pods/p/exec?command=sh', true],
  ['GET', '/api/v1/namespaces/default/pods/p/exec?command=sh', true],
  ['POST', '/api/v1/namespaces/default/pods/p/attach', true],
  ['POST', '/api/v1/namespaces/default/pods/p/portforward', true],
  ['GET', '/api/v1/namespaces/default/pods/p/log?follow=true', true],
  ['GET', '/api/v1/namespaces/default/pods/p/log', true],
  ['GET', '/debug/pprof/profile?seconds=30', true],
  // Bounded: reads, lists (however big), writes, status, discovery, health.
  ['GET', '/api/v1/pods', false],
  ['GET', '/api/v1/pods?watch=false', false],
  ['GET', '/api/v1/namespaces/default/pods/p', false],
  ['GET', '/api/v1/namespaces/default/pods/p?watch=true', false],
  ['GET', '/apis/apps/v1/deployments?limit=500&continue=abc', false],
  ['POST', '/api/v1/namespaces/default/pods', false],
  ['PUT', '/api/v1/namespaces/default/pods/p/status', false],
  ['PATCH', '/apis/apps/v1/namespaces/default/deployments/d/scale', false],
  ['POST', '/api/v1/namespaces/default/pods/p/eviction', false],
  ['POST', '/api/v1/namespaces/default/pods/p/binding', false],
  ['DELETE', '/api/v1/namespaces/default/pods', false],
  ['GET', '/apis', false],
  ['GET', '/api/v1', false],
  ['GET', '/openapi/v3', false],
  ['GET', '/readyz', false],
  ['GET', '/version', false],
  ['GET', '/debug/pprof', false],
  ['GET', '/api/v1/namespaces/%zz/pods', false],
];

t.test('long-running as kube-apiserver counts it', async (t) => {
  for (const [method, path, want] of CASES) {
    t.equal(isLongRunning(classifyRequest(method, path)), want, `${method} ${path}`);
  }
});
