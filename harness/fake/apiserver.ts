// One fake kube-apiserver over HTTPS: authentication, discovery and a resource API backed by a
// shared FakeCluster. Its builtins are what this "version" serves; the skew between servers lives there.
import { createHash, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { MEDIA_AGGREGATED_V2 } from '../../src/constants.js';
import {
  DEFAULT_VERBS,
  isObject,
  metadataOf,
  type FakeCluster,
  type FakeResource,
  type GroupResource,
  type KObject,
  type Selection,
  type WatchEvent,
} from './cluster.js';
import { aggregatedList, groupDocs, legacyDoc } from './discovery-docs.js';
import { FakeApiError, badRequest } from './errors.js';
import type { Pki } from './pki.js';

export { BUILTINS_NEW, BUILTINS_OLD } from './builtins.js';
export { FakeCluster, type FakeResource } from './cluster.js';

export interface FakeApiServerOptions {
  readonly name: string;
  readonly cluster: FakeCluster;
  readonly pki: Pki;
  readonly builtins: readonly FakeResource[];
  /** legacy = an old server without aggregated discovery. Default aggregated. */
  readonly discovery?: 'aggregated' | 'legacy';
  readonly gitVersion?: string;
  readonly host?: string;
  readonly port?: number;
}

export type DiscoveryFault = 'none' | 'malformed' | 'error500' | 'hang';

/** An aggregated `GET /apis` far too large (a hostile or broken apiserver), streamed with backpressure. */
export interface OversizedApis {
  readonly bytes: number;
  /** Send a Content-Length (the body then starts 100 ms after the headers), or stream it chunked. */
  readonly contentLength: boolean;
  /** Send an ETag (and answer 304 to it). */
  readonly etag: boolean;
}

/** One discovery answer of the fake: what it sent, and how many body bytes the connection took. */
export interface DiscoveryResponse {
  readonly path: string;
  readonly status: number;
  readonly bytes: number;
  /** The whole body went out (false: the client left before its end). */
  readonly complete: boolean;
  /** The answer is over (sent, or its connection gone). */
  readonly closed: boolean;
}

export interface RecordedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string | string[] | undefined>;
  /** Every header line as it arrived, in order, names as sent: repeated headers stay separate lines. */
  readonly rawHeaders: readonly (readonly [string, string])[];
  /** CN of the TLS peer certificate of the connection (verified or not), null without one. */
  readonly peerCn: string | null;
  /** Who the fake authenticated the request as (null: nobody), the way kube-apiserver would. */
  readonly user: FakeUser | null;
}

export interface FakeUser {
  readonly name: string;
  readonly groups: readonly string[];
  /** How: a front-proxy certificate with X-Remote-* headers, a client certificate or the bearer token. */
  readonly via: 'front-proxy' | 'client-cert' | 'token';
}

/** kube-apiserver --requestheader-allowed-names of the fake, and its requestheader header names. */
export const FRONT_PROXY_ALLOWED_NAMES: readonly string[] = Object.freeze(['front-proxy-client']);

const MAX_BODY = 3 * 1024 * 1024;
const NO_RESOURCE = (): FakeApiError => new FakeApiError(404, 'NotFound', 'the server could not find the requested resource');
const NOT_ALLOWED = (): FakeApiError =>
  new FakeApiError(405, 'MethodNotAllowed', 'the server does not allow this method on the requested resource');

export class FakeApiServer {
  readonly name: string;
  private builtins: FakeResource[];
  private server: Server | null = null;
  private starting: Promise<void> | null = null;
  private boundPort: number;
  private gitVersion: string;
  private tls: { key: Buffer; cert: Buffer; ca: Buffer[] } | null = null;
  private frontProxyCa: X509Certificate | null = null;
  private readonly sockets = new Set<Socket>();
  /** Ends open watches and hanging requests on close(). */
  private readonly cleanups = new Set<() => void>();
  private readonly log: RecordedRequest[] = [];
  private ready = true;
  private fault: DiscoveryFault = 'none';
  private openapiV3: Readonly<Record<string, string>> | 'missing' | 'error500' = {};
  private resetWhen: ((method: string, path: string) => boolean) | null = null;
  private apisDocument: unknown = null;
  private oversized: OversizedApis | null = null;
  private readonly answered: DiscoveryResponse[] = [];

