import t, { type Test } from 'tap';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../src/config/core/problems.js';
import { loadConfig, parseConfig } from '../../src/config/load.js';
import { parseDuration } from '../../src/config/core/units.js';
import { extprocListenAddresses, extprocListenProblem } from '../../src/config/core/extproc-listen.js';

const minimal = {
  apiservers: [{ name: 'a', url: 'https://127.0.0.1:6443', caFile: 'ca.crt', credentials: { tokenFile: 'token' } }],
  envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' } },
};

function problems(doc: unknown): { path: string; message: string }[] {
  try {
    parseConfig(doc, 'test.yaml', '/base');
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
  return [];
}

/** `discovery.<field>: value` is one problem, at its path, saying why. */
function refusedDiscoveryField(t: Test, field: string, value: unknown, message: RegExp): void {
  const got = problems({ ...minimal, discovery: { [field]: value } });
  t.same(
    got.map((p) => p.path),
    [`discovery.${field}`],
    `${JSON.stringify(value)}: one problem, at its path`,
  );
  t.match(got[0]?.message, message, `${JSON.stringify(value)}: says why`);
}

t.test('a minimal config gets defaults, absolute paths, and is frozen', async (t) => {
  const c = parseConfig(minimal, 'test.yaml', '/base');
  t.equal(c.discovery.interval, 1000);
  t.equal(c.discovery.staleAfter, 3000);
  t.equal(c.discovery.watch, true);
  t.equal(c.extproc.listen, '127.0.0.1:9002');
  t.equal(c.extproc.failureMode, 'open');
  t.equal(c.apiservers[0]?.caFile, '/base/ca.crt');
  t.equal(c.apiservers[0]?.credentials?.tokenFile, '/base/token');
  t.equal(c.envoy.tls.certFile, '/base/gw.crt');
  t.ok(Object.isFrozen(c) && Object.isFrozen(c.apiservers) && Object.isFrozen(c.apiservers[0]));
  t.throws(() => {
    (c.discovery as { interval: number }).interval = 5;
  });
});

t.test('durations take a unit, as Go writes them; a bare number is refused but 0 (issue 30)', async (t) => {
  const c = parseConfig(
    {
      ...minimal,
      discovery: { interval: '2s', timeout: '750ms', staleAfter: '1m' },
      extproc: { messageTimeout: '250ms' },
      log: { decisions: { interval: 0 } },
    },
    't',
    '/b',
  );
  t.equal(c.discovery.interval, 2000);
  t.equal(c.discovery.timeout, 750);
  t.equal(c.discovery.staleAfter, 60_000);
  t.equal(c.extproc.messageTimeout, 250);
  t.equal(c.log.decisions.interval, 0, 'a bare 0 is a duration');
  // `interval: 5` read as 5 ms would poll every apiserver two hundred times a second.
  const got = problems({ ...minimal, discovery: { interval: 5, timeout: '2s' }, membership: { drainTimeout: 30 } });
  t.same(
    got.map((p) => p.path),
    ['discovery.interval', 'membership.drainTimeout'],
  );
  t.match(got[0]?.message, /^5 has no unit: write "5ms" or "5s", whichever is meant \(only 0 may go without\)$/);
});

t.test('a unix listen path is resolved against the config folder', async (t) => {
  t.equal(parseConfig({ ...minimal, extproc: { listen: 'unix:run/sg.sock' } }, 't', '/b').extproc.listen, 'unix:/b/run/sg.sock');
  t.equal(parseConfig({ ...minimal, extproc: { listen: 'unix:/abs.sock' } }, 't', '/b').extproc.listen, 'unix:/abs.sock');
});

t.test('every problem is listed at once, each with its path', async (t) => {
  const got = problems({
    apiservers: [
      { name: 'A_bad', url: 'http://x', credentials: { clientCertFile: 'c' } },
      { name: 'dup', url: 'https://h:1' },
      { name: 'dup', url: 'https://h:2', extra: 1 },
      { name: 'default', url: 'https://h:3' },
    ],
    discovery: { interval: 'soon' },
    extproc: { listen: 'nowhere', failureMode: 'maybe' },
    envoy: {},
    typo: true,
  });
  const paths = got.map((p) => p.path);
  for (const want of [
    'apiservers[0].name',
    'apiservers[0].url',
    'apiservers[0].credentials',
    'apiservers[2]',
    'discovery.interval',
    'extproc.listen',
    'extproc.failureMode',
    '',
  ]) {
    t.ok(paths.includes(want), `problem at ${want || '(top)'} in ${JSON.stringify(paths)}`);
  }
  // Cross-section problems too, though other sections have problems of their own.
  t.ok(
    got.some((p) => p.path === 'apiservers[2].name' && /duplicate/.test(p.message)),
    'the duplicate name, in the same list',
  );
  t.ok(
    got.some((p) => p.path === 'apiservers[3].name' && /reserved/.test(p.message)),
    'the reserved name, in the same list',
  );
  t.ok(got.length >= 11, `${got.length} problems`);
});

t.test('Go-style durations, composite ones included', async (t) => {
  const cases: [string, number | null][] = [
    ['500ms', 500],
    ['5s', 5000],
    ['1m30s', 90_000],
    ['2h45m', 9_900_000],
    ['1.5h', 5_400_000],
    ['.5s', 500],
    ['100us', 0.1],
    ['250µs', 0.25],
    ['1500000ns', 1.5],
    ['0', 0],
    [' 2m ', 120_000],
    ['', null],
    ['1', null],
    ['1m30', null],
    ['-1s', null],
    ['1d', null],
    ['s', null],
    ['1 m', null],
  ];
  for (const [text, want] of cases) t.equal(parseDuration(text), want, JSON.stringify(text));
  t.equal(parseConfig({ ...minimal, discovery: { interval: '1m30s', staleAfter: '5m' } }, 't', '/b').discovery.interval, 90_000);
  t.match(problems({ ...minimal, discovery: { interval: '1m30' } }), [{ path: 'discovery.interval', message: /not a duration .*1m30s/ }]);
});

t.test('dangerous configs are refused, each with why', async (t) => {
  const server = minimal.apiservers[0] as Record<string, unknown>;
  const cases: [string, Record<string, unknown>, string, RegExp][] = [
    [
      'a URL with a path prefix',
      { ...minimal, apiservers: [{ ...server, url: 'https://10.0.0.1:6443/k8s' }] },
      'apiservers[0].url',
      /no path/,
    ],
    [
      'a URL with a query',
      { ...minimal, apiservers: [{ ...server, url: 'https://10.0.0.1:6443/?x=1' }] },
      'apiservers[0].url',
      /no path, query/,
    ],
    ['a URL with a user', { ...minimal, apiservers: [{ ...server, url: 'https://u:p@10.0.0.1:6443' }] }, 'apiservers[0].url', /user/],
    [
      'a token file with a client certificate',
      { ...minimal, apiservers: [{ ...server, credentials: { tokenFile: 't', clientCertFile: 'c', clientKeyFile: 'k' } }] },
      'apiservers[0].credentials',
      /choose one of .*one identity/,
    ],
    [
      'staleAfter shorter than interval',
      { ...minimal, discovery: { interval: '10s', staleAfter: '5s' } },
      'discovery.staleAfter',
      /longer than discovery.interval/,
    ],
    [
      'staleAfter equal to interval',
      { ...minimal, discovery: { interval: '2s', staleAfter: '2000ms' } },
      'discovery.staleAfter',
      /longer than/,
    ],
  ];
  for (const [what, doc, path, message] of cases) t.match(problems(doc), [{ path, message }], what);
  t.same(problems({ ...minimal, apiservers: [{ ...server, url: 'https://10.0.0.1:6443/' }] }), [], 'a trailing slash alone is fine');
});

t.test('duplicate and reserved names are problems', async (t) => {
  const got = problems({
    ...minimal,
    apiservers: [minimal.apiservers[0], minimal.apiservers[0], { ...minimal.apiservers[0], name: 'default' }],
  });
  t.match(got, [
    { path: 'apiservers[1].name', message: /duplicate/ },
    { path: 'apiservers[2].name', message: /reserved/ },
  ]);
});

t.test('a use: envoy-config and validate also need what Envoy does, listed with every other problem', async (t) => {
  const doc = {
    apiservers: [
      { name: 'a', url: 'https://127.0.0.1:6443', credentials: { tokenFile: 't' } },
      { name: 'B', url: 'https://h:1' },
    ],
    telemetry: { tracing: { enabled: true, endpoint: 'https://collector:4317' } },
  };
  const paths = (use: 'serve' | 'envoy-config' | 'validate'): string[] => {
    try {
      parseConfig(doc, 't.yaml', '/b', use);
    } catch (err) {
      if (err instanceof ConfigError) return err.problems.map((p) => p.path).sort();
      throw err;
    }
    return [];
  };
  t.same(paths('serve'), ['apiservers[1].credentials', 'apiservers[1].name'], 'serve: no envoy section needed, no CA for Envoy');
  const envoy = [
    'apiservers[0].caFile',
    'apiservers[1].caFile',
    'apiservers[1].credentials',
    'apiservers[1].name',
    'envoy.tls.certFile',
    'envoy.tls.keyFile',
    'telemetry.tracing.caFile',
  ];
  t.same(paths('envoy-config'), envoy, 'envoy-config: the fields and what the bootstrap needs, at once');
  t.same(paths('validate'), envoy, 'validate: the same, never less');
  t.same(parseConfig({ apiservers: doc.apiservers.slice(0, 1) }, 't.yaml', '/b').envoy.tls, {}, 'serve without an envoy section');
  t.throws(
    () => parseConfig({ apiservers: doc.apiservers.slice(0, 1), envoy: { xds: { directory: 'xds' } } }, 't.yaml', '/b'),
    /apiservers\[0\]\.caFile: required to render/,
    'serve with envoy.xds writes the clusters: the CA files are its needs too',
  );
});

t.test('credentials: every apiserver, and the template of learnt ones, names an identity', async (t) => {
  const anonymous = { name: 'b', url: 'https://127.0.0.1:6444', caFile: 'ca.crt' };
  const got = problems({
    ...minimal,
    apiservers: [
      ...minimal.apiservers,
      anonymous,
      { ...anonymous, name: 'c', credentials: {} },
      { ...anonymous, name: 'd', credentials: { context: 'x' } },
    ],
  });
  t.same(
    got.map((p) => p.path).sort(),
    ['apiservers[1].credentials', 'apiservers[2].credentials', 'apiservers[3].credentials', 'apiservers[3].credentials.context'],
    'absent, empty, or only a context: each listed',
  );
  t.match(
    got.find((p) => p.path === 'apiservers[1].credentials')?.message,
    /required: give tokenFile, clientCertFile and clientKeyFile, or kubeconfig/,
  );
  for (const credentials of [{ tokenFile: 't' }, { clientCertFile: 'c', clientKeyFile: 'k' }, { kubeconfig: 'kc', context: 'x' }])
    t.same(
      problems({ ...minimal, apiservers: [{ ...anonymous, credentials }] }),
      [],
      `${Object.keys(credentials).join(' + ')} is an identity`,
    );
  t.same(
    problems({
      ...minimal,
      membership: { sources: ['nodes'], template: { caFile: 'ca.crt', credentials: {} } },
      envoy: { ...minimal.envoy, xds: { directory: 'xds' } },
    }).map((p) => p.path),
    ['membership.template.credentials'],
    "a learnt apiserver is read with the template's credentials",
  );
});

t.test('loadConfig: unreadable file and bad YAML are ConfigErrors', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'sg-config-'));
  t.throws(() => loadConfig(join(dir, 'missing.yaml')), { code: 'SKEWGATE_ERR_CONFIG', message: /cannot read/ });
  writeFileSync(join(dir, 'bad.yaml'), 'apiservers: [\n');
  t.throws(() => loadConfig(join(dir, 'bad.yaml')), { code: 'SKEWGATE_ERR_CONFIG', message: /not valid YAML/ });
  writeFileSync(
    join(dir, 'ok.yaml'),
    'apiservers:\n  - name: a\n    url: https://127.0.0.1:1\n    credentials: {tokenFile: t}\nenvoy:\n  tls: {certFile: c, keyFile: k}\n',
  );
  t.equal(loadConfig(join(dir, 'ok.yaml')).envoy.tls.keyFile, join(dir, 'k'));
});

