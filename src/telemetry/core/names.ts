// Every span name, attribute key and metric name skewgate emits, defined once. Standard
// semantic-convention keys where one exists (http.*, url.*, server.*, rpc.*); skewgate.* and
// k8s.api.* otherwise. Docs: docs/tracing.md.

/** Instrumentation scope of skewgate's tracer and meter. */
export const SCOPE = 'skewgate';

export const SPAN_DECISION = 'skewgate.decision';
export const SPAN_DISCOVERY = 'skewgate.discovery';

export const EVENT_VIEW_CHANGED = 'skewgate.discovery.view_changed';
export const EVENT_SKEW_CHANGED = 'skewgate.skew.changed';

export const ATTR = {
  // Decision spans.
  httpMethod: 'http.request.method',
  urlPath: 'url.path',
  rpcSystem: 'rpc.system',
  rpcService: 'rpc.service',
  rpcMethod: 'rpc.method',
  group: 'k8s.api.group',
  version: 'k8s.api.version',
  resource: 'k8s.api.resource',
  subresource: 'k8s.api.subresource',
  namespace: 'k8s.api.namespace',
  verb: 'k8s.api.verb',
  requestKind: 'k8s.api.request_kind',
  outcome: 'skewgate.outcome',
  reason: 'skewgate.reason',
  upstream: 'skewgate.upstream',
  /** The routed upstream's gitVersion (its /version, as discovery last read it). */
  upstreamVersion: 'skewgate.upstream.git_version',
  /** The Audit-ID the apiserver records the request under (its audit log's auditID). */
  auditId: 'skewgate.audit_id',
  /** A discovery round's apiserver's gitVersion, as last read. */
  apiserverVersion: 'skewgate.apiserver.git_version',
  candidates: 'skewgate.candidates',
  discoveryAgeMs: 'skewgate.discovery.age_ms',
  generation: 'skewgate.snapshot.generation',
  problem: 'skewgate.problem',
  /** none, stated or unstated: what became of the client certificate (no user names in traces). */
  clientIdentity: 'skewgate.client_identity',
  /** SHA-256 of a stated client certificate: the credential-id the apiserver's audit log records. */
  clientCertSha256: 'skewgate.client_cert.sha256',
  /** Where the parent context came from: envoy (gRPC metadata), client (HTTP header) or none. */
  parentSource: 'skewgate.trace.parent',
  serverAddress: 'server.address',
  serverPort: 'server.port',
  // Discovery spans.
  apiserver: 'skewgate.apiserver',
  discoverySource: 'skewgate.discovery.source',
  discoveryRequests: 'skewgate.discovery.requests',
  discoveryNotModified: 'skewgate.discovery.not_modified',
  discoveryBytes: 'skewgate.discovery.bytes',
  discoveryResources: 'skewgate.discovery.resources',
  discoveryGroupVersions: 'skewgate.discovery.group_versions',
  /** Set at span start when the round changed the view: such spans are always sampled. */
  discoveryViewChanged: 'skewgate.discovery.view_changed',
  discoveryFailures: 'skewgate.discovery.consecutive_failures',
  httpStatus: 'http.response.status_code',
  ready: 'skewgate.apiserver.ready',
  /** 1 per apiserver with its gitVersion as a label (Prometheus: skewgate_apiserver_info). */
  info: 'skewgate.apiserver.info',
  // Events.
  gained: 'skewgate.resources.gained',
  lost: 'skewgate.resources.lost',
  changed: 'skewgate.resources.changed',
  gainedSample: 'skewgate.resources.gained_sample',
  lostSample: 'skewgate.resources.lost_sample',
  skewedBefore: 'skewgate.skew.before',
  skewedAfter: 'skewgate.skew.after',
  newlySkewed: 'skewgate.skew.newly_skewed',
  noLongerSkewed: 'skewgate.skew.no_longer_skewed',
  /** Skewed before and after, missing from other apiservers now ("… missing from a,b (was a)"). */
  skewChanged: 'skewgate.skew.missing_from_changed',
} as const;

/** Metric names (OTel dots; the Prometheus endpoint shows them with underscores and units). */
export const METRIC = {
  decisions: 'skewgate.decisions',
  // Prometheus names carry their unit (skewgate_decision_duration_seconds), so the OTel names do.
  decisionDuration: 'skewgate.decision.duration_seconds',
  routeErrors: 'skewgate.decision.errors',
  fetchDuration: 'skewgate.discovery.fetch.duration_seconds',
  fetchErrors: 'skewgate.discovery.fetch.errors',
  viewAge: 'skewgate.discovery.view.age_seconds',
  /** Unit By; Prometheus: skewgate_discovery_document_bytes. */
  documentBytes: 'skewgate.discovery.document.bytes',
  skewedResources: 'skewgate.skew.resources',
  missingResources: 'skewgate.skew.missing',
  ready: 'skewgate.apiserver.ready',
  /** 1 per apiserver with its gitVersion as a label (Prometheus: skewgate_apiserver_info). */
  info: 'skewgate.apiserver.info',
  unmatchedIdentities: 'skewgate.membership.unmatched_identities',
  membershipSynced: 'skewgate.membership.synced',
  members: 'skewgate.membership.members',
  fastPathResources: 'skewgate.fast_path.resources',
  fastPathGroupVersions: 'skewgate.fast_path.group_versions',
  cordoned: 'skewgate.apiserver.cordoned',
  configGeneration: 'skewgate.config.generation',
  configReloads: 'skewgate.config.reloads',
  configLastReloadSuccess: 'skewgate.config.last_reload_success',
} as const;

/** A span of its own whenever the live apiservers the config does not name change. */
export const SPAN_MEMBERSHIP = 'skewgate.membership';
export const EVENT_MEMBERSHIP_CHANGED = 'skewgate.membership.changed';
export const ATTR_MEMBERSHIP = {
  synced: 'skewgate.membership.synced',
  unmatched: 'skewgate.membership.unmatched',
  unmatchedBefore: 'skewgate.membership.unmatched_before',
  members: 'skewgate.membership.members',
  membersBefore: 'skewgate.membership.members_before',
  probing: 'skewgate.membership.probing',
} as const;

/** A span of its own for each operator action on the admin endpoint (a cordon, an uncordon), naming who asked. */
export const SPAN_OPERATOR = 'skewgate.operator';
export const EVENT_CORDON_CHANGED = 'skewgate.cordon.changed';
export const ATTR_CORDON = {
  apiserver: 'skewgate.cordon.apiserver',
  /** cordon, drain or none (uncordoned). */
  mode: 'skewgate.cordon.mode',
  modeBefore: 'skewgate.cordon.mode_before',
  by: 'skewgate.cordon.by',
  reason: 'skewgate.cordon.reason',
  /** Where the admin request came from: a TCP peer, or the unix socket. */
  peer: 'skewgate.cordon.peer',
} as const;

/** Samples listed in span events are capped: an upgrade may add hundreds of resources at once. */
export const SAMPLE_LIMIT = 25;

/** What a config reload did (src/app/reload.ts's results): the skewgate_config_reloads_total label. */
export type ReloadResultName = 'applied' | 'unchanged' | 'invalid' | 'restart_required' | 'failed';
