// An operator's action on the admin endpoint as Jaeger shows it: a span (its own trace) per cordon
// or uncordon, with an event naming the apiserver, the mode before and after, and who asked.
import { SpanKind, type Tracer } from '@opentelemetry/api';
import type { CordonChange } from '../cordon/core/cordons.js';
import { ATTR_CORDON, EVENT_CORDON_CHANGED, SPAN_OPERATOR } from './core/names.js';

export function recordCordonSpan(tracer: Tracer, c: CordonChange, now: number): void {
  const span = tracer.startSpan(SPAN_OPERATOR, { kind: SpanKind.INTERNAL, root: true, startTime: now });
  const attrs = {
    [ATTR_CORDON.apiserver]: c.apiserver,
    [ATTR_CORDON.mode]: c.after ?? 'none',
    [ATTR_CORDON.modeBefore]: c.before ?? 'none',
    [ATTR_CORDON.by]: c.by,
    [ATTR_CORDON.reason]: c.reason,
    [ATTR_CORDON.peer]: c.peer,
  };
  span.setAttributes(attrs);
  span.addEvent(EVENT_CORDON_CHANGED, attrs, now);
  span.end(now);
}
