// Log lines for people (`log.format: text`, `--log-format text`): the same fields as the JSON
// line, redaction included, on the same stream.
import t from 'tap';
import { Writable } from 'node:stream';
import { createLogger, textLine } from '../../src/util/log.js';

t.test('textLine: time, level, component and message first, then key=value', async (t) => {
  const line = textLine(
    JSON.stringify({
      level: 'warn',
      time: '2026-12-02T03:00:00.000Z',
      service: 'skewgate',
      component: 'discovery',
      server: 'kas-1',
      err: 'timed out after 2000ms',
      failures: 3,
      msg: 'discovery failing',
    }),
  );
  t.equal(line, '2026-12-02T03:00:00.000Z WARN  [discovery] discovery failing server=kas-1 err="timed out after 2000ms" failures=3\n');
  t.equal(textLine('not json'), 'not json\n', 'a line that is not JSON passes as it is');
  t.match(textLine(JSON.stringify({ level: 'info', msg: 'x', nested: { a: 1 } })), /nested=\{"a":1\}/);
});

t.test('createLogger(text): one line per entry, credentials still redacted', async (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(chunk.toString());
      done();
    },
  });
  const log = createLogger('info', sink, 'text');
  log.child({ component: 'extproc' }).info({ headers: { authorization: 'Bearer secret' } }, 'request');
  log.flush();
  await new Promise((r) => setImmediate(r));
  t.equal(lines.length, 1);
  t.match(lines[0], /^\S+ INFO {2}\[extproc\] request headers=/);
  t.notMatch(lines[0] ?? '', /secret/, 'the token is redacted');
});
