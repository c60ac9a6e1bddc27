// The I/O half of publishing the gateways as the `kubernetes` Service's endpoints
// (publication.ts decides): this gateway renews its Lease while it can serve, and every
// leaseDuration/3 each gateway writes the Endpoints and EndpointSlice the live Leases call for
// (they all compute the same, so they converge). A graceful stop deletes its own Lease and
// writes the endpoints without it (the apiservers, if it was the last).
import { hostname } from 'node:os';
import { request } from 'undici';
import type { Logger } from 'pino';
import type { Config } from '../config/core/schema.js';
import { sendJson } from '../kube/requests.js';
import { type ServerTarget } from '../kube/transport.js';
import type { Snapshot } from '../discovery/core/types.js';
import { isHealthy } from '../routing/freshness.js';
import {
  desiredPublication,
  endpointSliceObject,
  endpointsObject,
  ENDPOINTS_PATH,
  GATEWAY_LEASE_SELECTOR,
  gatewayLeaseName,
  gatewayNameOf,
  gatewayLeaseObject,
  LEASES_PATH,
  parseAddress,
  parseGatewayLease,
  portGroup,
  publishedAddresses,
  SERVICE_NAME,
  SLICES_PATH,
  type Address,
  type Publication,
} from './core/publication.js';

export interface PublisherSource {
  current(): Snapshot;
  targets(): readonly ServerTarget[];
}

export class KubernetesServicePublisher {
  private readonly gateway: string;
  private readonly address: Address;
  private readonly durationMs: number;
  private readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private closing: Promise<void> | null = null;
  private last = '';

