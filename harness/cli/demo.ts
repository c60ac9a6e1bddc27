// `skewgate-lab demo` (npm run demo): fake apiservers with a skewed API set, skewgate (fast path on,
// as in production) and a real Envoy, a short self-check through the gateway and through a plain
// balanced Envoy, then lines to try and a playable upgrade: u moves the next old apiserver to the
// new version, r moves it back, and status, skew and the self-check follow. skewgate's log goes
// to a file beside Envoy's; the terminal gets only what is said to a person.
import { Agent, request } from 'undici';
import { createWriteStream } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { join, relative, resolve } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD } from '../fake/index.js';
import { kubeconfigFor } from '../fake/pki.js';
import { startStack, type Stack } from '../demo/stack.js';
import { DemoUpgrade } from '../demo/upgrade.js';
import { createLogger } from '../../src/util/log.js';
import { EXIT_OK } from '../../src/constants.js';

export interface DemoOptions {
  readonly dir: string;
  readonly port: number;
  readonly exitAfterSeconds?: number | undefined;
}

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';
const OLD = { gitVersion: 'v1.35.2', builtins: BUILTINS_OLD } as const;
const NEW = { gitVersion: 'v1.36.0', builtins: BUILTINS_NEW } as const;

async function tally(url: string, path: string, token: string, ca: string, n: number): Promise<string> {
  const dispatcher = new Agent({ connect: { ca } });
  const counts = new Map<string, number>();
  try {
    for (let i = 0; i < n; i++) {
      const res = await request(url + path, { dispatcher, headers: { authorization: `Bearer ${token}` } });
      await res.body.dump();
      const who = String(res.headers['x-fake-apiserver'] ?? 'skewgate');
      const key = `${res.statusCode} from ${who}`;
      counts.set(key, (counts.get(key) ?? 0) + 1);
    }
  } finally {
    await dispatcher.close();
  }
  return [...counts].map(([k, v]) => `${v}× ${k}`).join(', ');
}

