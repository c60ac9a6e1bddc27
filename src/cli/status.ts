// `skewgate status`: what the running gateway believes now, from its admin endpoint (GET
// /v1/status): its members and their readiness, each view's age and source, the snapshot and
// config generations, the skew. Exit 0: every member ready with a fresh view and nothing
// unaccounted for; 1: a problem listed (or the gateway does not answer); 2: bad usage or config.
import { EXIT_BAD_CONFIG, EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import type { GatewayStatus } from '../inspect/status.js';
import { membershipLines } from './membership-lines.js';
import { formatTable, fromGatewayOrDiscovery, structured, type GatewaySource } from './one-shot.js';

const seconds = (ms: number | null): string =>
  ms === null ? '-' : ms < 10_000 ? `${(ms / 1000).toFixed(1)}s` : `${Math.round(ms / 1000)}s`;

export async function runStatus(source: GatewaySource, output: 'table' | 'json' | 'yaml' = 'table'): Promise<number> {
  if (source.discover) {
    // A round of this command's own has no generations, members or readiness history to show.
    process.stderr.write(
      'skewgate status: --discover does not apply: status is what the running gateway believes (skew --discover, explain --discover)\n',
    );
    return EXIT_BAD_CONFIG;
  }
  const got = await fromGatewayOrDiscovery<GatewayStatus>('status', source, {
    ask: (gateway) => gateway(ADMIN_PATHS.status),
    discover: () => {
      throw new Error('unreachable: status never discovers');
    },
  });
  if (typeof got === 'number') return got;
  const s = got.answer;
  const exitCode = s.problems.length === 0 ? EXIT_OK : EXIT_PROBLEMS;
  const data = structured(output, s);
  if (data !== null) {
    process.stdout.write(data);
    return exitCode;
  }
  process.stdout.write(
    `gateway:        ${got.origin.kind === 'gateway' ? got.origin.address : '-'}  skewgate ${s.skewgate.version}, pid ${s.skewgate.pid}, up ${seconds(s.skewgate.uptimeSeconds * 1000)}\n` +
      `config:         ${s.config.source} (generation ${s.config.generation})\n` +
      `snapshot:       generation ${s.snapshot.generation}\n\n`,
  );
  process.stdout.write(
    formatTable([
      ['APISERVER', 'URL', 'VERSION', 'ROLE', 'READY', 'VIEW', 'AGE', 'SOURCES', 'ERROR'],
      ...s.members.map((m) => [
        m.name,
        m.url,
        m.gitVersion ?? '-',
        `${m.role}${m.seed ? ' (seed)' : ''}`,
        m.ready === null ? '-' : m.healthy ? 'yes' : m.ready ? 'draining' : 'no',
        m.viewSource === null ? 'none' : `${m.viewSource}${m.fresh ? '' : ' (not fresh)'}`,
        seconds(m.viewAgeMs),
        m.sources.join(',') || '-',
        m.lastError ?? '',
      ]),
    ]),
  );
  const notes = membershipLines(s.skew.membership);
  if (notes.length > 0) process.stdout.write(`\n${notes.join('\n')}\n`);
  process.stdout.write(`\n${s.skew.summary}\n`);
  if (s.problems.length > 0)
    process.stdout.write(
      `\n${s.problems.length} problem${s.problems.length === 1 ? '' : 's'}:\n${s.problems.map((p) => `  - ${p}`).join('\n')}\n`,
    );
  return exitCode;
}
