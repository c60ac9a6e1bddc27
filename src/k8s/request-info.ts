// Request classification with kube-apiserver's RequestInfo rules
// (k8s.io/apiserver pkg/endpoints/request/requestinfo.go), as a pure function of method and path.

/** A Kubernetes API request verb as kube-apiserver names it. */
export type Verb = 'get' | 'list' | 'watch' | 'create' | 'update' | 'patch' | 'delete' | 'deletecollection' | 'proxy';

export interface ResourceRequest {
  readonly kind: 'resource';
  readonly method: string;
  /** The decoded path without query. */
  readonly path: string;
  readonly apiPrefix: 'api' | 'apis';
  /** '' for the core group. */
  readonly group: string;
  readonly version: string;
  readonly resource: string;
  readonly subresource: string;
  readonly name: string;
  readonly namespace: string;
  /** '' when the HTTP method maps to no verb (kube-apiserver does the same). */
  readonly verb: Verb | '';
}

export interface NonResourceRequest {
  readonly kind: 'non-resource';
  readonly method: string;
  readonly path: string;
  /** The raw query after '?' ('' without one): OpenAPI's `hash=` pins a document (routing/document-route.ts). */
  readonly query: string;
  /** The lower-case HTTP method, as kube-apiserver records it for non-resource requests. */
  readonly verb: string;
}

/** A path that cannot be decoded or parsed; kube-apiserver would answer 400 or 404 itself. */
export interface InvalidRequest {
  readonly kind: 'invalid';
  readonly method: string;
  readonly path: string;
  readonly problem: string;
}

export type RequestInfo = ResourceRequest | NonResourceRequest | InvalidRequest;
