// The lab shape "one API switched off on one apiserver", started once for the claims that need it
// (test/helpers/shape-lab.ts): etcd, kas-1 and kas-2 KUBE_NEW, kas-3 KUBE_NEW with
// --runtime-config=batch/v1=false, and the three arms. Suites, in this order:
//   suites/runtime-config.ts       open-loop load: no 404 for batch/v1 through skewgate, ~1/3 through round robin
//   suites/namespace-deletion.ts   a real kube-controller-manager deletes namespaces: no Job left in etcd
// Uses the addresses of its lab slot (harness/lab/slots.ts). Fails, never skips, when a part is missing.
import t from 'tap';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { withShapeLab } from '../helpers/shape-lab.js';
import { runtimeConfigSuite, SWITCHED_OFF } from './suites/runtime-config.js';
import { namespaceDeletionSuite } from './suites/namespace-deletion.js';

const slot = claimLabSlot();
t.setTimeout(12 * 60_000);

await withShapeLab(
  t,
  {
    name: 'api-switched-off',
    addresses: slot,
    connections: 24,
    specs: (v) =>
      ['kas-1', 'kas-2', 'kas-3'].map((name, i) => ({
        name,
        version: v.kubeNew,
        ip: slot.loopback(i + 1),
        port: 6443,
        ...(name === 'kas-3' ? { runtimeConfig: `${SWITCHED_OFF}=false` } : {}),
      })),
  },
  [runtimeConfigSuite, namespaceDeletionSuite],
);
