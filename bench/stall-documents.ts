// (f) The discovery documents the stall bench serves, and the static HTTPS apiserver that serves
// them as prepared bytes (no encoding in the bench process while it measures).
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { Pki } from '../harness/fake/index.js';
import { MEDIA_AGGREGATED_V2 } from '../src/constants.js';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

export interface Doc {
  readonly body: Buffer;
  readonly etag: string;
  /** Resources in the view skewgate builds from it, /api's pods included. */
  readonly resources: number;
}

const docOf = (text: string, resources: number): Doc => ({
  body: Buffer.from(text),
  etag: `"${createHash('sha1').update(text).digest('hex')}"`,
  resources: resources + 1,
});

const list = (items: unknown[]): string =>
  JSON.stringify({ kind: 'APIGroupDiscoveryList', apiVersion: 'apidiscovery.k8s.io/v2', metadata: {}, items });

/** A CRD as kube-apiserver lists it: every verb, a status subresource, a category. */
function crdResource(g: number, r: number): unknown {
  const kind = `Kind${g}x${r}`;
  return {
    resource: `kind${g}x${r}s`,
    responseKind: { group: '', version: '', kind },
    scope: 'Namespaced',
    singularResource: `kind${g}x${r}`,
    verbs: VERBS,
    categories: ['all'],
    subresources: [{ subresource: 'status', responseKind: { group: '', version: '', kind }, verbs: ['get', 'patch', 'update'] }],
  };
}

/**
 * An aggregated /apis of `groups` CRD-like groups of `perGroup` resources each; variant 1 adds a
 * resource to every 7th group, so that a change is parsed, merged and indexed in full.
 */
export function crdDocument(groups: number, perGroup: number, variant: 0 | 1): Doc {
  const items = [];
  let n = 0;
  for (let g = 0; g < groups; g++) {
    const resources = [];
    for (let r = 0; r < perGroup + (variant === 1 && g % 7 === 0 ? 1 : 0); r++) resources.push(crdResource(g, r));
    n += resources.length;
    items.push({ metadata: { name: `g${g}.example.com` }, versions: [{ version: 'v1', resources, freshness: 'Current' }] });
  }
  return docOf(list(items), n);
}

/** A resource as a buggy or hostile apiserver would list it: `pad` distinct characters in a shortName. */
const paddedResource = (name: string, pad: number): unknown => ({
  resource: name,
  responseKind: { group: '', version: '', kind: 'K' },
  scope: 'Namespaced',
  verbs: ['get', 'list'],
  shortNames: [name.padEnd(pad, 'x')],
});

/**
 * The largest document both bounds accept, in what it costs to absorb: as many resources as
 * `maxEntries` allows (resources and group/versions together; /api's pods and v1 take two), `perGroup`
 * to a group, each padded with a distinct shortName so that together they fill `maxBytes`.
 * `variant` renames every resource (and lists one fewer), so two variants share no entry.
 */
export function largestDocument(maxBytes: number, maxEntries: number, perGroup: number, variant: 0 | 1): Doc {
  const groups = Math.floor((maxEntries - 2) / (perGroup + 1));
  const name = (g: number, r: number): string => `r${variant}x${g}x${r}`;
  const bare = JSON.stringify(paddedResource(name(groups, perGroup), 0)).length + 1;
  const perResource = Math.floor((maxBytes - 200 - groups * 140) / (groups * perGroup));
  const pad = Math.max(0, perResource - bare);
  const items = [];
  for (let g = 0; g < groups; g++) {
    const resources = [];
    const count = variant === 1 && g === 0 ? perGroup - 1 : perGroup;
    for (let r = 0; r < count; r++) resources.push(paddedResource(name(g, r), pad));
    items.push({ metadata: { name: `l${g}.example.com` }, versions: [{ version: 'v1', resources, freshness: 'Current' }] });
  }
  const text = list(items);
  if (text.length > maxBytes) throw new Error(`largestDocument: ${text.length} bytes exceed ${maxBytes}`);
  return docOf(text, groups * perGroup - variant);
}

/** Lean resources (the most per byte) past both bounds: what a document skewgate must refuse looks like. */
export function pastBoundsDocument(bytes: number, perGroup: number): Doc {
  const entry = JSON.stringify(paddedResource('p000000', 0)).length + 1;
  const groups = Math.floor((bytes - 200) / (perGroup * entry + 140));
  const items = [];
  for (let g = 0; g < groups; g++) {
    const resources = [];
    for (let r = 0; r < perGroup; r++) resources.push(paddedResource(`p${String(r).padStart(6, '0')}`, 0));
    items.push({ metadata: { name: `p${g}.example.com` }, versions: [{ version: 'v1', resources, freshness: 'Current' }] });
  }
  return docOf(list(items), groups * perGroup);
}

const CORE = list([
  {
    metadata: {},
    versions: [
      {
        version: 'v1',
        resources: [{ resource: 'pods', responseKind: { group: '', version: 'v1', kind: 'Pod' }, scope: 'Namespaced', verbs: VERBS }],
        freshness: 'Current',
      },
    ],
  },
]);

/** An apiserver that serves prepared bytes; `apis` is swapped to change its document. */
export class StaticApiServer {
  private server: Server | null = null;
  url = '';
  constructor(
    readonly name: string,
    private readonly pki: Pki,
    public apis: Doc,
  ) {}

  async start(): Promise<void> {
    const core = docOf(CORE, 0);
    const server = createServer({ cert: readFileSync(this.pki.serverCertFile), key: readFileSync(this.pki.serverKeyFile) }, (req, res) => {
      const path = (req.url ?? '').split('?', 1)[0];
      if (path === '/readyz') return void res.end('ok');
      const d = path === '/api' ? core : path === '/apis' ? this.apis : null;
      if (d === null) {
        res.writeHead(404, { 'content-type': 'application/json' });
        return void res.end('{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}');
      }
      if (req.headers['if-none-match'] === d.etag) {
        res.writeHead(304, { etag: d.etag });
        return void res.end();
      }
      res.writeHead(200, { 'content-type': MEDIA_AGGREGATED_V2, etag: d.etag, 'content-length': d.body.length });
      res.end(d.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address();
    this.url = `https://127.0.0.1:${typeof addr === 'object' && addr ? addr.port : 0}`;
    this.server = server;
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server?.closeAllConnections();
      this.server?.close(() => resolve());
    });
  }
}
