// `skewgate-lab demo` (npm run demo): fake apiservers with a skewed API set, skewgate and a real Envoy,
// a short self-check through the gateway and through a plain balanced Envoy, then lines to try.
import { Agent, request } from 'undici';
import { readFile } from 'node:fs/promises';
import { relative } from 'node:path';
import { BUILTINS_NEW, BUILTINS_OLD } from '../fake/index.js';
import { startStack } from '../demo/stack.js';
import { EXIT_OK } from '../../src/constants.js';

export interface DemoOptions {
  readonly dir: string;
  readonly port: number;
  readonly exitAfterSeconds?: number | undefined;
}

const SKEWED = '/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies';
const COMMON = '/api/v1/namespaces/default/configmaps';

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
  log('skewgate-lab demo: starting 3 fake apiservers (2 × "v1.35", 1 × "v1.36"), skewgate and Envoy …');
  const stack = await startStack({
    dir: o.dir,
    gatewayPort: o.port,
    baseline: true,
    servers: [
      { name: 'apiserver-a', builtins: BUILTINS_OLD, gitVersion: 'v1.35.2' },
      { name: 'apiserver-b', builtins: BUILTINS_OLD, gitVersion: 'v1.35.2' },
      { name: 'apiserver-c', builtins: BUILTINS_NEW, gitVersion: 'v1.36.0' },
    ],
    logLevel: 'info',
  });
  const stop = async (): Promise<void> => {
    await stack.close();
  };
  try {
    const ca = await readFile(stack.pki.caFile, 'utf8');
    const token = stack.pki.token;
    log(`\ngateway (Envoy + skewgate):  ${stack.gatewayUrl}`);
    log(`plain balanced Envoy:        ${stack.baselineUrl ?? '-'}   (no skewgate: the problem)`);
    log(`Envoy admin:                 ${stack.envoy.adminUrl}`);
    log('\nself-check, 12 requests each:');
    log(`  GET ${SKEWED}`);
    log(`    through skewgate:  ${await tally(stack.gatewayUrl, SKEWED, token, ca, 12)}`);
    if (stack.baselineUrl) log(`    plain balanced:    ${await tally(stack.baselineUrl, SKEWED, token, ca, 12)}   ← false 404s`);
    log(`  GET ${COMMON}`);
    log(`    through skewgate:  ${await tally(stack.gatewayUrl, COMMON, token, ca, 12)}`);
    log(`  GET /apis/nothing.example/v1/widgets`);
    log(
      `    through skewgate:  ${await tally(stack.gatewayUrl, '/apis/nothing.example/v1/widgets', token, ca, 3)}   (a true 404, answered at the edge)`,
    );
    const rel = (p: string): string => relative(process.cwd(), p) || p;
    log('\ntry:');
    log(
      `  curl --cacert ${rel(stack.pki.caFile)} -H "Authorization: Bearer $(cat ${rel(stack.pki.tokenFile)})" ${stack.gatewayUrl}${SKEWED}`,
    );
    log(
      `  curl --cacert ${rel(stack.pki.caFile)} -H "Authorization: Bearer $(cat ${rel(stack.pki.tokenFile)})" ${stack.baselineUrl ?? ''}${SKEWED}`,
    );
    // These ask the running demo gateway (its admin endpoint, admin.listen in the config).
    log(`  node dist/src/cli/main.js status --config ${rel(stack.configFile)}`);
    log(`  node dist/src/cli/main.js skew --config ${rel(stack.configFile)}`);
    log(`  node dist/src/cli/main.js explain --config ${rel(stack.configFile)} POST ${SKEWED}`);
    log(
      `  kubectl --kubeconfig ${rel(stack.pki.kubeconfigFile)} --server ${stack.gatewayUrl} get mutatingadmissionpolicies   (if you have kubectl)`,
    );
    log(`\nlogs: ${rel(o.dir)}/envoy.log; skewgate logs on stderr. Ctrl-C stops everything.`);
    await new Promise<void>((resolveWait) => {
      process.once('SIGINT', () => resolveWait());
      process.once('SIGTERM', () => resolveWait());
      if (o.exitAfterSeconds !== undefined) setTimeout(resolveWait, o.exitAfterSeconds * 1000).unref();
    });
  } finally {
    log('stopping …');
    await stop();
  }
  return EXIT_OK;
}