  constructor(private readonly opts: FakeApiServerOptions) {
    this.gitVersion = opts.gitVersion ?? 'v1.35.0';
    this.name = opts.name;
    this.builtins = [...opts.builtins];
    this.boundPort = opts.port ?? 0;
  }

  get port(): number {
    return this.boundPort;
  }

  /** What /version answers from now on (an apiserver restarted as another version: close, set, start). */
  setGitVersion(gitVersion: string): void {
    this.gitVersion = gitVersion;
  }

  get url(): string {
    const host = this.opts.host ?? '127.0.0.1';
    return `https://${host.includes(':') ? `[${host}]` : host}:${this.boundPort}`;
  }

  get requests(): readonly RecordedRequest[] {
    return this.log;
  }
  clearRequests(): void {
    this.log.length = 0;
  }
  setReady(ready: boolean): void {
    this.ready = ready;
  }
  setDiscoveryFault(fault: DiscoveryFault): void {
    this.fault = fault;
  }
  /**
   * Requests for which this returns true are cut (the connection destroyed) once they arrived and
   * before any response: an apiserver stopping mid-request. null: none.
   */
  setResetRequests(when: ((method: string, path: string) => boolean) | null): void {
    this.resetWhen = when;
  }
  /**
   * The OpenAPI v3 index to serve: document path → hash (default: none listed, which keeps
   * kubectl's client-side validation from fetching any), or no index at all (404), or a 500.
   */
  setOpenApiV3Index(index: Readonly<Record<string, string>> | 'missing' | 'error500'): void {
    this.openapiV3 = index;
  }
  /**
   * Serve this document as the aggregated `GET /apis` instead of the one built from the
   * built-ins (null: built again), e.g. a real kube-apiserver's, so that a test can compare with
   * what kube-apiserver made of it. The legacy documents and the resources themselves stay the built-ins'.
   */
  setAggregatedApis(document: unknown): void {
    this.apisDocument = document;
  }

  /** Serve this oversized body as the aggregated `GET /apis` (null: the real document again). */
  setOversizedApis(o: OversizedApis | null): void {
    this.oversized = o;
  }

  /** The answers to `/api`, `/apis` and their group/versions, with the body bytes each sent. */
  get discoveryResponses(): readonly DiscoveryResponse[] {
    return this.answered;
  }
  clearDiscoveryResponses(): void {
    this.answered.length = 0;
  }

  addBuiltin(r: FakeResource): void {
    this.removeBuiltin(r.group, r.version, r.resource);
    this.builtins.push(r);
  }

  removeBuiltin(group: string, version: string, resource: string): void {
    this.builtins = this.builtins.filter((r) => !(r.group === group && r.version === version && r.resource === resource));
  }

  /** Listens; after a close() on the same port again, as a restarted apiserver would. */
  start(): Promise<void> {
    if (this.server) return Promise.resolve();
    this.starting ??= this.listen().finally(() => (this.starting = null));
    return this.starting;
  }

