// startEnvoy / stop against the REAL binary: readiness, failures, several at once.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { EnvoyNotFoundError, EnvoyStartError, startEnvoy, validateBootstrap } from '../../src/envoy-runtime/process.js';

const minimal = {
  admin: { address: { socket_address: { address: '127.0.0.1', port_value: 0 } } },
  static_resources: {
    listeners: [
      {
        name: 'l',
        address: { socket_address: { address: '127.0.0.1', port_value: 0 } },
        filter_chains: [
          {
            filters: [
              {
                name: 'envoy.filters.network.http_connection_manager',
                typed_config: {
                  '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
                  stat_prefix: 't',
                  route_config: {
                    virtual_hosts: [
                      {
                        name: 'v',
                        domains: ['*'],
                        routes: [{ match: { prefix: '/' }, direct_response: { status: 200, body: { inline_string: 'hi' } } }],
                      },
                    ],
                  },
                  http_filters: [
                    {
                      name: 'envoy.filters.http.router',
                      typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' },
                    },
                  ],
                },
              },
            ],
          },
        ],
      },
    ],
  },
};

function get(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    request({ host: '127.0.0.1', port, path: '/' }, (res) => {
      let b = '';
      res.on('data', (c: Buffer) => (b += c.toString()));
      res.on('end', () => resolve(b));
    })
      .on('error', reject)
      .end();
  });
}

t.test('two Envoys run side by side; stop is idempotent; the log file is written', async (t) => {
  const dir = t.testdir({});
  const logFile = join(dir, 'envoy.log');
  const one = await startEnvoy({ bootstrap: minimal, logFile, logLevel: 'info' });
  const two = await startEnvoy({ bootstrap: minimal });
  t.teardown(() => Promise.all([one.stop(), two.stop()]).then(() => undefined));
  t.match(one.adminUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
  t.not(one.adminUrl, two.adminUrl, 'distinct admin ports');
  t.equal(await get(one.listenPort as number), 'hi', 'first Envoy serves');
  t.equal(await get(two.listenPort as number), 'hi', 'second Envoy serves');
  await one.stop();
  await one.stop();
  t.ok(one.process.exitCode !== null || one.process.signalCode !== null, 'first Envoy has exited');
  t.equal(await get(two.listenPort as number), 'hi', 'second Envoy unaffected');
  t.match(
    readFileSync(logFile, 'utf8'),
    /starting main dispatch loop|all clusters initialized|initializing/i,
    'log file holds Envoy output',
  );
});

t.test('a bootstrap Envoy rejects gives an error with the log tail', async (t) => {
  const bad = { ...minimal, static_resources: { ...minimal.static_resources, bogus_field: 1 } };
  await t.rejects(startEnvoy({ bootstrap: bad }), EnvoyStartError);
  await t.rejects(startEnvoy({ bootstrap: bad }), /bogus_field/, 'the tail names the problem');
  const v = await validateBootstrap(bad);
  t.equal(v.ok, false);
  t.match(v.output, /bogus_field/);
});

t.test('a missing binary tells the user to run npm run setup', async (t) => {
  await t.rejects(startEnvoy({ bootstrap: minimal, envoyBin: '/nonexistent/envoy' }), EnvoyNotFoundError);
  await t.rejects(startEnvoy({ bootstrap: minimal, envoyBin: '/nonexistent/envoy' }), /npm run setup/);
});
