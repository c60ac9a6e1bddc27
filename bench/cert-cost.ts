// (j) What a client certificate costs Envoy on the fast path, one part at a time: Envoy alone on
// an mTLS listener answering every request itself (no upstream, no skewgate), then the
// connection manager writing x-forwarded-client-cert, a Lua filter doing nothing, skewgate's Lua
// stating the certificate, both (the fast path as it ships), and both with the Lua declining it. The routes answer with what they saw, so a round counts a request whose
// certificate was not treated as its arm says as failed. Envoy's CPU per request from /proc.
import { readFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { Pool } from 'undici';
import { createPki } from '../harness/fake/index.js';
import { CLIENT_CERT_HEADER, ENVOY_IDENTITY_HEADER } from '../src/constants.js';
import { certIdentityScript, LUA_FILTER } from '../src/envoy/cert-identity.js';
import { startEnvoy, type EnvoyHandle } from '../src/envoy-runtime/process.js';
import { loadClientTrust } from '../src/identity/client-ca.js';
import { packageRoot } from '../src/util/package-root.js';
import { openLoop } from './open-loop.js';
import { procCpuUs } from './proc-cpu.js';
import type { Section } from './report.js';
import { fmt } from './stats.js';
import { addFailures, median, NO_FAILURES, type Failures } from './verdict.js';

export interface CertCostOptions {
  readonly rounds: number;
  /** Requests per arm and round, 8 in flight. */
  readonly saturated: number;
  /** Requests per arm and round one at a time at `rate`/s. */
  readonly paced: number;
  readonly rate: number;
}

export const DEFAULT_CERT_COST: CertCostOptions = { rounds: 4, saturated: 20_000, paced: 2_000, rate: 500 };
export const QUICK_CERT_COST: CertCostOptions = { rounds: 2, saturated: 4_000, paced: 500, rate: 500 };

type ArmKey = 'tls' | 'xfcc' | 'empty' | 'lua' | 'lua+xfcc' | 'declined';

interface Arm {
  readonly key: ArmKey;
  readonly label: string;
  readonly xfcc: boolean;
  /** The Lua with the bundle (states the certificate), with none (declines it), or a function that does nothing; null: no Lua. */
  readonly lua: 'bundle' | 'none' | 'empty' | null;
  /** What the route answering the request must have seen. */
  readonly expect: 'plain' | 'stated' | 'xfcc';
}

const ARMS: readonly Arm[] = [
  { key: 'tls', label: 'mTLS listener, the request answered by Envoy (the floor)', xfcc: false, lua: null, expect: 'plain' },
  {
    key: 'xfcc',
    label: '+ x-forwarded-client-cert by the connection manager (SANITIZE_SET, cert and chain)',
    xfcc: true,
    lua: null,
    expect: 'xfcc',
  },
  { key: 'empty', label: '+ a Lua filter whose function does nothing', xfcc: false, lua: 'empty', expect: 'plain' },
  {
    key: 'lua',
    label: "+ skewgate's Lua stating the certificate",
    xfcc: false,
    lua: 'bundle',
    expect: 'stated',
  },
  { key: 'lua+xfcc', label: '+ both: the fast path for a certificate as it ships', xfcc: true, lua: 'bundle', expect: 'stated' },
  {
    key: 'declined',
    label: '+ both, the Lua declining it (its CA not in the bundle): on to skewgate',
    xfcc: true,
    lua: 'none',
    expect: 'xfcc',
  },
];

function bootstrap(arm: Arm, script: string | null, pki: { ca: string; cert: string; key: string }): object {
  const answer = (name: string, body: string, headers: object[]): object => ({
    name,
    match: { prefix: '/', headers },
    direct_response: { status: 200, body: { inline_string: body } },
  });
  return {
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
    static_resources: {
      listeners: [
        {
          name: 'cert-cost',
          address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
          filter_chains: [
            {
              filters: [
                {
                  name: 'envoy.filters.network.http_connection_manager',
                  typed_config: {
                    '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                    stat_prefix: 'cert_cost',
                    forward_client_cert_details: arm.xfcc ? 'SANITIZE_SET' : 'SANITIZE',
                    ...(arm.xfcc ? { set_current_client_cert_details: { cert: true, chain: true } } : {}),
                    http_filters: [
                      ...(script === null
                        ? []
                        : [
                            {
                              name: LUA_FILTER,
                              typed_config: {
                                '@type': 'type.googleapis.com/envoy.extensions.filters.http.lua.v3.Lua',
                                default_source_code: { inline_string: script },
                              },
                            },
                          ]),
                      {
                        name: 'envoy.filters.http.router',
                        typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
                      },
                    ],
                    route_config: {
                      virtual_hosts: [
                        {
                          name: 'all',
                          domains: ['*'],
                          routes: [
                            answer('stated', 'stated', [{ name: ENVOY_IDENTITY_HEADER, present_match: true }]),
                            answer('xfcc', 'xfcc', [{ name: CLIENT_CERT_HEADER, present_match: true }]),
                            answer('plain', 'plain', []),
                          ],
                        },
                      ],
                    },
                  },
                },
              ],
              transport_socket: {
                name: 'envoy.transport_sockets.tls',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
                  require_client_certificate: true,
                  common_tls_context: {
                    tls_certificates: [{ certificate_chain: { filename: pki.cert }, private_key: { filename: pki.key } }],
                    validation_context: { trusted_ca: { filename: pki.ca } },
                    alpn_protocols: ['http/1.1'],
                  },
                },
              },
            },
          ],
        },
      ],
    },
  };
}