  private async listen(): Promise<void> {
    const { pki } = this.opts;
    const frontProxyCa = await readFile(pki.frontProxyCaFile);
    this.tls ??= {
      key: await readFile(pki.serverKeyFile),
      cert: await readFile(pki.serverCertFile),
      ca: [await readFile(pki.caFile), frontProxyCa],
    };
    this.frontProxyCa ??= new X509Certificate(frontProxyCa);
    // Client certificates are optional: without one, a bearer token must authenticate. Both the
    // client CA (--client-ca-file) and the front-proxy CA (--requestheader-client-ca-file) are trusted.
    // kube-apiserver takes 1 MiB of request headers (Go's http.DefaultMaxHeaderBytes); Node's default is 16 KiB.
    const server = createServer({ ...this.tls, requestCert: true, rejectUnauthorized: false, maxHeaderSize: 1 << 20 }, (req, res) => {
      void this.handle(req, res);
    });
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    server.on('tlsClientError', (_err, s) => s.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.boundPort, this.opts.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    server.on('error', () => undefined);
    this.boundPort = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** Idempotent. Ends watches, drops every connection, then stops listening. */
  async close(): Promise<void> {
    await this.starting?.catch(() => undefined);
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const cleanup of [...this.cleanups]) cleanup();
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.sockets) s.destroy();
    await closed;
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = req.url ?? '/';
    const peer = peerCertificate(req);
    const user = this.authenticate(req, peer);
    const rawHeaders: [string, string][] = [];
    for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) rawHeaders.push([req.rawHeaders[i] as string, req.rawHeaders[i + 1] as string]);
    this.log.push({ method: req.method ?? '', path: url, headers: { ...req.headers }, rawHeaders, peerCn: peer?.cn ?? null, user });
    res.setHeader('x-fake-apiserver', this.name);
    // A client that vanishes mid-request must not take the process down.
    req.on('error', () => undefined);
    res.on('error', () => undefined);
    const q = url.indexOf('?');
    const path = q < 0 ? url : url.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : url.slice(q + 1));
    if (this.resetWhen?.(req.method ?? '', path)) {
      req.socket.destroy();
      return;
    }
    try {
      if (path === '/healthz' || path === '/livez') return text(res, 200, 'ok');
      if (path === '/readyz')
        return this.ready ? text(res, 200, 'ok') : text(res, 500, '[-]fake-ready failed: setReady(false)\nreadyz check failed');
      if (path === '/version') return json(res, 200, versionInfo(this.gitVersion));
      if (user === null) throw new FakeApiError(401, 'Unauthorized', 'Unauthorized');
      const segs = path
        .split('/')
        .filter((s) => s !== '')
        .map((s) => decodeURIComponent(s));
      // Empty OpenAPI documents: enough for kubectl's client-side validation to pass everything.
      if (path === '/openapi/v3') return this.openapiIndex(req, res);
      if (path === '/openapi/v2') return void res.writeHead(200, { 'content-type': 'application/octet-stream' }).end();
      const [prefix] = segs;
      if (prefix !== 'api' && prefix !== 'apis') throw NO_RESOURCE();
      if (segs.length <= (prefix === 'api' ? 2 : 3)) return this.discovery(req, res, segs);
      return await this.resource(req, res, segs, query, user);
    } catch (err) {
      const e =
        err instanceof FakeApiError
          ? err
          : err instanceof URIError
            ? badRequest(`malformed path: ${path}`)
            : new FakeApiError(500, 'InternalError', `fake apiserver: ${String(err)}`);
      if (res.headersSent) res.destroy();
      else json(res, e.code, e.toStatus());
    }
  }

  /**
   * kube-apiserver's order: the requestheader authenticator (a verified front-proxy certificate
   * with an allowed CN, and X-Remote-User), then the client certificate, then the bearer token.
   * A front-proxy certificate without X-Remote-User falls through, as there.
   */
  private authenticate(req: IncomingMessage, peer: PeerCert | null): FakeUser | null {
    if (peer?.verified === true && this.frontProxyCa !== null && issuedBy(peer, this.frontProxyCa)) {
      const user = req.headersDistinct['x-remote-user']?.[0];
      if (FRONT_PROXY_ALLOWED_NAMES.includes(peer.cn ?? '') && user !== undefined && user !== '') {
        return { name: user, groups: req.headersDistinct['x-remote-group'] ?? [], via: 'front-proxy' };
      }
    } else if (peer?.verified === true) {
      return { name: peer.cn ?? '', groups: peer.organizations, via: 'client-cert' };
    }
    const m = /^bearer\s+(\S+)\s*$/i.exec(req.headers.authorization ?? '');
    return m?.[1] === this.opts.pki.token ? { name: 'fake-token-user', groups: ['system:masters'], via: 'token' } : null;
  }

  /** Built-ins first; CRDs of the shared cluster fill in what the built-ins do not define. */
  private served(): FakeResource[] {
    const key = (r: FakeResource): string => `${r.group}/${r.version}/${r.resource}`;
    const own = new Set(this.builtins.map(key));
    return [...this.builtins, ...this.opts.cluster.customResources().filter((r) => !own.has(key(r)))];
  }

  private discovery(req: IncomingMessage, res: ServerResponse, segs: string[]): void {
    if (req.method !== 'GET' && req.method !== 'HEAD') throw NOT_ALLOWED();
    if (this.fault === 'hang') {
      // Never answers: the client's timeout or close() ends it.
      const end = (): void => void res.destroy();
      this.cleanups.add(end);
      res.on('close', () => this.cleanups.delete(end));
      return;
    }
    if (this.fault === 'error500') throw new FakeApiError(500, 'InternalError', 'fake discovery failure (setDiscoveryFault)');
    const groups = groupDocs(this.served());
    const aggregated = segs.length === 1 && this.opts.discovery !== 'legacy' && acceptsAggregated(req.headers.accept);
    const path = `/${segs.join('/')}`;
    if (aggregated && segs[0] === 'apis' && this.oversized) return void this.serveOversized(req, res, this.oversized);
    const doc = aggregated
      ? segs[0] === 'apis' && this.apisDocument !== null
        ? this.apisDocument
        : aggregatedList(groups.filter((g) => (g.group === '') === (segs[0] === 'api')))
      : legacyDoc(segs, groups, `${this.opts.host ?? '127.0.0.1'}:${this.boundPort}`);
    if (doc === null) throw NO_RESOURCE();
    let body = JSON.stringify(doc);
    if (this.fault === 'malformed') body = body.slice(0, Math.floor(body.length / 2));
    if (!aggregated) {
      this.answered.push({ path, status: 200, bytes: Buffer.byteLength(body), complete: true, closed: true });
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(body);
    }
    const etag = `"${createHash('sha512').update(body).digest('hex').toUpperCase()}"`;
    const notModified = req.headers['if-none-match'] === etag;
    this.answered.push({
      path,
      status: notModified ? 304 : 200,
      bytes: notModified ? 0 : Buffer.byteLength(body),
      complete: true,
      closed: true,
    });
    res.writeHead(notModified ? 304 : 200, {
      'content-type': MEDIA_AGGREGATED_V2,
      etag,
      vary: 'Accept',
      'cache-control': 'public',
    });
    res.end(notModified ? undefined : body);
  }

  /**
   * Streams `o.bytes` of a never-ending JSON list in 64 KiB chunks, each written only once the
   * connection took the last: the bytes recorded are what the client let through before it left.
   */
  private serveOversized(req: IncomingMessage, res: ServerResponse, o: OversizedApis): void {
    const etag = `"oversized-${o.bytes}"`;
    const headers: Record<string, string> = { 'content-type': MEDIA_AGGREGATED_V2, vary: 'Accept', ...(o.etag ? { etag } : {}) };
    if (o.etag && req.headers['if-none-match'] === etag) {
      this.answered.push({ path: '/apis', status: 304, bytes: 0, complete: true, closed: true });
      return void res.writeHead(304, headers).end();
    }
    const entry = { path: '/apis', status: 200, bytes: 0, complete: false, closed: false };
    this.answered.push(entry);
    res.on('finish', () => (entry.complete = true));
    res.writeHead(200, o.contentLength ? { ...headers, 'content-length': String(o.bytes) } : headers);
    res.flushHeaders();
    const head = Buffer.from('{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[');
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    let closed = false;
    res.on('close', () => {
      closed = true;
      // After the last write callbacks: the count is final.
      setImmediate(() => (entry.closed = true));
    });
    const pump = (): void => {
      while (!closed && sent < o.bytes) {
        const part = (sent === 0 ? Buffer.concat([head, chunk]) : chunk).subarray(0, o.bytes - sent);
        sent += part.length;
        const more = res.write(part, () => {
          if (!closed) entry.bytes += part.length;
        });
        if (!more) return void res.once('drain', pump);
      }
      if (!closed) res.end();
    };
    // With a Content-Length, a client that refuses by the header alone is gone before a byte is sent.
    const timer = setTimeout(pump, o.contentLength ? 100 : 0);
    res.on('close', () => clearTimeout(timer));
  }

  /** GET /openapi/v3 as kube-openapi serves it: the index, with an ETag and If-None-Match. */
  private openapiIndex(req: IncomingMessage, res: ServerResponse): void {
    const index = this.openapiV3;
    if (index === 'missing') throw NO_RESOURCE();
    if (index === 'error500') throw new FakeApiError(500, 'InternalError', 'fake OpenAPI failure');
    const paths = Object.fromEntries(Object.entries(index).map(([p, hash]) => [p, { serverRelativeURL: `/openapi/v3/${p}?hash=${hash}` }]));
    const body = JSON.stringify({ paths });
    const etag = `"${createHash('sha512').update(body).digest('hex').toUpperCase()}"`;
    const notModified = req.headers['if-none-match'] === etag;
    res.writeHead(notModified ? 304 : 200, { 'content-type': 'application/json', etag });
    res.end(notModified ? undefined : body);
  }

  private async resource(req: IncomingMessage, res: ServerResponse, segs: string[], query: URLSearchParams, user: FakeUser): Promise<void> {
    let rest = segs[0] === 'api' ? segs.slice(2) : segs.slice(3);
    const [group, version] = segs[0] === 'api' ? ['', segs[1]] : [segs[1], segs[2]];
    const watchPath = rest[0] === 'watch';
    if (watchPath) rest = rest.slice(1);
    let ns = '';
    // namespaces/<ns>/status and /finalize are subresources of the namespace itself.
    if (rest[0] === 'namespaces' && rest.length >= 3 && rest[2] !== 'status' && rest[2] !== 'finalize') {
      ns = rest[1] ?? '';
      rest = rest.slice(2);
    }
    const [resource, name = '', sub = '', ...extra] = rest;
    const r = this.served().find((x) => x.group === group && x.version === version && x.resource === resource);
    if (!r || extra.length > 0 || (watchPath && sub) || (ns && !r.namespaced) || (r.namespaced && !ns && name)) throw NO_RESOURCE();

    const watchQuery = !['', 'false', '0'].includes(query.get('watch') ?? '');
    const verb =
      (
        {
          GET: name ? (watchPath ? 'watch' : 'get') : watchPath || watchQuery ? 'watch' : 'list',
          HEAD: name ? 'get' : 'list',
          POST: name && !sub ? '' : 'create',
          PUT: name ? 'update' : '',
          PATCH: name ? 'patch' : '',
          DELETE: name ? 'delete' : 'deletecollection',
        } as Record<string, string>
      )[req.method ?? ''] ?? '';
    const allowed = sub ? r.subresources?.find((s) => s.name === sub)?.verbs : (r.verbs ?? DEFAULT_VERBS);
    if (!allowed) throw NO_RESOURCE();
    if (!verb || !allowed.includes(verb)) throw NOT_ALLOWED();

    const { cluster } = this.opts;
    const gr: GroupResource = { group: r.group, resource: r.resource };
    const out = (o: KObject): KObject => Object.assign({ apiVersion: gvOf(r), kind: r.kind }, o, { apiVersion: gvOf(r), kind: r.kind });
    if (sub) return this.subresource(req, res, r, gr, ns, name, sub, verb);
    // `kubectl auth whoami`: who the request was authenticated as, stored nowhere (as kube-apiserver).
    if (r.group === 'authentication.k8s.io' && r.resource === 'selfsubjectreviews') {
      // Read, not parsed: kubectl sends this one as protobuf, and it holds nothing to keep.
      for await (const _chunk of req as AsyncIterable<Buffer>) void _chunk;
      const userInfo = { username: user.name, groups: [...user.groups] };
      return json(res, 201, {
        apiVersion: gvOf(r),
        kind: r.kind,
        metadata: { creationTimestamp: new Date().toISOString() },
        status: { userInfo },
      });
    }
    switch (verb) {
      case 'get':
        return json(res, 200, out(cluster.get(gr, ns, name)));
      case 'list':
        return json(res, 200, listOf(r, cluster.list(gr, selection(ns, name, query)).map(out), cluster.resourceVersion));
      case 'watch':
        return this.watch(res, gr, selection(ns, name, query), query, out);
      case 'create':
        return json(res, 201, out(cluster.create(gr, ns, await readObject(req))));
      case 'update':
      case 'patch': {
        const current = cluster.get(gr, ns, name);
        const body = await readBody(req);
        const next = verb === 'patch' ? applyPatch(req.headers['content-type'], current, body) : asObject(body);
        // With a status subresource, the main resource cannot change status (as in kube-apiserver).
        if (r.subresources?.some((s) => s.name === 'status')) next['status'] = current['status'];
        return json(res, 200, out(cluster.update(gr, ns, name, next)));
      }
      case 'delete':
        return json(res, 200, out(cluster.delete(gr, ns, name)));
      default: {
        // deletecollection
        const items = cluster.list(gr, selection(ns, name, query)).map((o) => out(cluster.delete(gr, ns, String(metadataOf(o)['name']))));
        return json(res, 200, listOf(r, items, cluster.resourceVersion));
      }
    }
  }

  /** status and log are implemented; other subresources answer 400 from the server that serves them. */
  private async subresource(
    req: IncomingMessage,
    res: ServerResponse,
    r: FakeResource,
    gr: GroupResource,
    ns: string,
    name: string,
    sub: string,
    verb: string,
  ): Promise<void> {
    const { cluster } = this.opts;
    const current = Object.assign({ apiVersion: gvOf(r), kind: r.kind }, cluster.get(gr, ns, name));
    if (sub === 'log') return text(res, 200, `fake log of ${r.resource} ${ns}/${name} from ${this.name}\n`);
    if (sub !== 'status') throw badRequest(`the fake apiserver does not implement ${r.resource}/${sub}`);
    if (verb === 'get') return json(res, 200, current);
    const body = await readBody(req);
    const next = verb === 'patch' ? applyPatch(req.headers['content-type'], current, body) : asObject(body);
    // Only status changes here, but a resourceVersion sent along still guards the write.
    const rv = metadataOf(next)['resourceVersion'];
    const metadata = { ...metadataOf(current), ...(rv !== undefined ? { resourceVersion: rv } : {}) };
    return json(
      res,
      200,
      Object.assign({ apiVersion: gvOf(r), kind: r.kind }, cluster.update(gr, ns, name, { ...current, metadata, status: next['status'] })),
    );
  }

  /** A newline-delimited JSON event stream, held open until the client leaves, a timeout or close(). */
  private watch(res: ServerResponse, gr: GroupResource, sel: Selection, query: URLSearchParams, present: (o: KObject) => KObject): void {
    const rv = query.get('resourceVersion') ?? '';
    const since = rv === '' || rv === '0' ? null : Number(rv);
    if (since !== null && !Number.isSafeInteger(since)) throw badRequest(`invalid resourceVersion "${rv}"`);
    res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-cache, private' });
    res.flushHeaders();
    const write = (ev: WatchEvent | { type: string; object: unknown }): void => {
      if (res.writableEnded || res.destroyed) return;
      res.write(`${JSON.stringify({ type: ev.type, object: ev.type === 'ERROR' ? ev.object : present(ev.object as KObject) })}\n`);
    };
    let stop = (): void => undefined;
    try {
      stop = this.opts.cluster.watch(gr, sel, since, write);
    } catch (err) {
      if (!(err instanceof FakeApiError)) throw err;
      write({ type: 'ERROR', object: err.toStatus() }); // kube-apiserver reports an expired version in-stream
      return void res.end();
    }
    const seconds = Number(query.get('timeoutSeconds') ?? 0);
    const timer = seconds > 0 && seconds < 2e6 ? setTimeout(() => finish(), seconds * 1000) : undefined;
    const finish = (): void => {
      stop();
      clearTimeout(timer);
      this.cleanups.delete(finish);
      if (!res.writableEnded && !res.destroyed) res.end();
    };
    this.cleanups.add(finish);
    res.on('close', finish);
  }
}

