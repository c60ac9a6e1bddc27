// gRPC framing as skewgate's server reads and writes it (src/extproc/core/grpc-wire.ts): tables.
import t from 'tap';
import { encodeGrpcMessage, frameMessage, GrpcStatus, MessageReader, parseGrpcTimeout } from '../../src/extproc/core/grpc-wire.js';

const msg = (text: string): Buffer => frameMessage(Buffer.from(text));
/** Every chunk pushed in turn; the messages read, as text, or the status that ended the call. */
function read(chunks: readonly Buffer[], max = 1024): string[] | string {
  const r = new MessageReader(max);
  const out: string[] = [];
  for (const c of chunks) {
    const got = r.push(c);
    if (!Array.isArray(got)) return `status ${got.code}: ${got.details}`;
    out.push(...got.map((b) => b.toString()));
  }
  return out;
}
const two = Buffer.concat([msg('hello'), msg('world')]);
const cut = (b: Buffer, ...at: number[]): Buffer[] => [0, ...at].map((from, i) => b.subarray(from, at[i] ?? b.length));

t.test('MessageReader: messages however the chunks cut them', async (t) => {
  const rows: [string, Buffer[], string[] | string][] = [
    ['one message, one chunk', [msg('hello')], ['hello']],
    ['two in one chunk', [two], ['hello', 'world']],
    ['the prefix cut', cut(msg('hello'), 2), ['hello']],
    ['the body cut', cut(msg('hello'), 7), ['hello']],
    // A chunk that ends right after a prefix: the next one starts with the body, not a prefix (a
    // CI bench at 2,000 req/s read a body byte as the compressed flag here).
    ['cut right after the prefix', cut(msg('hello'), 5), ['hello']],
    ['cut right after the second prefix', cut(two, 15), ['hello', 'world']],
    ['byte by byte', Array.from(two, (b) => Buffer.from([b])), ['hello', 'world']],
    ['the second message cut after the first whole', cut(two, 13), ['hello', 'world']],
    ['an empty message', [frameMessage(Buffer.alloc(0))], ['']],
    ['a partial message only', [msg('hello').subarray(0, 6)], []],
    [
      'a length over the bound, refused at its prefix',
      [Buffer.from([0, 0, 0, 4, 1])],
      `status ${GrpcStatus.RESOURCE_EXHAUSTED}: skewgate: received message larger than max (1025 vs. 1024)`,
    ],
    [
      'the same, the prefix cut',
      [Buffer.from([0, 0, 0]), Buffer.from([4, 1])],
      `status ${GrpcStatus.RESOURCE_EXHAUSTED}: skewgate: received message larger than max (1025 vs. 1024)`,
    ],
    [
      'a compressed message',
      [Buffer.concat([Buffer.from([1]), msg('x').subarray(1)])],
      `status ${GrpcStatus.UNIMPLEMENTED}: skewgate: compressed messages are not accepted (no grpc-encoding)`,
    ],
  ];
  for (const [name, chunks, want] of rows) t.same(read(chunks), want, name);
  // Every way to cut two messages into two or three chunks.
  const wrong: string[] = [];
  for (let a = 1; a < two.length; a++)
    for (let b = a; b <= two.length; b++) {
      const got = read(b === two.length ? cut(two, a) : cut(two, a, b));
      if (JSON.stringify(got) !== JSON.stringify(['hello', 'world'])) wrong.push(`cut at ${a}, ${b}: ${JSON.stringify(got)}`);
    }
  t.same(wrong, [], 'every cut of two messages into two or three chunks reads both');
  const p = new MessageReader(1024);
  p.push(msg('hello').subarray(0, 5));
  t.equal(p.partial, true, 'a prefix without its body is a partial message');
  const r = new MessageReader(1024);
  r.push(msg('hello').subarray(0, 6));
  t.equal(r.partial, true, 'a partial message is held');
  r.drop();
  t.equal(r.partial, false, 'and dropped');
  const next = r.push(msg('next'));
  t.same(Array.isArray(next) ? next.map((b) => b.toString()) : next, ['next'], 'the reader goes on from a clean state');
});

t.test('frameMessage: the 5-byte prefix, uncompressed', async (t) => {
  t.same([...frameMessage(Buffer.from('ab'))], [0, 0, 0, 0, 2, 97, 98]);
});

t.test('grpc-message: printable ASCII as is, the rest percent-encoded as UTF-8', async (t) => {
  const rows: [string, string][] = [
    ['plain text: ok', 'plain text: ok'],
    ['100%', '100%25'],
    ['line\nbreak', 'line%0Abreak'],
    ['é', '%C3%A9'],
  ];
  for (const [input, want] of rows) t.equal(encodeGrpcMessage(input), want, JSON.stringify(input));
});

t.test('grpc-timeout: units to milliseconds; absent or malformed is no deadline', async (t) => {
  const rows: [string | undefined, number | null][] = [
    ['100m', 100],
    ['5S', 5000],
    ['2M', 120_000],
    ['1H', 3_600_000],
    ['1000u', 1],
    ['5000000n', 5],
    [undefined, null],
    ['', null],
    ['10', null],
    ['123456789S', null],
    ['5s', null],
  ];
  for (const [v, want] of rows) t.equal(parseGrpcTimeout(v), want, String(v));
});
