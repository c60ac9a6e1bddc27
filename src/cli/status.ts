// `skewgate status`: what the running gateway believes now, from its admin endpoint (GET
// /v1/status): its members and their readiness, each view's age and source, the snapshot and
// config generations, the skew. Exit 0: every member ready with a fresh view and nothing
// unaccounted for; 1: a problem listed (or the gateway does not answer); 2: bad usage or config.
import { EXIT_BAD_CONFIG, EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import type { GatewayStatus } from '../inspect/status.js';
import { membershipLines } from './membership-lines.js';
import { formatTable, fromGatewayOrDiscovery, structured, type AnswerOrigin, type GatewaySource } from './one-shot.js';
import { skewKey } from './skew.js';
import { changedLine, watchAnswers } from './watch.js';

const seconds = (ms: number | null): string =>
  ms === null ? '-' : ms < 10_000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms / 1000)}s`;

export async function runStatus(
  source: GatewaySource,
  output: 'table' | 'json' | 'yaml' = 'table',
  watch: { readonly intervalMs: number; readonly signal?: AbortSignal } | null = null,
): Promise<number> {
  if (source.discover) {
    // A round of this command's own has no generations, members or readiness history to show.
    process.stderr.write(
      'skewgate status: --discover does not apply: status is what the running gateway believes (skew --discover, explain --discover)\n',
    );
    return EXIT_BAD_CONFIG;
  }
  const ask = () =>
    fromGatewayOrDiscovery<GatewayStatus>('status', source, {
      ask: (gateway) => gateway(ADMIN_PATHS.status),
      discover: () => {
        throw new Error('unreachable: status never discovers');
      },
    });
  if (watch !== null) return watchAnswers({ ask, key: statusKey, print: (s, origin, at) => printStatus(s, origin, output, at), ...watch });
  const got = await ask();
  if (typeof got === 'number') return got;
  return printStatus(got.answer, got.origin, output, null);
}

/** What `status -w` compares: the members' states, the skew and the membership, not their ages. */
export function statusKey(s: GatewayStatus): string {
  return JSON.stringify([
    s.config.generation,
    s.members.map((m) => [
      m.name,
      m.url,
      m.role,
      m.seed,
      m.sources,
      m.ready,
      m.healthy,
      m.fresh,
      m.viewSource,
      m.gitVersion,
      m.lastErrorCode,
    ]),
    skewKey(s.skew),
  ]);
}

function printStatus(s: GatewayStatus, origin: AnswerOrigin, output: 'table' | 'json' | 'yaml', changedAt: Date | null): number {
  const exitCode = s.problems.length === 0 ? EXIT_OK : EXIT_PROBLEMS;
  const data = structured(output, s);
  if (data !== null) {
    // One document per answer: YAML's separator between them, JSON's stream as it is.
    process.stdout.write(changedAt !== null && output === 'yaml' ? `---\n${data}` : data);
    return exitCode;
  }
  if (changedAt !== null) process.stdout.write(changedLine(changedAt));
  process.stdout.write(
    `gateway:        ${origin.kind === 'gateway' ? origin.address : '-'}  skewgate ${s.skewgate.version}, pid ${s.skewgate.pid}, up ${seconds(s.skewgate.uptimeSeconds * 1000)}\n` +
      `config:         ${s.config.source} (generation ${s.config.generation})\n` +
      `snapshot:       generation ${s.snapshot.generation}\n\n`,
  );
  process.stdout.write(
    formatTable([
      ['APISERVER', 'URL', 'VERSION', 'ROLE', 'CORDON', 'READY', 'VIEW', 'AGE', 'SOURCES', 'ERROR'],
      ...s.members.map((m) => [
        m.name,
        m.url,
        m.gitVersion ?? '-',
        `${m.role}${m.seed ? ' (seed)' : ''}`,
        m.cordon === null ? '-' : m.cordon === 'drain' ? 'drained' : 'cordoned',
        m.ready === null ? '-' : !m.ready ? 'no' : m.role === 'draining' ? 'draining' : 'yes',
        m.viewSource === null ? 'none' : `${m.viewSource}${m.fresh ? '' : ' (not fresh)'}`,
        seconds(m.viewAgeMs),
        m.sources.join(',') || '-',
        m.lastError ?? '',
      ]),
    ]),
  );
  const notes = [
    ...membershipLines(s.skew.membership),
    ...(s.cordons ?? []).map(
      (c) =>
        `note: ${c.apiserver} ${c.mode === 'drain' ? 'drained (nothing new goes to it)' : 'cordoned (it gets only what no other member serves)'} by ${c.by || '?'} at ${c.at}${c.reason === '' ? '' : `: ${c.reason}`}`,
    ),
  ];
  if (notes.length > 0) process.stdout.write(`\n${notes.join('\n')}\n`);
  process.stdout.write(`\n${s.skew.summary}\n`);
  if (s.problems.length > 0)
    process.stdout.write(
      `\n${s.problems.length} problem${s.problems.length === 1 ? '' : 's'}:\n${s.problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
  return exitCode;
}
