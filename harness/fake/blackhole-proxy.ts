// A TCP proxy in front of one apiserver that can "blackhole": keep every socket open and stop
// forwarding in both directions, as an apiserver that was SIGSTOPped or whose packets are dropped
// looks from Envoy's side (connections accepted by the kernel, never a byte back). Restored, it
// forwards again on new connections; the ones caught in the blackhole are cut (bytes were lost).
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';

export class BlackholeProxy {
  private server: Server | null = null;
  private boundPort = 0;
  private holed = false;
  private readonly pairs = new Set<{ client: Socket; upstream: Socket | null }>();

  constructor(
    private readonly target: { host: string; port: number },
    private readonly host = '127.0.0.1',
  ) {}

  get port(): number {
    return this.boundPort;
  }

  /** Connections accepted since start (both states). */
  accepted = 0;

  async start(): Promise<void> {
    if (this.server) return;
    const server = createServer((client) => this.accept(client));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, this.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.boundPort = (server.address() as AddressInfo).port;
    this.server = server;
  }

  /** true: stop forwarding everywhere, keep sockets open. false: forward again. */
  setBlackhole(on: boolean): void {
    if (on === this.holed) return;
    this.holed = on;
    if (on) {
      for (const p of this.pairs) this.hole(p);
    } else {
      for (const p of [...this.pairs]) this.cut(p);
    }
  }

  get blackholed(): boolean {
    return this.holed;
  }

  private accept(client: Socket): void {
    this.accepted++;
    const pair: { client: Socket; upstream: Socket | null } = { client, upstream: null };
    this.pairs.add(pair);
    client.on('error', () => undefined);
    client.on('close', () => this.cut(pair));
    if (this.holed) {
      this.hole(pair);
      return;
    }
    const upstream = connect(this.target.port, this.target.host);
    pair.upstream = upstream;
    upstream.on('error', () => undefined);
    upstream.on('close', () => this.cut(pair));
    client.pipe(upstream);
    upstream.pipe(client);
  }

  /** Unpiped and drained into nothing: the peer's writes succeed (as into a kernel buffer) and go nowhere. */
  private hole(pair: { client: Socket; upstream: Socket | null }): void {
    pair.client.unpipe();
    pair.upstream?.unpipe();
    pair.client.removeAllListeners('data');
    pair.client.on('data', () => undefined);
    pair.upstream?.removeAllListeners('data');
    pair.upstream?.on('data', () => undefined);
  }

  private cut(pair: { client: Socket; upstream: Socket | null }): void {
    if (!this.pairs.delete(pair)) return;
    pair.client.destroy();
    pair.upstream?.destroy();
  }

  /** Idempotent. Cuts every connection, stops listening. */
  async close(): Promise<void> {
    const server = this.server;
    if (!server) return;
    this.server = null;
    for (const p of [...this.pairs]) this.cut(p);
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
