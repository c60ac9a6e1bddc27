import t from 'tap';
import { apiServerArgs, etcdArgs, etcdUrl, type ApiServerSpec } from '../../harness/lab/flags.js';
import { labPkiFiles } from '../../harness/lab/pki.js';

const pki = labPkiFiles('/lab/pki');
const lab: ApiServerSpec = { name: 'kas-1', version: '1.35.4', ip: '127.0.0.2', port: 6443 };

t.test('the lab: loopback address bound and advertised; the flags as they were', async (t) => {
  t.same(apiServerArgs(lab, pki, 'http://127.0.0.1:23790', { certDir: '/lab/run/kas-1/certs' }), [
    '--etcd-servers=http://127.0.0.1:23790',
    '--secure-port=6443',
    '--bind-address=127.0.0.2',
    '--advertise-address=127.0.0.2',
    '--cert-dir=/lab/run/kas-1/certs',
    '--tls-cert-file=/lab/pki/apiserver.crt',
    '--tls-private-key-file=/lab/pki/apiserver.key',
    '--client-ca-file=/lab/pki/ca.crt',
    '--token-auth-file=/lab/pki/tokens.csv',
    '--authorization-mode=Node,RBAC',
    '--enable-admission-plugins=NodeRestriction',
    '--kubelet-client-certificate=/lab/pki/apiserver-kubelet-client.crt',
    '--kubelet-client-key=/lab/pki/apiserver-kubelet-client.key',
    '--kubelet-certificate-authority=/lab/pki/ca.crt',
    '--kubelet-preferred-address-types=InternalIP,Hostname',
    '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
    '--service-account-signing-key-file=/lab/pki/sa.key',
    '--service-account-key-file=/lab/pki/sa.pub',
    '--api-audiences=https://kubernetes.default.svc.cluster.local',
    '--service-cluster-ip-range=10.96.0.0/16',
    '--requestheader-client-ca-file=/lab/pki/front-proxy-ca.crt',
    '--requestheader-allowed-names=front-proxy-client',
    '--requestheader-username-headers=X-Remote-User',
    '--requestheader-uid-headers=X-Remote-Uid',
    '--requestheader-group-headers=X-Remote-Group',
    '--requestheader-extra-headers-prefix=X-Remote-Extra-',
    '--proxy-client-cert-file=/lab/pki/front-proxy-client.crt',
    '--proxy-client-key-file=/lab/pki/front-proxy-client.key',
    '--endpoint-reconciler-type=none',
    '--disable-admission-plugins=ServiceAccount',
    '--profiling=false',
    '--shutdown-watch-termination-grace-period=5s',
    '--shutdown-delay-duration=10s',
  ]);
  t.same(
    apiServerArgs({ ...lab, placement: 'loopback' }, pki, 'u', { certDir: 'c' }),
    apiServerArgs(lab, pki, 'u', { certDir: 'c' }),
    'loopback is the default placement',
  );
  t.same(
    apiServerArgs({ ...lab, serviceAccountAdmission: true }, pki, 'u', { certDir: 'c' }),
    apiServerArgs(lab, pki, 'u', { certDir: 'c' }).filter((a) => a !== '--disable-admission-plugins=ServiceAccount'),
    'serviceAccountAdmission: the ServiceAccount plugin left on, nothing else changed',
  );
  for (const ip of ['10.0.0.2', '0.0.0.0', 'kas-1'])
    t.throws(() => apiServerArgs({ ...lab, ip }, pki, 'u', { certDir: 'c' }), /not a loopback IPv4 address/, `the lab refuses ${ip}`);
});

t.test('a container: bound on every interface, advertising its network address (peers too)', async (t) => {
  const spec: ApiServerSpec = { ...lab, ip: '172.31.250.11', placement: 'container', peerProxy: true };
  const args = apiServerArgs(spec, pki, 'http://etcd:2379', { certDir: '/var/run/kubernetes' });
  t.ok(args.includes('--bind-address=0.0.0.0'));
  t.ok(args.includes('--advertise-address=172.31.250.11'));
  t.ok(args.includes('--peer-advertise-ip=172.31.250.11'));
  const labArgs = apiServerArgs({ ...spec, ip: '127.0.0.2', placement: 'loopback' }, pki, 'http://etcd:2379', {
    certDir: '/var/run/kubernetes',
  });
  t.same(
    args.filter((a, i) => a !== labArgs[i]),
    ['--bind-address=0.0.0.0', '--advertise-address=172.31.250.11', '--peer-advertise-ip=172.31.250.11'],
    'nothing else differs',
  );
  for (const ip of ['127.0.0.1', '0.0.0.0', 'kas-1', '::1']) {
    t.throws(
      () => apiServerArgs({ ...spec, ip }, pki, 'u', { certDir: 'c' }),
      /advertises its network IPv4 address/,
      `a container refuses ${ip}`,
    );
  }
});

t.test('etcd: the lab binds and advertises one address; a container listens everywhere and advertises its name', async (t) => {
  const labSpec = { name: 'lab', dataDir: '/d', ip: '127.0.0.1', clientPort: 23790, peerPort: 23800 };
  t.same(etcdArgs(labSpec), [
    '--name=lab',
    '--data-dir=/d',
    '--listen-client-urls=http://127.0.0.1:23790',
    '--advertise-client-urls=http://127.0.0.1:23790',
    '--listen-peer-urls=http://127.0.0.1:23800',
    '--initial-advertise-peer-urls=http://127.0.0.1:23800',
    '--initial-cluster=lab=http://127.0.0.1:23800',
    '--initial-cluster-state=new',
    '--unsafe-no-fsync=true',
    '--watch-progress-notify-interval=5s',
    '--log-level=warn',
  ]);
  t.equal(etcdUrl(labSpec), 'http://127.0.0.1:23790');
  const c = { name: 'etcd', dataDir: '/var/lib/etcd', ip: '0.0.0.0', advertiseHost: 'etcd', clientPort: 2379, peerPort: 2380 };
  const args = etcdArgs(c);
  t.ok(args.includes('--listen-client-urls=http://0.0.0.0:2379'));
  t.ok(args.includes('--advertise-client-urls=http://etcd:2379'));
  t.ok(args.includes('--listen-peer-urls=http://0.0.0.0:2380'));
  t.ok(args.includes('--initial-cluster=etcd=http://etcd:2380'));
  t.equal(etcdUrl(c), 'http://etcd:2379', 'clients use the advertised name');
});
