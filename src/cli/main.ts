#!/usr/bin/env node
// The `skewgate` command: parses arguments, turns errors into exit codes, nothing else. Each
// command's module is loaded when it runs: `skewgate health` (an exec probe, every few seconds)
// must not load discovery or the Envoy renderer. The harness (lab, demo, compose) has its own
// command, `skewgate-lab` (harness/cli/main.ts): nothing here reaches it.
import { Command, CommanderError, Option } from 'commander';
import { ConfigError } from '../config/core/problems.js';
import { EXIT_BAD_CONFIG, EXIT_PROBLEMS } from '../constants.js';
import { LOG_FORMATS, type LogFormat } from '../util/log.js';
import type { GatewaySource } from './one-shot.js';
import { LIST_FORMATS, type ListFormat } from './formats.js';
import type { ListOptions } from './listing.js';
import { skewgateVersion } from '../util/version.js';
import { addHelpExtras } from './help.js';
import { CONFIG_DEFAULT_HELP, NoConfigError, optionalConfigFile, requiredConfigFile } from './config-file.js';

const program = new Command()
  .name('skewgate')
  .description('Route Kubernetes API requests to an apiserver that can serve them, during version skew (Envoy ext_proc).')
  .version(skewgateVersion(), '-V, --version', "print skewgate's version")
  .addOption(
    new Option(
      '--log-format <format>',
      "log lines on stderr as json or text (serve: default the config's log.format; other commands: text)",
    ).choices(LOG_FORMATS),
  )
  .showHelpAfterError()
  .exitOverride();

/** --log-format, wherever it was given (before or after the command name). */
function logFormat(): LogFormat | undefined {
  return program.opts<{ logFormat?: LogFormat }>().logFormat;
}

/** A flag's value that commander cannot check itself: said on stderr, exit 2. */
class UsageError extends Error {}

/** A duration flag's parser: a Go duration (2s, 1m30s), or bare digits as milliseconds (as these flags always took). */
async function flagDuration(): Promise<(text: string) => number | null> {
  const { parseDuration } = await import('../config/core/units.js');
  return (text) => (/^\d+$/.test(text.trim()) ? Number(text.trim()) : parseDuration(text));
}

const configOption = ['-c, --config <file>', `skewgate YAML config file (${CONFIG_DEFAULT_HELP})`] as const;

program
  .command('serve')
  .description('run the ext_proc service: discovery in the background, a routing decision per request')
  .option(...configOption)
  .action(async (o: { config?: string }) => {
    process.exitCode = await (await import('./serve.js')).runServe(requiredConfigFile(o.config), logFormat());
  });

program
  .command('envoy-config')
  .description('print the Envoy bootstrap (YAML) for this config on stdout')
  .option(...configOption)
  .option('--relative-to <dir>', 'write file paths relative to this folder (for a committed bootstrap)')
  .action(async (o: { config?: string; relativeTo?: string }) => {
    process.exitCode = await (await import('./envoy-config.js')).runEnvoyConfig(requiredConfigFile(o.config), o.relativeTo);
  });

/**
 * --config, --admin and --timeout: where a command asks the running gateway; with `discover`, also
 * --discover (skew and explain can answer from a discovery round of their own; the others cannot,
 * and do not offer it).
 */
function withGatewayOptions(cmd: Command, discover = false): Command {
  cmd
    .option(
      '-c, --config <file>',
      `skewgate YAML config file: its admin.listen names the gateway to ask${discover ? ' (with --discover: the apiservers)' : ''}; ${CONFIG_DEFAULT_HELP}, if it exists`,
    )
    .option(
      '--admin <address>',
      "ask the gateway's admin endpoint here (host:port on loopback, or unix:/path) instead of the config's admin.listen",
    );
  if (discover)
    cmd.option('--discover', "do not ask the running gateway: run a discovery round of this command's own against the config's apiservers");
  return cmd.option('--timeout <duration>', 'how long the gateway may take to answer (Go duration or ms)', '5s');
}

interface GatewayFlags {
  readonly config?: string;
  readonly admin?: string;
  readonly discover?: boolean;
  readonly timeout: string;
}

