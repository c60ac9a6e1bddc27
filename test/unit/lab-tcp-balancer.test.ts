// The lab's plain TCP balancer (harness/lab/tcp-balancer.ts): round robin over every apiserver, TLS
// passed through, HAProxy's `inter 2s fall 2 rise 2` connect check.
import t from 'tap';
import { tcpBalancerBootstrap, tcpBalancerPool } from '../../harness/lab/tcp-balancer.js';

t.test('a tcp_proxy listener over the apiservers, checked as HAProxy checks them', async (t) => {
  const b = tcpBalancerBootstrap({ address: '10.213.1.2', port: 6443 }, '/lab/b-pool.json') as {
    static_resources: {
      listeners: {
        address: unknown;
        filter_chains: { filters: { name: string; typed_config: { cluster: string } }[]; transport_socket?: unknown }[];
      }[];
      clusters: {
        lb_policy: string;
        transport_socket?: unknown;
        type: string;
        eds_cluster_config: { eds_config: { path_config_source: { path: string } } };
        health_checks: Record<string, unknown>[];
      }[];
    };
  };
  const listener = b.static_resources.listeners[0];
  t.same(listener?.address, { socket_address: { address: '10.213.1.2', port_value: 6443 } });
  const chain = listener?.filter_chains[0];
  t.same(
    chain?.filters.map((f) => f.name),
    ['envoy.filters.network.tcp_proxy'],
    'one TCP proxy filter, nothing of HTTP',
  );
  t.equal(chain?.transport_socket, undefined, 'no TLS at the balancer: the client meets the apiserver itself');
  const cluster = b.static_resources.clusters[0];
  t.equal(cluster?.lb_policy, 'ROUND_ROBIN');
  t.equal(cluster?.transport_socket, undefined);
  t.equal(cluster?.type, 'EDS', 'the pool from a file, changed while connections stay');
  t.equal(cluster?.eds_cluster_config.eds_config.path_config_source.path, '/lab/b-pool.json');
  const pool = tcpBalancerPool(
    [
      { ip: '127.0.1.1', port: 6443 },
      { ip: '127.0.1.2', port: 6443 },
    ],
    3,
  ) as { version_info: string; resources: { '@type': string; cluster_name: string; endpoints: { lb_endpoints: unknown[] }[] }[] };
  t.equal(pool.version_info, '3');
  t.equal(pool.resources[0]?.['@type'], 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment');
  t.equal(pool.resources[0]?.cluster_name, 'apiservers', "the cluster's own name");
  t.same(
    pool.resources[0]?.endpoints[0]?.lb_endpoints,
    [
      { endpoint: { address: { socket_address: { address: '127.0.1.1', port_value: 6443 } } } },
      { endpoint: { address: { socket_address: { address: '127.0.1.2', port_value: 6443 } } } },
    ],
    'every apiserver given',
  );
  t.match(cluster?.health_checks[0], { interval: '2s', unhealthy_threshold: 2, healthy_threshold: 2, tcp_health_check: {} });
});
