// The lab's address plan and its slots: no two slots share an address or a port (so any two labs
// run side by side), slot 0 keeps `skewgate-lab lab up`'s, and a slot is held by one process at a
// time, taken over when its owner is gone; the machine-wide lock the slots and the results file use.
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isLabAlias, LAB_ADDRESSES_PER_SLOT, LAB_MAX_SLOT, labAddresses } from '../../harness/lab/addresses.js';
import { claimLabSlot } from '../../harness/lab/slots.js';
import { withMachineLock } from '../../harness/lab/machine-lock.js';
import { writeClusterPart } from '../../bench/cluster-results.js';

t.test('no two slots share a loopback address, an alias address or an etcd port', async (t) => {
  const owner = new Map<string, number>();
  let clashes = 0;
  for (let slot = 0; slot <= LAB_MAX_SLOT; slot++) {
    const a = labAddresses(slot);
    const taken = [
      `port:${a.etcdClientPort}`,
      `port:${a.etcdPeerPort}`,
      ...Array.from({ length: LAB_ADDRESSES_PER_SLOT }, (_, i) => [a.loopback(i + 1), a.alias(i + 1)]).flat(),
    ];
    for (const x of taken) {
      if (owner.has(x)) clashes++;
      owner.set(x, slot);
    }
  }
  t.equal(clashes, 0, 'every address and port belongs to one slot');
  t.equal(owner.size, (LAB_MAX_SLOT + 1) * (2 + 2 * LAB_ADDRESSES_PER_SLOT), 'and each slot has all of its own');
});

t.test("slot 0 is `lab up`'s: 127.0.0.N, 10.213.0.N, etcd 23790/23800", async (t) => {
  const a = labAddresses(0);
  t.same(
    [a.loopback(1), a.loopback(16), a.alias(3), a.etcdClientPort, a.etcdPeerPort],
    ['127.0.0.1', '127.0.0.16', '10.213.0.3', 23790, 23800],
  );
  const b = labAddresses(3);
  t.same([b.loopback(2), b.alias(14)], ['127.0.3.2', '10.213.3.14']);
  t.ok(isLabAlias(b.alias(1)) && !isLabAlias(b.loopback(1)), 'an alias address is known as one, a loopback one is not');
  t.same(
    b.sans.slice(0, 4),
    ['IP:127.0.3.1', 'IP:10.213.3.1', 'IP:127.0.3.2', 'IP:10.213.3.2'],
    "the certificate names the slot's loopback and alias addresses",
  );
  t.equal(b.sans.length, 2 * LAB_ADDRESSES_PER_SLOT);
});

t.test('out-of-range slots and addresses are refused', async (t) => {
  t.throws(() => labAddresses(LAB_MAX_SLOT + 1), RangeError);
  t.throws(() => labAddresses(-1), RangeError);
  t.throws(() => labAddresses(1).loopback(0), RangeError);
  t.throws(() => labAddresses(1).alias(LAB_ADDRESSES_PER_SLOT + 1), RangeError);
});

t.test('a slot is held by one process until released; a dead owner loses it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'skewgate-slots-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const a = claimLabSlot(dir);
  const b = claimLabSlot(dir);
  t.equal(a.slot, 1, 'the lowest free slot');
  t.equal(b.slot, 2, 'the next one while the first is held');
  a.release();
  a.release(); // idempotent
  t.notOk(existsSync(join(dir, '1')), 'released: its directory is gone');
  const c = claimLabSlot(dir);
  t.equal(c.slot, 1, 'a released slot is handed out again');
  // Slot 3 held by a process that has exited (its pid is no longer alive).
  const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  mkdirSync(join(dir, '3'));
  writeFileSync(join(dir, '3', 'owner'), `${dead.stdout}\n`);
  // Slot 4 held by this (live) process, as another Lab in it would.
  mkdirSync(join(dir, '4'));
  writeFileSync(join(dir, '4', 'owner'), `${process.pid}\n`);
  const d = claimLabSlot(dir);
  t.equal(d.slot, 3, "a dead owner's slot is taken over");
  const e = claimLabSlot(dir);
  t.equal(e.slot, 5, "a live owner's slot is not");
  for (const s of [b, c, d, e]) s.release();
});

t.test('the machine lock: one holder at a time; writers of one results file keep each part', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'skewgate-lock-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const events: string[] = [];
  const holder = (name: string) =>
    withMachineLock(join(dir, 'lock'), async () => {
      events.push(`${name} in`);
      await new Promise((r) => setTimeout(r, 30));
      events.push(`${name} out`);
    });
  await Promise.all([holder('a'), holder('b'), holder('c')]);
  t.same(
    events.filter((_, i) => i % 2 === 0).map((e) => e.replace(' in', ' out')),
    events.filter((_, i) => i % 2 === 1),
    `no holder entered before the previous one left: ${events.join(', ')}`,
  );
  t.notOk(existsSync(join(dir, 'lock')), 'released after the last holder');
  // Eight cluster files writing their parts of one file at once: every part is there.
  const file = join(dir, 'RESULTS.md');
  const ids = Array.from({ length: 8 }, (_, i) => `part-${i}`);
  await Promise.all(ids.map((id) => writeClusterPart(id, `### ${id}`, file)));
  const doc = readFileSync(file, 'utf8');
  t.same(
    ids.filter((id) => !doc.includes(`### ${id}`)),
    [],
    'no part lost',
  );
});
