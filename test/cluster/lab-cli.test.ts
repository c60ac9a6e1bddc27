// `skewgate-lab lab up|status|down` and `skewgate-lab node up|status|down` run as a developer runs
// them (issue 26, item 2): the built CLI as a child process, on this file's lab slot (--slot) so
// that it runs beside any other lab, a lab of KUBE_OLD apiservers with kas-3 at KUBE_NEW (--mixed),
// then a node whose kubelet registers through the node gateway the command starts. Asserted: each
// command's exit code and what it prints; the Node registered and Ready through the gateway, as
// system:node:<name>; a second `node up` refused while the node runs; `node down` leaves no process
// and no network namespace; an out-of-range --slot refused with the range. Fails, never skips,
// when a part is missing.
import t from 'tap';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { freePort } from '../../harness/lab/net.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { LAB_MAX_SLOT } from '../../harness/lab/addresses.js';
import { requireNodeParts } from '../../harness/node/lab-node.js';
import { packageRoot } from '../../src/util/package-root.js';
import { requireLabParts } from '../helpers/lab-parts.js';

t.setTimeout(8 * 60_000);
const { versions: v } = requireLabParts();
requireNodeParts();
const slot = claimLabSlot();
const root = packageRoot();
const dir = join(root, '.cache', 'lab-cli');
const NODE = `cli-node-${slot.slot}`;
const NETNS = `skewgate-lab-${slot.slot}-0`;

