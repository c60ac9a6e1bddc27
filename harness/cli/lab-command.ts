// `skewgate-lab lab …` and `skewgate-lab node …`: the subcommands and their options. The work lives
// in ./lab.js and ./node.js, loaded only when such a command runs, so that other commands (an exec
// probe runs `health` every few seconds) do not pay for the lab's modules.
import type { Command } from 'commander';
import { defaultLabDir } from '../lab/versions.js';
import { EXIT_PROBLEMS } from '../../src/constants.js';

/** Runs a command's work; an error it throws (a bad --slot, a missing part, a mount left) is one line and exit 1, never a stack. */
async function guarded(what: string, work: () => Promise<number>): Promise<number> {
  try {
    return await work();
  } catch (err) {
    process.stderr.write(`skewgate-lab ${what}: ${(err as Error).message}\n`);
    return EXIT_PROBLEMS;
  }
}

export const LAB_GATEWAY_PORT = 16443;

export function registerLabCommand(program: Command): void {
  const lab = program
    .command('lab')
    .description('a real mixed-version control plane on loopback: etcd, 3 kube-apiservers, Envoy + skewgate');
  const dirOption = ['--dir <dir>', 'run dir: PKI, pid files, logs, configs', defaultLabDir()] as const;
  // Slot 0 is this command's; the tests claim 1…15, so a test can run the CLI beside a lab of yours.
  const slotOption = ['--slot <n>', "the lab's addresses and etcd ports: 127.0.<n>.x, 10.213.<n>.x", '0'] as const;
  lab
    .command('up')
    .description('start etcd, kube-apiservers kas-1..3 on 127.0.0.1..3:6443 and the gateway; returns when all are ready')
    .option(...dirOption)
    .option('--mixed', 'start kas-3 at the new Kubernetes version (lab/versions.env KUBE_NEW)')
    .option('--port <port>', 'gateway port on 127.0.0.1', String(LAB_GATEWAY_PORT))
    .option('--baseline-port <port>', 'also start a plain Envoy without skewgate on this port')
    .option(...slotOption)
    .option('--first-ip <ip>', "address of kas-1; kas-2 and kas-3 take the next two (default: the slot's 127.0.<n>.1)")
    .option('--etcd-port <port>', "etcd client port (peer port: this + 10; default: the slot's, 23790 for slot 0)")
    .action(
      async (o: {
        dir: string;
        mixed?: boolean;
        port: string;
        baselinePort?: string;
        slot: string;
        firstIp?: string;
        etcdPort?: string;
      }) => {
        process.exitCode = await (
          await import('./lab.js')
        ).runLabUp({
          dir: o.dir,
          slot: Number(o.slot),
          mixed: Boolean(o.mixed),
          port: Number(o.port),
          firstIp: o.firstIp,
          etcdPort: o.etcdPort === undefined ? undefined : Number(o.etcdPort),
          baselinePort: o.baselinePort === undefined ? undefined : Number(o.baselinePort),
        });
      },
    );
  lab
    .command('down')
    .description('stop every process of the lab and verify that none is left')
    .option(...dirOption)
    .option(...slotOption)
    .action(async (o: { dir: string; slot: string }) => {
      process.exitCode = await guarded('lab down', async () => (await import('./lab.js')).runLabDown(o.dir, Number(o.slot)));
    });
  lab
    .command('pki')
    .description("write the lab's PKI (CA, serving, front-proxy, client certificates, tokens) into a folder; a complete set is reused")
    .requiredOption('--dir <dir>', 'folder for the files, e.g. /pki')
    .option(
      '--san <name>',
      'another name on the serving certificates (DNS:name, IP:addr, or bare); repeat',
      (v: string, acc: string[]) => [...acc, v],
      [] as string[],
    )
    .action(async (o: { dir: string; san: string[] }) => {
      process.exitCode = await (await import('./lab.js')).runLabPki(o.dir, o.san);
    });
  lab
    .command('status')
    .description("the lab's processes: pid, alive, version, address, readiness")
    .option(...dirOption)
    .option(...slotOption)
    .action(async (o: { dir: string; slot: string }) => {
      process.exitCode = await guarded('lab status', async () => (await import('./lab.js')).runLabStatus(o.dir, Number(o.slot)));
    });

  const node = program
    .command('node')
    .description(
      "a real node beside the lab: containerd and a kubelet registered through the lab's gateway, with scheduler and controller manager",
    );
  const nodeOptions = (c: Command): Command =>
    c
      .option(...dirOption)
      .option(...slotOption)
      .option('--name <name>', "the Node's name", 'node-1')
      .option('--index <n>', "which of the lab's four node places (address 10.215.0.4n+2, pods 10.244.0.64n/26)", '0')
      .option('--server <url>', "the lab's gateway, for the scheduler (default: the one `lab up` started)");
  type NodeFlags = { dir: string; slot: string; name: string; index: string; server?: string };
  const parsed = (o: NodeFlags) => ({
    dir: o.dir,
    slot: Number(o.slot),
    name: o.name,
    index: Number(o.index),
    controlPlaneServer: o.server,
  });
  nodeOptions(node.command('up').description('start the node (and the scheduler and controller manager); returns once it is Ready')).action(
    async (o: NodeFlags) => {
      process.exitCode = await guarded('node up', async () => (await import('./node.js')).runNodeUp(parsed(o)));
    },
  );
  nodeOptions(node.command('down').description('stop the node: kubelet, pods, containerd, its mounts and bridge')).action(
    async (o: NodeFlags) => {
      process.exitCode = await guarded('node down', async () => (await import('./node.js')).runNodeDown(parsed(o)));
    },
  );
  nodeOptions(node.command('status').description("the node's processes and its Node's Ready condition")).action(async (o: NodeFlags) => {
    process.exitCode = await guarded('node status', async () => (await import('./node.js')).runNodeStatus(parsed(o)));
  });
}