export async function runDemo(o: DemoOptions): Promise<number> {
  const log = (s: string): void => {
    process.stdout.write(`${s}\n`);
  };
  const dir = resolve(o.dir);
  const rel = (p: string): string => relative(process.cwd(), p) || p;
  log('skewgate-lab demo: starting 3 fake apiservers (2 × "v1.35", 1 × "v1.36"), skewgate and Envoy …');
  // A fresh xDS folder: members and cordons of an earlier run do not carry over.
  await rm(join(dir, 'xds'), { recursive: true, force: true });
  const skewgateLog = join(dir, 'skewgate.log');
  const logStream = createWriteStream(skewgateLog, { flags: 'a' });
  const stack: Stack = await startStack({
    dir,
    gatewayPort: o.port,
    baseline: true,
    servers: [
      { name: 'apiserver-a', builtins: BUILTINS_OLD, gitVersion: OLD.gitVersion },
      { name: 'apiserver-b', builtins: BUILTINS_OLD, gitVersion: OLD.gitVersion },
      { name: 'apiserver-c', builtins: BUILTINS_NEW, gitVersion: NEW.gitVersion },
    ],
    logLevel: 'info',
    logger: createLogger('info', logStream),
    // Filesystem xDS: the fast path on, as in production (docs/design.md, "The fast path").
    envoy: { xds: { directory: join(dir, 'xds') } },
  });
  try {
    const ca = await readFile(stack.pki.caFile, 'utf8');
    const token = stack.pki.token;
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, kubeconfigFor(stack.pki, stack.gatewayUrl), { mode: 0o600 });
    const selfCheck = async (): Promise<void> => {
      log('\nself-check, 12 requests each:');
      log(`  GET ${SKEWED}`);
      log(`    through skewgate:  ${await tally(stack.gatewayUrl, SKEWED, token, ca, 12)}`);
      if (stack.baselineUrl) log(`    plain balanced:    ${await tally(stack.baselineUrl, SKEWED, token, ca, 12)}`);
      log(`  GET ${COMMON}`);
      log(`    through skewgate:  ${await tally(stack.gatewayUrl, COMMON, token, ca, 12)}`);
    };
    log(`\ngateway (Envoy + skewgate):  ${stack.gatewayUrl}`);
    log(`plain balanced Envoy:        ${stack.baselineUrl ?? '-'}   (no skewgate: the problem)`);
    log(`Envoy admin:                 ${stack.envoy.adminUrl}`);
    await selfCheck();
    log(`  GET /apis/nothing.example/v1/widgets`);
    log(
      `    through skewgate:  ${await tally(stack.gatewayUrl, '/apis/nothing.example/v1/widgets', token, ca, 3)}   (a true 404, answered at the edge)`,
    );
    log("  (the plain balanced Envoy's 404s for mutatingadmissionpolicies are false: apiserver-c serves them)");
    log('\ntry, in another shell:');
    log(`  kubectl --kubeconfig ${rel(kubeconfig)} get mutatingadmissionpolicies`);
    log(`  kubectl --kubeconfig ${rel(kubeconfig)} --context cert auth whoami`);
    log(
      `  curl --cacert ${rel(stack.pki.caFile)} -H "Authorization: Bearer $(cat ${rel(stack.pki.tokenFile)})" ${stack.gatewayUrl}${SKEWED}`,
    );
    // These ask the running demo gateway (its admin endpoint, admin.listen in the config).
    log(`  node dist/src/cli/main.js status --config ${rel(stack.configFile)}`);
    log(`  node dist/src/cli/main.js skew --config ${rel(stack.configFile)}`);
    log(`  node dist/src/cli/main.js explain --config ${rel(stack.configFile)} POST ${SKEWED}`);
    log(`\nlogs: ${rel(skewgateLog)} (skewgate), ${rel(join(dir, 'envoy.log'))} (Envoy).`);
    log('keys: u upgrades the next v1.35 apiserver to v1.36 (a restart), r rolls the last one back, q stops (or Ctrl-C).');
    const upgrade = new DemoUpgrade(
      stack.apiservers.filter((a) => a.name !== 'apiserver-c'),
      OLD,
      NEW,
    );
    await new Promise<void>((resolveWait) => {
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        process.stdin.off('data', onKey);
        if (process.stdin.isTTY) process.stdin.setRawMode(false);
        // Not only paused: an open pipe would keep the process alive after the stack stops.
        process.stdin.destroy();
        resolveWait();
      };
      let chain = Promise.resolve();
      const onKey = (chunk: Buffer): void => {
        for (const ch of chunk.toString('utf8')) {
          // Raw mode: Ctrl-C arrives as a character, not a signal.
          if (ch === 'q' || ch === '\u0003') return finish();
          const step = ch === 'u' ? () => upgrade.upgrade() : ch === 'r' ? () => upgrade.rollBack() : null;
          if (step === null) continue;
          chain = chain
            .then(async () => {
              log(`\n${ch === 'u' ? 'upgrading' : 'rolling back'} …`);
              log(await step());
              // Two discovery rounds: skewgate has seen the restart (discovery.interval 1s).
              await new Promise((r) => setTimeout(r, 2500));
              await selfCheck();
              log('  (skewgate status and skew show it too)');
            })
            .catch((err: unknown) => log(`that step failed: ${String(err)}`));
        }
      };
      if (process.stdin.isTTY) process.stdin.setRawMode(true);
      process.stdin.on('data', onKey);
      process.stdin.resume();
      process.once('SIGINT', finish);
      process.once('SIGTERM', finish);
      if (o.exitAfterSeconds !== undefined) setTimeout(finish, o.exitAfterSeconds * 1000).unref();
    });
  } finally {
    log('stopping …');
    await stack.close();
    await new Promise<void>((r) => logStream.end(r));
  }
  return EXIT_OK;
}
