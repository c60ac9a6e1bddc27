// Where the admin endpoint may listen (src/config/core/admin-address.ts): loopback or a unix socket, nothing a
// network reaches; and how a client reaches what it allows.
import t from 'tap';
import { adminTarget, formatAdminAddress, parseAdminAddress } from '../../src/config/core/admin-address.js';

t.test('accepted: loopback TCP in every spelling, and unix sockets', async (t) => {
  const cases: [string, ReturnType<typeof parseAdminAddress>][] = [
    ['127.0.0.1:9003', { kind: 'tcp', host: '127.0.0.1', port: 9003 }],
    ['127.1.2.3:0', { kind: 'tcp', host: '127.1.2.3', port: 0 }],
    ['localhost:9003', { kind: 'tcp', host: 'localhost', port: 9003 }],
    ['[::1]:9003', { kind: 'tcp', host: '::1', port: 9003 }],
    ['[0:0:0:0:0:0:0:1]:9003', { kind: 'tcp', host: '0:0:0:0:0:0:0:1', port: 9003 }],
    ['unix:/run/skewgate/admin.sock', { kind: 'unix', path: '/run/skewgate/admin.sock' }],
    ['unix:///run/skewgate/admin.sock', { kind: 'unix', path: '/run/skewgate/admin.sock' }],
  ];
  for (const [text, want] of cases) t.same(parseAdminAddress(text), want, text);
});

t.test('refused, each with the reason', async (t) => {
  const cases: [string, RegExp][] = [
    ['0.0.0.0:9003', /0\.0\.0\.0 is not a loopback address/],
    ['10.0.0.11:9003', /not a loopback address/],
    ['[::]:9003', /:: is not a loopback address/],
    ['cp-1.example:9003', /cp-1\.example is not a loopback address/],
    ['::1:9003', /must be host:port/],
    ['127.0.0.1', /must be host:port/],
    ['127.0.0.1:70000', /above 65535/],
    ['unix:', /needs a socket path/],
    [`unix:/${'x'.repeat(120)}`, /at most 107/],
    ['[127.0.0.1]:9003', /not an IPv6 address/],
  ];
  for (const [text, want] of cases) {
    const got = parseAdminAddress(text);
    t.type(got, 'string', `${text} is refused`);
    t.match(got, want, text);
  }
});

t.test('a client reaches TCP by URL and a unix socket through its path', async (t) => {
  t.same(adminTarget({ kind: 'tcp', host: '::1', port: 9003 }), { origin: 'http://[::1]:9003' });
  t.same(adminTarget({ kind: 'unix', path: '/run/a.sock' }), { origin: 'http://localhost', socketPath: '/run/a.sock' });
  t.equal(formatAdminAddress({ kind: 'tcp', host: '::1', port: 9003 }), '[::1]:9003');
  t.equal(formatAdminAddress({ kind: 'unix', path: '/run/a.sock' }), 'unix:/run/a.sock');
});
