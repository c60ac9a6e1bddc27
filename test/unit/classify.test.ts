import t from 'tap';
import { classifyRequest } from '../../src/k8s/classify.js';
import type { NonResourceRequest, ResourceRequest, Verb } from '../../src/k8s/request-info.js';

interface ResourceFields {
  readonly apiPrefix?: 'api' | 'apis';
  readonly group?: string;
  readonly version: string;
  readonly resource: string;
  readonly subresource?: string;
  readonly name?: string;
  readonly namespace?: string;
  readonly verb: Verb | '';
  /** The decoded path; defaults to the raw path without its query. */
  readonly path?: string;
}

function rawPathOnly(raw: string): string {
  const q = raw.indexOf('?');
  return q < 0 ? raw : raw.slice(0, q);
}

function res(method: string, raw: string, f: ResourceFields): [string, string, ResourceRequest] {
  return [
    method,
    raw,
    {
      kind: 'resource',
      method: method.toUpperCase(),
      path: f.path ?? rawPathOnly(raw),
      apiPrefix: f.apiPrefix ?? (f.group ? 'apis' : 'api'),
      group: f.group ?? '',
      version: f.version,
      resource: f.resource,
      subresource: f.subresource ?? '',
      name: f.name ?? '',
      namespace: f.namespace ?? '',
      verb: f.verb,
    },
  ];
}

function non(method: string, raw: string, path?: string): [string, string, NonResourceRequest] {
  return [
    method,
    raw,
    {
      kind: 'non-resource',
      method: method.toUpperCase(),
      path: path ?? rawPathOnly(raw),
      query: raw.includes('?') ? raw.slice(raw.indexOf('?') + 1) : '',
      verb: method.toLowerCase(),
    },
  ];
}

const core = { version: 'v1' } as const;
const apps = { group: 'apps', version: 'v1' } as const;
const ns = { namespace: 'default' } as const;

