// The shared "etcd" of the fake control plane: objects, resourceVersions, watch events and CRDs,
// seen alike by every fake apiserver of one cluster.
import { randomUUID } from 'node:crypto';
import { FakeApiError, badRequest, invalid, notFound } from './errors.js';

export interface FakeResource {
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
  /** Default: get list watch create update patch delete deletecollection. */
  readonly verbs?: readonly string[];
  readonly subresources?: readonly { readonly name: string; readonly verbs: readonly string[] }[];
  readonly shortNames?: readonly string[];
}

export const DEFAULT_VERBS: readonly string[] = Object.freeze([
  'create',
  'delete',
  'deletecollection',
  'get',
  'list',
  'patch',
  'update',
  'watch',
]);

export type KObject = Record<string, unknown>;
export interface WatchEvent {
  readonly type: 'ADDED' | 'MODIFIED' | 'DELETED';
  readonly object: KObject;
}
/** Storage is per group/resource, as in etcd: every version of a resource sees the same objects. */
export interface GroupResource {
  readonly group: string;
  readonly resource: string;
}
export interface Selection {
  readonly namespace?: string;
  readonly name?: string;
  readonly labelSelector?: string;
}

interface Watcher {
  readonly key: string;
  readonly matches: (o: KObject) => boolean;
  readonly send: (ev: WatchEvent) => void;
}

const CRDS: GroupResource = { group: 'apiextensions.k8s.io', resource: 'customresourcedefinitions' };
const LOG_SIZE = 5000;
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

export const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
export const metadataOf = (o: KObject): Record<string, unknown> => (isObject(o['metadata']) ? o['metadata'] : {});
const str = (v: unknown): string => (typeof v === 'string' ? v : '');
const keyOf = (gr: GroupResource): string => `${gr.group}/${gr.resource}`;
const qualified = (gr: GroupResource): string => (gr.group ? `${gr.resource}.${gr.group}` : gr.resource);

export class FakeCluster {
  private revision = 0;
  /** Events with a resourceVersion at or below this have left the log (watch from there → 410). */
  private compacted = 0;
  private readonly store = new Map<string, Map<string, KObject>>();
  private readonly log: { key: string; ev: WatchEvent; rv: number }[] = [];
  private readonly watchers = new Set<Watcher>();

  constructor() {
    for (const name of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) {
      this.create({ group: '', resource: 'namespaces' }, '', { metadata: { name }, status: { phase: 'Active' } });
    }
  }

  get resourceVersion(): string {
    return String(this.revision);
  }

