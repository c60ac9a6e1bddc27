// Reading the garbage collector's own account of a run (test/helpers/gc-log.ts), from lines as
// kube-controller-manager v1.35 writes them at --v=2.
import t from 'tap';
import { gcLogFacts, lastRun } from '../helpers/gc-log.js';

const OWNER = '47f08a46-594b-4553-8f67-8acf7cbe8161';
const line = (msg: string, rest: string): string => `I1203 09:44:28.059183    4946 garbagecollector.go:1] "${msg}" ${rest}`;
const cm = (name: string, uid: string): string => `[v1/ConfigMap, namespace: gc-harm, name: ${name}, uid: ${uid}]`;
const map = (ns: string): string =>
  `[admissionregistration.k8s.io/v1/MutatingAdmissionPolicy, namespace: ${ns}, name: owner-a, uid: ${OWNER}]`;

t.test('lastRun: the part after the last start line', async (t) => {
  t.equal(lastRun('==== 1 first\nold\n==== 2 second\nnew\n'), '==== 2 second\nnew\n');
  t.equal(lastRun('no start line\n'), 'no start line\n');
});

t.test('gcLogFacts: proceeding, deletions and owners held alive', async (t) => {
  const log = [
    line('Starting controller', 'controller="garbagecollector"'),
    line('replacing virtual item with observed item', `virtual="${map('gc-harm')}" observed="${map('')}"`),
    line('Garbage collector: all resource monitors have synced', ''),
    line('Proceeding to collect garbage', ''),
    line('Processing item', `item="${cm('canary-a-1', '11111111-2222')}" virtual=false`),
    line('Deleting item', `item="${cm('canary-a-1', '11111111-2222')}" propagationPolicy="Background"`),
    line(`item doesn't have an owner, continue on next item`, `item="${map('gc-harm')}"`),
  ].join('\n');
  t.same(gcLogFacts(log), { proceeding: 'synced', deleted: ['gc-harm/canary-a-1'], seenAlive: [OWNER, OWNER] });
  t.same(gcLogFacts(line('Starting controller', '')), { proceeding: null, deleted: [], seenAlive: [] }, 'nothing yet');
  t.equal(
    gcLogFacts(line('Garbage collector: not all resource monitors could be synced, proceeding anyways', '')).proceeding,
    'not all synced',
  );
});
