// `skewgate validate`: the config with every check serve and envoy-config run, Envoy's TLS files
// included (exit 2), then files, reachability, TLS and credentials per apiserver (exit 1).
import { accessSync, constants as fsc } from 'node:fs';
import { checkConfig } from '../config/check.js';
import { EXIT_OK, EXIT_PROBLEMS } from '../constants.js';
import { membershipView } from '../inspect/membership-view.js';
import type { LogFormat } from '../util/log.js';
import { oneShotLogger, withOneShotDiscovery } from './one-shot.js';
import { renderListing, sayAside, type Listing, type ListOptions } from './listing.js';

/** What `validate -o json|yaml` prints. */
export interface ValidationReport {
  readonly config: string;
  readonly apiservers: readonly {
    readonly name: string;
    readonly url: string;
    readonly discovery: 'ok' | 'failed';
    readonly view: { readonly source: 'aggregated' | 'legacy'; readonly resources: number } | null;
    readonly ready: boolean;
    readonly error: string | null;
  }[];
  /** Empty when the gateway can run with this config against these apiservers. */
  readonly problems: readonly string[];
}

export async function runValidate(configFile: string, list: ListOptions = { format: 'table' }, logFormat?: LogFormat): Promise<number> {
  // Before any discovery, every check serve and envoy-config run (exit 2): an unsafe front-proxy
  // certificate, say, is a config problem whatever the apiservers answer.
  await checkConfig(configFile, 'validate');
  return withOneShotDiscovery(
    configFile,
    ({ config, snapshot, now, membershipProblem }) => {
      const problems: string[] = [];
      const readable = (what: string, file: string | undefined): void => {
        if (file === undefined) return;
        try {
          accessSync(file, fsc.R_OK);
        } catch {
          problems.push(`${what}: cannot read ${file}`);
        }
      };
      // envoy.tls and upstreamClientCert were read by checkConfig above (an unreadable one: exit 2).
      readable('envoy.extprocPeers.certFile', config.envoy.extprocPeers?.certFile);
      readable('envoy.extprocPeers.keyFile', config.envoy.extprocPeers?.keyFile);
      readable('envoy.extprocPeers.caFile', config.envoy.extprocPeers?.caFile);
      readable('extproc.peer.certFile', config.extproc.peer?.certFile);
      readable('extproc.peer.keyFile', config.extproc.peer?.keyFile);
      readable('extproc.peer.clientCaFile', config.extproc.peer?.clientCaFile);
      const apiservers = snapshot.servers.map((s) => {
        const ok = s.view !== null && s.consecutiveFailures === 0;
        if (!ok) problems.push(`${s.name} (${s.url}): ${s.lastError ?? 'no discovery'}`);
        if (s.ready !== true) problems.push(`${s.name} (${s.url}): /readyz is not ok`);
        return {
          name: s.name,
          url: s.url,
          discovery: ok ? ('ok' as const) : ('failed' as const),
          view: s.view ? { source: s.view.source, resources: s.view.resources.size } : null,
          ready: s.ready === true,
          error: s.lastError,
        };
      });
      // Is the list complete? Without the identity Leases skewgate cannot tell (no 404 is then safe to trust).
      const membership = membershipView(snapshot, now, membershipProblem);
      if (!membership.synced)
        problems.push(
          leaseProblem(
            membershipProblem,
            apiservers.some((a) => a.discovery === 'ok'),
          ),
        );
      for (const u of membership.unmatched)
        problems.push(
          `a running apiserver is not in the config: identity ${u.identity}${u.hostname === null ? '' : ` (hostname ${u.hostname})`}; add it, or set apiservers[].hostname to its hostname`,
        );
      const report: ValidationReport = { config: config.source, apiservers, problems };
      const exitCode = problems.length > 0 ? EXIT_PROBLEMS : EXIT_OK;
      sayAside(list, list.format === 'name' ? [] : [`config ${config.source}: ok (${config.apiservers.length} apiservers)`]);
      process.stdout.write(renderListing(validationListing(report), list));
      sayAside(
        list,
        problems.length > 0
          ? [`${problems.length} problem${problems.length === 1 ? '' : 's'}:`, ...problems.map((p) => `  - ${p}`)]
          : ['all apiservers reachable, TLS verified, credentials accepted, every running apiserver listed'],
      );
      return exitCode;
    },
    oneShotLogger(logFormat),
  );
}

type CheckedApiServer = ValidationReport['apiservers'][number];

/** The apiservers as rows; -o wide adds the discovery error. */
export function validationListing(report: ValidationReport): Listing<CheckedApiServer> {
  return {
    data: report,
    rows: report.apiservers,
    name: (a) => a.name,
    columns: [
      { header: 'APISERVER', cell: (a) => a.name },
      { header: 'URL', cell: (a) => a.url },
      { header: 'DISCOVERY', cell: (a) => (a.discovery === 'ok' ? 'ok' : 'FAILED') },
      { header: 'VIEW', cell: (a) => (a.view ? `${a.view.source}, ${a.view.resources} resources` : '-') },
      { header: 'READYZ', cell: (a) => (a.ready ? 'ready' : 'NOT READY') },
      { header: 'ERROR', cell: (a) => a.error ?? '-', wide: true },
    ],
  };
}

/**
 * Why the identity Leases could not be listed, with the fix that fits: an RBAC grant only when an
 * apiserver refused the credentials (401/403); when none answered at all, the network is the
 * problem, not the grant (issue 30).
 */
export function leaseProblem(problem: string | null, anyAnswered: boolean): string {
  const why = problem ?? 'identity leases not listed';
  if (/\b(401|403)\b|forbidden|unauthorized/i.test(why))
    return `${why}: grant get/list/watch on leases in kube-system to the discovery credentials (deploy/kubernetes/rbac.yaml)`;
  if (!anyAnswered) return `${why}: no apiserver answered (see above); the membership cannot be verified until one does`;
  return `${why}: the membership cannot be verified (a 404 is then trusted only from the configured apiservers)`;
}
