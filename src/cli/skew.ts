// `skewgate skew`: every resource (and subresource) that not all apiservers serve.
import { computeSkew } from '../routing/skew.js';
import { EXIT_OK } from '../constants.js';
import { membershipLines, membershipView } from './membership-lines.js';
import { formatTable, withOneShotDiscovery } from './one-shot.js';

export async function runSkew(configFile: string, json: boolean): Promise<number> {
  return withOneShotDiscovery(configFile, ({ snapshot, now, membershipProblem }) => {
    const rows = computeSkew(snapshot);
    const unsynced = snapshot.servers.filter((s) => s.view === null);
    const membership = membershipView(snapshot, now, membershipProblem);
    if (json) {
      process.stdout.write(
        JSON.stringify({ skew: rows, unsynced: unsynced.map((s) => ({ name: s.name, error: s.lastError })), membership }, null, 2) + '\n',
      );
      return EXIT_OK;
    }
    for (const line of membershipLines(membership)) process.stdout.write(`${line}\n`);
    for (const s of unsynced)
      process.stdout.write(`warning: no discovery from ${s.name}: ${s.lastError ?? 'unknown error'} (left out of the comparison)\n`);
    if (rows.length === 0) {
      process.stdout.write(`no skew: every resource is served by all ${snapshot.servers.length - unsynced.length} apiservers compared\n`);
      return EXIT_OK;
    }
    process.stdout.write(
      formatTable([
        ['GROUP', 'VERSION', 'RESOURCE', 'SERVED BY', 'NOT SERVED BY'],
        ...rows.map((r) => [r.group || '(core)', r.version, r.resource, r.servedBy.join(',') || '-', r.missingFrom.join(',')]),
      ]),
    );
    return EXIT_OK;
  });
}
