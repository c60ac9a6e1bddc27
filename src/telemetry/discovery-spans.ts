// One span per discovery round per apiserver, with events when its view or the skew changed: how
// an upgrade shows up in Jaeger. Spans are written after the fact, with the round's own times.
import { SpanKind, SpanStatusCode, type Attributes, type Tracer } from '@opentelemetry/api';
import { documentRequests, type DiscoveryRoundEvent } from '../discovery/core/events.js';
import { diffViews } from '../discovery/core/view-compare.js';
import type { ServerAddress } from './decision-spans.js';
import { ATTR, EVENT_SKEW_CHANGED, EVENT_VIEW_CHANGED, SAMPLE_LIMIT, SPAN_DISCOVERY } from './core/names.js';
import type { SkewChange } from './core/skew-diff.js';

function sample(items: readonly string[]): string[] {
  return items.length <= SAMPLE_LIMIT ? [...items] : [...items.slice(0, SAMPLE_LIMIT), `… and ${items.length - SAMPLE_LIMIT} more`];
}

/** "gvr" keys of diffViews ("apps/v1/deployments", "/v1/pods") as people write them. */
function label(key: string): string {
  return key.startsWith('/') ? key.slice(1) : key;
}

export function roundAttributes(e: DiscoveryRoundEvent, server: ServerAddress | undefined): Attributes {
  const docs = documentRequests(e.requests);
  const apis = docs.find((r) => r.path === '/apis') ?? docs[0];
  const view = e.after.view;
  const a: Attributes = {
    [ATTR.apiserver]: e.server,
    [ATTR.discoveryRequests]: docs.map((r) => `GET ${r.path} ${r.status ?? 'no response'}`),
    [ATTR.discoveryNotModified]: docs.length > 0 && docs.every((r) => r.status === 304),
    [ATTR.discoveryBytes]: docs.reduce((n, r) => n + r.bytes, 0),
    [ATTR.discoveryViewChanged]: view !== null && view !== e.before.view,
    [ATTR.discoveryFailures]: e.after.consecutiveFailures,
    [ATTR.generation]: e.snapshot.generation,
  };
  if (server) {
    a[ATTR.serverAddress] = server.address;
    a[ATTR.serverPort] = server.port;
  }
  if (apis?.status != null) a[ATTR.httpStatus] = apis.status;
  if (e.after.ready !== null) a[ATTR.ready] = e.after.ready;
  if (e.after.gitVersion !== undefined) a[ATTR.apiserverVersion] = e.after.gitVersion;
  if (view) {
    a[ATTR.discoverySource] = view.source;
    a[ATTR.discoveryResources] = view.resources.size;
    a[ATTR.discoveryGroupVersions] = view.groupVersions.size;
  }
  return a;
}

export function recordRoundSpan(tracer: Tracer, e: DiscoveryRoundEvent, server: ServerAddress | undefined, skew: SkewChange | null): void {
  const attributes = roundAttributes(e, server);
  // A round is its own trace: it is no request's child.
  const span = tracer.startSpan(SPAN_DISCOVERY, { kind: SpanKind.CLIENT, startTime: e.startedAt, attributes, root: true });
  if (!span.isRecording()) {
    span.end();
    return;
  }
  const at = e.startedAt + e.durationMs;
  const { view: before } = e.before;
  const { view: after } = e.after;
  if (after && after !== before) {
    const d = diffViews(before, after);
    span.addEvent(
      EVENT_VIEW_CHANGED,
      {
        [ATTR.apiserver]: e.server,
        [ATTR.gained]: d.added.length,
        [ATTR.lost]: d.removed.length,
        [ATTR.changed]: d.changed.length,
        [ATTR.gainedSample]: sample(d.added.map(label)),
        [ATTR.lostSample]: sample(d.removed.map(label)),
      },
      at,
    );
  }
  if (skew) {
    span.addEvent(
      EVENT_SKEW_CHANGED,
      {
        [ATTR.skewedBefore]: skew.before,
        [ATTR.skewedAfter]: skew.after,
        [ATTR.newlySkewed]: sample(skew.newlySkewed),
        [ATTR.noLongerSkewed]: sample(skew.noLongerSkewed),
        ...(skew.changed.length === 0 ? {} : { [ATTR.skewChanged]: sample(skew.changed) }),
      },
      at,
    );
  }
  // The error names the URL and what failed, never a credential (src/kube/requests.ts).
  if (e.after.consecutiveFailures > 0) span.setStatus({ code: SpanStatusCode.ERROR, message: e.after.lastError ?? 'discovery failed' });
  span.end(at);
}