const resourceRows: [string, string, ResourceRequest][] = [
  // kubectl get / create / apply / edit / delete
  res('GET', '/api/v1/namespaces/default/pods', { ...core, ...ns, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/namespaces/default/pods?limit=500', { ...core, ...ns, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/namespaces/default/pods/nginx', { ...core, ...ns, resource: 'pods', name: 'nginx', verb: 'get' }),
  res('POST', '/api/v1/namespaces/default/pods?fieldManager=kubectl-client-side-apply&fieldValidation=Strict', {
    ...core,
    ...ns,
    resource: 'pods',
    verb: 'create',
  }),
  res('PUT', '/api/v1/namespaces/default/pods/nginx?fieldManager=kubectl-edit', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    verb: 'update',
  }),
  res('PATCH', '/api/v1/namespaces/default/pods/nginx?fieldManager=kubectl-patch', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    verb: 'patch',
  }),
  res('DELETE', '/api/v1/namespaces/default/pods/nginx', { ...core, ...ns, resource: 'pods', name: 'nginx', verb: 'delete' }),
  res('DELETE', '/api/v1/namespaces/default/pods?labelSelector=app%3Dnginx', {
    ...core,
    ...ns,
    resource: 'pods',
    verb: 'deletecollection',
  }),
  // subresources: logs, exec (SPDY POST and WebSocket GET), port-forward, eviction, status
  res('GET', '/api/v1/namespaces/default/pods/nginx/log?container=nginx&follow=true', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    subresource: 'log',
    verb: 'get',
  }),
  res(
    'POST',
    '/api/v1/namespaces/default/pods/nginx/exec?command=sh&command=-c&command=echo%20hi&container=nginx&stdin=true&stdout=true&tty=true',
    { ...core, ...ns, resource: 'pods', name: 'nginx', subresource: 'exec', verb: 'create' },
  ),
  res('GET', '/api/v1/namespaces/default/pods/nginx/exec?command=ls&stderr=true&stdout=true', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    subresource: 'exec',
    verb: 'get',
  }),
  res('POST', '/api/v1/namespaces/default/pods/nginx/portforward', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    subresource: 'portforward',
    verb: 'create',
  }),
  res('POST', '/api/v1/namespaces/default/pods/nginx/eviction', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    subresource: 'eviction',
    verb: 'create',
  }),
  res('PATCH', '/api/v1/namespaces/default/pods/nginx/status', {
    ...core,
    ...ns,
    resource: 'pods',
    name: 'nginx',
    subresource: 'status',
    verb: 'patch',
  }),
  // cluster-scoped, node proxy subresource and the deprecated proxy verb (no subresource)
  res('GET', '/api/v1/nodes', { ...core, resource: 'nodes', verb: 'list' }),
  res('GET', '/api/v1/nodes/node-1/proxy/metrics', { ...core, resource: 'nodes', name: 'node-1', subresource: 'proxy', verb: 'get' }),
  res('GET', '/api/v1/proxy/nodes/node-1/metrics', { ...core, resource: 'nodes', name: 'node-1', verb: 'proxy' }),
  res('GET', '/api/v1/proxy/namespaces/default/services/web:80/healthz', {
    ...core,
    ...ns,
    resource: 'services',
    name: 'web:80',
    verb: 'proxy',
  }),
  // legacy watch paths
  res('GET', '/api/v1/watch/namespaces/ns/pods/p', { ...core, namespace: 'ns', resource: 'pods', name: 'p', verb: 'watch' }),
  res('GET', '/api/v1/watch/namespaces/ns/pods', { ...core, namespace: 'ns', resource: 'pods', verb: 'watch' }),
  res('GET', '/api/v1/watch/pods?watch=false', { ...core, resource: 'pods', verb: 'watch' }),
  res('POST', '/api/v1/watch/pods', { ...core, resource: 'pods', verb: 'watch' }),
  // namespaces special cases
  res('GET', '/api/v1/namespaces', { ...core, resource: 'namespaces', verb: 'list' }),
  res('GET', '/api/v1/namespaces/ns', { ...core, namespace: 'ns', resource: 'namespaces', name: 'ns', verb: 'get' }),
  res('PUT', '/api/v1/namespaces/ns/status', {
    ...core,
    namespace: 'ns',
    resource: 'namespaces',
    name: 'ns',
    subresource: 'status',
    verb: 'update',
  }),
  res('PUT', '/api/v1/namespaces/ns/finalize', {
    ...core,
    namespace: 'ns',
    resource: 'namespaces',
    name: 'ns',
    subresource: 'finalize',
    verb: 'update',
  }),
  res('DELETE', '/api/v1/namespaces/ns', { ...core, namespace: 'ns', resource: 'namespaces', name: 'ns', verb: 'delete' }),
  res('GET', '/api/v1/namespaces/ns/pods/p/log', {
    ...core,
    namespace: 'ns',
    resource: 'pods',
    name: 'p',
    subresource: 'log',
    verb: 'get',
  }),
  // the named case ignores watch=1 entirely
  res('GET', '/apis/apps/v1/namespaces/ns/deployments/name/scale?watch=1', {
    ...apps,
    namespace: 'ns',
    resource: 'deployments',
    name: 'name',
    subresource: 'scale',
    verb: 'get',
  }),
  res('PUT', '/apis/apps/v1/namespaces/ns/deployments/web/scale', {
    ...apps,
    namespace: 'ns',
    resource: 'deployments',
    name: 'web',
    subresource: 'scale',
    verb: 'update',
  }),
  // watch query parameter: any first value other than 0/false (case-insensitive) is a watch
  res('GET', '/apis/apps/v1/deployments?allowWatchBookmarks=true&resourceVersion=1234&timeout=6m17s&timeoutSeconds=377&watch=true', {
    ...apps,
    resource: 'deployments',
    verb: 'watch',
  }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=1', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'watch' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=false', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'list' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=0', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'list' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=FALSE', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'list' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'watch' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'watch' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=yes', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'watch' }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=false&watch=true', {
    ...apps,
    namespace: 'ns',
    resource: 'deployments',
    verb: 'list',
  }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?wat%63h=tru%65', {
    ...apps,
    namespace: 'ns',
    resource: 'deployments',
    verb: 'watch',
  }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=%zz&watch=1', {
    ...apps,
    namespace: 'ns',
    resource: 'deployments',
    verb: 'watch',
  }),
  res('GET', '/apis/apps/v1/namespaces/ns/deployments?watch=1;x', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'list' }),
  res('HEAD', '/apis/apps/v1/namespaces/ns/deployments?watch=true', { ...apps, namespace: 'ns', resource: 'deployments', verb: 'watch' }),
  // fieldSelector=metadata.name=<name> names the object (kubectl get --watch pod/x, client-go single-object informers)
  res('GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo', {
    ...core,
    namespace: 'ns',
    resource: 'pods',
    name: 'foo',
    verb: 'list',
  }),
  res('GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo&resourceVersion=0&watch=true', {
    ...core,
    namespace: 'ns',
    resource: 'pods',
    name: 'foo',
    verb: 'watch',
  }),
  res('GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3D%3Dfoo', {
    ...core,
    namespace: 'ns',
    resource: 'pods',
    name: 'foo',
    verb: 'list',
  }),
  res('GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name!%3Dfoo', { ...core, namespace: 'ns', resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-1&limit=500', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=status.phase%3DRunning,metadata.name%3Dfoo', {
    ...core,
    resource: 'pods',
    name: 'foo',
    verb: 'list',
  }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo,metadata.name%3Dbar', {
    ...core,
    resource: 'pods',
    name: 'bar',
    verb: 'list',
  }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Da%5C%2Cb', { ...core, resource: 'pods', name: 'a,b', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Da%2Fb', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3D..', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=app%20in%20(a,b),!canary,tier%3Dweb', {
    ...core,
    resource: 'pods',
    name: 'foo',
    verb: 'list',
  }),
  // any ListOptions conversion error drops the name but keeps the watch flag
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=app%20in%20(a', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=-bad-key', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo&limit=abc&watch=1', { ...core, resource: 'pods', verb: 'watch' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo&timeoutSeconds=&watch=0', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1/pods?fieldSelector=metadata.name%3Dfoo%3Dbar&watch=1', { ...core, resource: 'pods', verb: 'watch' }),
  // fieldSelector is not consulted for named requests or deletes
  res('DELETE', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo', {
    ...core,
    namespace: 'ns',
    resource: 'pods',
    verb: 'deletecollection',
  }),
  // CRDs, aggregated APIs and other groups
  res('GET', '/apis/example.com/v1/namespaces/x/widgets', {
    group: 'example.com',
    version: 'v1',
    namespace: 'x',
    resource: 'widgets',
    verb: 'list',
  }),
  res('POST', '/apis/example.com/v1/namespaces/x/widgets', {
    group: 'example.com',
    version: 'v1',
    namespace: 'x',
    resource: 'widgets',
    verb: 'create',
  }),
  res('PUT', '/apis/example.com/v1/gizmos/g1/status', {
    group: 'example.com',
    version: 'v1',
    resource: 'gizmos',
    name: 'g1',
    subresource: 'status',
    verb: 'update',
  }),
  res('GET', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com', {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    resource: 'customresourcedefinitions',
    name: 'widgets.example.com',
    verb: 'get',
  }),
  res('POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'selfsubjectaccessreviews',
    verb: 'create',
  }),
  res('PUT', '/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager', {
    group: 'coordination.k8s.io',
    version: 'v1',
    namespace: 'kube-system',
    resource: 'leases',
    name: 'kube-controller-manager',
    verb: 'update',
  }),
  res('GET', '/apis/metrics.k8s.io/v1beta1/namespaces/default/pods', {
    group: 'metrics.k8s.io',
    version: 'v1beta1',
    ...ns,
    resource: 'pods',
    verb: 'list',
  }),
  res('POST', '/api/v1/namespaces/default/serviceaccounts/default/token', {
    ...core,
    ...ns,
    resource: 'serviceaccounts',
    name: 'default',
    subresource: 'token',
    verb: 'create',
  }),
  // methods
  res('HEAD', '/api/v1/namespaces/default/pods/nginx', { ...core, ...ns, resource: 'pods', name: 'nginx', verb: 'get' }),
  res('HEAD', '/api/v1/namespaces/default/pods', { ...core, ...ns, resource: 'pods', verb: 'list' }),
  res('OPTIONS', '/api/v1/namespaces/default/pods', { ...core, ...ns, resource: 'pods', verb: '' }),
  res('CONNECT', '/api/v1/namespaces/default/pods/nginx', { ...core, ...ns, resource: 'pods', name: 'nginx', verb: '' }),
  res('get', '/api/v1/pods', { ...core, resource: 'pods', verb: 'list' }),
  res('Delete', '/api/v1/namespaces/default/pods/nginx', { ...core, ...ns, resource: 'pods', name: 'nginx', verb: 'delete' }),
  // percent-encoding, decoded like Go's URL.Path
  res('GET', '/%61pi/v1/namespaces/default/pods', {
    ...core,
    ...ns,
    resource: 'pods',
    verb: 'list',
    path: '/api/v1/namespaces/default/pods',
  }),
  res('GET', '/api/v1/namespaces/default/configmaps/my%20config', {
    ...core,
    ...ns,
    resource: 'configmaps',
    name: 'my config',
    verb: 'get',
    path: '/api/v1/namespaces/default/configmaps/my config',
  }),
  res('GET', '/api/v1/namespaces/default/configmaps/caf%C3%A9', {
    ...core,
    ...ns,
    resource: 'configmaps',
    name: 'café',
    verb: 'get',
    path: '/api/v1/namespaces/default/configmaps/café',
  }),
  res('GET', '/api/v1/namespaces/default/configmaps/100%25', {
    ...core,
    ...ns,
    resource: 'configmaps',
    name: '100%',
    verb: 'get',
    path: '/api/v1/namespaces/default/configmaps/100%',
  }),
  res('GET', '/api/v1/namespaces/a%2Fb/pods', {
    ...core,
    namespace: 'a',
    resource: 'b',
    name: 'pods',
    verb: 'get',
    path: '/api/v1/namespaces/a/b/pods',
  }),
  // slashes: trimmed at both ends, empty inner segments kept
  res('GET', '/api/v1/namespaces/default/pods/', { ...core, ...ns, resource: 'pods', verb: 'list' }),
  res('GET', '//api/v1/pods', { ...core, resource: 'pods', verb: 'list' }),
  res('GET', '/api/v1//pods', { ...core, resource: '', name: 'pods', verb: 'get' }),
  res('GET', '/api/v1/pods//status', { ...core, resource: 'pods', subresource: 'status', verb: 'list' }),
  res('GET', '/apis//v1/pods', { apiPrefix: 'apis', group: '', version: 'v1', resource: 'pods', verb: 'list' }),
  // dot segments, resolved as Envoy's path normalisation would
  res('GET', '/api/v1/namespaces/default/../kube-system/pods', {
    ...core,
    namespace: 'kube-system',
    resource: 'pods',
    verb: 'list',
    path: '/api/v1/namespaces/kube-system/pods',
  }),
  res('GET', '/api/./v1/./pods', { ...core, resource: 'pods', verb: 'list', path: '/api/v1/pods' }),
  res('GET', '/api/v1/namespaces/x/%2E%2E/y/pods', {
    ...core,
    namespace: 'y',
    resource: 'pods',
    verb: 'list',
    path: '/api/v1/namespaces/y/pods',
  }),
  res('GET', '/../../api/v1/pods', { ...core, resource: 'pods', verb: 'list', path: '/api/v1/pods' }),
  res('GET', '/api/v1/pods/p/..', { ...core, resource: 'pods', verb: 'list', path: '/api/v1/pods/' }),
  res('GET', '/api/v1/pods/p/.', { ...core, resource: 'pods', name: 'p', verb: 'get', path: '/api/v1/pods/p/' }),
  res('GET', '/api/v1/pods/.p/..p', { ...core, resource: 'pods', name: '.p', subresource: '..p', verb: 'get' }),
];

