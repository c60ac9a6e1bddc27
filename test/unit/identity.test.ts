// Client-certificate identity: XFCC parsing, the DER subject walk, verification, and the identity
// stated to the apiserver, checked against kube-apiserver's own x509 authenticator (the oracle in
// test/fixtures/x509-identity).
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import {
  ClientIdentityVerifier,
  CREDENTIAL_ID_EXTRA,
  parsePemCertificates,
  stateClientIdentity,
  type ClientTrust,
  type IdentityResult,
} from '../../src/identity/core/client-identity.js';
import { extraHeaderName, frontProxyHeaders } from '../../src/identity/core/front-proxy-headers.js';
import { goSubject, SubjectParseError, subjectAttributes } from '../../src/identity/core/x509-subject.js';
import { parseXfcc } from '../../src/identity/core/xfcc.js';

const FIXTURES = join(process.cwd(), 'test/fixtures/x509-identity');
const pem = (name: string): string => readFileSync(join(FIXTURES, 'certs', `${name}.crt`), 'utf8');
const trust: ClientTrust = { cas: parsePemCertificates(pem('client-ca')), source: 'client-ca.crt' };
const NOW = Date.now();

interface OracleUser {
  readonly name: string;
  readonly uid: string;
  readonly groups: readonly string[] | null;
  readonly extra: Record<string, readonly string[]>;
}
interface OracleResult {
  readonly authenticated: boolean;
  readonly user?: OracleUser;
  readonly error?: string;
}
const oracle = JSON.parse(readFileSync(join(FIXTURES, 'expected.json'), 'utf8')) as Record<string, OracleResult>;

/** Envoy's XFCC for a certificate (and chain): quoted, URL-encoded PEM. */
function xfccOf(leaf: string, chain?: string): string {
  const hash = new X509Certificate(leaf).fingerprint256.replace(/:/g, '').toLowerCase();
  return `Hash=${hash};Cert="${encodeURIComponent(leaf)}"${chain === undefined ? '' : `;Chain="${encodeURIComponent(chain)}"`}`;
}

/** Where skewgate refuses a certificate kube-apiserver would take, and why (docs/security.md). */
const REFUSED_BY_DESIGN: Record<string, RegExp> = {
  'space-group': /surrounding whitespace/,
};

t.test('states what kube-apiserver itself would see, for every fixture certificate', async (t) => {
  t.ok(Object.keys(oracle).length >= 14, 'the oracle covers the fixture set');
  for (const [name, want] of Object.entries(oracle)) {
    const chain = name === 'via-intermediate' ? pem(name) + pem('intermediate') : undefined;
    const got = stateClientIdentity(xfccOf(pem(name), chain), trust, NOW);
    const refusal = REFUSED_BY_DESIGN[name];
    if (refusal !== undefined) {
      t.equal(want.authenticated, true, `${name}: kube-apiserver takes it`);
      t.match(got, { kind: 'unstated', problem: refusal }, `${name}: skewgate refuses it`);
    } else if (want.authenticated && want.user) {
      t.same(
        got,
        {
          kind: 'stated',
          identity: {
            user: want.user.name,
            uid: want.user.uid === '' ? null : want.user.uid,
            groups: want.user.groups ?? [],
            extra: Object.entries(want.user.extra),
            fingerprint: (want.user.extra[CREDENTIAL_ID_EXTRA]?.[0] ?? '').replace('X509SHA256=', ''),
          },
        },
        `${name}: same user, UID, groups and credential-id`,
      );
    } else {
      // Not authenticated by kube-apiserver (no CN: it would try the next authenticator; an error: 401).
      t.equal(got.kind, 'unstated', `${name}: refused (kube-apiserver: ${want.error ?? 'not authenticated'})`);
    }
  }
});

t.test('refusals name the reason', async (t) => {
  const cases: [string, string | undefined, RegExp][] = [
    ['no-cn', undefined, /no common name/],
    ['two-uids', undefined, /2 UID attributes/],
    ['server-only', undefined, /client authentication/],
    ['unrelated', undefined, /not issued by a CA in client-ca\.crt/],
    ['via-intermediate', undefined, /not issued by a CA/],
  ];
  for (const [name, chain, problem] of cases)
    t.match(stateClientIdentity(xfccOf(pem(name), chain), trust, NOW), { kind: 'unstated', problem }, name);
  t.match(
    stateClientIdentity(xfccOf(pem('via-intermediate'), pem('via-intermediate') + pem('intermediate')), trust, NOW),
    { kind: 'stated', identity: { user: 'grace' } },
    'with its chain it verifies',
  );
  t.match(
    stateClientIdentity(xfccOf(pem('via-intermediate'), pem('intermediate') + pem('jane')), trust, NOW),
    { kind: 'stated' },
    'certificates in Chain that are not on the path are ignored',
  );
  t.match(
    stateClientIdentity(xfccOf(pem('jane'), pem('admin')), trust, NOW),
    { kind: 'stated', identity: { user: 'jane' } },
    'a stray certificate in Chain changes nothing',
  );
});