interface Figures {
  saturatedUs: number[];
  pacedUs: number[];
  failures: Failures;
}

export async function benchCertCost(progress: (msg: string) => void, o: CertCostOptions = DEFAULT_CERT_COST): Promise<Section> {
  const dir = join(packageRoot(), '.cache', 'bench-cert-cost');
  await mkdir(dir, { recursive: true });
  const pki = await createPki(join(dir, 'pki'));
  const trust = await loadClientTrust(pki.caFile);
  const scripts = {
    bundle: certIdentityScript(trust),
    none: certIdentityScript({ cas: [], source: 'no CA' }),
    empty: 'function envoy_on_request(h) end',
  };
  const envoys = new Map<ArmKey, EnvoyHandle>();
  const pools: Pool[] = [];
  const connect = {
    ca: readFileSync(pki.caFile, 'utf8'),
    cert: readFileSync(pki.clients.limited.certFile, 'utf8'),
    key: readFileSync(pki.clients.limited.keyFile, 'utf8'),
  };
  const figures = new Map<ArmKey, Figures>(ARMS.map((a) => [a.key, { saturatedUs: [], pacedUs: [], failures: NO_FAILURES }]));
  try {
    progress(`(j) starting ${ARMS.length} Envoys, one per arm`);
    for (const arm of ARMS) {
      const script = arm.lua === null ? null : scripts[arm.lua];
      envoys.set(
        arm.key,
        await startEnvoy({
          bootstrap: bootstrap(arm, script, { ca: pki.caFile, cert: pki.gatewayCertFile, key: pki.gatewayKeyFile }),
          logFile: join(dir, `envoy-${arm.key.replace('+', '-')}.log`),
        }),
      );
    }
    const poolOf = new Map<ArmKey, Pool>();
    for (const arm of ARMS) {
      const p = new Pool(`https://127.0.0.1:${envoys.get(arm.key)?.listenPort ?? 0}`, {
        connect,
        connections: 8,
        keepAliveTimeout: 60_000,
      });
      pools.push(p);
      poolOf.set(arm.key, p);
    }
    const send = async (arm: Arm, f: Figures | null): Promise<void> => {
      const pool = poolOf.get(arm.key) as Pool;
      try {
        const res = await pool.request({
          method: 'GET',
          path: '/api/v1/namespaces/default/pods/bench',
          headers: { 'user-agent': 'kubelet/v1.35.4' },
        });
        const body = await res.body.text();
        if (f !== null && (res.statusCode !== 200 || body !== arm.expect))
          f.failures = addFailures(f.failures, { ...NO_FAILURES, unexpected: 1 });
      } catch {
        if (f !== null) f.failures = addFailures(f.failures, { ...NO_FAILURES, errors: 1 });
      }
    };
    const saturated = async (arm: Arm, n: number, f: Figures | null): Promise<void> => {
      let left = n;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (left-- > 0) await send(arm, f);
        }),
      );
    };
    const cpu = (arm: Arm): number => procCpuUs(envoys.get(arm.key)?.process.pid ?? -1);
    for (let round = 0; round < o.rounds; round++) {
      progress(
        `(j) round ${round + 1} of ${o.rounds}: ${ARMS.length} arms × (${o.saturated} requests 8 in flight, ${o.paced} at ${o.rate}/s)`,
      );
      for (let i = 0; i < ARMS.length; i++) {
        const arm = ARMS[(i + round) % ARMS.length] as Arm;
        const f = figures.get(arm.key) as Figures;
        await saturated(arm, 1000, null);
        let c0 = cpu(arm);
        await saturated(arm, o.saturated, f);
        f.saturatedUs.push((cpu(arm) - c0) / o.saturated);
        c0 = cpu(arm);
        await openLoop(o.paced, o.rate, () => send(arm, f));
        f.pacedUs.push((cpu(arm) - c0) / o.paced);
      }
    }
  } finally {
    for (const p of pools) await p.close().catch(() => undefined);
    for (const e of envoys.values()) await e.stop().catch(() => undefined);
  }
  const floor = figures.get('tls') as Figures;
  const over = (v: readonly number[], base: readonly number[]): number => median(v.map((x, i) => x - (base[i] ?? Number.NaN)));
  return {
    id: 'j',
    title: 'what a client certificate costs Envoy on the fast path',
    method: `Envoy alone (2 workers) on an mTLS listener that answers every request itself, one Envoy per arm, each adding one part of what the fast path does for a certificate request; the client presents the stack's jane certificate (CN=jane, two O), undici, HTTP/1.1 over kept-alive connections. The routes answer with what they saw (the Lua's marker, x-forwarded-client-cert, or neither): a request not treated as its arm says counts as failed. Per round and arm ${o.saturated.toLocaleString('en-US')} requests 8 in flight, then ${o.paced.toLocaleString('en-US')} one at a time at ${o.rate}/s (as the requests of a node arrive); ${o.rounds} rounds, the arms' order rotated; Envoy's CPU (/proc, user + system) per request, and over the floor as the median of per-round paired differences.`,
    targets: [],
    tables: [
      {
        caption: "Envoy's CPU per request, µs (medians of rounds; over the floor: median of the rounds' paired differences)",
        headers: ['arm', '8 in flight', 'over the floor', `one at a time, ${o.rate}/s`, 'over the floor', 'failed'],
        rows: ARMS.map((a) => {
          const f = figures.get(a.key) as Figures;
          const failed = f.failures.errors + f.failures.unexpected;
          return [
            a.label,
            fmt(median(f.saturatedUs)),
            a.key === 'tls' ? '' : fmt(over(f.saturatedUs, floor.saturatedUs)),
            fmt(median(f.pacedUs)),
            a.key === 'tls' ? '' : fmt(over(f.pacedUs, floor.pacedUs)),
            String(failed),
          ];
        }),
      },
    ],
    notes: [
      `Per round (8 in flight): ${ARMS.map((a) => `${a.key} ${(figures.get(a.key) as Figures).saturatedUs.map((v) => fmt(v)).join(' / ')}`).join('; ')}.`,
      `Per round (${o.rate}/s): ${ARMS.map((a) => `${a.key} ${(figures.get(a.key) as Figures).pacedUs.map((v) => fmt(v)).join(' / ')}`).join('; ')}.`,
      'CPU time comes from /proc in clock ticks (10 ms): one tick is 0.5 µs per request over 20,000 requests, 5 µs over 2,000.',
    ],
  };
}