  list(gr: GroupResource, sel: Selection = {}): KObject[] {
    const matches = matcher(sel);
    const objects = [...(this.store.get(keyOf(gr)) ?? new Map<string, KObject>()).entries()];
    return objects
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([, o]) => o)
      .filter(matches)
      .map((o) => structuredClone(o));
  }

  get(gr: GroupResource, namespace: string, name: string): KObject {
    const o = this.store.get(keyOf(gr))?.get(`${namespace}/${name}`);
    if (!o) throw notFound(gr.resource, name, gr.group);
    return structuredClone(o);
  }

  create(gr: GroupResource, namespace: string, input: KObject): KObject {
    const obj = structuredClone(input);
    const meta = { ...metadataOf(obj) };
    let name = str(meta['name']);
    if (!name && str(meta['generateName'])) name = str(meta['generateName']) + randomUUID().slice(0, 5);
    if (!name) throw invalid(`${qualified(gr)} "" is invalid: metadata.name: Required value: name or generateName is required`);
    if (!NAME.test(name)) throw invalid(`${qualified(gr)} "${name}" is invalid: metadata.name: Invalid value: "${name}"`);
    checkNamespace(meta, namespace);
    const objects = this.objects(gr);
    if (objects.has(`${namespace}/${name}`)) {
      throw new FakeApiError(409, 'AlreadyExists', `${qualified(gr)} "${name}" already exists`, {
        name,
        group: gr.group,
        kind: gr.resource,
      });
    }
    if (keyOf(gr) === keyOf(CRDS)) establishCrd(obj, name);
    const rv = ++this.revision;
    obj['metadata'] = withIdentity(meta, name, namespace, randomUUID(), now(), rv);
    objects.set(`${namespace}/${name}`, obj);
    this.emit(gr, 'ADDED', obj, rv);
    return structuredClone(obj);
  }

  /** Replaces an object; a resourceVersion in the input must be the current one (optimistic locking). */
  update(gr: GroupResource, namespace: string, name: string, input: KObject): KObject {
    const current = this.get(gr, namespace, name);
    const obj = structuredClone(input);
    const meta = { ...metadataOf(obj) };
    const cur = metadataOf(current);
    if (meta['name'] !== undefined && meta['name'] !== name) {
      throw badRequest(`the name of the object (${str(meta['name'])}) does not match the name on the URL (${name})`);
    }
    checkNamespace(meta, namespace);
    if (meta['resourceVersion'] !== undefined && meta['resourceVersion'] !== cur['resourceVersion']) {
      throw new FakeApiError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on ${qualified(gr)} "${name}": the object ` +
          'has been modified; please apply your changes to the latest version and try again',
        { name, group: gr.group, kind: gr.resource },
      );
    }
    if (keyOf(gr) === keyOf(CRDS)) establishCrd(obj, name);
    const rv = ++this.revision;
    obj['metadata'] = withIdentity(meta, name, namespace, cur['uid'], cur['creationTimestamp'], rv);
    this.objects(gr).set(`${namespace}/${name}`, obj);
    this.emit(gr, 'MODIFIED', obj, rv);
    return structuredClone(obj);
  }

  delete(gr: GroupResource, namespace: string, name: string): KObject {
    const obj = this.get(gr, namespace, name);
    this.objects(gr).delete(`${namespace}/${name}`);
    const rv = ++this.revision;
    metadataOf(obj)['resourceVersion'] = String(rv);
    this.emit(gr, 'DELETED', obj, rv);
    if (keyOf(gr) === keyOf(CRDS)) {
      // As with a real CRD: its objects go with it.
      const spec = isObject(obj['spec']) ? obj['spec'] : {};
      const instances: GroupResource = { group: str(spec['group']), resource: str(isObject(spec['names']) ? spec['names']['plural'] : '') };
      for (const o of this.list(instances)) this.delete(instances, str(metadataOf(o)['namespace']), str(metadataOf(o)['name']));
    }
    return obj;
  }

  /**
   * Sends the current objects as ADDED (since === null) or the logged events after `since`, then
   * every matching change until the returned function is called.
   */
  watch(gr: GroupResource, sel: Selection, since: number | null, send: (ev: WatchEvent) => void): () => void {
    const matches = matcher(sel);
    if (since !== null && since < this.compacted) {
      throw new FakeApiError(410, 'Expired', `too old resource version: ${since} (${this.compacted})`);
    }
    if (since === null) for (const object of this.list(gr, sel)) send({ type: 'ADDED', object });
    else {
      for (const e of this.log) {
        if (e.rv > since && e.key === keyOf(gr) && matches(e.ev.object)) send(structuredClone(e.ev));
      }
    }
    const w: Watcher = { key: keyOf(gr), matches, send };
    this.watchers.add(w);
    return () => this.watchers.delete(w);
  }

  /** The resources that the stored CRDs define: served by every apiserver of the cluster. */
  customResources(): FakeResource[] {
    const out: FakeResource[] = [];
    for (const crd of this.store.get(keyOf(CRDS))?.values() ?? []) {
      const spec = crd['spec'] as Record<string, unknown>;
      const names = spec['names'] as Record<string, unknown>;
      for (const v of spec['versions'] as Record<string, unknown>[]) {
        if (v['served'] === false) continue;
        const sub = isObject(v['subresources']) ? v['subresources'] : {};
        const shortNames = Array.isArray(names['shortNames']) ? names['shortNames'].filter((s) => typeof s === 'string') : [];
        out.push({
          group: str(spec['group']),
          version: str(v['name']),
          resource: str(names['plural']),
          kind: str(names['kind']),
          namespaced: spec['scope'] === 'Namespaced',
          ...(shortNames.length ? { shortNames } : {}),
          subresources: [
            ...(sub['status'] ? [{ name: 'status', verbs: ['get', 'patch', 'update'] }] : []),
            ...(sub['scale'] ? [{ name: 'scale', verbs: ['get', 'patch', 'update'] }] : []),
          ],
        });
      }
    }
    return out;
  }

  private objects(gr: GroupResource): Map<string, KObject> {
    let m = this.store.get(keyOf(gr));
    if (!m) this.store.set(keyOf(gr), (m = new Map()));
    return m;
  }

  private emit(gr: GroupResource, type: WatchEvent['type'], obj: KObject, rv: number): void {
    const ev: WatchEvent = { type, object: structuredClone(obj) };
    this.log.push({ key: keyOf(gr), ev, rv });
    if (this.log.length > LOG_SIZE) this.compacted = this.log.shift()?.rv ?? this.compacted;
    for (const w of this.watchers) {
      if (w.key !== keyOf(gr) || !w.matches(obj)) continue;
      try {
        w.send(structuredClone(ev));
      } catch {
        this.watchers.delete(w); // a broken stream must not stop the others
      }
    }
  }
}

const now = (): string => new Date().toISOString().replace(/\.\d+Z$/, 'Z');

function withIdentity(
  meta: Record<string, unknown>,
  name: string,
  namespace: string,
  uid: unknown,
  created: unknown,
  rv: number,
): Record<string, unknown> {
  const out: Record<string, unknown> = { ...meta, name, namespace, uid, creationTimestamp: created, resourceVersion: String(rv) };
  if (!namespace) delete out['namespace'];
  return out;
}

function checkNamespace(meta: Record<string, unknown>, namespace: string): void {
  if (namespace && meta['namespace'] !== undefined && meta['namespace'] !== namespace) {
    throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
  }
}

function matcher(sel: Selection): (o: KObject) => boolean {
  const terms = (sel.labelSelector ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean)
    .map((t) => {
      const m = /^(!?)([\w./-]+)\s*(?:(==|=|!=)\s*([\w.-]*))?$/.exec(t);
      if (!m) throw badRequest(`unable to parse requirement: "${t}" (the fake apiserver knows =, ==, != and exists)`);
      const [, not, key = '', op, value] = m;
      return (labels: Record<string, unknown>): boolean =>
        op === undefined ? key in labels !== (not === '!') : (labels[key] === value) === (op !== '!=');
    });
  return (o) => {
    const meta = metadataOf(o);
    if (sel.namespace && meta['namespace'] !== sel.namespace) return false;
    if (sel.name && meta['name'] !== sel.name) return false;
    const labels = isObject(meta['labels']) ? meta['labels'] : {};
    return terms.every((t) => t(labels));
  };
}

/** Checks the fields a CRD needs to be served and marks it Established, as the CRD controllers would. */
function establishCrd(obj: KObject, name: string): void {
  const spec = isObject(obj['spec']) ? obj['spec'] : {};
  const names = isObject(spec['names']) ? spec['names'] : {};
  const versions = Array.isArray(spec['versions']) ? spec['versions'] : [];
  const problems = [
    !str(spec['group']) && 'spec.group: Required value',
    !str(names['plural']) && 'spec.names.plural: Required value',
    !str(names['kind']) && 'spec.names.kind: Required value',
    !['Namespaced', 'Cluster'].includes(str(spec['scope'])) && 'spec.scope: Unsupported value',
    (versions.length === 0 || !versions.every((v) => isObject(v) && str(v['name']))) && 'spec.versions: Required value',
    name !== `${str(names['plural'])}.${str(spec['group'])}` &&
      `metadata.name: Invalid value: "${name}": must be spec.names.plural+"."+spec.group`,
  ].filter(Boolean);
  if (problems.length) throw invalid(`CustomResourceDefinition.apiextensions.k8s.io "${name}" is invalid: ${problems.join(', ')}`);
  const cond = (type: string, reason: string): KObject => ({ type, status: 'True', lastTransitionTime: now(), reason, message: '' });
  const storage = versions.find((v) => isObject(v) && v['storage'] === true) as KObject | undefined;
  obj['status'] = {
    conditions: [cond('NamesAccepted', 'NoConflicts'), cond('Established', 'InitialNamesAccepted')],
    acceptedNames: names,
    storedVersions: [str((storage ?? (versions[0] as KObject))['name'])],
  };
}