t.test('the clock: expired and not yet valid', async (t) => {
  const x = xfccOf(pem('jane'));
  t.match(stateClientIdentity(x, trust, Date.parse('2300-01-01T00:00:00Z')), { kind: 'unstated', problem: /expired or not yet valid/ });
  t.match(stateClientIdentity(x, trust, Date.parse('2000-01-01T00:00:00Z')), { kind: 'unstated', problem: /expired or not yet valid/ });
  const v = new ClientIdentityVerifier(trust);
  t.equal(v.state(x, NOW).kind, 'stated');
  t.equal(v.state(x, Date.parse('2300-01-01T00:00:00Z')).kind, 'unstated', 'the cache keeps the window, not the answer');
});

t.test('XFCC that cannot come from the gateway Envoy is refused', async (t) => {
  const jane = xfccOf(pem('jane'));
  const cases: [string, RegExp][] = [
    [`${jane},${jane}`, /2 elements/],
    ['Hash=abc', /no Cert field/],
    ['Cert="%E0%A4%A"', /not URL-encoded PEM/],
    ['Cert="hello"', /holds no certificate/],
    [`Cert="${encodeURIComponent('-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----')}"`, /does not parse/],
    ['Cert="unterminated', /unterminated quoted value/],
    ['Cert=a;Cert=b', /appears twice/],
    ['justakey', /malformed pair/],
  ];
  for (const [header, problem] of cases)
    t.match(stateClientIdentity(header, trust, NOW), { kind: 'unstated', problem }, header.slice(0, 40));
  t.match(stateClientIdentity(jane, null, NOW), { kind: 'unstated', problem: /no client CA/ }, 'no trust configured: never stated');
  t.same(stateClientIdentity(undefined, trust, NOW), { kind: 'none' });
  t.same(stateClientIdentity('', null, NOW), { kind: 'none' });
});

t.test('parseXfcc', async (t) => {
  const ok = (h: string): Record<string, string>[] => {
    const r = parseXfcc(h);
    if (!r.ok) throw new Error(r.problem);
    return r.elements.map((e) => Object.fromEntries(e));
  };
  t.same(ok('By=spiffe://a;Hash=00ff;Subject="CN=x,O=y";URI='), [{ by: 'spiffe://a', hash: '00ff', subject: 'CN=x,O=y', uri: '' }]);
  t.same(ok('Subject="a \\"b\\" ; c, d"'), [{ subject: 'a "b" ; c, d' }], 'quotes, escapes, separators inside quotes');
  t.same(ok('Hash=1;By=a,Hash=2'), [{ hash: '1', by: 'a' }, { hash: '2' }], 'two elements');
  t.same(ok(' hash = 1 ; '), [{ hash: '1' }], 'whitespace and a trailing ";"');
  t.same(ok(''), []);
  t.match(parseXfcc('Subject="x" y'), { ok: false, problem: /text after the quoted value/ });
});

