// What follows the running discovery service's members: Envoy's xDS files (a cluster and routes per
// member, with envoy.xds) and the apiservers' addresses that decision spans and the workers name
// (learnt members too). After a reload it follows the new service's.
import type { ApiServerConfig } from '../config/core/schema.js';
import type { DiscoveryService } from '../discovery/service.js';
import type { Config } from '../config/core/schema.js';
import type { XdsWriter } from '../envoy-runtime/xds-files.js';

type Apiserver = Pick<ApiServerConfig, 'name' | 'url'>;

export class MembersFollower {
  private list: readonly Apiserver[];
  private readonly listeners: ((list: readonly Apiserver[]) => void)[] = [];
  private off: () => void = () => undefined;

  constructor(
    private readonly xds: XdsWriter | null,
    initial: readonly Apiserver[],
  ) {
    this.list = initial;
  }

  /** The apiservers' addresses now. */
  apiservers(): readonly Apiserver[] {
    return this.list;
  }

  onApiservers(listener: (list: readonly Apiserver[]) => void): void {
    this.listeners.push(listener);
  }

  setApiservers(list: readonly Apiserver[]): void {
    this.list = list;
    for (const l of this.listeners) l(list);
  }

  /** Follows `discovery`'s members from now on (the previous service's no longer). */
  follow(config: Config, discovery: DiscoveryService): Promise<void> {
    const xds = this.xds;
    if (xds === null) return Promise.resolve();
    this.off();
    xds.reconfigure(config);
    this.off = discovery.onMembers((m) => {
      this.setApiservers(m.map((e) => e.spec));
      void xds.update(m);
    });
    return xds.update(discovery.members());
  }

  close(): void {
    this.off();
  }
}
