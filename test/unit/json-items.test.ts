// parseJsonSteps: the same value as JSON.parse for any text, the same error for a malformed one.
import t from 'tap';
import { AGGREGATED_PATH, NESTED_MIN_CHARS, parseJsonSteps, PieceTooLargeError } from '../../src/discovery/core/json-items.js';
import { runToEnd } from '../../src/util/core/sliced.js';
import { seededRandom } from '../../bench/synthetic.js';
import { runCountingPauses } from '../helpers/sliced.js';

const parse = (text: string): unknown => runToEnd(parseJsonSteps(text));

function errorOf(f: () => unknown): string {
  try {
    f();
  } catch (err) {
    return (err as Error).message;
  }
  return 'no error';
}

type Tap = Parameters<Parameters<typeof t.test>[0]>[0];

/**
 * 400 documents from `doc`, every second one with one character corrupted (most become malformed,
 * some stay valid with another meaning): `parse` gives JSON.parse's value or its error for each.
 */
function agreesWithJsonParse(
  t: Tap,
  rnd: () => number,
  doc: () => string,
  parse: (text: string) => unknown,
): { valid: number; malformed: number } {
  let valid = 0;
  let malformed = 0;
  for (let n = 0; n < 400; n++) {
    let text = doc();
    if (n % 2 === 1) {
      const at = Math.floor(rnd() * text.length);
      text = text.slice(0, at) + ['"', ',', ']', '}', '[', '{', ':', '\\', 'x'][Math.floor(rnd() * 9)] + text.slice(at + 1);
    }
    const expected = errorOf(() => JSON.parse(text));
    if (expected === 'no error') {
      valid++;
      t.same(parse(text), JSON.parse(text), `document ${n}`);
    } else {
      malformed++;
      t.equal(
        errorOf(() => parse(text)),
        expected,
        `document ${n}: same error`,
      );
    }
  }
  return { valid, malformed };
}

t.test('the same value as JSON.parse (table)', async (t) => {
  const cases: readonly [string, string][] = [
    [
      'an aggregated list',
      '{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","metadata":{},"items":[{"metadata":{"name":"apps"}},{"metadata":{"name":"batch"}}]}',
    ],
    ['items first, whitespace everywhere', ' { "items" : [ {"a":1} ,\n {"b":[1,2,{"c":"]"}]} ] , "kind" : "X" } '],
    ['an empty array', '{"items":[],"kind":"X"}'],
    ['an empty array with blanks', '{"items":[ \n ],"kind":"X"}'],
    ['elements that are not objects', '{"items":[1,"two",null,true,[3,[4]],{"x":"a,b]"}]}'],
    ['strings with escapes and brackets', '{"k":"v\\"[{","items":[{"s":"\\\\"},{"s":"\\"]}"}],"z":"\\u005d"}'],
    ['a nested items key is not the top one', '{"a":{"items":[1,2]},"items":[3]}'],
    ['no items key', '{"kind":"X","metadata":{}}'],
    ['items not an array', '{"items":{"a":[1,2]}}'],
    ['the key twice (JSON.parse keeps the last)', '{"items":[1],"items":[2,3]}'],
    ['an escaped spelling of the key after the plain one', '{"items":[1],"it\\u0065ms":[2]}'],
    ['a top-level array', '[{"items":[1]}]'],
    ['a number', '42'],
    ['unicode', '{"items":[{"n":"é😀\\ud83d\\ude00"}]}'],
  ];
  for (const [name, text] of cases) t.same(parse(text), JSON.parse(text), name);
});

t.test('malformed text: the error JSON.parse gives for the whole', async (t) => {
  const cases = [
    '{"items":[1,]}',
    '{"items":[1 2]}',
    '{"items":[{"a":1}]',
    '{"items":[{"a":1}]}}',
    '{"items":[{"a":}]}',
    '{"items":["unterminated]}',
    '{"items":[1]} trailing',
    '{"items":[1]}{"items":[2]}',
    '',
    '{',
  ];
  for (const text of cases) {
    const expected = errorOf(() => JSON.parse(text));
    t.not(expected, 'no error', `JSON.parse rejects ${JSON.stringify(text)}`);
    t.equal(
      errorOf(() => parse(text)),
      expected,
      JSON.stringify(text),
    );
  }
});

