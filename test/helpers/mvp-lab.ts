// The lab shape of test/cluster/mvp-compare and bench (h): two KUBE_OLD apiservers with
// Kubernetes' built-in Mixed Version Proxy switched on (peerProxy: --peer-ca-file, the gate) and one
// KUBE_NEW, a probe object of each kind that exists (a configmap per arm's namespace, a
// MutatingAdmissionPolicy on kas-3), the wait until both old servers really proxy the new
// resource, and three gateways: plain round-robin Envoy (the MVP does the work), and Envoy +
// skewgate with the fast path on and off.
import type { ApiServerSpec } from '../../harness/lab/flags.js';
import type { LabAddresses } from '../../harness/lab/addresses.js';
import type { GatewayInfo } from '../../harness/lab/lab.js';
import { freeLoopbackPort } from '../load/run.js';
import { ensureNamespace } from '../load/verify.js';
import { collectionPath, configMaps, labNamespace, mutatingAdmissionPolicies, objectPath } from '../load/workload.js';
import { FAST_OFF, FAST_ON, SKEWGATE_ARMS, skewgateArmOptions } from './fast-path-arms.js';
import type { LoadLab } from './load-lab.js';

export const MVP_ARMS = ['mvp', ...SKEWGATE_ARMS] as const;
export type MvpArm = (typeof MVP_ARMS)[number];
/** The name of the probe objects (a configmap per arm namespace, a MutatingAdmissionPolicy). */
export const PROBE = 'lat-probe';
/** GETs straight to an old server, 100 ms apart, before giving up on the MVP's peer discovery. */
const PROXY_TRIES = 600;

export interface MvpLab {
  readonly specs: readonly ApiServerSpec[];
  readonly gateways: Readonly<Record<MvpArm, GatewayInfo>>;
  /** Per old server: ms from kas-3's readiness until it proxied the probe. */
  readonly proxyingAfter: Readonly<Record<string, number>>;
}

export async function startMvpLab(l: LoadLab, slot: LabAddresses): Promise<MvpLab> {
  const { parts, session, lab, timeline, clock, progress } = l;
  const v = parts.versions;
  const specs: ApiServerSpec[] = [
    { name: 'kas-1', version: v.kubeOld, ip: slot.loopback(1), port: 6443, peerProxy: true },
    { name: 'kas-2', version: v.kubeOld, ip: slot.loopback(2), port: 6443, peerProxy: true },
    { name: 'kas-3', version: v.kubeNew, ip: slot.loopback(3), port: 6443, peerProxy: true },
  ];
  await Promise.all(specs.map((s) => session.start(s)));
  const url = (name: string): string => lab.apiServerUrl(name);
  const created = (what: string, status: number, text: string): void => {
    if (status !== 201) throw new Error(`creating ${what}: ${status} ${text.slice(0, 300)}`);
  };
  for (const arm of MVP_ARMS) {
    await ensureNamespace(session.direct, url('kas-1'), labNamespace(arm));
    const cm = await session.direct.send('POST', `${url('kas-1')}${collectionPath(configMaps, labNamespace(arm))}`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: PROBE },
    });
    created(`configmap ${PROBE} in ${labNamespace(arm)}`, cm.status, cm.text);
  }
  const map = await session.direct.send('POST', `${url('kas-3')}${collectionPath(mutatingAdmissionPolicies, '')}`, {
    ...mutatingAdmissionPolicies.body(),
    metadata: { name: PROBE },
  });
  created(`MutatingAdmissionPolicy ${PROBE} on kas-3 (v${v.kubeNew})`, map.status, map.text);

  // The MVP must really proxy: an old server answers for the new resource once its peer discovery has synced.
  const skewedGet = objectPath(mutatingAdmissionPolicies, '', PROBE);
  const kas3Ready = timeline.snapshot().servers.find((e) => e.server === 'kas-3' && e.what === 'ready')?.atMs ?? clock();
  const proxyingAfter: Record<string, number> = {};
  for (const old of ['kas-1', 'kas-2']) {
    for (let i = 1; ; i++) {
      const res = await session.direct.send('GET', `${url(old)}${skewedGet}`).catch(() => null);
      if (res?.status === 200) break;
      if (i >= PROXY_TRIES)
        throw new Error(
          `${old} (v${v.kubeOld}, MVP on) never proxied ${skewedGet} to kas-3 in ${PROXY_TRIES} tries: last ${res?.status ?? 'no answer'} ${res?.text.slice(0, 200) ?? ''}`,
        );
      await new Promise((r) => setTimeout(r, 100));
    }
    proxyingAfter[old] = clock() - kas3Ready;
  }
  progress(
    `MVP proxies on both v${v.kubeOld} servers (${Object.entries(proxyingAfter)
      .map(([k, ms]) => `${k} ${(ms / 1000).toFixed(1)} s`)
      .join(', ')} after kas-3 was ready)`,
  );
  const gateways = await lab.startGateways({
    mvp: { name: 'plain', withSkewgate: false, port: await freeLoopbackPort() },
    [FAST_ON]: skewgateArmOptions(FAST_ON, await freeLoopbackPort()),
    [FAST_OFF]: skewgateArmOptions(FAST_OFF, await freeLoopbackPort()),
  });
  return { specs, gateways, proxyingAfter };
}