async function gatewaySource(o: GatewayFlags): Promise<GatewaySource> {
  const parseDuration = await flagDuration();
  const timeoutMs = parseDuration(o.timeout);
  if (timeoutMs === null || timeoutMs <= 0) throw new UsageError(`--timeout ${o.timeout}: not a duration (5s, 1500ms, 1m)`);
  return { configFile: optionalConfigFile(o.config), admin: o.admin, discover: Boolean(o.discover), timeoutMs, logFormat: logFormat() };
}

const WATCH_OPTION = ['-w, --watch', 'keep asking the gateway and print again whenever what this shows changes (Ctrl-C ends it)'] as const;
const INTERVAL_OPTION = ['--interval <duration>', 'with -w: how often to ask (Go duration or ms)', '2s'] as const;

interface WatchFlags {
  readonly watch?: boolean;
  readonly interval: string;
}

async function watchOf(o: WatchFlags): Promise<{ readonly intervalMs: number } | null> {
  if (o.watch !== true) return null;
  const parseDuration = await flagDuration();
  const intervalMs = parseDuration(o.interval);
  if (intervalMs === null || intervalMs < 100) throw new UsageError(`--interval ${o.interval}: a duration of at least 100ms (2s, 500ms)`);
  return { intervalMs };
}

/** -o for a listing, as kubectl's (wide: `wide`), and --no-headers. */
function withListOptions(cmd: Command, wide: string, name: string): Command {
  return cmd
    .addOption(
      new Option('-o, --output <format>', `table (default), wide (${wide}), name (${name}, one per line), json or yaml`).choices(
        LIST_FORMATS,
      ),
    )
    .option('--no-headers', 'table and wide: leave out the header row');
}

interface ListFlags {
  readonly output?: ListFormat;
  /** False with --no-headers. */
  readonly headers: boolean;
}

const listOf = (o: ListFlags, json = false): ListOptions => ({
  format: json ? 'json' : (o.output ?? 'table'),
  noHeaders: !o.headers,
  logFormat: logFormat(),
});

withListOptions(
  withGatewayOptions(
    program
      .command('status')
      .description(
        'what the running gateway believes now (its admin endpoint): members, readiness, view ages and sources, generations, skew',
      ),
  ),
  "the failure count and the last error's code",
  'apiserver names',
)
  .option(...WATCH_OPTION)
  .option(...INTERVAL_OPTION)
  .action(async (o: GatewayFlags & WatchFlags & ListFlags) => {
    process.exitCode = await (await import('./status.js')).runStatus(await gatewaySource(o), listOf(o), await watchOf(o));
  });

withListOptions(
  withGatewayOptions(
    program
      .command('history')
      .description(
        "what changed lately in the running gateway's view, oldest first: apiservers joining and leaving, readiness, draining, versions, views, the skew",
      ),
  ),
  'the same: every field is in the table',
  'apiserver/event',
).action(async (o: GatewayFlags & ListFlags) => {
  process.exitCode = await (await import('./history.js')).runHistory(await gatewaySource(o), listOf(o));
});

withGatewayOptions(
  program
    .command('explain')
    .description(
      "the decision the running gateway makes for METHOD PATH (with -H headers and a client certificate), and why (--discover: from a discovery round of this command's own)",
    ),
  true,
)
  .addOption(new Option('-o, --output <format>', 'table (default), json or yaml').choices(['table', 'json', 'yaml']))
  .option('--json', 'the same as -o json')
  .option(
    '-H, --header <line>',
    'a request header, "Name: value", as the client sends it (e.g. kubectl\'s Accept); repeat',
    (v: string, acc: string[]) => [...acc, v],
    [] as string[],
  )
  .option(
    '--client-cert <file>',
    'the client certificate the request presents (PEM, intermediates after it): judged as the gateway judges it',
  )
  .argument('<method>', 'HTTP method, e.g. GET')
  .argument('<path>', 'request path with query, e.g. /apis/apps/v1/namespaces/default/deployments')
  .action(
    async (
      method: string,
      path: string,
      o: GatewayFlags & { json?: boolean; output?: 'table' | 'json' | 'yaml'; header: string[]; clientCert?: string },
    ) => {
      process.exitCode = await (
        await import('./explain.js')
      ).runExplain({
        source: await gatewaySource(o),
        method,
        path,
        output: o.json ? 'json' : (o.output ?? 'table'),
        headers: o.header,
        clientCert: o.clientCert,
      });
    },
  );