t.test('random documents and random corruptions agree with JSON.parse', async (t) => {
  const rnd = seededRandom(7);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const value = (depth: number): unknown => {
    const r = rnd();
    if (depth > 3 || r < 0.3) return pick([1, -2.5e3, 'a', 'q"uo\\te', '[{,}]', null, true, '', 'é']);
    if (r < 0.6) return Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1));
    return Object.fromEntries(
      Array.from({ length: Math.floor(rnd() * 4) }, (_, i) => [pick(['items', 'k', `f${i}`, 'a"b']), value(depth + 1)]),
    );
  };
  const { valid, malformed } = agreesWithJsonParse(
    t,
    rnd,
    () =>
      JSON.stringify(
        { kind: 'X', metadata: value(1), items: Array.from({ length: Math.floor(rnd() * 6) }, () => value(1)) },
        null,
        rnd() < 0.5 ? undefined : 1,
      ),
    parse,
  );
  t.ok(valid > 200 && malformed > 50, `both kinds exercised: ${valid} valid, ${malformed} malformed`);
});

t.test('a large list pauses between elements', async (t) => {
  const text = JSON.stringify({ kind: 'X', items: Array.from({ length: 1000 }, (_, i) => ({ i })) });
  const { value, pauses } = runCountingPauses(parseJsonSteps(text));
  t.ok(pauses >= 1000, `paused ${pauses} times`);
  t.same(value, JSON.parse(text));
});

t.test('a path: an element past the threshold is split at the next key, the same value and errors as JSON.parse', async (t) => {
  const rnd = seededRandom(11);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  // Nested `items` at every level, so that every level of the path has something to split.
  const value = (depth: number): unknown => {
    const r = rnd();
    if (depth > 4 || r < 0.25) return pick([1, 'a', 'q"uo\\te', '[{,}]', null, 'é']);
    if (r < 0.45) return Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1));
    return { k: value(depth + 1), items: Array.from({ length: Math.floor(rnd() * 4) }, () => value(depth + 1)) };
  };
  const deep = (text: string): unknown => runToEnd(parseJsonSteps(text, ['items', 'items', 'items'], 0));
  const { valid, malformed } = agreesWithJsonParse(
    t,
    rnd,
    () => JSON.stringify({ kind: 'X', items: Array.from({ length: Math.floor(rnd() * 5) }, () => value(1)) }),
    deep,
  );
  t.ok(valid > 150 && malformed > 50, `both kinds exercised: ${valid} valid, ${malformed} malformed`);
});

t.test('one group of many resources pauses between its resources (AGGREGATED_PATH), not only between groups', async (t) => {
  const resources = Array.from({ length: 5000 }, (_, i) => ({ resource: `r${i}s`, verbs: ['get', 'list'] }));
  const text = JSON.stringify({
    kind: 'APIGroupDiscoveryList',
    items: [
      { metadata: { name: 'big.example.com' }, versions: [{ version: 'v1', resources }] },
      { metadata: { name: 'small' }, versions: [] },
    ],
  });
  t.ok(text.length > NESTED_MIN_CHARS, 'the group is past the threshold');
  const count = (path: string | readonly string[]): number => {
    const { value, pauses } = runCountingPauses(parseJsonSteps(text, path));
    t.same(value, JSON.parse(text), `${JSON.stringify(path)}: the same value`);
    return pauses;
  };
  const byGroup = count('items');
  const byResource = count(AGGREGATED_PATH);
  t.ok(byResource >= 5000, `split to its resources: ${byResource} pauses`);
  t.ok(byGroup < 100, `by group only: ${byGroup} pauses (the one group parsed at once)`);
});

