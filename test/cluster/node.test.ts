// A real node through the gateway (issue 26): one lab (test/helpers/node-lab.ts) — etcd,
// kube-apiservers kas-1, kas-2 (KUBE_OLD) and kas-3 (KUBE_NEW) with the ServiceAccount admission
// plugin, Envoy + skewgate for the control plane and another for the node (kubernetesService.publish
// on: the `kubernetes` Service points at it), kube-controller-manager and kube-scheduler, and a node
// whose kubelet and kube-proxy register through the gateway with their own certificates — running
// the node suites in turn: registration, an in-cluster client, kubectl's streaming verbs. Uses the
// addresses of its lab slot. Fails, never skips, when a part is missing.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { withNodeLab } from '../helpers/node-lab.js';
import { nodeRegistrationSuite } from './suites/node-registration.js';
import { nodeSessionsSuite } from './suites/node-sessions.js';
import { inClusterClientSuite } from './suites/in-cluster-client.js';

t.setTimeout(15 * 60_000);
const slot = claimLabSlot();
t.teardown(() => slot.release());

await withNodeLab(
  t,
  {
    name: 'node',
    addresses: slot,
    specs: (v, a) => [
      { name: 'kas-1', version: v.kubeOld, ip: a.loopback(1), port: 6443 },
      { name: 'kas-2', version: v.kubeOld, ip: a.loopback(2), port: 6443 },
      { name: 'kas-3', version: v.kubeNew, ip: a.loopback(3), port: 6443 },
    ],
  },
  [nodeRegistrationSuite, inClusterClientSuite, nodeSessionsSuite],
);
