#!/usr/bin/env node
// `skewgate-lab`: the harness that proves skewgate — the demo on fake apiservers, the lab of real
// kube-apiservers, the docker-compose renderer. A product of its own beside the service: it uses
// the service's modules, the service never uses it, and the service image does not hold it.
import { Command, CommanderError } from 'commander';
import { ConfigError } from '../../src/config/core/problems.js';
import { EXIT_BAD_CONFIG, EXIT_PROBLEMS } from '../../src/constants.js';
import { registerLabCommand } from './lab-command.js';

const program = new Command()
  .name('skewgate-lab')
  .description('The harness beside skewgate: a demo on fake apiservers, a lab of real kube-apiservers, the compose demo.')
  .showHelpAfterError()
  .exitOverride();

program
  .command('demo')
  .description('run a self-contained demo: fake skewed apiservers + skewgate + a real Envoy')
  .option('--dir <dir>', 'working folder for certificates, configs and logs', '.cache/demo')
  .option('--port <port>', 'gateway port', '8443')
  .option('--exit-after <seconds>', 'stop by itself after this many seconds (for scripted runs)')
  .action(async (o: { dir: string; port: string; exitAfter?: string }) => {
    process.exitCode = await (
      await import('./demo.js')
    ).runDemo({ dir: o.dir, port: Number(o.port), exitAfterSeconds: o.exitAfter === undefined ? undefined : Number(o.exitAfter) });
  });

registerLabCommand(program);

program
  .command('compose')
  .description("write the docker-compose demo (docker-compose.yml, deploy/compose/*.yaml) rendered from the lab's flags and configs")
  .option('--out <dir>', 'the repository root to write into', '.')
  .action(async (o: { out: string }) => {
    process.exitCode = await (await import('./compose.js')).runCompose(o.out);
  });

program
  .command('envoy-baseline')
  .description(
    "print the bootstrap of a plain Envoy without skewgate: envoy-config's, the ext_proc filter removed (the compose demo's baseline)",
  )
  .requiredOption('-c, --config <file>', 'skewgate YAML config file')
  .option(
    '--service-name <name>',
    "service name of Envoy's tracer, which reports as <name>-envoy (default: the config's telemetry.serviceName)",
  )
  .action(async (o: { config: string; serviceName?: string }) => {
    process.exitCode = await (await import('./envoy-baseline.js')).runEnvoyBaseline(o.config, o.serviceName);
  });

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof ConfigError) {
    process.stderr.write(`skewgate-lab: invalid config ${err.message}\n`);
    process.exitCode = EXIT_BAD_CONFIG;
  } else if (err instanceof CommanderError) {
    process.exitCode = err.exitCode === 0 ? 0 : EXIT_BAD_CONFIG;
  } else {
    process.stderr.write(`skewgate-lab: ${(err as Error).stack ?? String(err)}\n`);
    process.exitCode = EXIT_PROBLEMS;
  }
}
