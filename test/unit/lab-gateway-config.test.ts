import t from 'tap';
import { parseConfig } from '../../src/config/load.js';
import { apiServerArgs } from '../../harness/lab/flags.js';
import { LAB_USERS, directContext, gatewayConfigDocument, gatewayKubeconfig } from '../../harness/lab/gateway-config.js';
import { JANE_NAMESPACE, JANE_ROLE, janeRbac, labRbacObjects } from '../../harness/lab/rbac.js';
import { labPkiFiles, type LabPki } from '../../harness/lab/pki.js';

// The lab's own file layout under /pki, with tokens: the paths are what the rendered config names.
const pki: LabPki = { ...labPkiFiles('/pki'), adminToken: 'admin-tok', janeToken: 'jane-tok', skewgateToken: 'sg-tok' };
const apiservers = [
  { name: 'kas-1', url: 'https://127.0.0.1:6443' },
  { name: 'kas-2', url: 'https://127.0.0.2:6443' },
];

t.test('the lab gateway verifies client certificates and presents the front-proxy certificate', async (t) => {
  const doc = gatewayConfigDocument({ pki, apiservers, extprocListen: 'unix:/run/x.sock', port: 16443 });
  const envoy = doc['envoy'] as { tls: Record<string, string>; upstreamClientCert: Record<string, string> };
  t.same(envoy.tls, { certFile: pki.gatewayCertFile, keyFile: pki.gatewayKeyFile, clientCaFile: pki.caFile });
  t.same(envoy.upstreamClientCert, { certFile: pki.frontProxyClientCertFile, keyFile: pki.frontProxyClientKeyFile });
  const config = parseConfig(doc, 'lab.yaml', '/');
  t.equal(config.envoy.tls.clientCaFile, pki.caFile, 'src/config accepts it');
  t.equal(config.envoy.upstreamClientCert?.certFile, pki.frontProxyClientCertFile);
  t.equal(config.extproc.failureMode, 'open', 'fail-open: the lab shows docs/design.md, invariant 4');
});

t.test('a gateway with a peer skewgate, its health listener and a request bound: both configs accepted', async (t) => {
  const peerSide = {
    endpoints: ['127.0.0.1:9443'],
    certFile: '/p/c.crt',
    keyFile: '/p/c.key',
    caFile: '/p/ca.crt',
    serverName: 'skewgate-peer',
  };
  const input = {
    pki,
    apiservers,
    extprocListen: 'unix:/run/x.sock',
    port: 16443,
    extprocPeers: peerSide,
    healthPort: 16444,
    requestTimeout: '5s',
  };
  const local = parseConfig(gatewayConfigDocument(input), 'lab.yaml', '/');
  t.same(local.envoy.extprocPeers?.endpoints, ['127.0.0.1:9443']);
  t.equal(local.envoy.extprocPeers?.serverName, 'skewgate-peer');
  t.same(local.envoy.health, { address: '127.0.0.1', port: 16444 });
  t.equal(local.envoy.requestTimeout, 5000);
  t.equal(local.extproc.peer, undefined, 'the local skewgate has no peer listener');
  const listener = { listen: '127.0.0.1:9443', certFile: '/p/s.crt', keyFile: '/p/s.key', clientCaFile: '/p/ca.crt' };
  const peer = parseConfig(
    gatewayConfigDocument({ ...input, extprocListen: 'unix:/run/peer.sock', peerListener: listener }),
    'peer.yaml',
    '/',
  );
  t.same(peer.extproc.peer, listener, "the peer's listener for other nodes' Envoys");
  t.equal(peer.extproc.listen, 'unix:/run/peer.sock');
  const plain = parseConfig(gatewayConfigDocument({ pki, apiservers, extprocListen: 'unix:/run/x.sock', port: 16443 }), 'lab.yaml', '/');
  t.equal(plain.envoy.extprocPeers, undefined, 'none of it by default');
  t.equal(plain.envoy.health, undefined);
});

