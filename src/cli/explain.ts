// `skewgate explain METHOD PATH`: the decision for one request, with everything that led to it.
import { classifyRequest } from '../k8s/classify.js';
import { decide, isFresh, isHealthy } from '../routing/decide.js';
import { gvrKey } from '../discovery/types.js';
import { EXIT_OK } from '../constants.js';
import { formatTable, withOneShotDiscovery } from './one-shot.js';

export async function runExplain(configFile: string, method: string, path: string, json: boolean): Promise<number> {
  return withOneShotDiscovery(configFile, ({ config, snapshot, now }) => {
    const info = classifyRequest(method.toUpperCase(), path);
    const decision = decide(info, snapshot, { now, staleAfterMs: config.discovery.staleAfter, rng: Math.random });
    const byServer = info.kind === 'resource' ? snapshot.resources.get(gvrKey(info.group, info.version, info.resource)) : undefined;
    const servers = snapshot.servers.map((s) => {
      const cap = byServer?.get(s.name);
      const listing = info.kind !== 'resource' ? '-'
        : cap === undefined ? 'resource not listed'
        : info.subresource === '' ? [...cap.verbs].join(',')
        : cap.subresources.has(info.subresource) ? `${info.subresource}: ${[...(cap.subresources.get(info.subresource) ?? [])].join(',')}` : `subresource ${info.subresource} not listed`;
      return {
        name: s.name,
        healthy: isHealthy(s),
        ready: s.ready,
        fresh: isFresh(s, now, config.discovery.staleAfter),
        viewAgeMs: s.lastSuccessAt === null ? null : now - s.lastSuccessAt,
        source: s.view?.source ?? null,
        listing,
        error: s.lastError,
      };
    });
    if (json) {
      process.stdout.write(JSON.stringify({ request: { method, path }, classification: info, servers, decision }, null, 2) + '\n');
      return EXIT_OK;
    }
    const fields = info.kind === 'resource'
      ? `group=${info.group || '(core)'} version=${info.version} resource=${info.resource} subresource=${info.subresource || '-'} name=${info.name || '-'} namespace=${info.namespace || '-'} verb=${info.verb || '-'}`
      : info.kind === 'invalid' ? `problem: ${info.problem}` : `verb=${info.verb}`;
    process.stdout.write(`request:        ${method.toUpperCase()} ${path}\nclassification: ${info.kind}  ${fields}\n\n`);
    process.stdout.write(formatTable([
      ['APISERVER', 'HEALTHY', 'VIEW', 'AGE', 'LISTS', 'ERROR'],
      ...servers.map((s) => [s.name, s.healthy ? 'yes' : `no (ready=${String(s.ready)})`, s.source === null ? 'none' : `${s.source}${s.fresh ? '' : ' (not fresh)'}`, s.viewAgeMs === null ? '-' : `${s.viewAgeMs}ms`, s.listing, s.error ?? '']),
    ]));
    const extra = decision.outcome === 'routed' ? `  upstream=${decision.upstream}` : decision.outcome === 'rejected' ? `  problem=${decision.problem}` : '';
    process.stdout.write(`\ncandidates:     ${decision.candidates.join(', ') || '(none)'}\ndecision:       ${decision.outcome}  reason=${decision.reason}${extra}\n`);
    return EXIT_OK;
  });
}
