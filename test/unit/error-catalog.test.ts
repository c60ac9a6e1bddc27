// The one error catalog (src/errors/catalog.ts): every code says what it means and what to do, is
// given by some error in src/ (no dead entry), and docs/errors.md lists each one as the catalog
// says it; failureOf() reads the code and kind of what is thrown, never its message.
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ERRORS, FAILURE_KINDS, failureOf, isErrorCode } from '../../src/errors/catalog.js';
import { DiscoveryDocumentError } from '../../src/discovery/core/parse.js';
import { CredentialsError } from '../../src/kube/credentials.js';
import { DiscoveryFetchError } from '../../src/kube/transport.js';
import { ConfigError } from '../../src/config/core/problems.js';
import { packageRoot } from '../../src/util/package-root.js';

const root = packageRoot();
const sources = (dir: string): string[] =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? sources(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : [],
  );
const src = sources(join(root, 'src'))
  .filter((f) => !f.endsWith(join('errors', 'catalog.ts')))
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n');

t.test('every code: what it means, what to do, and an error that gives it', async (t) => {
  for (const [code, e] of Object.entries(ERRORS)) {
    t.match(code, /^SKEWGATE_ERR_[A-Z_]+$/, `${code}: the code's form`);
    t.ok(e.means.length > 20 && e.action.length > 20, `${code}: says what it means and what to do`);
    if (code !== 'SKEWGATE_ERR_INTERNAL') t.ok(src.includes(`'${code}'`), `${code}: given by an error in src/`);
  }
  const given = new Set([...src.matchAll(/'(SKEWGATE_ERR_[A-Z_]+)'/g)].map((m) => m[1]));
  t.same(
    [...given].filter((c) => !isErrorCode(c)),
    [],
    'no code in src/ outside the catalog',
  );
});

t.test('docs/errors.md lists every code as the catalog says it', async (t) => {
  const doc = readFileSync(join(root, 'docs', 'errors.md'), 'utf8');
  for (const [code, e] of Object.entries(ERRORS))
    t.ok(doc.includes(`| \`${code}\` | ${e.means} | ${e.action} |`), `${code}'s row (the table is rendered from src/errors/catalog.ts)`);
  t.equal([...doc.matchAll(/^\| `SKEWGATE_ERR_/gm)].length, Object.keys(ERRORS).length, 'and no other row');
});

t.test('failureOf: the code and kind of what is thrown', async (t) => {
  const url = 'https://10.0.0.1:6443/apis';
  const cases: [string, unknown, string, string][] = [
    ['a timeout', new DiscoveryFetchError('x', url, { timeout: true }), 'SKEWGATE_ERR_DISCOVERY_FETCH', 'timeout'],
    ['a refused connection', new DiscoveryFetchError('x', url, { connection: true }), 'SKEWGATE_ERR_DISCOVERY_FETCH', 'connection'],
    ['TLS', new DiscoveryFetchError('x', url, { tls: true }), 'SKEWGATE_ERR_DISCOVERY_FETCH', 'tls'],
    ['an error status', new DiscoveryFetchError('x', url, { status: 500 }), 'SKEWGATE_ERR_DISCOVERY_FETCH', 'http'],
    [
      'a body too large (with its 200)',
      new DiscoveryFetchError('x', url, { status: 200, tooLarge: { limit: 1, seen: { contentLength: 2 }, etag: null } }),
      'SKEWGATE_ERR_DISCOVERY_FETCH',
      'too_large',
    ],
    ['aborted', new DiscoveryFetchError('x', url, { aborted: true }), 'SKEWGATE_ERR_DISCOVERY_FETCH', 'aborted'],
    ['a kind given', new DiscoveryFetchError('x', url, { kind: 'malformed' }), 'SKEWGATE_ERR_DISCOVERY_FETCH', 'malformed'],
    ['a malformed document', new DiscoveryDocumentError('/apis', 'items', 'not an array'), 'SKEWGATE_ERR_DISCOVERY_DOCUMENT', 'malformed'],
    ['credentials', new CredentialsError('a', 'no token'), 'SKEWGATE_ERR_CREDENTIALS', 'credentials'],
    ['a config error', new ConfigError('/x.yaml', []), 'SKEWGATE_ERR_CONFIG', 'other'],
    ['a plain Error', new Error('boom'), 'SKEWGATE_ERR_INTERNAL', 'other'],
    ['a code not in the catalog', Object.assign(new Error('x'), { code: 'ECONNREFUSED' }), 'SKEWGATE_ERR_INTERNAL', 'other'],
    ['a string', 'boom', 'SKEWGATE_ERR_INTERNAL', 'other'],
  ];
  for (const [what, err, code, kind] of cases) {
    const f = failureOf(err);
    t.same([f.code, f.kind], [code, kind], what);
    t.ok((FAILURE_KINDS as readonly string[]).includes(f.kind), `${what}: a kind of the list`);
  }
  t.equal(failureOf(new DiscoveryFetchError('GET x: timed out', url, { timeout: true })).message, 'GET x: timed out', 'the message kept');
});