const nonResourceRows: [string, string, NonResourceRequest][] = [
  non('GET', '/healthz'),
  non('GET', '/readyz?verbose'),
  non('GET', '/livez/etcd'),
  non('GET', '/version'),
  non('GET', '/openapi/v2'),
  non('GET', '/openapi/v3/apis/apps/v1'),
  non('GET', '/metrics'),
  non('GET', '/api'),
  non('GET', '/api/v1'),
  non('GET', '/api/v1/'),
  non('GET', '/apis'),
  non('GET', '/apis/apps'),
  non('GET', '/apis/apps/v1'),
  non('GET', '/apis/apps/v1/'),
  non('GET', '/apis/apps/v1?timeout=32s'),
  non('GET', '/.well-known/openid-configuration'),
  non('GET', '/openid/v1/jwks'),
  non('GET', '/'),
  non('POST', '/api/v1'),
  non('OPTIONS', '/apis'),
  non('get', '/logs/kube-apiserver.log'),
  non('GET', '/%61pis', '/apis'),
  non('GET', '/apis/apps/v1/..', '/apis/apps/'),
  non('GET', '/healthz/../version', '/version'),
];

const invalidRows: [string, string, RegExp][] = [
  ['GET', '/api/v1/pods/%zz', /invalid URL escape "%zz"/],
  ['GET', '/api/v1/pods/%4', /invalid URL escape "%4"/],
  ['GET', '/api/v1/pods/nginx%', /invalid URL escape "%"/],
  ['GET', '/api/v1/pods/%E0%A4', /not valid UTF-8/],
  ['GET', '/api/v1/pods/%00', /NUL/],
  ['GET', '/api/v1/pods/a\u0000b', /control character/],
  ['GET', '/api/v1/pods/a\tb', /control character/],
  ['GET', '/api/v1/watch', /"watch" must be followed by a resource/],
  ['GET', '/api/v1/watch/', /"watch" must be followed by a resource/],
  ['GET', '/apis/apps/v1/watch?watch=1', /"watch" must be followed by a resource/],
  ['GET', '/api/v1/proxy', /"proxy" must be followed by a resource/],
  ['GET', '', /empty path/],
  ['GET', '?watch=1', /empty path/],
  ['GET', 'api/v1/pods', /must start with "\/"/],
  ['OPTIONS', '*', /must start with "\/"/],
  ['GET', 'http://example.com/api/v1/pods', /must start with "\/"/],
];