  constructor(
    private readonly config: Config,
    private readonly source: PublisherSource,
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {
    const k = config.kubernetesService;
    if (!k.publish || k.address === undefined) throw new Error('KubernetesServicePublisher needs kubernetesService.publish and .address');
    this.gateway = k.gatewayName ?? gatewayNameOf(hostname());
    this.address = { ip: k.address, port: k.port ?? config.envoy.listen.port };
    this.durationMs = k.leaseDuration;
  }

  start(): void {
    if (this.closing || this.timer) return;
    const tick = (): void => {
      this.running = this.tick(true)
        .catch((err: unknown) => this.log.warn({ err: (err as Error).message }, 'kubernetes Service: publishing failed; retrying'))
        .finally(() => {
          this.running = null;
          if (this.closing) return;
          this.timer = setTimeout(tick, Math.max(500, Math.floor(this.durationMs / 3)));
          this.timer.unref();
        });
    };
    tick();
  }

  /** Stops renewing, deletes this gateway's Lease, and writes the endpoints without it. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      if (this.timer) clearTimeout(this.timer);
      await this.running;
      await this.tick(false).catch((err: unknown) =>
        this.log.warn({ err: (err as Error).message }, 'kubernetes Service: could not withdraw this gateway; its Lease expires on its own'),
      );
      this.abort.abort();
    })();
    return this.closing;
  }

  private target(): ServerTarget {
    const t = this.source.targets()[0];
    if (t === undefined) throw new Error('no apiserver to write through');
    return t;
  }

  /** Envoy's admin /ready (when its port is known), and at least one ready apiserver. */
  private async canServe(): Promise<boolean> {
    if (!this.source.current().servers.some(isHealthy)) return false;
    const admin = this.config.envoy.admin;
    if (admin.port === 0) return true;
    try {
      const host = admin.address.includes(':') ? `[${admin.address}]` : admin.address;
      const res = await request(`http://${host}:${admin.port}/ready`, { signal: AbortSignal.timeout(1000) });
      await res.body.text();
      return res.statusCode === 200;
    } catch {
      return false;
    }
  }

  private async tick(stay: boolean): Promise<void> {
    const target = this.target();
    const signal = this.abort.signal;
    const leasePath = `${LEASES_PATH}/${gatewayLeaseName(this.gateway)}`;
    const mine = await sendJson(target, 'GET', leasePath, undefined, signal);
    const serving = stay && (await this.canServe());
    if (serving) {
      const rv =
        mine.status === 200 ? (JSON.parse(mine.text) as { metadata?: { resourceVersion?: string } }).metadata?.resourceVersion : undefined;
      const body = gatewayLeaseObject(this.gateway, this.address, this.now(), this.durationMs, rv);
      const res =
        rv === undefined
          ? await sendJson(target, 'POST', LEASES_PATH, body, signal)
          : await sendJson(target, 'PUT', leasePath, body, signal);
      if (res.status >= 300) throw new Error(`renewing ${gatewayLeaseName(this.gateway)}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
    } else if (mine.status === 200) {
      await sendJson(target, 'DELETE', leasePath, undefined, signal);
      this.log.info(
        { gateway: this.gateway },
        stay ? 'kubernetes Service: this gateway cannot serve; withdrawn' : 'kubernetes Service: this gateway withdrawn',
      );
    }
    const listed = await sendJson(
      target,
      'GET',
      `${LEASES_PATH}?${new URLSearchParams({ labelSelector: GATEWAY_LEASE_SELECTOR })}`,
      undefined,
      signal,
    );
    if (listed.status !== 200) throw new Error(`listing the gateway Leases: HTTP ${listed.status} ${listed.text.slice(0, 200)}`);
    const items = (JSON.parse(listed.text) as { items?: unknown[] }).items ?? [];
    const leases = items.flatMap((o) => {
      const l = parseGatewayLease(o);
      return l === null || (!serving && l.name === gatewayLeaseName(this.gateway)) ? [] : [l];
    });
    const apiservers = this.source
      .current()
      .servers.filter(isHealthy)
      .flatMap((s) => {
        const u = new URL(s.url);
        const a = parseAddress(`${u.hostname}:${u.port === '' ? 443 : u.port}`);
        return a === null ? [] : [a];
      });
    const desired = desiredPublication(leases, apiservers, this.now());
    if (desired === null) return;
    await this.write(target, desired);
  }

  private async write(target: ServerTarget, p: Publication): Promise<void> {
    const { port, ips, leftOut } = portGroup(p);
    const key = `${p.source} ${ips.join(',')}:${port}`;
    if (key !== this.last) {
      this.log.info(
        { source: p.source, addresses: ips, port, ...(leftOut.length > 0 ? { leftOut } : {}) },
        'kubernetes Service: endpoints',
      );
      if (leftOut.length > 0)
        this.log.warn({ leftOut }, 'kubernetes Service: gateways on another port are left out (every gateway must publish the same port)');
      this.last = key;
    }
    for (const [path, make] of [
      [ENDPOINTS_PATH, endpointsObject],
      [SLICES_PATH, endpointSliceObject],
    ] as const) {
      const current = await sendJson(target, 'GET', `${path}/${SERVICE_NAME}`, undefined, this.abort.signal);
      const want = make(port, ips);
      if (current.status === 404) {
        const res = await sendJson(target, 'POST', path, want, this.abort.signal);
        if (res.status >= 300 && res.status !== 409)
          throw new Error(`creating ${path}/${SERVICE_NAME}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
        continue;
      }
      if (current.status !== 200) throw new Error(`reading ${path}/${SERVICE_NAME}: HTTP ${current.status}`);
      const obj = JSON.parse(current.text) as { metadata?: { resourceVersion?: string } };
      if (JSON.stringify(publishedAddresses(obj)) === JSON.stringify(publishedAddresses(want))) continue;
      const res = await sendJson(
        target,
        'PUT',
        `${path}/${SERVICE_NAME}`,
        make(port, ips, obj.metadata?.resourceVersion),
        this.abort.signal,
      );
      // 409: another gateway wrote first; the next tick compares again.
      if (res.status >= 300 && res.status !== 409)
        throw new Error(`writing ${path}/${SERVICE_NAME}: HTTP ${res.status} ${res.text.slice(0, 200)}`);
    }
  }
}
