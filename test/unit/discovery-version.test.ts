// An apiserver's /version as discovery reads it (src/discovery/core/version.ts): what counts as a
// gitVersion, and when a round reads it again.
import t from 'tap';
import { parseGitVersion, VERSION_REFRESH_MS, versionDue } from '../../src/discovery/core/version.js';

t.test('parseGitVersion: a printable gitVersion, nothing else', async (t) => {
  const rows: [string, string | null][] = [
    ['{"major":"1","minor":"36","gitVersion":"v1.36.3","platform":"linux/amd64"}', 'v1.36.3'],
    ['{"gitVersion":"v1.35.4-eks-1234abcd"}', 'v1.35.4-eks-1234abcd'],
    ['{"gitVersion":""}', null],
    ['{"gitVersion":42}', null],
    ['{"gitVersion":"v1.36.3 "}', null],
    ['{"gitVersion":"v1.36.3\\n"}', null],
    ['{"gitVersion":"v1.36.\u00e9"}', null],
    [`{"gitVersion":"v${'1'.repeat(200)}"}`, null],
    ['{"major":"1"}', null],
    ['[]', null],
    ['null', null],
    ['not json', null],
    ['', null],
  ];
  for (const [body, want] of rows) t.equal(parseGitVersion(body), want, body.slice(0, 60));
});

t.test('versionDue: none read yet, the last round not ready or failing, or the read older than the refresh', async (t) => {
  const now = 1_000_000;
  const read = { gitVersion: 'v1.35.4', versionReadAt: now - 1000, ready: true, consecutiveFailures: 0 };
  t.equal(versionDue({ ready: null, consecutiveFailures: 0 }, now), true, 'never read');
  t.equal(versionDue(read, now), false, 'read a second ago, ready: not again');
  t.equal(versionDue({ ...read, ready: false }, now), true, 'not ready last round: it may be restarting as another version');
  t.equal(versionDue({ ...read, consecutiveFailures: 1 }, now), true, 'failing last round');
  t.equal(versionDue({ ...read, versionReadAt: now - VERSION_REFRESH_MS + 1 }, now), false, 'just inside the refresh');
  t.equal(versionDue({ ...read, versionReadAt: now - VERSION_REFRESH_MS }, now), true, 'the refresh is due');
});
