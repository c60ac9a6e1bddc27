// The pod the node tests talk to through the gateway: one Node.js container (the image the skewgate
// Dockerfile builds on, imported into the node's containerd) that prints `tick <n> <epoch ms>` every
// TICK_MS (for `logs -f`), echoes each stdin line back as `echo: <line>` (for `attach -i`), and
// answers HTTP on ECHO_PORT with its hostname (for `port-forward`); its shell serves `exec`.

export const TICK_MS = 1000;
export const ECHO_PORT = 8080;

const PROGRAM = `
let n = 0;
setInterval(() => console.log('tick ' + ++n + ' ' + Date.now()), ${TICK_MS});
process.stdin.on('data', (d) => process.stdout.write('echo: ' + d));
require('http').createServer((q, s) => s.end('hello from ' + require('os').hostname() + '\\n')).listen(${ECHO_PORT});
`;

export function echoPod(o: {
  readonly name: string;
  readonly namespace: string;
  readonly image: string;
  readonly nodeName?: string;
}): object {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: o.name, namespace: o.namespace, labels: { app: o.name } },
    spec: {
      automountServiceAccountToken: false,
      ...(o.nodeName === undefined ? {} : { nodeName: o.nodeName }),
      terminationGracePeriodSeconds: 1,
      containers: [
        {
          name: 'echo',
          image: o.image,
          imagePullPolicy: 'Never',
          stdin: true,
          command: ['node', '-e', PROGRAM],
          ports: [{ containerPort: ECHO_PORT }],
        },
      ],
    },
  };
}

/** The epoch milliseconds a `tick` line carries (when the pod printed it), or undefined. */
export function tickTime(line: string): number | undefined {
  const m = /^tick \d+ (\d+)$/.exec(line.trim());
  return m === null ? undefined : Number(m[1]);
}
