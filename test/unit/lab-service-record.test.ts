// The verdicts test/cluster/kubernetes-service.test.ts draws from its records (test/helpers/service-record.ts).
import t from 'tap';
import { endpointSliceObject, endpointsObject } from '../../src/kubernetes-service/core/publication.js';
import type { GatewayLease } from '../../src/kubernetes-service/core/publication.js';
import { deadGatewayFindings, stateSequence, stateText, type ServicePoll } from '../helpers/service-record.js';

const A = '10.213.0.14';
const B = '10.213.0.15';

t.test('stateSequence: every state a watch saw, repeats dropped; empty and gone are states', async (t) => {
  const seq = stateSequence([
    { type: 'ADDED', object: endpointsObject(16443, [A, B]) },
    { type: 'MODIFIED', object: endpointsObject(16443, [B, A]) },
    { type: 'BOOKMARK', object: {} },
    { type: 'MODIFIED', object: endpointSliceObject(16443, [A]) },
    { type: 'MODIFIED', object: endpointsObject(16443, []) },
    { type: 'DELETED', object: endpointsObject(16443, [A]) },
    { type: 'ADDED', object: endpointsObject(6443, ['10.213.0.1', '10.213.0.2']) },
  ]).map(stateText);
  t.same(seq, [`${A}:16443,${B}:16443`, `${A}:16443`, 'empty', 'DELETED', '10.213.0.1:6443,10.213.0.2:6443']);
  t.same(stateSequence([]), [], 'no events, no states');
});

const lease = (name: string, renewTime: number): GatewayLease => ({ name, address: { ip: A, port: 1 }, renewTime, durationMs: 6000 });
const both = [`${A}:1`, `${B}:1`];
const poll = (at: number, survivorRenewed: number, listed: readonly string[], deadRenewed = 1000): ServicePoll => ({
  leasesAt: at,
  leases: [lease('dead', deadRenewed), lease('survivor', survivorRenewed)],
  objectsAt: at + 5,
  endpoints: listed,
  slice: listed,
});

t.test('deadGatewayFindings: listed while its Lease lives, gone once the survivor ticked after the expiry', async (t) => {
  // dead renewed at 1000 → expires at 7000; the survivor renews at 6000, 8000 (first after), 10000.
  const ok = deadGatewayFindings(
    [poll(2000, 2000, both), poll(6500, 6000, both), poll(8100, 8000, both), poll(10100, 10000, [`${A}:1`])],
    'dead',
    'survivor',
    `${B}:1`,
  );
  t.same(ok, { expiresAt: 7000, beforeExpiry: 2, droppedEarly: [], settled: 1, listedLate: [] });
  t.equal(
    deadGatewayFindings([poll(2000, 2000, both)], 'dead', 'survivor', `${B}:1`).settled,
    0,
    'the survivor not yet renewed twice after the expiry: nothing settled',
  );
});

t.test('deadGatewayFindings: dropped early, or still listed after the tick, is found', async (t) => {
  const early = deadGatewayFindings([poll(3000, 2000, [`${A}:1`])], 'dead', 'survivor', `${B}:1`);
  t.equal(early.droppedEarly.length, 1, 'gone while its Lease was live');
  const late = deadGatewayFindings(
    [poll(8100, 8000, both), poll(10100, 10000, both), poll(12100, 12000, [`${A}:1`])],
    'dead',
    'survivor',
    `${B}:1`,
  );
  t.same([late.settled, late.listedLate.length], [2, 1], 'still listed after the tick that began past the expiry');
  // Listed in one object only still counts as listed.
  const half = deadGatewayFindings(
    [poll(8100, 8000, both), { ...poll(10100, 10000, [`${A}:1`]), slice: both }],
    'dead',
    'survivor',
    `${B}:1`,
  );
  t.equal(half.listedLate.length, 1, 'the slice still lists it');
  t.equal(
    deadGatewayFindings([poll(9000, 9000, both, 4000)], 'dead', 'survivor', `${B}:1`).expiresAt,
    10000,
    'the latest renewal seen counts',
  );
  // A renewal of the dead gateway seen later moves the expiry (an in-flight renewal landing after the kill).
  const moved = deadGatewayFindings([poll(2000, 2000, both, 1000), poll(3000, 2000, both, 2500)], 'dead', 'survivor', `${B}:1`);
  t.equal(moved.expiresAt, 8500);
});
