// What a test reads of a Node and a Pod to tell whether the node kept them: the Ready condition
// (and since when), taints, the pod's identity, place and restarts. Read with the admin token.
import type { ApiAnswer } from './node-lab.js';

type Api = (base: string, method: string, path: string) => Promise<ApiAnswer>;

export interface NodeView {
  readonly ready: string;
  /** The Ready condition's lastTransitionTime: unchanged means it never flipped. */
  readonly since: string;
  readonly taints: string[];
}

export interface PodView {
  readonly uid: string;
  readonly nodeName: string;
  readonly phase: string;
  readonly restarts: number;
  readonly deleting: boolean;
}

export async function nodeView(api: Api, base: string, name: string): Promise<NodeView> {
  const r = await api(base, 'GET', `/api/v1/nodes/${name}`);
  const n = r.json as {
    spec?: { taints?: { key: string }[] };
    status?: { conditions?: { type: string; status: string; lastTransitionTime: string }[] };
  };
  const ready = n.status?.conditions?.find((c) => c.type === 'Ready');
  return {
    ready: ready?.status ?? `GET ${r.status}`,
    since: ready?.lastTransitionTime ?? '',
    taints: (n.spec?.taints ?? []).map((x) => x.key),
  };
}

export async function podView(api: Api, base: string, namespace: string, name: string): Promise<PodView> {
  const r = await api(base, 'GET', `/api/v1/namespaces/${namespace}/pods/${name}`);
  const p = r.json as {
    metadata?: { uid?: string; deletionTimestamp?: string };
    spec?: { nodeName?: string };
    status?: { phase?: string; containerStatuses?: { restartCount: number }[] };
  };
  return {
    uid: p.metadata?.uid ?? `GET ${r.status}`,
    nodeName: p.spec?.nodeName ?? '',
    phase: p.status?.phase ?? '',
    restarts: (p.status?.containerStatuses ?? []).reduce((s, c) => s + c.restartCount, 0),
    deleting: p.metadata?.deletionTimestamp !== undefined,
  };
}