interface PeerCert {
  readonly cert: X509Certificate;
  readonly cn: string | null;
  readonly organizations: readonly string[];
  /** Chains to a CA the server trusts. */
  readonly verified: boolean;
  /** issuedBy's answers for this certificate, by CA. */
  readonly issuers: WeakMap<X509Certificate, boolean>;
}

/**
 * The connection's certificate, read once per connection (kube-apiserver verifies it on every
 * request, as it would for a client connected directly: an apiserver's cost, not the gateway's,
 * and no part of what the fakes stand in for — benchmarks through them compare gateways).
 */
const peers = new WeakMap<object, PeerCert | null>();

function peerCertificate(req: IncomingMessage): PeerCert | null {
  const socket = req.socket as TLSSocket;
  const known = peers.get(socket);
  if (known !== undefined) return known;
  const raw = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate().raw : undefined;
  let peer: PeerCert | null = null;
  if (raw !== undefined && raw.length > 0) {
    const cert = new X509Certificate(raw);
    peer = {
      cert,
      cn: rdnValues(cert.subject, 'CN')[0] ?? null,
      organizations: rdnValues(cert.subject, 'O'),
      verified: socket.authorized,
      issuers: new WeakMap(),
    };
  }
  peers.set(socket, peer);
  return peer;
}

