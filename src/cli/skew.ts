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
import { membershipLines } from './membership-lines.js';
import {
  formatTable,
  fromGatewayOrDiscovery,
  originLine,
  structured,
  type AnswerOrigin,
  type GatewaySource,
  type OutputFormat,
} from './one-shot.js';

/** `-o name`: group/version/resource, as kubectl writes resource names (core: v1/pods). */
const rowName = (r: SkewRow): string => `${r.group ? `${r.group}/` : ''}${r.version}/${r.resource}`;

export async function runSkew(
  source: GatewaySource,
  output: OutputFormat = 'table',
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
  if (watch !== null) return watchAnswers({ ask, key: skewKey, print: (r, origin, at) => printSkew(r, origin, output, at), ...watch });
  const got = await ask();
  if (typeof got === 'number') return got;
  return printSkew(got.answer, got.origin, output, null);
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

function printSkew(report: SkewReport, origin: AnswerOrigin, output: OutputFormat, changedAt: Date | null): number {
  const exitCode = report.verdict === 'no_skew' ? EXIT_OK : EXIT_PROBLEMS;
  const data = structured(output, report);
  if (data !== null) {
    // One document per answer: YAML's separator between them, JSON's stream as it is.
    process.stdout.write(changedAt !== null && output === 'yaml' ? `---\n${data}` : data);
    return exitCode;
  }
  if (changedAt !== null && output !== 'name') process.stdout.write(changedLine(changedAt));
  // Names only: nothing else on stdout (the summary and warnings go to stderr), for scripts.
  if (output === 'name') {
    for (const r of report.skew) process.stdout.write(`${rowName(r)}\n`);
    process.stderr.write(`${report.summary}\n`);
    return exitCode;
  }
  process.stdout.write(`${originLine(origin, report.generation)}\n`);
  for (const line of membershipLines(report.membership)) process.stdout.write(`${line}\n`);
  for (const s of report.notCompared.filter((n) => n.member))
    process.stdout.write(`warning: no discovery from ${s.name}: ${s.error} (left out of the comparison)\n`);
  if (report.skew.length > 0 && output === 'wide')
    // One column per apiserver compared: whether it serves the resource.
    process.stdout.write(
      formatTable([
        ['GROUP', 'VERSION', 'RESOURCE', ...report.compared.map((n) => n.toUpperCase())],
        ...report.skew.map((r) => [
          r.group || '(core)',
          r.version,
          r.resource,
          ...report.compared.map((n) => (r.servedBy.includes(n) ? 'yes' : '-')),
        ]),
      ]),
    );
  else if (report.skew.length > 0)
    process.stdout.write(
      formatTable([
        ['GROUP', 'VERSION', 'RESOURCE', 'SERVED BY', 'NOT SERVED BY'],
        ...report.skew.map((r) => [r.group || '(core)', r.version, r.resource, r.servedBy.join(',') || '-', r.missingFrom.join(',')]),
      ]),
    );
  process.stdout.write(`${report.summary}\n`);
  return exitCode;
}

/**
 * `skew --if-removed <apiserver>`: what no member would serve if it left, and who used each lately
 * (the gateway's usage record: GET /v1/gate?removing=). Exit 0: nothing it alone serves is in use;
 * 1: something is (or the gateway did not answer); 2: bad usage, an unknown apiserver.
 */
export async function runIfRemoved(source: GatewaySource, apiserver: string, output: OutputFormat): Promise<number> {
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
  const data = structured(output, r);
  if (data !== null) {
    process.stdout.write(data);
    return inUse ? EXIT_PROBLEMS : EXIT_OK;
  }
  if (output === 'name') {
    for (const x of r.resources) process.stdout.write(`${x.resource.replace(/^\//, '')}\n`);
    return inUse ? EXIT_PROBLEMS : EXIT_OK;
  }
  const span = spanText(r.usageWindowMs);
  if (r.resources.length === 0)
    process.stdout.write(`if ${r.apiserver} leaves, every resource it serves is still served by another member\n`);
  else
    process.stdout.write(
      formatTable([
        ['RESOURCE', 'USER', 'USER AGENT', 'COUNT', 'LAST SEEN'],
        ...r.resources.flatMap((x) =>
          x.users.length === 0
            ? [[x.resource.replace(/^\//, ''), `- (not used in ${span})`, '', '', '']]
            : x.users.map((u) => [
                x.resource.replace(/^\//, ''),
                u.user,
                u.userAgent || '-',
                String(u.count),
                new Date(u.lastSeen).toISOString(),
              ]),
        ),
      ]),
    );
  if (r.doubt !== null) process.stdout.write(`warning: ${r.doubt}\n`);
  process.stdout.write(
    inUse
      ? `${r.resources.filter((x) => x.users.length > 0).length} of ${r.resources.length} resources only ${r.apiserver} serves were used in the last ${span}: \`skewgate gate --removing ${r.apiserver}\` holds\n`
      : `nothing only ${r.apiserver} serves was used in the last ${span}\n`,
  );
  return inUse ? EXIT_PROBLEMS : EXIT_OK;
}
