// `skewgate status`: what the running gateway believes now, from its admin endpoint (GET
// /v1/status): its members and their readiness, each view's age and source, the snapshot and
// config generations, the skew. Exit 0: every member ready with a fresh view and nothing
// unaccounted for; 1: a problem listed (or the gateway does not answer); 2: bad usage or config.
import { EXIT_BAD_CONFIG, EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import type { GatewayStatus, MemberStatus } from '../inspect/status.js';
import { membershipLines } from './membership-lines.js';
import { fromGatewayOrDiscovery, type AnswerOrigin, type GatewaySource } from './one-shot.js';
import { isRowFormat, renderListing, sayAside, type Listing, type ListOptions } from './listing.js';
import { skewKey } from './skew.js';
import { changedLine, watchAnswers } from './watch.js';

const seconds = (ms: number | null): string =>
  ms === null ? '-' : ms < 10_000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms / 1000)}s`;

export async function runStatus(
  source: GatewaySource,
  list: ListOptions = { format: 'table' },
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
  if (watch !== null) return watchAnswers({ ask, key: statusKey, print: (s, origin, at) => printStatus(s, origin, list, at), ...watch });
  const got = await ask();
  if (typeof got === 'number') return got;
  return printStatus(got.answer, got.origin, list, null);
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

function printStatus(s: GatewayStatus, origin: AnswerOrigin, list: ListOptions, changedAt: Date | null): number {
  const exitCode = s.problems.length === 0 ? EXIT_OK : EXIT_PROBLEMS;
  const rows = renderListing(statusListing(s), list);
  if (!isRowFormat(list.format)) {
    // One document per answer: YAML's separator between them, JSON's stream as it is.
    process.stdout.write(changedAt !== null && list.format === 'yaml' ? `---\n${rows}` : rows);
    return exitCode;
  }
  const aside: string[] = [];
  if (changedAt !== null) aside.push(changedLine(changedAt).trimEnd());
  if (list.format !== 'name')
    aside.push(
      `gateway:        ${origin.kind === 'gateway' ? origin.address : '-'}  skewgate ${s.skewgate.version}, pid ${s.skewgate.pid}, up ${seconds(s.skewgate.uptimeSeconds * 1000)}`,
      `config:         ${s.config.source} (generation ${s.config.generation})`,
      `snapshot:       generation ${s.snapshot.generation}`,
    );
  sayAside(list, aside);
  process.stdout.write(rows);
  const notes = [
    ...membershipLines(s.skew.membership),
    ...(s.cordons ?? []).map(
      (c) =>
        `note: ${c.apiserver} ${c.mode === 'drain' ? 'drained (nothing new goes to it)' : 'cordoned (it gets only what no other member serves)'} by ${c.by || '?'} at ${c.at}${c.reason === '' ? '' : `: ${c.reason}`}`,
    ),
  ];
  sayAside(list, [
    ...notes,
    s.skew.summary,
    ...(s.problems.length > 0
      ? [`${s.problems.length} problem${s.problems.length === 1 ? '' : 's'}:`, ...s.problems.map((p) => `  - ${p}`)]
      : []),
  ]);
  return exitCode;
}

/** The members as rows: -o wide adds the failure count and the last error's code. */
export function statusListing(s: GatewayStatus): Listing<MemberStatus> {
  return {
    data: s,
    rows: s.members,
    name: (m) => m.name,
    columns: [
      { header: 'APISERVER', cell: (m) => m.name },
      { header: 'URL', cell: (m) => m.url },
      { header: 'VERSION', cell: (m) => m.gitVersion ?? '-' },
      { header: 'ROLE', cell: (m) => `${m.role}${m.seed ? ' (seed)' : ''}` },
      { header: 'CORDON', cell: (m) => (m.cordon === null ? '-' : m.cordon === 'drain' ? 'drained' : 'cordoned') },
      { header: 'READY', cell: (m) => (m.ready === null ? '-' : !m.ready ? 'no' : m.role === 'draining' ? 'draining' : 'yes') },
      { header: 'VIEW', cell: (m) => (m.viewSource === null ? 'none' : `${m.viewSource}${m.fresh ? '' : ' (not fresh)'}`) },
      { header: 'AGE', cell: (m) => seconds(m.viewAgeMs) },
      { header: 'SOURCES', cell: (m) => m.sources.join(',') || '-' },
      { header: 'FAILURES', cell: (m) => String(m.consecutiveFailures), wide: true },
      { header: 'CODE', cell: (m) => m.lastErrorCode ?? '-', wide: true },
      { header: 'ERROR', cell: (m) => m.lastError ?? '' },
    ],
  };
}