t.test('resource requests', async (t) => {
  t.ok(resourceRows.length >= 50);
  for (const [method, path, want] of resourceRows) {
    t.strictSame(classifyRequest(method, path), want, `${method} ${path}`);
  }
});

t.test('non-resource requests', async (t) => {
  for (const [method, path, want] of nonResourceRows) {
    t.strictSame(classifyRequest(method, path), want, `${method} ${path}`);
  }
});

t.test('invalid requests', async (t) => {
  for (const [method, path, problem] of invalidRows) {
    const got = classifyRequest(method, path);
    t.equal(got.kind, 'invalid', `${method} ${JSON.stringify(path)} is invalid`);
    if (got.kind !== 'invalid') continue;
    t.equal(got.method, method.toUpperCase());
    t.match(got.problem, problem, `${method} ${JSON.stringify(path)}: ${got.problem}`);
  }
});

t.test('the invalid result keeps the undecodable raw path, and the decoded one otherwise', async (t) => {
  t.strictSame(classifyRequest('GET', '/api/v1/pods/%zz?watch=1'), {
    kind: 'invalid',
    method: 'GET',
    path: '/api/v1/pods/%zz',
    problem: 'invalid URL escape "%zz"',
  });
  const watch = classifyRequest('GET', '/%61pi/v1/watch');
  t.equal(watch.kind, 'invalid');
  t.equal(watch.path, '/api/v1/watch');
});