/** Values of one attribute in node's subject text: one "KEY=value" per line, RFC 4514 escapes. */
function rdnValues(subject: string, key: string): string[] {
  return subject
    .split('\n')
    .filter((l) => l.startsWith(`${key}=`))
    .map((l) =>
      l
        .slice(key.length + 1)
        .replace(/\\([0-9A-Fa-f]{2}|.)/g, (_, c: string) => (c.length === 2 ? String.fromCharCode(parseInt(c, 16)) : c)),
    );
}

function issuedBy(peer: PeerCert, ca: X509Certificate): boolean {
  let yes = peer.issuers.get(ca);
  if (yes === undefined) {
    yes = peer.cert.checkIssued(ca) && peer.cert.verify(ca.publicKey);
    peer.issuers.set(ca, yes);
  }
  return yes;
}

const gvOf = (r: FakeResource): string => (r.group ? `${r.group}/${r.version}` : r.version);

function json(res: ServerResponse, code: number, body: unknown): void {
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
}

function text(res: ServerResponse, code: number, body: string): void {
  res.writeHead(code, { 'content-type': 'text/plain; charset=utf-8' }).end(body);
}

const listOf = (r: FakeResource, items: KObject[], resourceVersion: string): KObject => ({
  apiVersion: gvOf(r),
  kind: `${r.kind}List`,
  metadata: { resourceVersion },
  items,
});