t.test('maxPieceChars: no piece past it is parsed at once; a refusal names where the piece is', async (t) => {
  const limits = { nestedMinChars: 1000, maxPieceChars: 4000 };
  const run = (value: unknown): unknown => runToEnd(parseJsonSteps(JSON.stringify(value), AGGREGATED_PATH, limits));
  const refusal = (value: unknown): PieceTooLargeError | string => {
    try {
      run(value);
      return 'no error';
    } catch (err) {
      return err instanceof PieceTooLargeError ? err : String(err);
    }
  };
  const resources = (n: number, pad = 0): unknown[] => Array.from({ length: n }, (_, i) => ({ resource: `r${i}`, pad: 'x'.repeat(pad) }));
  const list = (items: unknown[], extra: Record<string, unknown> = {}): unknown => ({ kind: 'APIGroupDiscoveryList', ...extra, items });
  const group = (rs: unknown[], extra: Record<string, unknown> = {}): unknown => ({
    metadata: { name: 'g' },
    ...extra,
    versions: [{ version: 'v1', resources: rs }],
  });

  const big = list([group(resources(800)), group(resources(3))]);
  t.ok(JSON.stringify(big).length > 4 * limits.maxPieceChars, 'a document many times the limit');
  t.same(run(big), big, 'is parsed, each piece under the limit: the same value');

  const cases: [string, unknown, string, RegExp][] = [
    [
      'one resource past the limit',
      list([group([...resources(3), { resource: 'fat', shortNames: ['y'.repeat(5000)] }])]),
      'items[0].versions[0].resources[3]',
      /^items\[0\]\.versions\[0\]\.resources\[3\] is 5,0\d\d characters of JSON, more than the 4,000 parsed at once$/,
    ],
    [
      'a group past the limit without its versions',
      list([group(resources(3), { pad: 'z'.repeat(5000) })]),
      'items[0] without its versions',
      /without its versions is/,
    ],
    [
      'the document past the limit without its items',
      list([group(resources(3))], { pad: 'z'.repeat(5000) }),
      'the document without its items',
      /^the document without its items is/,
    ],
    [
      'a document past the limit with no items to split',
      { kind: 'APIResourceList', resources: resources(100, 40) },
      'the document, which does not split at "items" (malformed, or no such list),',
      /^the document, which does not split at "items" \(malformed, or no such list\), is [\d,]+ characters/,
    ],
  ];
  for (const [name, value, where, message] of cases) {
    const e = refusal(value);
    t.ok(e instanceof PieceTooLargeError, `${name}: refused`);
    if (!(e instanceof PieceTooLargeError)) continue;
    t.equal(e.where, where, `${name}: where`);
    t.match(e.message, message, `${name}: the message`);
    t.equal(e.limit, 4000);
  }
});

t.test('maxPieceChars: a malformed document past it is not parsed whole for its error; the failing piece is named', async (t) => {
  const rs = Array.from({ length: 300 }, (_, i) => ({ resource: `r${i}` }));
  const text = JSON.stringify({ kind: 'L', items: [{ versions: [{ resources: rs }] }, { versions: [] }] });
  t.ok(text.length > 4000);
  const broken = text.replace('{"resource":"r200"}', '{"resource":"r200",}');
  t.not(broken, text);
  const message = errorOf(() => runToEnd(parseJsonSteps(broken, AGGREGATED_PATH, { nestedMinChars: 1000, maxPieceChars: 4000 })));
  t.match(message, /\(in items\[0\]\.versions\[0\]\.resources\[200\]\)$/, 'the piece it failed in');
  const small = JSON.stringify({ kind: 'L', items: [{ a: 1 }] }).replace('1}', '1,}');
  t.equal(
    errorOf(() => runToEnd(parseJsonSteps(small, AGGREGATED_PATH, { maxPieceChars: 4000 }))),
    errorOf(() => JSON.parse(small)),
    'under the limit: JSON.parse’s own error of the whole',
  );
});