interface CliRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}
/** The built CLI with these arguments: its exit code and output (never throws). */
const cli = (args: readonly string[]): Promise<CliRun> =>
  new Promise((resolve) => {
    execFile(
      process.execPath,
      [join(root, 'dist', 'harness', 'cli', 'main.js'), ...args],
      { cwd: root, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => resolve({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
const at = ['--dir', dir, '--slot', String(slot.slot)];
const nodeAt = [...at, '--name', NODE];
const netnsList = async (): Promise<string> =>
  new Promise((resolve) => execFile('ip', ['netns', 'list'], (_err, stdout) => resolve(stdout)));

// What a crashed earlier run left.
await cli(['node', 'down', ...nodeAt]);
await cli(['lab', 'down', ...at]);
t.teardown(async () => {
  await cli(['node', 'down', ...nodeAt]);
  await cli(['lab', 'down', ...at]);
  slot.release();
});

const port = await freePort();
const gateway = `https://127.0.0.1:${port}`;

await t.test('lab up --mixed --slot: the control plane on the slot, and how to use it', async (t) => {
  const r = await cli(['lab', 'up', ...at, '--mixed', '--port', String(port)]);
  t.equal(r.code, 0, `lab up: exit 0 ${r.stderr.trim()}`);
  t.match(r.stdout, `gateway (Envoy + skewgate): ${gateway}`, 'prints the gateway');
  t.match(r.stdout, `127.0.${slot.slot}.3`, "kas-3 on the slot's third loopback address");
  t.match(r.stdout, `lab down --dir`, 'and how to stop it');
  const status = await cli(['lab', 'status', ...at]);
  t.equal(status.code, 0, 'lab status: exit 0');
  t.match(status.stdout, new RegExp(`kas-3\\b.*${v.kubeNew.replaceAll('.', '\\.')}`), `lab status: kas-3 at v${v.kubeNew}`);
});

await t.test('node up: the node registers through the node gateway and is Ready', async (t) => {
  const r = await cli(['node', 'up', ...nodeAt]);
  t.equal(r.code, 0, `node up: exit 0 ${r.stderr.trim()}`);
  t.match(r.stdout, new RegExp(`node ${NODE} up in [\\d.]+ s: Ready=True`), 'prints the node up and Ready');
  t.match(r.stdout, `address 10.215.${slot.slot}.2 (network namespace ${NETNS})`, "on the slot's first node place");
  t.match(r.stdout, `as system:node:${NODE}`, 'the kubelet with its own certificate');
  // The Node as the apiservers have it, read through the lab's gateway.
  const pki = join(dir, 'pki');
  const agent = new Agent({ connect: { ca: await readFile(join(pki, 'ca.crt'), 'utf8') } });
  try {
    const res = await request(`${gateway}/api/v1/nodes/${NODE}`, {
      dispatcher: agent,
      headers: { authorization: `Bearer ${(await readFile(join(pki, 'admin.token'), 'utf8')).trim()}` },
    });
    const node = (await res.body.json()) as {
      status?: { nodeInfo?: { kubeletVersion?: string }; conditions?: { type: string; status: string }[] };
    };
    t.equal(res.statusCode, 200, 'the Node exists');
    t.equal(node.status?.nodeInfo?.kubeletVersion, `v${v.kubeOld}`, `kubelet v${v.kubeOld} (the node is upgraded last)`);
    t.equal(node.status?.conditions?.find((c) => c.type === 'Ready')?.status, 'True', 'Ready');
  } finally {
    await agent.close();
  }
  const status = await cli(['node', 'status', ...nodeAt]);
  t.equal(status.code, 0, 'node status: exit 0');
  for (const kind of ['containerd', 'kubelet', 'kube-proxy'])
    t.match(status.stdout, new RegExp(`${NODE}-${kind}\\s+\\d+`), `node status: ${kind} with its pid`);
  t.match(status.stdout, `Node ${NODE}: Ready=True`, "node status: the Node's Ready condition");
  const again = await cli(['node', 'up', ...nodeAt]);
  t.equal(again.code, 1, 'a second node up: exit 1');
  t.match(again.stderr, `node ${NODE} is already running`, 'refused: the node runs (its network would be made anew under it)');
});

await t.test('node down: nothing of the node left; the lab still up', async (t) => {
  const r = await cli(['node', 'down', ...nodeAt]);
  t.equal(r.code, 0, `node down: exit 0 ${r.stderr.trim()}`);
  t.match(r.stdout, `${NODE} stopped`, 'prints what it stopped');
  const status = await cli(['node', 'status', ...nodeAt]);
  t.equal(status.code, 1, 'node status of a stopped node: exit 1');
  t.match(status.stdout, new RegExp(`${NODE}-kubelet\\s+-`), 'no kubelet');
  t.notMatch(await netnsList(), NETNS, `network namespace ${NETNS} gone`);
  const lab = await cli(['lab', 'status', ...at]);
  t.match(lab.stdout, /kas-1/, 'the lab still runs');
});

await t.test('bad input: an out-of-range --slot refused with the range', async (t) => {
  const r = await cli(['node', 'up', '--dir', dir, '--slot', String(LAB_MAX_SLOT + 1), '--name', NODE]);
  t.equal(r.code, 1, 'node up --slot 16: exit 1');
  t.match(r.stderr, `--slot must be 0…${LAB_MAX_SLOT}, got ${LAB_MAX_SLOT + 1}`, 'says the range');
  const down = await cli(['node', 'down', '--dir', dir, '--slot', String(LAB_MAX_SLOT + 1), '--name', NODE]);
  t.equal(down.code, 1, 'node down --slot 16: exit 1');
  t.match(down.stderr, `skewgate-lab node down: --slot must be 0…${LAB_MAX_SLOT}`, 'one line that says the range, no stack');
  t.notMatch(down.stderr, /\n\s+at /, 'no stack trace');
  const lab = await cli(['lab', 'up', '--dir', dir, '--slot', '-1']);
  t.not(lab.code, 0, 'lab up --slot -1: refused');
  t.match(lab.stderr, `--slot must be 0…${LAB_MAX_SLOT}`, 'says the range');
});

await t.test('lab down: every process stopped', async (t) => {
  const r = await cli(['lab', 'down', ...at]);
  t.equal(r.code, 0, 'lab down: exit 0');
  t.match(
    r.stdout,
    /stopped .*kas-1.*kube-controller-manager|stopped .*kube-controller-manager.*kas-1/,
    'stopped the apiservers and what node up started',
  );
});
