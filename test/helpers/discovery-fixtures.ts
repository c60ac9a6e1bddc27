// Shared set-up for the discovery integration tests: a PKI, fake apiservers, configs and waits.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { type Pki, type FakeApiServerOptions, createPki, FakeApiServer, FakeCluster } from '../../harness/fake/index.js';
import type { ApiServerSettings } from '../../src/kube/credentials.js';
import type { DiscoveryConfig } from '../../src/discovery/options.js';
import type { Snapshot } from '../../src/discovery/core/types.js';

/** One PKI for every discovery test process (createPki reuses a complete set and locks while generating). */
export function testPki(): Promise<Pki> {
  return createPki(join(tmpdir(), 'skewgate-test-pki-discovery'));
}

/** A second, unrelated CA: its caFile does not verify the fake apiservers. */
export function otherPki(): Promise<Pki> {
  return createPki(join(tmpdir(), 'skewgate-test-pki-discovery-other'));
}

export async function startFake(t: Test, opts: FakeApiServerOptions): Promise<FakeApiServer> {
  const s = new FakeApiServer(opts);
  await s.start();
  t.teardown(() => s.close());
  return s;
}

export function tokenServer(s: FakeApiServer, pki: Pki, extra: Partial<ApiServerSettings> = {}): ApiServerSettings {
  return { name: s.name, url: s.url, caFile: pki.caFile, credentials: { tokenFile: pki.tokenFile }, ...extra };
}

export function discoveryConfig(apiservers: readonly ApiServerSettings[], d: Partial<DiscoveryConfig['discovery']> = {}): DiscoveryConfig {
  return {
    apiservers,
    discovery: { interval: 60_000, timeout: 2000, watch: false, staleAfter: 180_000, identityLeaseLiveness: 60_000, ...d },
  };
}

/** Resolves with the first snapshot (current or coming) that satisfies pred; fails after ms. */
export function waitForSnapshot(
  source: { current(): Snapshot; onChange(l: (s: Snapshot) => void): () => void },
  pred: (s: Snapshot) => boolean,
  ms = 5000,
  what = 'snapshot condition',
): Promise<Snapshot> {
  return new Promise((resolve, reject) => {
    if (pred(source.current())) return resolve(source.current());
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out after ${ms}ms waiting for ${what}`));
    }, ms);
    const off = source.onChange((s) => {
      if (!pred(s)) return;
      clearTimeout(timer);
      off();
      resolve(s);
    });
  });
}

export { FakeApiServer, FakeCluster };
export type { Pki };

/**
 * Resolves once skewgate's discovery has sent none of these fakes a request (open watches aside)
 * for `quietMs`: the start-up refreshes and the follow-ups of a watch event (250 and 750 ms after
 * it, test/unit/discovery-watch.test.ts) are over, so the next fetch has a cause the test gave
 * it. A precondition, not a measure: `timeoutMs` only bounds a hang.
 */
export async function discoveryQuiet(servers: readonly FakeApiServer[], quietMs = 1000, timeoutMs = 15_000): Promise<void> {
  const count = (): number =>
    servers.reduce(
      (n, s) => n + s.requests.filter((r) => r.headers['user-agent'] === 'skewgate-discovery' && !r.path.includes('watch=1')).length,
      0,
    );
  const start = Date.now();
  let last = count();
  let since = Date.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, 50));
    const n = count();
    if (n !== last) {
      last = n;
      since = Date.now();
    } else if (Date.now() - since >= quietMs) {
      return;
    }
    if (Date.now() - start > timeoutMs) throw new Error(`discovery never went quiet for ${quietMs} ms within ${timeoutMs} ms`);
  }
}