t.test('the DER subject walk', async (t) => {
  const der = (name: string): Uint8Array => new Uint8Array(new X509Certificate(pem(name)).raw);
  t.same(
    goSubject(subjectAttributes(der('multivalued'))),
    {
      commonName: 'multi',
      organization: ['g1', 'g2'],
      // The order of the DER (openssl asn1parse): the set {O=g1, CN=multi}, then O=g2.
      attributes: [
        { oid: '2.5.4.10', value: 'g1' },
        { oid: '2.5.4.3', value: 'multi' },
        { oid: '2.5.4.10', value: 'g2' },
      ],
    },
    'a multi-valued RDN: CN and O from the same set',
  );
  t.equal(goSubject(subjectAttributes(der('two-cns'))).commonName, 'second', 'the last CN wins, as in Go');
  t.same(
    subjectAttributes(der('uid')).map((a) => a.oid),
    ['2.5.4.3', '2.5.4.10', '1.3.6.1.4.1.57683.2'],
  );

  // Hand-built TBS structures for the string types openssl does not write by default.
  const tlv = (tag: number, ...body: (number[] | Uint8Array)[]): number[] => {
    const b = body.flatMap((x) => [...x]);
    const len = b.length < 0x80 ? [b.length] : [0x81, b.length];
    return [tag, ...len, ...b];
  };
  const CN = [0x06, 0x03, 0x55, 0x04, 0x03];
  const withValue = (value: number[]): Uint8Array =>
    new Uint8Array(tlv(0x30, tlv(0x30, tlv(0x02, [1]), tlv(0x30), tlv(0x30), tlv(0x30), tlv(0x30, tlv(0x31, tlv(0x30, CN, value))))));
  const cn = (value: number[]): string => goSubject(subjectAttributes(withValue(value))).commonName;
  t.equal(cn(tlv(0x1e, [0x00, 0x6a, 0x00, 0xe9, 0xd8, 0x3d, 0xde, 0x00])), 'jé😀', 'BMPString (UTF-16BE with a surrogate pair)');
  t.equal(cn(tlv(0x1e, [0x00, 0x61, 0x00, 0x00])), 'a', 'BMPString: one NUL terminator dropped, as Go does');
  t.equal(cn(tlv(0x1e, [0xd8, 0x3d, 0x00, 0x61])), '\ufffda', 'BMPString: a lone surrogate becomes U+FFFD');
  t.equal(cn(tlv(0x14, [0x6a, 0xe9])), 'jé', 'T61String read as Latin-1');
  t.equal(cn(tlv(0x12, [0x31, 0x20, 0x32])), '1 2', 'NumericString');
  t.equal(cn(tlv(0x16, [0x61, 0x40, 0x62])), 'a@b', 'IA5String');
  t.equal(cn(tlv(0x13, [0x61, 0x2a, 0x26])), 'a*&', 'PrintableString with the * and & Go accepts');
  const bad: [number[], RegExp][] = [
    [tlv(0x13, [0x61, 0x40]), /invalid PrintableString/],
    [tlv(0x16, [0x80]), /invalid IA5String/],
    [tlv(0x12, [0x61]), /invalid NumericString/],
    [tlv(0x0c, [0xc3]), /invalid UTF8String/],
    [tlv(0x1e, [0x00]), /invalid BMPString/],
    [tlv(0x1c, [0, 0, 0, 0x61]), /unsupported string type/],
  ];
  for (const [value, err] of bad) t.throws(() => cn(value), { name: 'SubjectParseError', message: err });
  t.throws(() => subjectAttributes(new Uint8Array([0x30, 0x05, 0x30])), SubjectParseError, 'truncated');
  t.throws(() => subjectAttributes(new Uint8Array([0x30, 0x80])), SubjectParseError, 'indefinite length');

  // Damaged certificates: a clean SubjectParseError or a parse, never anything else.
  const base = der('tricky');
  let seed = 7;
  const rand = (n: number): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  let parsed = 0;
  for (let i = 0; i < 2000; i++) {
    const b = Uint8Array.from(base);
    for (let k = 0; k < 3; k++) b[rand(Math.min(b.length, 200))] = rand(256);
    try {
      subjectAttributes(b.subarray(0, b.length - rand(3)));
      parsed++;
    } catch (err) {
      if (!(err instanceof SubjectParseError)) throw err;
    }
  }
  t.ok(parsed < 2000, `${parsed}/2000 damaged copies still parsed; the rest failed cleanly`);
});

t.test('front-proxy headers', async (t) => {
  const got = stateClientIdentity(xfccOf(pem('uid')), trust, NOW) as Extract<IdentityResult, { kind: 'stated' }>;
  t.same(frontProxyHeaders(got.identity), [
    { name: 'x-remote-user', value: 'bob', append: false },
    { name: 'x-remote-uid', value: 'bob-uid-42', append: false },
    { name: 'x-remote-group', value: 'uid-testers', append: false },
    { name: 'x-remote-extra-authentication.kubernetes.io%2Fcredential-id', value: `X509SHA256=${got.identity.fingerprint}`, append: false },
  ]);
  const tricky = stateClientIdentity(xfccOf(pem('tricky')), trust, NOW) as Extract<IdentityResult, { kind: 'stated' }>;
  t.same(
    frontProxyHeaders(tricky.identity).filter((h) => h.name === 'x-remote-group'),
    [
      { name: 'x-remote-group', value: 'a,b', append: false },
      { name: 'x-remote-group', value: 'team "q"', append: true },
      { name: 'x-remote-group', value: 'semi;colon', append: true },
    ],
    'one line per group, commas kept inside a group',
  );
  t.equal(extraHeaderName('a b%/é'), 'x-remote-extra-a%20b%25%2F%C3%A9', 'escaped as client-go does; % itself too');
});

t.test('the verifier caches per certificate, bounded', async (t) => {
  const v = new ClientIdentityVerifier(trust, 2);
  for (const n of ['jane', 'admin', 'uid', 'jane']) v.state(xfccOf(pem(n)), NOW);
  t.equal(v.size, 2);
  t.same(v.state(xfccOf(pem('jane')), NOW), stateClientIdentity(xfccOf(pem('jane')), trust, NOW));
});
