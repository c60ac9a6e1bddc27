import t from 'tap';
import { collectAuditEvents, type ServerAuditEvent } from '../../harness/lab/audit-events.js';

t.test('audit events by ID, with the server whose log held them', async (t) => {
  const lines = [
    JSON.stringify({
      kind: 'Event',
      auditID: 'a1',
      stage: 'ResponseComplete',
      verb: 'create',
      user: { username: 'jane', groups: ['dev-viewers', 'system:authenticated'] },
      responseStatus: { code: 201 },
    }),
    JSON.stringify({ kind: 'Event', auditID: 'a2', stage: 'ResponseStarted', user: {}, responseStatus: { code: 401 } }),
    JSON.stringify({
      kind: 'Event',
      auditID: 'a3',
      stage: 'ResponseComplete',
      user: { username: 'kubernetes-admin' },
      impersonatedUser: { username: 'jane' },
    }),
    '{"kind":"Event","auditID":"torn',
    JSON.stringify({ kind: 'Event', auditID: 'x', stage: 'ResponseComplete' }),
    '',
  ].join('\n');
  const into = new Map<string, ServerAuditEvent[]>();
  collectAuditEvents(lines, 'kas-a', into);
  collectAuditEvents(JSON.stringify({ auditID: 'a1', stage: 'ResponseComplete', user: { username: 'jane' } }), 'kas-b', into);
  t.same([...into.keys()].sort(), ['a1', 'a2', 'a3'], 'a torn line and an event without user are skipped');
  t.same(
    into.get('a1')?.map((e) => e.server),
    ['kas-a', 'kas-b'],
  );
  t.same(into.get('a2')?.[0]?.event.user, {}, 'failed authentication: empty user');
  t.equal(into.get('a3')?.[0]?.event.impersonatedUser?.username, 'jane');
});
