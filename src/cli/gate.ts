// `skewgate gate`: may the rollout go on? The running gateway's answer (GET /v1/gate), for scripts
// between the apiservers of an upgrade (kubeadm on one control-plane node after another; a Cluster
// API hook). Exit 0 proceed; 1 hold (with --wait: still holding at the timeout); 2 bad usage or
// config; 3 the gateway did not answer. With --wait, asks again until it proceeds, printing each
// change of the reasons on stderr.
import { EXIT_BAD_CONFIG, EXIT_OK } from '../constants.js';
import type { GateAnswer, GateQuestion } from '../gate/core/verdict.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import { fromGatewayOrDiscovery, structured, type GatewaySource } from './one-shot.js';

export const EXIT_HOLD = 1;
export const EXIT_GATEWAY_UNREACHABLE = 3;

export interface GateArgs {
  readonly question: GateQuestion;
  readonly output: 'text' | 'json' | 'yaml';
  /** Keep asking until proceed, at most this long (ms); null: ask once. */
  readonly waitMs: number | null;
  readonly intervalMs: number;
}

export async function runGate(source: GatewaySource, a: GateArgs): Promise<number> {
  if (source.discover) {
    process.stderr.write('skewgate gate: --discover does not apply: the gate is what the running gateway has seen\n');
    return EXIT_BAD_CONFIG;
  }
  const query = new URLSearchParams(Object.entries(a.question).filter((e): e is [string, string] => typeof e[1] === 'string'));
  const path = `${ADMIN_PATHS.gate}${query.size > 0 ? `?${query.toString()}` : ''}`;
  const deadline = a.waitMs === null ? null : Date.now() + a.waitMs;
  let said = '';
  for (;;) {
    const got = await fromGatewayOrDiscovery<GateAnswer>('gate', source, {
      ask: (gateway) => gateway(path),
      discover: () => {
        throw new Error('unreachable: the gate never discovers');
      },
    });
    // fromGatewayOrDiscovery says 1 for an unreachable gateway: here 1 is "hold".
    if (typeof got === 'number') return got === EXIT_BAD_CONFIG ? got : EXIT_GATEWAY_UNREACHABLE;
    const g = got.answer;
    const done = g.verdict === 'proceed' || deadline === null || Date.now() + a.intervalMs > deadline;
    if (deadline !== null && !done) {
      // Progress: the reasons each time they change.
      const now = g.holds.map((h) => `  - ${h.reason}: ${h.detail}`).join('\n');
      if (now !== said) process.stderr.write(`${new Date().toISOString()} hold; asking again every ${a.intervalMs / 1000}s:\n${now}\n`);
      said = now;
      await new Promise((r) => setTimeout(r, a.intervalMs));
      continue;
    }
    const data = structured(a.output === 'text' ? 'table' : a.output, g);
    if (data !== null) process.stdout.write(data);
    else printGate(g, deadline !== null && g.verdict === 'hold');
    return g.verdict === 'proceed' ? EXIT_OK : EXIT_HOLD;
  }
}

function printGate(g: GateAnswer, timedOut: boolean): void {
  const lines = [`${g.verdict}${timedOut ? ' (still holding when --timeout ran out)' : ''}`];
  for (const h of g.holds) lines.push(`  hold: ${h.reason}: ${h.detail}`);
  for (const p of g.passed) lines.push(`  ok:   ${p}`);
  for (const u of g.unchecked) lines.push(`  not checked: ${u}`);
  if (g.removal !== null && g.removal.resources.length > 0) {
    lines.push(`  if ${g.removal.apiserver} leaves, no member serves:`);
    for (const r of g.removal.resources.slice(0, 20))
      lines.push(
        `    ${r.resource}${r.users.length === 0 ? '' : `  used by ${r.users.map((u) => `${u.user} (${u.userAgent || 'no user agent'}, ${u.count}×)`).join(', ')}`}`,
      );
    if (g.removal.resources.length > 20) lines.push(`    … and ${g.removal.resources.length - 20} more (-o json lists them all)`);
  }
  process.stdout.write(`${lines.join('\n')}\n`);
}
