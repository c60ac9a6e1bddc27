// Shared set-up for the discovery integration tests: a PKI, fake apiservers, configs and waits.
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Test } from 'tap';
import { type Pki, type FakeResource, createPki, FakeApiServer, FakeCluster } from '../../harness/fake/index.js';
import type { ApiServerSettings } from '../../src/discovery/credentials.js';
import type { DiscoveryConfig } from '../../src/discovery/service.js';
import type { Snapshot } from '../../src/discovery/types.js';

/** One PKI for every discovery test process (createPki reuses a complete set and locks while generating). */
export function testPki(): Promise<Pki> {
  return createPki(join(tmpdir(), 'skewgate-test-pki-discovery'));
}

/** A second, unrelated CA: its caFile does not verify the fake apiservers. */
export function otherPki(): Promise<Pki> {
  return createPki(join(tmpdir(), 'skewgate-test-pki-discovery-other'));
}

export async function startFake(
  t: Test,
  opts: { name: string; pki: Pki; cluster: FakeCluster; builtins: readonly FakeResource[]; discovery?: 'aggregated' | 'legacy' },
): Promise<FakeApiServer> {
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
    discovery: { interval: 60_000, timeout: 2000, watch: false, staleAfter: 180_000, ...d },
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
