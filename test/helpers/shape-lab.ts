// One lab per shape, shared by every claim that needs that shape (issue 25): etcd, the shape's
// kube-apiservers started side by side, and the three gateway arms every load test compares — the
// fast path on, off, and the plain round-robin baseline — started side by side; then each suite in
// turn, as a subtest. A suite leaves the lab as it found it: the apiservers and the arms up, its
// own gateways and controller managers stopped, its objects in namespaces (or names) of its own.
// Each suite is handed its own `origin` and `runSeconds`, taken when it begins: the access-log
// counts and the "Run time" of its results are its own, not those of the suites before it.
import type { Test } from 'tap';
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import type { LabAddresses } from '../../harness/lab/addresses.js';
import type { GatewayInfo } from '../../harness/lab/lab.js';
import type { LabVersions } from '../../harness/lab/versions.js';
import { freeLoopbackPort } from '../load/run.js';
import { FAST_OFF, FAST_ON, skewgateArmOptions } from './fast-path-arms.js';
import { withLoadLab, type LoadLab } from './load-lab.js';

export type ArmName = typeof FAST_ON | typeof FAST_OFF | 'baseline';

export interface ShapeLab extends LoadLab {
  /** The shape's apiservers, as started (all ready before the first suite). */
  readonly specs: readonly ApiServerSpec[];
  /** The shared arms: Envoy + skewgate with the fast path on and off, and plain round robin. */
  readonly gateways: Readonly<Record<ArmName, GatewayInfo>>;
}

export interface Suite {
  /** The subtest's title: the claim the suite proves. */
  readonly title: string;
  readonly run: (t: Test, lab: ShapeLab) => Promise<void>;
}

export interface Shape {
  /** The lab's name (its run dir is .cache/lab-<name>). */
  readonly name: string;
  /** The slot the test file claimed (claimLabSlot). */
  readonly addresses: LabAddresses;
  /** Connections of the shared LoadHttp (the largest any suite needs). */
  readonly connections: number;
  readonly specs: (versions: LabVersions) => readonly ApiServerSpec[];
}

export async function withShapeLab(t: Test, shape: Shape, suites: readonly Suite[]): Promise<void> {
  await withLoadLab(shape.name, { connections: shape.connections, addresses: shape.addresses }, async (l) => {
    const specs = shape.specs(l.parts.versions);
    await Promise.all(specs.map((s) => l.session.start(s)));
    const gateways = await l.lab.startGateways({
      [FAST_ON]: skewgateArmOptions(FAST_ON, await freeLoopbackPort()),
      [FAST_OFF]: skewgateArmOptions(FAST_OFF, await freeLoopbackPort()),
      baseline: { name: 'baseline', withSkewgate: false, port: await freeLoopbackPort() },
    });
    l.progress(`${shape.name}: ${specs.map((s) => `${s.name} v${s.version}`).join(', ')} and the arms up; ${suites.length} suites`);
    for (const suite of suites) {
      const startedAt = Date.now();
      l.progress(`suite: ${suite.title}`);
      await t.test(suite.title, (st) =>
        suite.run(st, { ...l, specs, gateways, origin: l.clock(), runSeconds: () => (Date.now() - startedAt) / 1000 }),
      );
    }
  });
}
