// `skewgate skew`: every resource (and subresource) that not all apiservers serve, as the running
// gateway sees it (its admin endpoint), or from a discovery round of this command's own with
// --discover. Exit 0: every apiserver was compared and none differs; 1: a skew, an apiserver that
// could not be compared (named: its discovery is missing, so "no skew" would be a guess), or a
// gateway that does not answer; 2: bad config or usage.
import { EXIT_BAD_CONFIG, EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import { changedLine, watchAnswers } from './watch.js';
import type { SkewRow } from '../routing/skew.js';
import { skewReport, type SkewReport } from '../inspect/skew-report.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import type { GateAnswer } from '../gate/core/verdict.js';
import { spanText } from '../gate/core/removal.js';
import type { ClientUsage } from '../gate/core/usage.js';
import { membershipLines } from './membership-lines.js';
import { fromGatewayOrDiscovery, originLine, type AnswerOrigin, type GatewaySource } from './one-shot.js';
import type { ListFormat } from './formats.js';
import { isRowFormat, renderListing, sayAside, type Column, type Listing, type ListOptions } from './listing.js';

/** `-o name`: group/version/resource, as kubectl writes resource names (core: v1/pods). */
const rowName = (r: SkewRow): string => `${r.group ? `${r.group}/` : ''}${r.version}/${r.resource}`;

export async function runSkew(
  source: GatewaySource,
  list: ListOptions = { format: 'table' },
  watch: { readonly intervalMs: number; readonly signal?: AbortSignal } | null = null,
): Promise<number> {
  if (watch !== null && source.discover) {
    process.stderr.write('skewgate skew: -w follows the running gateway: not with --discover\n');
    return EXIT_BAD_CONFIG;
  }
  const ask = () =>
    fromGatewayOrDiscovery<SkewReport>('skew', source, {
      ask: (gateway) => gateway(ADMIN_PATHS.skew),
      discover: ({ snapshot, now, membershipProblem }) => skewReport(snapshot, now, membershipProblem),
    });
  if (watch !== null) return watchAnswers({ ask, key: skewKey, print: (r, origin, at) => printSkew(r, origin, list, at), ...watch });
  const got = await ask();
  if (typeof got === 'number') return got;
  return printSkew(got.answer, got.origin, list, null);
}

/** What `skew -w` compares: the verdict, the rows, who was compared and the membership — not generations or ages. */
export function skewKey(r: SkewReport): string {
  return JSON.stringify([
    r.verdict,
    r.skew.map((x) => [x.group, x.version, x.resource, x.servedBy, x.missingFrom]),
    r.compared,
    r.notCompared.map((n) => [n.name, n.member]),
    r.membership.unmatched.map((u) => u.identity),
    r.membership.draining,
    r.membership.probing.map((p) => p.name),
  ]);
}

function printSkew(report: SkewReport, origin: AnswerOrigin, list: ListOptions, changedAt: Date | null): number {
  const exitCode = report.verdict === 'no_skew' ? EXIT_OK : EXIT_PROBLEMS;
  const rows = renderListing(skewListing(report, list.format), list);
  if (!isRowFormat(list.format)) {
    // One document per answer: YAML's separator between them, JSON's stream as it is.
    process.stdout.write(changedAt !== null && list.format === 'yaml' ? `---\n${rows}` : rows);
    return exitCode;
  }
  sayAside(list, [
    ...(changedAt === null ? [] : [changedLine(changedAt).trimEnd()]),
    ...(list.format === 'name' ? [] : [originLine(origin, report.generation), ...membershipLines(report.membership)]),
    ...report.notCompared
      .filter((n) => n.member)
      .map((n) => `warning: no discovery from ${n.name}: ${n.error} (left out of the comparison)`),
  ]);
  process.stdout.write(rows);
  sayAside(list, [report.summary]);
  return exitCode;
}

/** The skewed resources as rows: -o wide has a column per apiserver compared (does it serve it?). */
export function skewListing(report: SkewReport, format: ListFormat): Listing<SkewRow> {
  const gvr: Column<SkewRow>[] = [
    { header: 'GROUP', cell: (r) => r.group || '(core)' },
    { header: 'VERSION', cell: (r) => r.version },
    { header: 'RESOURCE', cell: (r) => r.resource },
  ];
  return {
    data: report,
    rows: report.skew,
    name: rowName,
    columns:
      format === 'wide'
        ? [
            ...gvr,
            ...report.compared.map((n): Column<SkewRow> => ({
              header: n.toUpperCase(),
              cell: (r) => (r.servedBy.includes(n) ? 'yes' : '-'),
            })),
          ]
        : [
            ...gvr,
            { header: 'SERVED BY', cell: (r) => r.servedBy.join(',') || '-' },
            { header: 'NOT SERVED BY', cell: (r) => r.missingFrom.join(',') },
          ],
  };
}

/**
 * `skew --if-removed <apiserver>`: what no member would serve if it left, and who used each lately
 * (the gateway's usage record: GET /v1/gate?removing=). Exit 0: nothing it alone serves is in use;
 * 1: something is (or the gateway did not answer); 2: bad usage, an unknown apiserver.
 */
export async function runIfRemoved(source: GatewaySource, apiserver: string, list: ListOptions): Promise<number> {
  if (source.discover) {
    process.stderr.write("skewgate skew --if-removed: who uses what is the running gateway's record: not with --discover\n");
    return EXIT_BAD_CONFIG;
  }
  const got = await fromGatewayOrDiscovery<GateAnswer>('skew', source, {
    ask: (gateway) => gateway(`${ADMIN_PATHS.gate}?${new URLSearchParams({ removing: apiserver }).toString()}`),
    discover: () => {
      throw new Error('unreachable: --if-removed never discovers');
    },
  });
  if (typeof got === 'number') return got;
  const g = got.answer;
  const unknown = g.holds.find((h) => h.reason === 'removal_unknown_member');
  if (unknown !== undefined || g.removal === null) {
    process.stderr.write(`skewgate skew: ${unknown?.detail ?? `${apiserver}: no answer`}\n`);
    return EXIT_BAD_CONFIG;
  }
  const r = g.removal;
  const inUse = r.resources.some((x) => x.users.length > 0);
  const span = spanText(r.usageWindowMs);
  type UseRow = { readonly resource: string; readonly user: ClientUsage | null };
  const listing: Listing<UseRow> = {
    data: r,
    // A row per resource and user (one per resource for -o name).
    rows: r.resources.flatMap((x): UseRow[] => {
      const resource = x.resource.replace(/^\//, '');
      return x.users.length === 0 || list.format === 'name' ? [{ resource, user: null }] : x.users.map((user) => ({ resource, user }));
    }),
    name: (row) => row.resource,
    columns: [
      { header: 'RESOURCE', cell: (row) => row.resource },
      { header: 'USER', cell: (row) => row.user?.user ?? `- (not used in ${span})` },
      { header: 'USER AGENT', cell: (row) => (row.user === null ? '' : row.user.userAgent || '-') },
      { header: 'COUNT', cell: (row) => (row.user === null ? '' : String(row.user.count)) },
      { header: 'LAST SEEN', cell: (row) => (row.user === null ? '' : new Date(row.user.lastSeen).toISOString()) },
    ],
  };
  process.stdout.write(renderListing(listing, list));
  sayAside(list, [
    ...(r.resources.length === 0 && list.format !== 'name'
      ? [`if ${r.apiserver} leaves, every resource it serves is still served by another member`]
      : []),
    ...(r.doubt === null ? [] : [`warning: ${r.doubt}`]),
    inUse
      ? `${r.resources.filter((x) => x.users.length > 0).length} of ${r.resources.length} resources only ${r.apiserver} serves were used in the last ${span}: \`skewgate gate --removing ${r.apiserver}\` holds`
      : `nothing only ${r.apiserver} serves was used in the last ${span}`,
  ]);
  return inUse ? EXIT_PROBLEMS : EXIT_OK;
}
