// skewgate's version: package.json's, read once (`--version`, serve's first log line, telemetry's
// service.version).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from './package-root.js';

let cached: string | undefined;

export function skewgateVersion(): string {
  if (cached === undefined) {
    try {
      cached = (JSON.parse(readFileSync(join(packageRoot(), 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
    } catch {
      cached = 'unknown';
    }
  }
  return cached;
}
