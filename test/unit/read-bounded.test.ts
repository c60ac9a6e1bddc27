// readBounded (src/kube/transport.ts): a body decoded chunk by chunk is the text the whole body
// decodes to, however it is cut: characters split across chunks, a BOM, bytes that are not UTF-8.
import t from 'tap';
import { readBounded, type FetchResponseLike } from '../../src/kube/transport.js';

const response = (chunks: readonly Uint8Array[]): FetchResponseLike => ({
  status: 200,
  statusText: '',
  headers: { get: () => null },
  body: (async function* () {
    for (const c of chunks) yield c;
  })(),
  text: () => Promise.reject(new Error('not used: the body is a stream')),
});

/** `bytes` cut at `cuts` (sorted offsets). */
const cutAt = (bytes: Buffer, cuts: readonly number[]): Uint8Array[] => {
  const out: Uint8Array[] = [];
  let from = 0;
  for (const c of [...cuts, bytes.length]) {
    out.push(bytes.subarray(from, c));
    from = c;
  }
  return out;
};

t.test('readBounded: the same text as Buffer#toString of the whole body, wherever it is cut', async (t) => {
  const samples: [string, Buffer][] = [
    ['ASCII JSON', Buffer.from('{"kind":"APIGroupDiscoveryList","items":[]}')],
    ['two-, three- and four-byte characters', Buffer.from('{"a":"é€😀ü","b":"日本語"}')],
    ['a BOM first: kept, as Buffer#toString keeps it', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"x":1}')])],
    ['bytes that are not UTF-8', Buffer.from([0x7b, 0xff, 0xc3, 0x28, 0xe2, 0x82, 0x7d, 0xf0, 0x9f, 0x98])],
    ['empty', Buffer.alloc(0)],
  ];
  for (const [name, bytes] of samples) {
    const whole = bytes.toString('utf8');
    // Every single cut, and every byte its own chunk.
    const cuttings = [
      [],
      ...Array.from({ length: Math.max(0, bytes.length - 1) }, (_, i) => [i + 1]),
      Array.from({ length: bytes.length }, (_, i) => i),
    ];
    for (const cuts of cuttings) {
      const got = await readBounded(response(cutAt(bytes, cuts)), 1 << 20);
      if (got.text !== whole || got.bytes !== bytes.length || got.over) {
        t.fail(`${name}, cut at ${cuts.join(',')}: ${JSON.stringify(got.text)} ≠ ${JSON.stringify(whole)}`);
        break;
      }
    }
    t.pass(`${name}: ${cuttings.length} cuttings`);
  }
  // Random text and random cuts.
  let seed = 7;
  const rnd = (n: number): number => (seed = (seed * 1103515245 + 12345) % 2 ** 31) % n;
  const alphabet = ['a', '"', 'é', '€', '😀', '\n', '{'];
  for (let round = 0; round < 200; round++) {
    const text = Array.from({ length: 50 + rnd(200) }, () => alphabet[rnd(alphabet.length)]).join('');
    const bytes = Buffer.from(text);
    const cuts = [...new Set(Array.from({ length: rnd(12) }, () => 1 + rnd(bytes.length - 1)))].sort((a, b) => a - b);
    const got = await readBounded(response(cutAt(bytes, cuts)), 1 << 20);
    if (got.text !== text) t.fail(`round ${round}: cut at ${cuts.join(',')}`);
  }
  t.pass('200 random texts cut at random');
});

t.test('readBounded: past the limit, the rest is not read; the first bytes only when asked for', async (t) => {
  const bytes = Buffer.from('0123456789abcdef');
  let pulled = 0;
  const counting = (chunks: Uint8Array[]): FetchResponseLike => ({
    ...response([]),
    body: (async function* () {
      for (const c of chunks) {
        pulled++;
        yield c;
      }
    })(),
  });
  const over = await readBounded(counting(cutAt(bytes, [4, 8, 12])), 6);
  t.same(over, { text: '', bytes: 8, over: true }, 'over: no text, the bytes seen');
  t.equal(pulled, 2, 'no chunk read past the one that went over');
  t.same(
    await readBounded(response(cutAt(bytes, [4, 8, 12])), 6, true),
    { text: '012345', bytes: 8, over: true },
    'partial: the first `limit` bytes',
  );
  t.same(
    await readBounded(response(cutAt(bytes, [10])), 16, true),
    { text: '0123456789abcdef', bytes: 16, over: false },
    'exactly at the limit: whole',
  );
});
