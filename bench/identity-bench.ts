// (e) client-certificate identity: what stating a verified certificate as front-proxy headers
// adds per request, side by side with the same requests carrying a token, plus the one-time
// verification of a certificate skewgate has not seen yet.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../src/util/package-root.js';
import { responseFor } from '../src/extproc/core/responses.js';
import {
  ClientIdentityVerifier,
  parsePemCertificates,
  stateClientIdentity,
  type ClientTrust,
} from '../src/identity/core/client-identity.js';
import { createRouter } from '../src/routing/router.js';
import type { Section } from './report.js';
import { timeBatches, type BatchTiming } from './route-bench.js';
import { fmt, percentile } from './stats.js';
import { requestMix, syntheticPlane } from './synthetic.js';

export function benchIdentity(progress: (msg: string) => void): Section {
  const certs = join(packageRoot(), 'test/fixtures/x509-identity/certs');
  const pem = (n: string): string => readFileSync(join(certs, `${n}.crt`), 'utf8');
  const trust: ClientTrust = { cas: parsePemCertificates(pem('client-ca')), source: 'client-ca.crt' };
  const xfcc = (leaf: string, chain?: string): string =>
    `Hash=00;Cert="${encodeURIComponent(leaf)}"${chain ? `;Chain="${encodeURIComponent(chain)}"` : ''}`;
  const jane = xfcc(pem('jane'));
  const chained = xfcc(pem('via-intermediate'), pem('via-intermediate') + pem('intermediate'));

  progress('(e) building the synthetic snapshot');
  const plane = syntheticPlane();
  const snap = plane.snapshot;
  const mix = requestMix(plane);
  const n = mix.length;
  const verifier = new ClientIdentityVerifier(trust);
  const router = createRouter(
    { current: () => snap },
    { staleAfterMs: 180_000, retryAfterSeconds: 1, clientIdentity: (x, now) => verifier.state(x, now) },
  );
  const tokenHeaders = new Map([
    ['authorization', 'Bearer abc'],
    [':authority', 'kubernetes.default.svc'],
  ]);
  const certHeaders = new Map([
    ['x-forwarded-client-cert', jane],
    [':authority', 'kubernetes.default.svc'],
  ]);
  if (router.route('GET', '/api/v1/pods', certHeaders).identity.kind !== 'stated') throw new Error('the fixture certificate is not stated');

  const opts = { warmup: 100, maxBatches: 1500, minBatches: 200, budgetMs: 2500 };
  const pass = (headers: ReadonlyMap<string, string>, withResponse: boolean) => (): number => {
    let acc = 0;
    for (const r of mix) {
      const result = router.route(r.method, r.path, headers);
      acc += withResponse ? (responseFor(result, 1) === null ? 0 : 1) : result.decision.candidates.length;
    }
    return acc;
  };
  // Interleaved rounds, so that the machine's noise falls on both sides alike.
  const rounds: Record<string, BatchTiming[]> = { token: [], cert: [], tokenResp: [], certResp: [] };
  for (let round = 0; round < 3; round++) {
    progress(`(e) round ${round + 1}/3: route() and route() + response, token vs client certificate`);
    rounds['token']!.push(timeBatches(pass(tokenHeaders, false), n, opts));
    rounds['cert']!.push(timeBatches(pass(certHeaders, false), n, opts));
    rounds['tokenResp']!.push(timeBatches(pass(tokenHeaders, true), n, opts));
    rounds['certResp']!.push(timeBatches(pass(certHeaders, true), n, opts));
  }
  const med = (k: string): number => percentile(Float64Array.from(rounds[k]!.flatMap((b) => [...b.perOpNs])).sort(), 50);

  progress('(e) timing first-sight verification (no cache)');
  const once = (x: string) =>
    timeBatches(
      () => {
        let acc = 0;
        for (let i = 0; i < 50; i++) acc += stateClientIdentity(x, trust, Date.now()).kind.length;
        return acc;
      },
      50,
      { warmup: 5, maxBatches: 200, minBatches: 40, budgetMs: 2000 },
    );
  const direct = once(jane);
  const viaIntermediate = once(chained);

  const us = (ns: number): string => `${fmt(ns / 1000)} µs`;
  const added = med('cert') - med('token');
  const addedResp = med('certResp') - med('tokenResp');
  return {
    id: 'e',
    title: 'client-certificate identity per request',
    method:
      `The real router (classify, decide and the identity step) over the ${n.toLocaleString('en-US')}-path mix of (a), once with a bearer token and once with Envoy's x-forwarded-client-cert for a verified client certificate ` +
      '(test/fixtures/x509-identity, EC P-256), in three interleaved rounds of batches; then the same with `responseFor()`, which builds the header mutation (X-Remote-User, -Group lines, -Extra credential-id, XFCC removal). ' +
      'First-sight verification (`stateClientIdentity`, no cache: URL-decoding, PEM parsing, chain and signature check, DER subject walk, SHA-256) is timed separately: it happens once per distinct certificate per CA bundle.',
    targets: [
      { metric: 'identity added to route() per request (median, cached)', target: '—', measured: us(added), met: null },
      { metric: 'identity added to route() + response per request (median)', target: '—', measured: us(addedResp), met: null },
    ],
    tables: [
      {
        caption: 'Per-request time, median over all batches of the three rounds:',
        headers: ['Call', 'bearer token', 'client certificate', 'difference'],
        rows: [
          ['router.route()', us(med('token')), us(med('cert')), us(added)],
          ['router.route() + responseFor()', us(med('tokenResp')), us(med('certResp')), us(addedResp)],
        ],
      },
      {
        caption: 'First sight of a certificate (verification, not cached), per call:',
        headers: ['Certificate', 'median', 'p99'],
        rows: [
          ['issued by the client CA', us(percentile(direct.perOpNs, 50)), us(percentile(direct.perOpNs, 99))],
          ['through an intermediate (Chain)', us(percentile(viaIntermediate.perOpNs, 50)), us(percentile(viaIntermediate.perOpNs, 99))],
        ],
      },
    ],
    notes: [
      'The verifier keeps up to 4,096 verified certificates per CA bundle (keyed by the XFCC value); per request only the validity window is checked against the clock.',
      'Envoy has verified the certificate in the TLS handshake already; skewgate verifies it again so that no Envoy configuration can make it state an identity from an unverified certificate (docs/security.md).',
    ],
  };
}
