// One pino logger factory: JSON lines on stderr, credentials redacted wherever they might appear.
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

export function createLogger(level: string, destination: NodeJS.WritableStream | pino.DestinationStream = process.stderr): Logger {
  return pino(
    {
      level,
      base: { service: 'skewgate' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination as pino.DestinationStream,
  );
}
