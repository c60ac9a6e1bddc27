// What the xDS writer renders into its route table besides the members' routes, each kept for what
// it was rendered from: a fast-path table's routes (rendered in slices: a table of tens of
// thousands of resources never holds the event loop that answers Envoy) and Envoy's Lua for the
// client CA bundle loaded now. A withdrawal and the write after it render each once.
import type { Config } from '../config/core/schema.js';
import { certIdentityScript, envoyStatesCertificates } from '../envoy/cert-identity.js';
import { fastPathRoutesSteps } from '../envoy/fast-routes.js';
import type { JsonObject } from '../envoy/json.js';
import type { ClientTrust } from '../identity/core/client-identity.js';
import type { FastTable } from '../routing/fast-path.js';
import { runSliced, sliceBudget } from '../util/slice-runner.js';

export class RouteRenders {
  private routes = new WeakMap<FastTable, readonly JsonObject[]>();
  private readonly scripts = new WeakMap<ClientTrust, string>();

  constructor(
    private config: Config,
    private readonly clientTrust: () => ClientTrust | null,
  ) {}

  /** A reloaded config: what was rendered with the old one is rendered again. */
  reconfigure(config: Config): void {
    this.config = config;
    this.routes = new WeakMap();
  }

  async fastRoutes(fast: FastTable | null): Promise<readonly JsonObject[]> {
    if (fast === null) return [];
    const known = this.routes.get(fast);
    if (known !== undefined) return known;
    const routes = await runSliced(
      fastPathRoutesSteps(fast, this.config.envoy.requestTimeout, envoyStatesCertificates(this.config)),
      sliceBudget(undefined),
    );
    this.routes.set(fast, routes);
    return routes;
  }

  /** Envoy's Lua for the bundle loaded now (none without one, or where Envoy states no certificate). */
  script(): string | undefined {
    const trust = envoyStatesCertificates(this.config) ? this.clientTrust() : null;
    if (trust === null) return undefined;
    let script = this.scripts.get(trust);
    if (script === undefined) {
      script = certIdentityScript(trust);
      this.scripts.set(trust, script);
    }
    return script;
  }
}