withListOptions(
  withGatewayOptions(
    program
      .command('skew')
      .description(
        "list every resource that not all apiservers serve, as the running gateway sees it: who serves it, who does not (--discover: a discovery round of this command's own)",
      ),
    true,
  ),
  'a column per apiserver',
  'group/version/resource',
)
  .option('--json', 'the same as -o json')
  .option(...WATCH_OPTION)
  .option(...INTERVAL_OPTION)
  .option(
    '--if-removed <apiserver>',
    'instead: what no member would serve if this apiserver left, and who used each lately (exit 1 while something is in use)',
  )
  .action(async (o: GatewayFlags & WatchFlags & ListFlags & { json?: boolean; ifRemoved?: string }) => {
    const skew = await import('./skew.js');
    const output = listOf(o, o.json);
    if (o.ifRemoved !== undefined) {
      if (o.watch) throw new UsageError('--if-removed answers once: not with -w');
      process.exitCode = await skew.runIfRemoved(await gatewaySource(o), o.ifRemoved, output);
      return;
    }
    process.exitCode = await skew.runSkew(await gatewaySource(o), output, await watchOf(o));
  });

withGatewayOptions(
  program
    .command('gate')
    .description(
      'may the rollout go on? "proceed" (exit 0) or "hold" (exit 1) with the reasons, from the running gateway: members ready and current, recent errors, a new member joined, a removal safe',
    ),
)
  .option('--expect <apiserver>', 'hold until this apiserver (name, hostname or address) is a member, discovered and sent requests')
  .option('--removing <apiserver>', 'hold while something only this apiserver serves is still in use, or it is the last one ready')
  .option('--kubernetes-version <version>', 'hold until every member runs this version (v1.36.3): the control plane upgrade finished')
  .option('--wait', 'ask again until the gate proceeds or --wait-timeout runs out (progress on stderr)')
  .option('--wait-timeout <duration>', 'with --wait: how long at most', '10m')
  .option('--interval <duration>', 'with --wait: how often to ask (Go duration or ms)', '2s')
  .addOption(new Option('-o, --output <format>', 'text (default), json or yaml').choices(['text', 'json', 'yaml']))
  .action(
    async (
      o: GatewayFlags & {
        expect?: string;
        removing?: string;
        kubernetesVersion?: string;
        wait?: boolean;
        waitTimeout: string;
        interval: string;
        output?: 'text' | 'json' | 'yaml';
      },
    ) => {
      const parseDuration = await flagDuration();
      const waitMs = o.wait ? parseDuration(o.waitTimeout) : null;
      if (o.wait && (waitMs === null || waitMs <= 0)) throw new UsageError(`--wait-timeout ${o.waitTimeout}: not a duration (10m, 90s)`);
      const intervalMs = (await watchOf({ watch: true, interval: o.interval }))?.intervalMs ?? 2000;
      process.exitCode = await (
        await import('./gate.js')
      ).runGate(await gatewaySource(o), {
        question: {
          ...(o.expect === undefined ? {} : { expect: o.expect }),
          ...(o.removing === undefined ? {} : { removing: o.removing }),
          ...(o.kubernetesVersion === undefined ? {} : { version: o.kubernetesVersion }),
        },
        output: o.output ?? 'text',
        waitMs,
        intervalMs,
      });
    },
  );

