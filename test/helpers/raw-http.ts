// One HTTP/1.1 exchange over TLS with the request's bytes exactly as given (undici refuses raw
// control bytes and malformed framing): the first answer's status, head and body.
import { readFileSync } from 'node:fs';
import { connect } from 'node:tls';

export interface RawAnswer {
  readonly status: number;
  readonly head: string;
  readonly body: string;
  /** Everything the connection carried back (a second answer too). */
  readonly text: string;
}

export function rawHttp(gatewayUrl: string, caFile: string, request: Buffer): Promise<RawAnswer> {
  const { hostname, port } = new URL(gatewayUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(
      { host: hostname, port: Number(port), ca: readFileSync(caFile), servername: 'localhost', ALPNProtocols: ['http/1.1'] },
      () => {
        // write, not end: Envoy drops a half-closed downstream connection, at times before its answer.
        socket.write(request);
      },
    );
    // Envoy closes the connection after its answer; the timeout only guards against a hang.
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('error', reject);
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1');
      const cut = text.indexOf('\r\n\r\n');
      const head = cut < 0 ? text : text.slice(0, cut);
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3}) /.exec(head)?.[1] ?? NaN), head, body: cut < 0 ? '' : text.slice(cut + 4), text });
    });
  });
}
