// `skewgate explain METHOD PATH [-H 'Name: value']… [--client-cert FILE]`: the decision for one
// request, with everything that led to it: the running gateway's own (POST /v1/explain on its
// admin endpoint: its snapshot, its client CA bundle, its clock), or with --discover the same
// function over a discovery round of this command's own (inspect/explanation.ts).
import { readFile } from 'node:fs/promises';
import { EXIT_BAD_CONFIG, EXIT_OK } from '../constants.js';
import { ADMIN_PATHS } from '../inspect/admin-paths.js';
import { ClientCaError, loadClientTrust } from '../identity/client-ca.js';
import { ClientIdentityVerifier, stateClientIdentity } from '../identity/core/client-identity.js';
import { explainRequest, ExplainInputError, requestHeaders, type Explanation, type ExplainRequest } from '../inspect/explanation.js';
import type { ClientIdentityOf } from '../routing/router.js';
import { membershipLines } from './membership-lines.js';
import { formatTable, fromGatewayOrDiscovery, originLine, structured, type AnswerOrigin, type GatewaySource } from './one-shot.js';

export interface ExplainOptions {
  readonly source: GatewaySource;
  readonly method: string;
  readonly path: string;
  /** table (the default, for people), json or yaml. */
  readonly output: 'table' | 'json' | 'yaml';
  /** "Name: value" lines, as curl's -H takes them. */
  readonly headers: readonly string[];
  /** A PEM file: the client certificate, then any intermediates it would send. */
  readonly clientCert?: string | undefined;
}

/** A CA bundle that cannot be loaded (--discover reads envoy.tls.clientCaFile itself). */
class ExplainSetupError extends Error {}

export async function runExplain(o: ExplainOptions): Promise<number> {
  let req: ExplainRequest;
  try {
    // Checked here too, so that a bad -H is a usage error before any gateway is asked.
    requestHeaders(o.headers);
    req = {
      method: o.method,
      path: o.path,
      headers: o.headers,
      ...(o.clientCert === undefined ? {} : { clientCertificate: await readCertificate(o.clientCert) }),
    };
  } catch (err) {
    if (!(err instanceof ExplainInputError)) throw err;
    process.stderr.write(`skewgate explain: ${err.message}\n`);
    return EXIT_BAD_CONFIG;
  }
  let got;
  try {
    got = await fromGatewayOrDiscovery<Explanation>('explain', o.source, {
      ask: (gateway) => gateway(ADMIN_PATHS.explain, req),
      discover: async ({ config, snapshot, now, membershipProblem }) => {
        // The gateway's verifier over the same bundle (identity/client-ca.ts reads it the same way).
        const caFile = config.envoy.tls.clientCaFile;
        let verifier: ClientIdentityVerifier | null = null;
        try {
          if (caFile !== undefined) verifier = new ClientIdentityVerifier(await loadClientTrust(caFile));
        } catch (err) {
          if (err instanceof ClientCaError) throw new ExplainSetupError(err.message);
          throw err;
        }
        const clientIdentity: ClientIdentityOf = (xfcc, t) => verifier?.state(xfcc, t) ?? stateClientIdentity(xfcc, null, t);
        return explainRequest(req, {
          snapshot,
          now,
          rng: Math.random,
          staleAfterMs: config.discovery.staleAfter,
          clientIdentity,
          fastPath: {
            xds: config.envoy.xds !== undefined,
            enabled: config.routing.fastPath,
            certificates: config.envoy.tls.clientCaFile !== undefined,
          },
          membershipProblem,
        });
      },
    });
  } catch (err) {
    if (!(err instanceof ExplainSetupError) && !(err instanceof ExplainInputError)) throw err;
    process.stderr.write(`skewgate explain: ${err.message}\n`);
    return EXIT_BAD_CONFIG;
  }
  if (typeof got === 'number') return got;
  printExplanation(got.answer, got.origin, o.output);
  return EXIT_OK;
}

async function readCertificate(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new ExplainInputError(`--client-cert ${file}: cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

function printExplanation(e: Explanation, origin: AnswerOrigin, output: 'table' | 'json' | 'yaml'): void {
  const data = structured(output, e);
  if (data !== null) {
    process.stdout.write(data);
    return;
  }
  const { classification: info, identity, decision, fastPath, servers, membership } = e;
  const { method, path, stripped } = e.request;
  const fields =
    info.kind === 'resource'
      ? `group=${info.group || '(core)'} version=${info.version} resource=${info.resource} subresource=${info.subresource || '-'} name=${info.name || '-'} namespace=${info.namespace || '-'} verb=${info.verb || '-'}`
      : info.kind === 'invalid'
        ? `problem: ${info.problem}`
        : `verb=${info.verb}`;
  const who =
    identity.kind === 'stated'
      ? `stated  user=${identity.user} groups=${identity.groups.join(',') || '-'}${identity.uid === null ? '' : ` uid=${identity.uid}`}`
      : identity.kind === 'unstated'
        ? `unstated  ${identity.problem}`
        : 'none (no client certificate)';
  // Whose view this is, said to a person (stderr, as the listing commands do): stdout is the report.
  process.stderr.write(`${originLine(origin, e.generation)}\n`);
  process.stdout.write(`request:        ${method} ${path}\nclassification: ${info.kind}  ${fields}\nidentity:       ${who}\n`);
  if (stripped.length > 0)
    process.stdout.write(`stripped:       ${stripped.join(', ')} (Envoy removes these before skewgate sees the request)\n`);
  process.stdout.write('\n');
  process.stdout.write(
    formatTable([
      ['APISERVER', 'VERSION', 'HEALTHY', 'VIEW', 'AGE', 'LISTS', 'ERROR'],
      ...servers.map((s) => [
        s.name,
        s.gitVersion ?? '-',
        s.cordon === 'drain'
          ? 'no (drained)'
          : s.healthy
            ? s.cordon === 'cordon'
              ? 'yes (cordoned)'
              : 'yes'
            : `no (ready=${String(s.ready)})`,
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
          ? `  etag=${decision.etag} groups=${decision.groups}`
          : '';
  const membershipNotes = membershipLines(membership);
  if (membershipNotes.length > 0) process.stdout.write(`\n${membershipNotes.join('\n')}\n`);
  process.stdout.write(
    `\ncandidates:     ${decision.candidates.join(', ') || '(none)'}\ndecision:       ${decision.outcome}  reason=${decision.reason}${extra}\n` +
      `fast path:      ${fastPath.takes ? `yes: Envoy sends it to the balanced pool without asking skewgate (${fastPath.why})` : `no: ${fastPath.why}`}\n`,
  );
}
