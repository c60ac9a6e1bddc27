import t from 'tap';
import { headerMapToMap, headerValueText, isSensitiveHeader, REDACTED, redactHeaders } from '../../src/extproc/core/headers.js';

const raw = (s: string): Buffer => Buffer.from(s, 'utf8');

t.test('headerValueText prefers raw_value, falls back to value', async (t) => {
  const cases: [string, Parameters<typeof headerValueText>[0], string][] = [
    ['raw only', { key: 'a', raw_value: raw('/api/v1') }, '/api/v1'],
    ['raw wins over value', { key: 'a', value: 'old', raw_value: raw('new') }, 'new'],
    ['empty raw falls back', { key: 'a', value: 'fallback', raw_value: Buffer.alloc(0) }, 'fallback'],
    ['value only', { key: 'a', value: 'v' }, 'v'],
    ['nothing', { key: 'a' }, ''],
    ['utf-8 bytes', { key: 'a', raw_value: raw('/api/v1/namespaces/café') }, '/api/v1/namespaces/café'],
    ['string raw_value', { key: 'a', raw_value: 'as-string' }, 'as-string'],
    ['subarray view', { key: 'a', raw_value: raw('xxGETyy').subarray(2, 5) }, 'GET'],
  ];
  for (const [name, input, want] of cases) t.equal(headerValueText(input), want, name);
});

t.test('headerMapToMap lower-cases, joins repeats, skips empty keys', async (t) => {
  const m = headerMapToMap({
    headers: [
      { key: ':method', raw_value: raw('GET') },
      { key: ':path', raw_value: raw('/apis/apps/v1/deployments?watch=1') },
      { key: 'Accept', raw_value: raw('application/json') },
      { key: 'x-multi', raw_value: raw('a') },
      { key: 'x-multi', value: 'b' },
      { key: 'cookie', raw_value: raw('a=1') },
      { key: 'cookie', raw_value: raw('b=2') },
      { key: '', raw_value: raw('ignored') },
    ],
  });
  t.equal(m.get(':method'), 'GET');
  t.equal(m.get(':path'), '/apis/apps/v1/deployments?watch=1');
  t.equal(m.get('accept'), 'application/json');
  t.equal(m.has('Accept'), false);
  t.equal(m.get('x-multi'), 'a,b');
  t.equal(m.get('cookie'), 'a=1; b=2');
  t.equal(m.size, 5);
});

t.test('headerMapToMap tolerates absent maps', async (t) => {
  t.equal(headerMapToMap(undefined).size, 0);
  t.equal(headerMapToMap(null).size, 0);
  t.equal(headerMapToMap({ headers: null }).size, 0);
  t.equal(headerMapToMap({}).size, 0);
});

t.test('isSensitiveHeader', async (t) => {
  for (const h of [
    'authorization',
    'Authorization',
    'proxy-authorization',
    'cookie',
    'set-cookie',
    'x-remote-user',
    'X-Remote-Group',
    'x-remote-extra-scopes',
  ]) {
    t.ok(isSensitiveHeader(h), h);
  }
  for (const h of [':path', 'accept', 'user-agent', 'x-request-id', 'x-remotely']) t.notOk(isSensitiveHeader(h), h);
});

t.test('redactHeaders blanks credentials and identity, keeps the rest', async (t) => {
  const token = 'eyJhbGciOiJSUzI1NiJ9.secret-token-value';
  const out = redactHeaders(
    new Map([
      [':path', '/api/v1/pods'],
      ['authorization', `Bearer ${token}`],
      ['proxy-authorization', `Basic dXNlcjpwYXNz`],
      ['cookie', 'session=abc'],
      ['x-remote-user', 'admin'],
      ['x-remote-extra-scopes', 'all'],
      ['user-agent', 'kubectl/v1.34'],
      ['__proto__', 'plain'],
    ]),
  );
  t.equal(out['authorization'], `Bearer ${REDACTED}`);
  t.equal(out['proxy-authorization'], `Basic ${REDACTED}`);
  t.equal(out['cookie'], REDACTED);
  t.equal(out['x-remote-user'], REDACTED);
  t.equal(out['x-remote-extra-scopes'], REDACTED);
  t.equal(out[':path'], '/api/v1/pods');
  t.equal(out['user-agent'], 'kubectl/v1.34');
  t.equal(out['__proto__'], 'plain', 'a hostile header name stays an ordinary key');
  const json = JSON.stringify(out);
  t.notOk(json.includes(token), 'token never appears');
  t.notOk(json.includes('dXNlcjpwYXNz'));
  t.notOk(json.includes('admin'));
  t.equal(redactHeaders(new Map([['authorization', 'opaque-no-scheme']]))['authorization'], REDACTED);
});