t.test('routing.fastPath: written only when asked for, and read by src/config', async (t) => {
  const base = { pki, apiservers, extprocListen: 'unix:/run/x.sock', port: 16443, xdsDir: '/run/xds' };
  t.equal(gatewayConfigDocument(base)['routing'], undefined, "unset: no routing section (skewgate's default)");
  t.equal(parseConfig(gatewayConfigDocument(base), 'lab.yaml', '/').routing.fastPath, true, 'the default is on');
  t.same(gatewayConfigDocument({ ...base, fastPath: false })['routing'], { fastPath: false });
  const off = parseConfig(gatewayConfigDocument({ ...base, fastPath: false }), 'lab.yaml', '/');
  t.equal(off.routing.fastPath, false, 'fastPath false is the config knob');
  t.equal(off.routing.retryAfterSeconds, 1, 'the rest of routing keeps its defaults');
  t.equal(parseConfig(gatewayConfigDocument({ ...base, fastPath: true }), 'lab.yaml', '/').routing.fastPath, true);
});

t.test('kubeconfig: the old contexts, one per user through the gateway, and direct ones', async (t) => {
  const kc = gatewayKubeconfig({ pki, gatewayUrl: 'https://127.0.0.1:16443', apiservers }) as {
    users: { name: string; user: Record<string, string> }[];
    contexts: { name: string; context: { cluster: string; user: string } }[];
    'current-context': string;
  };
  const ctx = new Map(kc.contexts.map((c) => [c.name, c.context]));
  const user = new Map(kc.users.map((u) => [u.name, u.user]));
  t.equal(kc['current-context'], 'token');
  t.same(ctx.get('token'), { cluster: 'gateway', user: 'admin-token' });
  t.same(ctx.get('cert'), { cluster: 'gateway', user: 'admin-cert' });
  t.same(ctx.get('kas-2'), { cluster: 'kas-2', user: 'admin-cert' }, 'per-apiserver direct context as before');
  for (const u of LAB_USERS) {
    t.same(ctx.get(u), { cluster: 'gateway', user: u }, `${u} through the gateway`);
    for (const s of apiservers) t.same(ctx.get(directContext(u, s.name)), { cluster: s.name, user: u }, `${u} straight to ${s.name}`);
  }
  t.equal(new Set(kc.contexts.map((c) => c.name)).size, kc.contexts.length, 'context names are unique');
  t.same(user.get('jane-token'), { token: 'jane-tok' });
  t.same(user.get('jane-cert'), { 'client-certificate': pki.janeCertFile, 'client-key': pki.janeKeyFile });
  t.same(user.get('bob-cert'), { 'client-certificate': pki.bobCertFile, 'client-key': pki.bobKeyFile });
  t.same(user.get('tricky-cert'), { 'client-certificate': pki.trickyCertFile, 'client-key': pki.trickyKeyFile });
  t.same(user.get('admin-token'), { token: 'admin-tok' });
});

t.test('RBAC: jane reads configmaps in default, nothing else', async (t) => {
  const { role, roleBinding } = janeRbac();
  t.same(role['rules'], [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }]);
  t.same(role['metadata'], { name: JANE_ROLE, namespace: JANE_NAMESPACE });
  t.same(roleBinding['subjects'], [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'jane' }]);
  const objs = labRbacObjects();
  t.same(
    objs.map((o) => `${o.path} ${String(o.body['kind'])}`),
    [
      '/apis/rbac.authorization.k8s.io/v1/clusterroles ClusterRole',
      '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings ClusterRoleBinding',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/roles Role',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/kube-system/rolebindings RoleBinding',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles Role',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings RoleBinding',
      // skewgate's kubernetes Service publisher (kubernetesService.publish).
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles Role',
      '/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings RoleBinding',
    ],
  );
  t.same(
    objs.slice(-2).map((o) => (o.body['metadata'] as { name: string }).name),
    ['skewgate:kubernetes-service', 'skewgate:kubernetes-service'],
  );
});

t.test('apiserver flags: the front-proxy identity headers, UID included', async (t) => {
  const args = apiServerArgs({ name: 'kas-1', version: '1.35.4', ip: '127.0.0.1', port: 6443 }, pki, 'http://127.0.0.1:23790', {
    certDir: '/c',
  });
  for (const flag of [
    `--requestheader-client-ca-file=${pki.frontProxyCaFile}`,
    '--requestheader-allowed-names=front-proxy-client',
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-uid-headers=X-Remote-Uid',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    `--client-ca-file=${pki.caFile}`,
    `--token-auth-file=${pki.tokenAuthFile}`,
  ])
    t.ok(args.includes(flag), flag);
});