/** JSON merge patch; a strategic merge patch is treated alike (lists are replaced, not merged). */
function applyPatch(contentType: string | undefined, target: KObject, patch: unknown): KObject {
  const type = (contentType ?? '').split(';')[0]?.trim().toLowerCase() ?? '';
  if (type !== 'application/merge-patch+json' && type !== 'application/strategic-merge-patch+json') {
    throw new FakeApiError(415, 'UnsupportedMediaType', `the fake apiserver supports merge patches only, not "${type}"`);
  }
  const merge = (t: unknown, p: unknown): unknown => {
    if (!isObject(p)) return p;
    const o: Record<string, unknown> = isObject(t) ? { ...t } : {};
    for (const [k, v] of Object.entries(p)) {
      if (v === null) delete o[k];
      else o[k] = merge(o[k], v);
    }
    return o;
  };
  return merge(target, asObject(patch)) as KObject;
}

function versionInfo(gitVersion: string): unknown {
  const m = /^v(\d+)\.(\d+)/.exec(gitVersion);
  return {
    major: m?.[1] ?? '1',
    minor: m?.[2] ?? '0',
    gitVersion,
    gitCommit: 'fake',
    gitTreeState: 'clean',
    buildDate: '2026-01-01T00:00:00Z',
    goVersion: 'go1.26',
    compiler: 'gc',
    platform: 'linux/amd64',
  };
}

