// The end of a run, checked straight against one apiserver (never through a gateway): every
// object the arms created, with its token, so that lost and duplicated writes can be counted.
import type { LoadHttp } from './http.js';
import type { FinalObject, ResourceKind } from './types.js';
import { ARM_LABEL, TOKEN_LABEL, collectionPath, type Workload } from './workload.js';

interface ListPage {
  readonly items?: readonly { readonly metadata?: { readonly name?: string; readonly labels?: Record<string, string> } }[];
  readonly metadata?: { readonly continue?: string };
}

export async function listFinal(http: LoadHttp, apiserverUrl: string, workload: Workload, arms: readonly string[]): Promise<FinalObject[]> {
  const out: FinalObject[] = [];
  for (const arm of arms) {
    for (const kind of ['skewed', 'common'] as const satisfies readonly ResourceKind[]) {
      const spec = workload[kind];
      let cont: string | undefined;
      do {
        const q = new URLSearchParams({ labelSelector: `${ARM_LABEL}=${arm}`, limit: '500' });
        if (cont !== undefined) q.set('continue', cont);
        const res = await http.send('GET', `${apiserverUrl}${collectionPath(spec, workload.namespace(arm))}?${q.toString()}`);
        if (res.status !== 200)
          throw new Error(`listing ${spec.resource} of ${arm} on ${apiserverUrl}: ${res.status} ${res.text.slice(0, 200)}`);
        const page = JSON.parse(res.text) as ListPage;
        for (const it of page.items ?? []) {
          out.push({ kind, arm, name: it.metadata?.name ?? '', token: it.metadata?.labels?.[TOKEN_LABEL] });
        }
        cont = page.metadata?.continue || undefined;
      } while (cont !== undefined);
    }
  }
  return out;
}

/** Creates a namespace straight on an apiserver (409 is fine: it exists). */
export async function ensureNamespace(http: LoadHttp, apiserverUrl: string, name: string): Promise<void> {
  const res = await http.send('POST', `${apiserverUrl}/api/v1/namespaces`, { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  if (res.status !== 201 && res.status !== 409) throw new Error(`creating namespace ${name}: ${res.status} ${res.text.slice(0, 200)}`);
}