t.test('envoy.tls.clientCaFile: optional, resolved like the other paths', async (t) => {
  t.equal(parseConfig(minimal, 't', '/b').envoy.tls.clientCaFile, undefined, 'off unless set');
  const c = parseConfig(
    {
      ...minimal,
      envoy: {
        tls: { certFile: 'gw.crt', keyFile: 'gw.key', clientCaFile: 'pki/client-ca.crt' },
        upstreamClientCert: { certFile: 'fp.crt', keyFile: '/abs/fp.key' },
      },
    },
    't',
    '/b',
  );
  t.equal(c.envoy.tls.clientCaFile, '/b/pki/client-ca.crt');
  t.same(c.envoy.upstreamClientCert, { certFile: '/b/fp.crt', keyFile: '/abs/fp.key' });
  t.same(
    problems({
      ...minimal,
      envoy: { tls: { certFile: 'c', keyFile: 'k', clientCaFile: '' }, upstreamClientCert: { certFile: 'a', keyFile: 'b' } },
    }).map((p) => p.path),
    ['envoy.tls.clientCaFile'],
    'an empty path is a problem',
  );
});

t.test('envoy.upstreamClientCert (the front-proxy certificate) is required with clientCaFile', async (t) => {
  const got = problems({ ...minimal, envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key', clientCaFile: 'client-ca.crt' } } });
  t.equal(got.length, 1);
  t.equal(got[0]?.path, 'envoy.upstreamClientCert');
  t.match(got[0]?.message, /required with tls\.clientCaFile/);
  t.match(got[0]?.message, /front-proxy/);
  t.same(problems({ ...minimal, envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key' } } }), [], 'not required without clientCaFile');
});

t.test('the missing front-proxy certificate is listed with every other problem', async (t) => {
  const got = problems({
    apiservers: [{ name: 'A', url: 'https://h:1' }],
    extproc: { listen: 'nowhere' },
    envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key', clientCaFile: 'client-ca.crt' }, connectTimeout: 'soon', admin: { port: -1 } },
  });
  const paths = got.map((p) => p.path);
  for (const want of ['apiservers[0].name', 'extproc.listen', 'envoy.connectTimeout', 'envoy.admin.port', 'envoy.upstreamClientCert']) {
    t.ok(paths.includes(want), `problem at ${want} in ${JSON.stringify(paths)}`);
  }
  const broken = problems({
    ...minimal,
    envoy: { tls: { certFile: 'gw.crt', keyFile: 'gw.key', clientCaFile: 'ca.crt' }, upstreamClientCert: { certFile: 'fp.crt' } },
  });
  t.same(
    broken.map((p) => p.path),
    ['envoy.upstreamClientCert.keyFile'],
    'a half-written front-proxy certificate is one problem, not two',
  );
});

t.test(
  'membership: off by default; with sources, Envoy must follow (xds), the watch must run, learnt apiservers must be verifiable',
  async (t) => {
    const c = parseConfig(minimal, 'test.yaml', '/base');
    t.same(c.membership.sources, [], 'no sources: the apiservers list is the membership');
    t.equal(c.membership.port, 6443);
    t.equal(c.membership.drainTimeout, 30_000);
    t.equal(c.envoy.xds, undefined);
    t.same(
      problems({ ...minimal, discovery: { watch: false }, membership: { sources: ['nodes', 'endpointSlice'] } }).map((p) => p.path),
      ['envoy.xds', 'discovery.watch', 'membership.template.caFile', 'membership.template.credentials'],
      'every problem at once',
    );
    t.same(
      problems({ ...minimal, membership: { sources: ['dns'] } }).map((p) => p.path),
      ['membership.sources[0]', 'envoy.xds', 'membership.template.caFile', 'membership.template.credentials'],
      'an unknown source, and with it what any source needs: every problem at once',
    );
    const ok = parseConfig(
      {
        ...minimal,
        membership: {
          sources: ['nodes'],
          port: 16443,
          drainTimeout: '1m',
          template: { caFile: 'ca.crt', serverName: 'kubernetes', credentials: { tokenFile: 'token' } },
        },
        envoy: { ...minimal.envoy, xds: { directory: 'xds' } },
      },
      'test.yaml',
      '/base',
    );
    t.equal(ok.envoy.xds?.directory, '/base/xds', 'relative to the config file');
    t.equal(ok.membership.template.caFile, '/base/ca.crt');
    t.equal(ok.membership.template.credentials?.tokenFile, '/base/token');
    t.equal(ok.membership.drainTimeout, 60_000);
    t.ok(Object.isFrozen(ok.membership.template));
  },
);

t.test('the peer channel and the health listener: resolved paths, TCP only, every problem at once', async (t) => {
  const c = parseConfig(
    {
      ...minimal,
      extproc: { peer: { listen: '0.0.0.0:9444', certFile: 'peer/server.crt', keyFile: 'peer/server.key', clientCaFile: 'peer/ca.crt' } },
      envoy: {
        ...minimal.envoy,
        extprocPeers: {
          endpoints: ['10.0.0.2:9444', '[fd00::3]:9444'],
          certFile: 'peer/client.crt',
          keyFile: 'peer/client.key',
          caFile: 'peer/ca.crt',
        },
        health: {},
      },
    },
    'test.yaml',
    '/base',
  );
  t.equal(c.extproc.peer?.clientCaFile, '/base/peer/ca.crt');
  t.equal(c.envoy.extprocPeers?.keyFile, '/base/peer/client.key');
  t.same(c.envoy.health, { address: '0.0.0.0', port: 16444 }, 'the health listener defaults');
  t.equal(parseConfig(minimal, 't', '/b').envoy.health, undefined, 'off unless asked for');
  const got = problems({
    ...minimal,
    extproc: { peer: { listen: 'unix:/run/peer.sock', certFile: 'a', keyFile: 'b' } },
    envoy: { ...minimal.envoy, extprocPeers: { endpoints: [], certFile: 'c', keyFile: 'd', caFile: 'e' }, health: { port: 70000 } },
  });
  t.same(
    got.map((p) => p.path).sort(),
    ['envoy.extprocPeers.endpoints', 'envoy.health.port', 'extproc.peer.clientCaFile', 'extproc.peer.listen'],
    JSON.stringify(got),
  );
  t.match(got.find((p) => p.path === 'extproc.peer.listen')?.message, /host:port \(TCP/);
});

t.test('discovery.maxDocumentBytes and maxDownloadBackoff: defaults, units, every bad value named', async (t) => {
  const c = parseConfig(minimal, 'test.yaml', '/base');
  t.equal(c.discovery.maxDocumentBytes, 8 * 1024 * 1024, 'default 8 MiB (issue 31: bench (f) chose it)');
  t.equal(c.discovery.maxDownloadBackoff, 30_000, 'default 30 s');
  const accepted: [unknown, number][] = [
    [65_536, 65_536],
    ['64Ki', 65_536],
    ['512Ki', 512 * 1024],
    ['32Mi', 32 * 1024 * 1024],
    [' 1Gi ', 1024 ** 3],
    [16_777_216, 16_777_216],
  ];
  for (const [value, bytes] of accepted)
    t.equal(
      parseConfig({ ...minimal, discovery: { maxDocumentBytes: value } }, 't', '/b').discovery.maxDocumentBytes,
      bytes,
      `${String(value)}`,
    );
  const refused: [unknown, RegExp][] = [
    ['32MB', /"32MB" is not a size \(use a number of bytes, or e\.g\. 512Ki, 32Mi, 1Gi\)/],
    ['32 Mi', /is not a size/],
    ['1.5Mi', /is not a size/],
    [-1, /./],
    [1.5, /./],
    [1024, /must be at least 64Ki/],
    ['63Ki', /must be at least 64Ki/],
    ['2Gi', /must be at most 1Gi/],
    [true, /./],
  ];
  for (const [value, message] of refused) {
    refusedDiscoveryField(t, 'maxDocumentBytes', value, message);
  }
  t.equal(parseConfig({ ...minimal, discovery: { maxDownloadBackoff: '2m' } }, 't', '/b').discovery.maxDownloadBackoff, 120_000);
  // Shorter than the interval is allowed: the backoff is never below the interval anyway.
  t.equal(parseConfig({ ...minimal, discovery: { interval: '1m' } }, 't', '/b').discovery.maxDownloadBackoff, 30_000);
  t.same(
    problems({ ...minimal, discovery: { maxDownloadBackoff: 'later', maxDocumentBytes: 'big' } }).map((p) => p.path),
    ['discovery.maxDocumentBytes', 'discovery.maxDownloadBackoff'],
    'both listed at once',
  );
});

t.test('discovery.maxResources: 50,000 by default; a whole number from 1000 up, or named as refused', async (t) => {
  t.equal(parseConfig(minimal, 'test.yaml', '/base').discovery.maxResources, 50_000, 'default (issue 31: bench (f) chose it)');
  t.equal(parseConfig({ ...minimal, discovery: { maxResources: 200_000 } }, 't', '/b').discovery.maxResources, 200_000);
  for (const [value, message] of [
    [999, /must be at least 1000/],
    [1500.5, /must be a whole number of resources/],
    ['50000', /must be a whole number of resources/],
    [20_000_000, /must be at most 10000000/],
  ] as const) {
    refusedDiscoveryField(t, 'maxResources', value, message);
  }
});

t.test('extproc.healthListen: off by default; host:port of its own, or named as refused (issue 30, item 7)', async (t) => {
  t.equal(parseConfig(minimal, 't', '/b').extproc.healthListen, undefined);
  t.equal(parseConfig({ ...minimal, extproc: { healthListen: '0.0.0.0:9004' } }, 't', '/b').extproc.healthListen, '0.0.0.0:9004');
  t.match(problems({ ...minimal, extproc: { healthListen: 'unix:/run/h.sock' } }), [
    { path: 'extproc.healthListen', message: /must be host:port \(TCP: the kubelet dials the pod IP\)/ },
  ]);
  t.match(problems({ ...minimal, extproc: { listen: '127.0.0.1:9002', healthListen: '127.0.0.1:9002' } }), [
    { path: 'extproc.healthListen', message: /taken by another ext_proc listener/ },
  ]);
});

t.test('extproc.limits and envoy.requestTimeout: defaults, units, and every bad value listed', async (t) => {
  const c = parseConfig(minimal, 'test.yaml', '/base');
  t.same(c.extproc.limits, { maxStreams: 1000, maxStreamsPerConnection: 100, maxMessageBytes: 2 * 1024 * 1024, firstMessageTimeout: 5000 });
  t.equal(c.envoy.requestTimeout, 65_000, "above kube-apiserver's 60 s --request-timeout");
  const set = parseConfig(
    {
      ...minimal,
      extproc: { limits: { maxStreams: 50, maxStreamsPerConnection: 10, maxMessageBytes: 1_500_000, firstMessageTimeout: '2s' } },
      envoy: { ...minimal.envoy, requestTimeout: '2m' },
    },
    'test.yaml',
    '/base',
  );
  t.same(set.extproc.limits, { maxStreams: 50, maxStreamsPerConnection: 10, maxMessageBytes: 1_500_000, firstMessageTimeout: 2000 });
  t.equal(set.envoy.requestTimeout, 120_000);
  t.equal(
    parseConfig({ ...minimal, envoy: { ...minimal.envoy, requestTimeout: 0 } }, 'test.yaml', '/base').envoy.requestTimeout,
    0,
    '0: no bound',
  );
  const bad = problems({
    ...minimal,
    extproc: {
      limits: { maxStreams: 0, maxStreamsPerConnection: 1.5, maxMessageBytes: 1024 * 1024, firstMessageTimeout: '10ms', extra: 1 },
    },
    envoy: { ...minimal.envoy, requestTimeout: '500ms' },
  });
  const paths = bad.map((p) => p.path);
  for (const want of [
    'extproc.limits.maxStreams',
    'extproc.limits.maxStreamsPerConnection',
    'extproc.limits.maxMessageBytes',
    'extproc.limits.firstMessageTimeout',
    'extproc.limits',
    'envoy.requestTimeout',
  ]) {
    t.ok(paths.includes(want), `${want} is listed (${JSON.stringify(bad.filter((p) => p.path === want))})`);
  }
  t.match(bad.find((p) => p.path === 'extproc.limits.maxMessageBytes')?.message, /1 MiB of request headers/);
  t.match(bad.find((p) => p.path === 'envoy.requestTimeout')?.message, /0 \(no bound\) or at least 1s/);
});

t.test('extproc.workers: the addresses of the endpoints, and the ports they need', async (t) => {
  const rows: [string, number, string[]][] = [
    ['127.0.0.1:9002', 1, ['127.0.0.1:9002']],
    ['127.0.0.1:9002', 3, ['127.0.0.1:9002', '127.0.0.1:9003', '127.0.0.1:9004']],
    ['[::1]:9002', 2, ['[::1]:9002', '[::1]:9003']],
    ['127.0.0.1:0', 2, ['127.0.0.1:0', '127.0.0.1:0']],
    ['unix:/run/sg.sock', 3, ['unix:/run/sg.sock', 'unix:/run/sg.sock.1', 'unix:/run/sg.sock.2']],
    ['unix:///run/sg.sock', 2, ['unix:///run/sg.sock', 'unix:/run/sg.sock.1']],
  ];
  for (const [listen, n, want] of rows) t.same(extprocListenAddresses(listen, n), want, `${listen} × ${n}`);
  t.equal(extprocListenProblem('127.0.0.1:65535', 1), null);
  t.match(extprocListenProblem('127.0.0.1:65535', 2), /need ports up to 65536/);
  t.equal(extprocListenProblem('127.0.0.1:65534', 2), null);
  t.equal(extprocListenProblem('unix:/x', 32), null);
  t.equal(parseConfig(minimal, 't', '/b').extproc.workers, 1, 'default 1');
  t.equal(parseConfig({ ...minimal, extproc: { workers: 4 } }, 't', '/b').extproc.workers, 4);
  t.throws(() => parseConfig({ ...minimal, extproc: { workers: 33 } }, 't', '/b'), /extproc\.workers/);
  t.throws(() => parseConfig({ ...minimal, extproc: { workers: 1.5 } }, 't', '/b'), /extproc\.workers/);
  t.throws(
    () => parseConfig({ ...minimal, extproc: { listen: '127.0.0.1:65535', workers: 2 } }, 't', '/b'),
    /extproc\.workers: 2 endpoints from port 65535 need ports up to 65536/,
  );
});
