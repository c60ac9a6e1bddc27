// Shared by the inspection commands: the running gateway's answer (its admin endpoint), or one
// round of discovery of their own, no watch, then close; and how they print.
import { CONFIG_ENV, DEFAULT_CONFIG_FILE } from './config-file.js';
import { stringify as stringifyYaml } from 'yaml';
import { loadConfig } from '../config/load.js';
import { type Config } from '../config/core/schema.js';
import { createLogger, type LogFormat, type Logger } from '../util/log.js';
import { DiscoveryService } from '../discovery/service.js';
import type { Snapshot } from '../discovery/core/types.js';
import { EXIT_BAD_CONFIG, EXIT_PROBLEMS } from '../constants.js';
import { AdminRefusedError, AdminUnreachableError, askGateway } from './admin-client.js';

export interface OneShot {
  readonly config: Config;
  readonly snapshot: Snapshot;
  readonly now: number;
  /** Why the identity Leases could not be listed (the membership is then not known), or null. */
  readonly membershipProblem: string | null;
}

/**
 * The inspection commands' own loggers: errors on stderr, text unless --log-format json. What fails
 * in their discovery round (an apiserver down) is in their report already, said once; set
 * SKEWGATE_LOG_LEVEL=warn (or debug) to see the log lines too.
 */
export function oneShotLogger(format: LogFormat = 'text'): Logger {
  return createLogger(process.env['SKEWGATE_LOG_LEVEL'] ?? 'error', process.stderr, format);
}

export async function withOneShotDiscovery<T>(configFile: string, fn: (s: OneShot) => T | Promise<T>, logger: Logger): Promise<T> {
  const loaded = loadConfig(configFile);
  const config = { ...loaded, discovery: { ...loaded.discovery, watch: false } } as Config;
  const discovery = new DiscoveryService(config, { logger });
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

/** Where status, skew and explain get their answer: the running gateway, or (--discover) a round of their own. */
export interface GatewaySource {
  /** -c: the config; its admin.listen names the gateway to ask. Needed unless --admin. */
  readonly configFile?: string | undefined;
  /** --admin: the endpoint to ask instead of the config's admin.listen. */
  readonly admin?: string | undefined;
  /** --discover: a discovery round of this command's own instead of asking the gateway. */
  readonly discover: boolean;
  /** How long the gateway may take to answer. */
  readonly timeoutMs: number;
  readonly logFormat?: LogFormat | undefined;
}

/** One question to the gateway's admin endpoint: GET, or POST with a JSON body. */
export type AskGateway = <T>(path: string, body?: unknown) => Promise<T>;

/** Where an answer came from, for the first line of a table. */
export type AnswerOrigin = { readonly kind: 'gateway'; readonly address: string } | { readonly kind: 'discovery' };

/**
 * The answer from the running gateway (`ask`) or, with --discover only, from a discovery round of
 * this command's own (`discover`). Never falls back by itself: an answer from elsewhere than the
 * gateway could differ from what it routes by. A number is the exit code of a failure already
 * reported on stderr.
 */
export async function fromGatewayOrDiscovery<T>(
  command: string,
  source: GatewaySource,
  how: {
    readonly ask: (gateway: AskGateway, config: Config | null) => Promise<T>;
    readonly discover: (s: OneShot) => T | Promise<T>;
  },
): Promise<{ readonly answer: T; readonly origin: AnswerOrigin } | number> {
  const fail = (code: number, message: string): number => {
    process.stderr.write(`skewgate ${command}: ${message}\n`);
    return code;
  };
  if (source.discover) {
    if (source.admin !== undefined) return fail(EXIT_BAD_CONFIG, '--admin and --discover exclude each other: ask the gateway, or discover');
    if (source.configFile === undefined)
      return fail(EXIT_BAD_CONFIG, `--discover needs a config, the apiservers to ask: give --config FILE or set ${CONFIG_ENV}`);
    const answer = await withOneShotDiscovery(source.configFile, how.discover, oneShotLogger(source.logFormat));
    return { answer, origin: { kind: 'discovery' } };
  }
  const config = source.configFile === undefined ? null : loadConfig(source.configFile);
  const address = source.admin ?? config?.admin?.listen;
  if (address === undefined)
    return fail(
      EXIT_BAD_CONFIG,
      source.configFile === undefined
        ? `no config: give --config FILE or set ${CONFIG_ENV} (its admin.listen names the gateway to ask; ${DEFAULT_CONFIG_FILE}, the default, does not exist), or --admin ADDRESS`
        : `${source.configFile} has no admin.listen, so the gateway has no admin endpoint to ask: set one (docs/design.md, "The admin endpoint"), give --admin ADDRESS, or --discover for a discovery round of this command's own`,
    );
  if (/:0$/.test(address))
    return fail(
      EXIT_BAD_CONFIG,
      `admin.listen ${address} picks a port at start: give --admin with the port the gateway logged ("admin endpoint listening")`,
    );
  const gateway: AskGateway = (path, body) => askGateway(address, path, { body, timeoutMs: source.timeoutMs });
  try {
    return { answer: await how.ask(gateway, config), origin: { kind: 'gateway', address } };
  } catch (err) {
    if (err instanceof AdminRefusedError) return fail(EXIT_BAD_CONFIG, err.message);
    if (err instanceof AdminUnreachableError && err.answered)
      return fail(EXIT_PROBLEMS, `the running gateway could not do it: ${err.message}`);
    if (err instanceof AdminUnreachableError)
      return fail(
        EXIT_PROBLEMS,
        `the running gateway did not answer: ${err.message}. Is \`skewgate serve\` running with this config, on this machine? (--discover: a discovery round of this command's own)`,
      );
    throw err;
  }
}

/** The first line of a table: whose view this is. */
export function originLine(origin: AnswerOrigin, generation: number): string {
  return origin.kind === 'gateway'
    ? `gateway:        ${origin.address} (snapshot generation ${generation})`
    : "gateway:        not asked: a discovery round of this command's own (--discover)";
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