for (const uncordon of [false, true]) {
  const cmd = withGatewayOptions(
    program
      .command(uncordon ? 'uncordon' : 'cordon')
      .description(
        uncordon
          ? 'give a cordoned or drained apiserver back its share of requests (the running gateway, kept across restarts)'
          : 'keep requests off one apiserver: it gets only what no other member serves (--drain: nothing new); kept across restarts and reloads',
      ),
  )
    .argument('<apiserver>', 'the apiserver, as `skewgate status` names it')
    .option('--reason <text>', 'why, for the log, the trace and the history', '')
    .option('--by <name>', 'who asks, as the gateway logs it (default user@host)')
    .addOption(new Option('-o, --output <format>', 'text (default), json or yaml').choices(['text', 'json', 'yaml']));
  if (!uncordon) cmd.option('--drain', 'nothing new goes to it, not even what only it serves');
  cmd.action(
    async (apiserver: string, o: GatewayFlags & { reason: string; by?: string; drain?: boolean; output?: 'text' | 'json' | 'yaml' }) => {
      process.exitCode = await (
        await import('./cordon.js')
      ).runCordon(await gatewaySource(o), {
        apiserver,
        mode: uncordon ? null : o.drain ? 'drain' : 'cordon',
        reason: o.reason,
        by: o.by,
        output: o.output === 'json' || o.output === 'yaml' ? o.output : 'table',
      });
    },
  );
}

withListOptions(
  program
    .command('validate')
    .description(
      'check the config, then reachability, TLS and credentials of every apiserver, and that no running apiserver is missing from it',
    )
    .option(...configOption),
  'the discovery error',
  'apiserver names',
).action(async (o: ListFlags & { config?: string }) => {
  process.exitCode = await (await import('./validate.js')).runValidate(requiredConfigFile(o.config), listOf(o), logFormat());
});

program
  .command('config-schema')
  .description("print the config's JSON Schema (for editors: docs/skewgate-config.schema.json is the same)")
  .action(async () => {
    const { configJsonSchema } = await import('../config/core/schema.js');
    process.stdout.write(`${JSON.stringify(configJsonSchema(), null, 2)}\n`);
  });

program
  .command('health')
  .description('ask a running skewgate for its gRPC health (grpc.health.v1, as Envoy does); exit 0 when serving')
  .option(...configOption)
  .option('--timeout <duration>', 'give up after this long (Go duration, e.g. 2s, or milliseconds)', '2s')
  .option('--envoy', "also require Envoy's GET /ready on its admin address (envoy.admin) to answer 200")
  .action(async (o: { config?: string; timeout: string; envoy?: boolean }) => {
    const parseDuration = await flagDuration();
    const timeoutMs = parseDuration(o.timeout);
    if (timeoutMs === null || timeoutMs <= 0) throw new UsageError(`--timeout ${o.timeout}: not a duration (2s, 1500ms, 500)`);
    process.exitCode = await (await import('./health.js')).runHealth(requiredConfigFile(o.config), timeoutMs, { envoy: Boolean(o.envoy) });
  });

program
  .command('gateway-cert')
  .description("issue the gateway's serving certificate (envoy.tls) from a CA the clients trust, with the names they connect to")
  .requiredOption('--ca-cert <file>', 'CA certificate, e.g. /etc/kubernetes/pki/ca.crt')
  .requiredOption('--ca-key <file>', 'its private key')
  .option(
    '--san <name>',
    'a DNS name or IP address clients use (DNS:name, IP:addr, or bare); repeat',
    (v: string, acc: string[]) => [...acc, v],
    [] as string[],
  )
  .option('--out <dir>', 'folder for <name>.crt and <name>.key', '.')
  .option('--name <name>', 'file name stem', 'gateway')
  .option('--days <days>', "validity in days (at most the CA's remaining validity)", '365')
  .option('--force', 'replace <name>.crt and <name>.key when they exist')
  .action(async (o: { caCert: string; caKey: string; san: string[]; out: string; name: string; days: string; force?: boolean }) => {
    process.exitCode = await (
      await import('./gateway-cert.js')
    ).runGatewayCert({
      caCert: o.caCert,
      caKey: o.caKey,
      sans: o.san,
      out: o.out,
      name: o.name,
      days: o.days,
      force: Boolean(o.force),
    });
  });

addHelpExtras(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof UsageError || err instanceof NoConfigError) {
    process.stderr.write(`skewgate: ${err.message}\n`);
    process.exitCode = EXIT_BAD_CONFIG;
  } else if (err instanceof ConfigError) {
    process.stderr.write(`skewgate: invalid config ${err.message}\n`);
    process.exitCode = EXIT_BAD_CONFIG;
  } else if (err instanceof CommanderError) {
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_BAD_CONFIG;
  } else {
    process.stderr.write(`skewgate: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = EXIT_PROBLEMS;
  }
}
