// The lab shape of an upgrade's mixed phase, started once for the claims that need it
// (test/helpers/shape-lab.ts): etcd, kas-1 and kas-2 KUBE_OLD, kas-3 KUBE_NEW (so
// mutatingadmissionpolicies is served by one of three), and the three arms. Suites, in this order:
//   suites/compose-demo.ts       the compose demo's client script (demo.sh) against real apiservers
//   suites/identity.ts           identity at the edge: whoami, RBAC, forged headers, audit logs
//   suites/garbage-collector.ts  a real kube-controller-manager: no dependent of a live owner deleted
// Uses the addresses of its lab slot (harness/lab/slots.ts). Fails, never skips, when a part is missing.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { withShapeLab } from '../helpers/shape-lab.js';
import { composeDemoSuite } from './suites/compose-demo.js';
import { identitySuite } from './suites/identity.js';
import { garbageCollectorSuite } from './suites/garbage-collector.js';

const slot = claimLabSlot();
t.setTimeout(14 * 60_000);

await withShapeLab(
  t,
  {
    name: 'mixed-versions',
    addresses: slot,
    connections: 8,
    specs: (v) => [
      { name: 'kas-1', version: v.kubeOld, ip: slot.loopback(1), port: 6443 },
      { name: 'kas-2', version: v.kubeOld, ip: slot.loopback(2), port: 6443 },
      { name: 'kas-3', version: v.kubeNew, ip: slot.loopback(3), port: 6443 },
    ],
  },
  [composeDemoSuite, identitySuite, garbageCollectorSuite],
);
