// `skewgate skew`: every resource (and subresource) that not all apiservers serve.
// Exit 0: every apiserver was compared and none differs; 1: a skew, or an apiserver that could not
// be compared (named: its discovery is missing, so "no skew" would be a guess); 2: bad config.
import { computeSkew, type SkewRow } from '../routing/skew.js';
import { EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import type { Snapshot } from '../discovery/types.js';
import { membershipLines, membershipView } from './membership-lines.js';
import { formatTable, structured, withOneShotDiscovery, type OutputFormat } from './one-shot.js';

export interface SkewVerdict {
  readonly skew: readonly SkewRow[];
  readonly compared: readonly string[];
  /** Apiservers without a discovery view, and why. */
  readonly notCompared: readonly { readonly name: string; readonly error: string }[];
  readonly exitCode: number;
  /** The one-line summary for a terminal. */
  readonly summary: string;
}

/**
 * What `skew` reports and exits with, from a snapshot and the live apiservers no member matches
 * (running, so part of the cluster, but never compared). Pure.
 */
export function skewVerdict(snapshot: Snapshot, unmatched: readonly string[] = []): SkewVerdict {
  const skew = computeSkew(snapshot);
  const compared = snapshot.servers.filter((s) => s.view !== null).map((s) => s.name);
  const notCompared = snapshot.servers
    .filter((s) => s.view === null)
    .map((s) => ({ name: s.name, error: s.lastError ?? 'no discovery yet' }))
    .concat(unmatched.map((name) => ({ name, error: 'a running apiserver that is not in the config' })));
  const missing = notCompared.map((s) => s.name).join(', ');
  let summary: string;
  if (compared.length === 0) summary = `cannot compare: no apiserver answered discovery (${missing || 'none configured'})`;
  else if (skew.length > 0)
    summary = `skew: ${skew.length} resource${skew.length === 1 ? '' : 's'} not served by all ${compared.length} apiservers compared${missing ? `; not compared: ${missing}` : ''}`;
  else if (notCompared.length > 0) summary = `no skew among the ${compared.length} apiservers compared, but not compared: ${missing}`;
  else summary = `no skew: every resource is served by all ${compared.length} apiservers`;
  const exitCode = skew.length === 0 && notCompared.length === 0 && compared.length > 0 ? EXIT_OK : EXIT_PROBLEMS;
  return { skew, compared, notCompared, exitCode, summary };
}

/** `-o name`: group/version/resource, as kubectl writes resource names (core: v1/pods). */
const rowName = (r: SkewRow): string => `${r.group ? `${r.group}/` : ''}${r.version}/${r.resource}`;

export async function runSkew(configFile: string, output: OutputFormat = 'table'): Promise<number> {
  return withOneShotDiscovery(configFile, ({ snapshot, now, membershipProblem }) => {
    const membership = membershipView(snapshot, now, membershipProblem);
    const v = skewVerdict(
      snapshot,
      membership.unmatched.map((u) => (u.hostname === null ? u.identity : `${u.identity} (hostname ${u.hostname})`)),
    );
    const data = structured(output, { skew: v.skew, compared: v.compared, notCompared: v.notCompared, membership, summary: v.summary });
    if (data !== null) {
      process.stdout.write(data);
      return v.exitCode;
    }
    // Names only: nothing else on stdout (the summary and warnings go to stderr), for scripts.
    if (output === 'name') {
      for (const r of v.skew) process.stdout.write(`${rowName(r)}\n`);
      process.stderr.write(`${v.summary}\n`);
      return v.exitCode;
    }
    for (const line of membershipLines(membership)) process.stdout.write(`${line}\n`);
    for (const s of v.notCompared.filter((n) => snapshot.servers.some((m) => m.name === n.name)))
      process.stdout.write(`warning: no discovery from ${s.name}: ${s.error} (left out of the comparison)\n`);
    if (v.skew.length > 0 && output === 'wide')
      // One column per apiserver compared: whether it serves the resource.
      process.stdout.write(
        formatTable([
          ['GROUP', 'VERSION', 'RESOURCE', ...v.compared.map((n) => n.toUpperCase())],
          ...v.skew.map((r) => [
            r.group || '(core)',
            r.version,
            r.resource,
            ...v.compared.map((n) => (r.servedBy.includes(n) ? 'yes' : '-')),
          ]),
        ]),
      );
    else if (v.skew.length > 0)
      process.stdout.write(
        formatTable([
          ['GROUP', 'VERSION', 'RESOURCE', 'SERVED BY', 'NOT SERVED BY'],
          ...v.skew.map((r) => [r.group || '(core)', r.version, r.resource, r.servedBy.join(',') || '-', r.missingFrom.join(',')]),
        ]),
      );
    process.stdout.write(`${v.summary}\n`);
    return v.exitCode;
  });
}
