// Shared by the inspection commands: one round of discovery, no watch, then close.
import { stringify as stringifyYaml } from 'yaml';
import { loadConfig, type Config } from '../config.js';
import { createLogger, type LogFormat, type Logger } from '../log.js';
import { DiscoveryService } from '../discovery/service.js';
import type { Snapshot } from '../discovery/types.js';

export interface OneShot {
  readonly config: Config;
  readonly snapshot: Snapshot;
  readonly now: number;
  /** Why the identity Leases could not be listed (the membership is then not known), or null. */
  readonly membershipProblem: string | null;
}

/** The inspection commands' log format: `--log-format` (main.ts sets SKEWGATE_LOG_FORMAT), default text. */
function oneShotLogFormat(): LogFormat {
  return process.env['SKEWGATE_LOG_FORMAT'] === 'json' ? 'json' : 'text';
}

export async function withOneShotDiscovery<T>(configFile: string, fn: (s: OneShot) => T | Promise<T>, logger?: Logger): Promise<T> {
  const loaded = loadConfig(configFile);
  const config = { ...loaded, discovery: { ...loaded.discovery, watch: false } } as Config;
  const discovery = new DiscoveryService(config, {
    logger: logger ?? createLogger(process.env['SKEWGATE_LOG_LEVEL'] ?? 'warn', process.stderr, oneShotLogFormat()),
  });
  try {
    await discovery.start();
    // Not watched here: one list of each membership source (the apiservers learnt are probed
    // once), then one of the identity Leases: is some running apiserver still unknown?
    const sourceProblem = await discovery.listSources();
    await discovery.probed();
    const leaseProblem = await discovery.listIdentityLeases();
    const membershipProblem = [sourceProblem, leaseProblem].filter((p) => p !== null).join('; ') || null;
    return await fn({ config: loaded, snapshot: discovery.current(), now: Date.now(), membershipProblem });
  } finally {
    await discovery.close();
  }
}

/** `-o`: how a command prints its data. table is the default for people. */
export type OutputFormat = 'table' | 'wide' | 'name' | 'json' | 'yaml';

/** Data as JSON or YAML, the same object either way; null for the other formats. */
export function structured(format: OutputFormat, data: unknown): string | null {
  if (format === 'json') return `${JSON.stringify(data, null, 2)}\n`;
  if (format === 'yaml') return stringifyYaml(data);
  return null;
}

/** A fixed-width text table; the first row is the header. */
export function formatTable(rows: readonly (readonly string[])[]): string {
  const widths: number[] = [];
  for (const r of rows)
    r.forEach((c, i) => {
      widths[i] = Math.max(widths[i] ?? 0, c.length);
    });
  return (
    rows
      .map((r) =>
        r
          .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
          .join('  ')
          .trimEnd(),
      )
      .join('\n') + '\n'
  );
}
