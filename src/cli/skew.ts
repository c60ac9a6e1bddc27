// `skewgate skew`: every resource (and subresource) that not all apiservers serve, as the running
// gateway sees it (its admin endpoint), or from a discovery round of this command's own with
// --discover. Exit 0: every apiserver was compared and none differs; 1: a skew, an apiserver that
// could not be compared (named: its discovery is missing, so "no skew" would be a guess), or a
// gateway that does not answer; 2: bad config or usage.
import { EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import type { SkewRow } from '../routing/skew.js';
import { skewReport, type SkewReport } from '../inspect/skew-report.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
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

export async function runSkew(source: GatewaySource, output: OutputFormat = 'table'): Promise<number> {
  const got = await fromGatewayOrDiscovery<SkewReport>('skew', source, {
    ask: (gateway) => gateway(ADMIN_PATHS.skew),
    discover: ({ snapshot, now, membershipProblem }) => skewReport(snapshot, now, membershipProblem),
  });
  if (typeof got === 'number') return got;
  return printSkew(got.answer, got.origin, output);
}

function printSkew(report: SkewReport, origin: AnswerOrigin, output: OutputFormat): number {
  const exitCode = report.verdict === 'no_skew' ? EXIT_OK : EXIT_PROBLEMS;
  const data = structured(output, report);
  if (data !== null) {
    process.stdout.write(data);
    return exitCode;
  }
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
