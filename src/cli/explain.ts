// `skewgate explain METHOD PATH [-H 'Name: value']… [--client-cert FILE]`: the decision for one
// request, with everything that led to it. The gateway's own function decides (routeRequest: the
// whole ladder, identity and merged /apis included) over a one-shot discovery round, with the
// headers as Envoy would hand them to skewgate.
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import {
  CLIENT_CERT_HEADER,
  EXIT_BAD_CONFIG,
  EXIT_OK,
  SANITIZED_REQUEST_HEADER_PREFIXES,
  SANITIZED_REQUEST_HEADERS,
} from '../constants.js';
import { gvrKey, type Snapshot } from '../discovery/types.js';
import type { Config } from '../config.js';
import { compileFastPath } from '../routing/fast-path.js';
import { fastPathTakes } from '../envoy/fast-routes.js';
import { FAST_PATH_MARGIN_MS } from '../envoy/fast-path-sync.js';
import { ClientCaError, loadClientTrust } from '../identity/client-ca.js';
import { ClientIdentityVerifier, parsePemCertificates, stateClientIdentity } from '../identity/client-identity.js';
import { formatXfcc } from '../identity/xfcc.js';
import { isFresh, isHealthy } from '../routing/freshness.js';
import { routeRequest, type ClientIdentityOf } from '../routing/router.js';
import { membershipLines, membershipView } from './membership-lines.js';
import { formatTable, structured, withOneShotDiscovery } from './one-shot.js';

export interface ExplainOptions {
  readonly configFile: string;
  readonly method: string;
  readonly path: string;
  /** table (the default, for people), json or yaml. */
  readonly output: 'table' | 'json' | 'yaml';
  /** "Name: value" lines, as curl's -H takes them. */
  readonly headers: readonly string[];
  /** A PEM file: the client certificate, then any intermediates it would send. */
  readonly clientCert?: string | undefined;
}

export class ExplainUsageError extends Error {
  readonly code = 'SKEWGATE_ERR_EXPLAIN_USAGE';
}

const sanitized = (name: string): boolean =>
  SANITIZED_REQUEST_HEADERS.includes(name) || SANITIZED_REQUEST_HEADER_PREFIXES.some((p) => name.startsWith(p));