t.test('label selector validity decides whether the field-selector name counts', async (t) => {
  const base = '/api/v1/pods?fieldSelector=metadata.name%3Dfoo&labelSelector=';
  const named = (selector: string): string => {
    const got = classifyRequest('GET', base + encodeURIComponent(selector));
    return got.kind === 'resource' ? got.name : `<${got.kind}>`;
  };
  for (const ok of [
    '',
    'app',
    '!app',
    'app=web',
    'app==web',
    'app!=web',
    'app in (a,b)',
    'app notin ()',
    'tier in (,x)',
    'example.com/app=web',
    'x>5',
    'x<3',
    'a,b=c, c notin (in)',
    'app=',
  ]) {
    t.equal(named(ok), 'foo', `valid label selector ${JSON.stringify(ok)}`);
  }
  for (const bad of [
    'app in',
    'app=(',
    '=web',
    'app==web==x',
    ',app',
    'app,',
    'a b',
    'x>five',
    'Example.com/app=web',
    '/app',
    'a/b/c',
    'x<-3',
    'app=' + 'v'.repeat(64),
    'k'.repeat(64),
    'app=-x',
    '!app=web',
    'app in (a b)',
  ]) {
    t.equal(named(bad), '', `invalid label selector ${JSON.stringify(bad)}`);
  }
});

t.test('pure: the same input gives equal, independent results', async (t) => {
  const a = classifyRequest('GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo');
  const b = classifyRequest('GET', '/api/v1/namespaces/ns/pods?fieldSelector=metadata.name%3Dfoo');
  t.strictSame(a, b);
  t.not(a, b);
});