/** True when the first acceptable Accept clause asks for aggregated discovery v2. */
function acceptsAggregated(accept: string | undefined): boolean {
  for (const clause of (accept ?? '').split(',')) {
    const [type = '', ...params] = clause.split(';').map((s) => s.trim());
    const p = new Map(params.map((kv) => [kv.split('=')[0]?.toLowerCase() ?? '', kv.split('=')[1] ?? '']));
    if (
      type === 'application/json' &&
      p.get('g') === 'apidiscovery.k8s.io' &&
      p.get('v') === 'v2' &&
      p.get('as') === 'APIGroupDiscoveryList'
    )
      return true;
    if (['application/json', 'application/*', '*/*'].includes(type) && !p.has('as')) return false;
  }
  return false;
}

function selection(namespace: string, name: string, query: URLSearchParams): Selection {
  const sel: { namespace?: string; name?: string; labelSelector?: string } = {};
  if (namespace) sel.namespace = namespace;
  if (name) sel.name = name;
  const labels = query.get('labelSelector');
  if (labels) sel.labelSelector = labels;
  for (const term of (query.get('fieldSelector') ?? '').split(',').filter(Boolean)) {
    const m = /^metadata\.(name|namespace)==?(.*)$/.exec(term.trim());
    if (!m) throw badRequest(`field label not supported by the fake apiserver: ${term}`);
    sel[m[1] as 'name' | 'namespace'] = m[2] ?? '';
  }
  return sel;
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw new FakeApiError(413, 'RequestEntityTooLarge', 'the request body is too large');
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
  } catch {
    throw badRequest('the request body is not valid JSON');
  }
}

function asObject(v: unknown): KObject {
  if (!isObject(v)) throw badRequest('the request body must be a JSON object');
  return v;
}

const readObject = async (req: IncomingMessage): Promise<KObject> => asObject(await readBody(req));