/** The request headers as skewgate sees them: names lower case, what Envoy strips gone (listed). */
function requestHeaders(lines: readonly string[]): { headers: Map<string, string>; stripped: string[] } {
  const headers = new Map<string, string>();
  const stripped: string[] = [];
  for (const line of lines) {
    const colon = line.indexOf(':');
    const name = colon < 0 ? '' : line.slice(0, colon).trim().toLowerCase();
    if (!/^[!#$%&'*+.^_`|~0-9a-z-]+$/.test(name))
      throw new ExplainUsageError(`-H ${JSON.stringify(line)}: not a header line ("Name: value")`);
    const value = line.slice(colon + 1).trim();
    if (sanitized(name)) {
      stripped.push(name);
      continue;
    }
    // Repeated headers reach ext_proc joined with ", ", as Envoy joins them.
    const before = headers.get(name);
    headers.set(name, before === undefined ? value : `${before}, ${value}`);
  }
  return { headers, stripped };
}

async function clientCertHeader(file: string): Promise<string> {
  let pem: string;
  try {
    pem = await readFile(file, 'utf8');
  } catch (err) {
    throw new ExplainUsageError(`--client-cert ${file}: cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
  let certs;
  try {
    certs = parsePemCertificates(pem);
  } catch (err) {
    throw new ExplainUsageError(`--client-cert ${file}: a certificate does not parse: ${(err as Error).message}`);
  }
  const leaf = certs[0];
  if (leaf === undefined) throw new ExplainUsageError(`--client-cert ${file}: no PEM certificate in it`);
  return formatXfcc(
    certs.map((c) => c.toString()),
    createHash('sha256').update(leaf.raw).digest('hex'),
  );
}

export async function runExplain(o: ExplainOptions): Promise<number> {
  let headers: Map<string, string>;
  let stripped: string[];
  try {
    ({ headers, stripped } = requestHeaders(o.headers));
    if (o.clientCert !== undefined) headers.set(CLIENT_CERT_HEADER, await clientCertHeader(o.clientCert));
  } catch (err) {
    if (!(err instanceof ExplainUsageError)) throw err;
    process.stderr.write(`skewgate explain: ${err.message}\n`);
    return EXIT_BAD_CONFIG;
  }
  const method = o.method.toUpperCase();
  return withOneShotDiscovery(o.configFile, async ({ config, snapshot, now, membershipProblem }) => {
    // The gateway's verifier over the same bundle (identity/client-ca.ts reads it the same way).
    const caFile = config.envoy.tls.clientCaFile;
    let verifier: ClientIdentityVerifier | null = null;
    try {
      if (caFile !== undefined) verifier = new ClientIdentityVerifier(await loadClientTrust(caFile));
    } catch (err) {
      if (!(err instanceof ClientCaError)) throw err;
      process.stderr.write(`skewgate explain: ${err.message}\n`);
      return EXIT_BAD_CONFIG;
    }
    const clientIdentity: ClientIdentityOf = (xfcc, t) => verifier?.state(xfcc, t) ?? stateClientIdentity(xfcc, null, t);
    const { info, decision, identity } = routeRequest(method, o.path, headers, snapshot, {
      now,
      staleAfterMs: config.discovery.staleAfter,
      rng: Math.random,
      clientIdentity,
    });
    const byServer = info.kind === 'resource' ? snapshot.resources.get(gvrKey(info.group, info.version, info.resource)) : undefined;
    const servers = snapshot.servers.map((s) => {
      const cap = byServer?.get(s.name);
      const listing =
        info.kind !== 'resource'
          ? '-'
          : cap === undefined
            ? 'resource not listed'
            : info.subresource === ''
              ? [...cap.verbs].join(',')
              : cap.subresources.has(info.subresource)
                ? `${info.subresource}: ${[...(cap.subresources.get(info.subresource) ?? [])].join(',')}`
                : `subresource ${info.subresource} not listed`;
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
    const identityView =
      identity.kind === 'stated'
        ? { kind: identity.kind, user: identity.identity.user, uid: identity.identity.uid, groups: identity.identity.groups }
        : identity;
    // The merged document's body is large and binary-safe only as text: its ETag and servers say which it is.
    const decisionView =
      decision.outcome === 'discovery'
        ? {
            outcome: decision.outcome,
            reason: decision.reason,
            candidates: decision.candidates,
            etag: decision.document.quotedEtag,
            groups: decision.document.groups,
          }
        : decision;
    const membership = membershipView(snapshot, now, membershipProblem);
    const fastPath = fastPathView(config, snapshot, now, method, o.path, headers, o.clientCert !== undefined);
    const data = structured(o.output, {
      request: { method, path: o.path, headers: Object.fromEntries(headers), stripped },
      classification: info,
      identity: identityView,
      servers,
      membership,
      decision: decisionView,
      fastPath,
    });
    if (data !== null) {
      process.stdout.write(data);
      return EXIT_OK;
    }
    const fields =
      info.kind === 'resource'
        ? `group=${info.group || '(core)'} version=${info.version} resource=${info.resource} subresource=${info.subresource || '-'} name=${info.name || '-'} namespace=${info.namespace || '-'} verb=${info.verb || '-'}`
        : info.kind === 'invalid'
          ? `problem: ${info.problem}`
          : `verb=${info.verb}`;
    const who =
      identity.kind === 'stated'
        ? `stated  user=${identity.identity.user} groups=${identity.identity.groups.join(',') || '-'}${identity.identity.uid === null ? '' : ` uid=${identity.identity.uid}`}`
        : identity.kind === 'unstated'
          ? `unstated  ${identity.problem}`
          : 'none (no client certificate)';
    process.stdout.write(`request:        ${method} ${o.path}\nclassification: ${info.kind}  ${fields}\nidentity:       ${who}\n`);
    if (stripped.length > 0)
      process.stdout.write(`stripped:       ${stripped.join(', ')} (Envoy removes these before skewgate sees the request)\n`);
    process.stdout.write('\n');
    process.stdout.write(
      formatTable([
        ['APISERVER', 'HEALTHY', 'VIEW', 'AGE', 'LISTS', 'ERROR'],
        ...servers.map((s) => [
          s.name,
          s.healthy ? 'yes' : `no (ready=${String(s.ready)})`,
          s.source === null ? 'none' : `${s.source}${s.fresh ? '' : ' (not fresh)'}`,
          s.viewAgeMs === null ? '-' : `${s.viewAgeMs}ms`,
          s.listing,
          s.error ?? '',
        ]),
      ]),
    );
    const extra =
      decision.outcome === 'routed'
        ? `  upstream=${decision.upstream}`
        : decision.outcome === 'rejected'
          ? `  problem=${decision.problem}`
          : decision.outcome === 'discovery'
            ? `  etag=${decision.document.quotedEtag} groups=${decision.document.groups}`
            : '';
    const membershipNotes = membershipLines(membership);
    if (membershipNotes.length > 0) process.stdout.write(`\n${membershipNotes.join('\n')}\n`);
    process.stdout.write(
      `\ncandidates:     ${decision.candidates.join(', ') || '(none)'}\ndecision:       ${decision.outcome}  reason=${decision.reason}${extra}\n` +
        `fast path:      ${fastPath.takes ? `yes: Envoy sends it to the balanced pool without asking skewgate (${fastPath.why})` : `no: ${fastPath.why}`}\n`,
    );
    return EXIT_OK;
  });
}

/**
 * Whether the gateway's Envoy would decide this request alone (the fast path: docs/design.md),
 * by the table this snapshot compiles to, and why (not).
 */
function fastPathView(
  config: Config,
  snapshot: Snapshot,
  now: number,
  method: string,
  path: string,
  headers: ReadonlyMap<string, string>,
  clientCertificate: boolean,
): { readonly takes: boolean; readonly why: string } {
  if (config.envoy.xds === undefined) return { takes: false, why: 'off (needs envoy.xds)' };
  if (!config.routing.fastPath) return { takes: false, why: 'off (routing.fastPath: false)' };
  const table = compileFastPath(snapshot, { now, staleAfterMs: config.discovery.staleAfter, marginMs: FAST_PATH_MARGIN_MS });
  if (table.groupVersions.length === 0) return { takes: false, why: `nothing is fast now: ${table.why}` };
  if (fastPathTakes(table, { method, path, headers, clientCertificate }))
    return { takes: true, why: 'default/served_by_all, every apiserver serves it identically' };
  return {
    takes: false,
    why: clientCertificate
      ? 'a client certificate is always stated by skewgate'
      : 'skewgate judges it (a skewed group/version, a watch, a long-running or discovery request, or a name no view lists)',
  };
}
