// One pino logger factory: JSON lines on stderr (or text lines, `log.format: text`), credentials
// redacted wherever they might appear. Never stdout: that is the commands' machine output.
import { pino, type Logger } from 'pino';

/** Paths pino blanks out; a token or key must never reach a log line. */
const REDACT = [
  'headers.authorization',
  'headers["proxy-authorization"]',
  'headers.cookie',
  '*.authorization',
  '*.token',
  '*.password',
  '*.key',
  '*.clientKey',
];

export type { Logger };

export type LogFormat = 'json' | 'text';
export const LOG_FORMATS: readonly LogFormat[] = ['json', 'text'];

/** Fields a text line shows in its own columns, not as key=value. */
const TEXT_COLUMNS = new Set(['time', 'level', 'msg', 'service', 'component']);

/**
 * One JSON log line as a line for people: `time LEVEL [component] message key=value …`, values
 * JSON-quoted when they are not plain words. A line that is not JSON is passed as it is. Pure.
 */
export function textLine(json: string): string {
  let o: Record<string, unknown>;
  try {
    o = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith('\n') ? json : `${json}\n`;
  }
  const fields = Object.entries(o)
    .filter(([k]) => !TEXT_COLUMNS.has(k))
    .map(([k, v]) => `${k}=${typeof v === 'string' && /^[\w.:/@+-]+$/.test(v) ? v : JSON.stringify(v)}`);
  const head = [
    String(o['time'] ?? ''),
    String(o['level'] ?? '')
      .toUpperCase()
      .padEnd(5),
    o['component'] === undefined ? '' : `[${String(o['component'])}]`,
    String(o['msg'] ?? ''),
  ].filter((p) => p !== '');
  return `${[...head, ...fields].join(' ')}\n`;
}

export function createLogger(
  level: string,
  destination: NodeJS.WritableStream | pino.DestinationStream = process.stderr,
  format: LogFormat = 'json',
): Logger {
  const out = destination as pino.DestinationStream;
  return pino(
    {
      level,
      base: { service: 'skewgate' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    format === 'text' ? { write: (line: string) => void out.write(textLine(line)) } : out,
  );
}
