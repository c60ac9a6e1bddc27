// Lint for the whole tree (npm test runs it). Beyond typescript-eslint's recommended rules, two
// import boundaries the design rests on (docs/design.md, "Parts and their rooms"):
//   1. the service (src/) never imports the harness (harness/), the tests or the benchmarks;
//   2. the pure core — classification, discovery's parse/merge/snapshot, the decision ladder,
//      identity's parsing and verification — imports no I/O: no network, files, processes, logger
//      or the modules that do those, and reads no clock or randomness of its own.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

const NOT_THE_HARNESS = {
  group: ['**/harness/**', '**/test/**', '**/bench/**'],
  message: 'src/ is the service: it never imports the harness, the tests or the benchmarks (docs/design.md).',
};

/**
 * Every room of src/ is one of three kinds, and purity follows from the folder alone:
 *   - pure rooms, wholly: classification, the decision ladder, where apiservers join and leave,
 *     the error catalog, the Envoy renderers (config in, JSON out: paths rewritten, never read),
 *     what status, skew and explain report, gateway-cert's certificate (keys, clock and serial in,
 *     DER out);
 *   - mixed rooms: their pure part in core/ (what the room computes), their I/O at the room's root
 *     (how it is fed: fetches, files, timers, sockets, the logger);
 *   - I/O rooms: the runtime of Envoy, the composition, the command line.
 */
const PURE_ROOMS = ['k8s', 'routing', 'membership', 'errors', 'envoy', 'inspect', 'pki'];
const MIXED_ROOMS = [
  'config',
  'cordon',
  'discovery',
  'extproc',
  'gate',
  'history',
  'identity',
  'kube',
  'kubernetes-service',
  'memory',
  'telemetry',
  'util',
  'workers',
];
const IO_ROOMS = ['envoy-runtime', 'app', 'cli'];

const PURE = [...PURE_ROOMS.map((r) => `src/${r}/**/*.ts`), 'src/*/core/**/*.ts'];

/**
 * The rooms of src/ from the bottom up (docs/design.md, "Parts and their rooms"): a room imports
 * only rooms of the layers below its own, so that arrows run one way and no circle can form.
 * The bottom layer (constants, errors, util) is free to all.
 */
const LAYERS = [
  ['errors', 'util'],
  ['config', 'k8s', 'pki', 'memory'],
  ['kube', 'identity', 'cordon'],
  ['membership'],
  ['discovery'],
  ['routing'],
  ['kubernetes-service', 'extproc', 'envoy'],
  ['inspect', 'telemetry', 'envoy-runtime', 'gate'],
  ['workers', 'history'],
  ['app'],
  ['cli'],
];

// A new room is classified before it lints: pure, mixed (with a core/) or I/O.
{
  const kinds = [...PURE_ROOMS, ...MIXED_ROOMS, ...IO_ROOMS].sort().join();
  const layered = LAYERS.flat().sort().join();
  if (kinds !== layered) throw new Error(`eslint.config.js: the rooms' kinds (${kinds}) and LAYERS (${layered}) differ`);
}

/** Per room: no-restricted-imports with the harness rule and the rooms it may not import. */
function layerRules() {
  return LAYERS.slice(1).flatMap((rooms, i) =>
    rooms.map((room) => {
      const below = LAYERS.slice(0, i + 1).flat();
      const forbidden = LAYERS.flat().filter((r) => r !== room && !below.includes(r));
      return {
        files: [`src/${room}/**/*.ts`],
        rules: {
          'no-restricted-imports': [
            'error',
            {
              patterns: [
                NOT_THE_HARNESS,
                // The top room forbids none.
                ...(forbidden.length === 0
                  ? []
                  : [
                      {
                        group: forbidden.map((r) => `**/${r}/*`),
                        message: `the rooms' layer order (docs/design.md): src/${room}/ imports only ${below.join(', ')} and constants.ts.`,
                      },
                    ]),
              ],
            },
          ],
        },
      };
    }),
  );
}

/** node:net's address parsers are string functions; its sockets are not. */
const NET_PARSERS_ONLY = {
  name: 'node:net',
  allowImportNames: ['isIP', 'isIPv4', 'isIPv6'],
  message: 'a pure module may parse addresses (isIP), never open sockets.',
};

const IO_MODULES = {
  group: [
    'node:fs',
    'node:fs/*',
    'node:http',
    'node:https',
    'node:http2',
    'node:child_process',
    'node:dgram',
    'node:dns',
    'node:dns/*',
    'node:timers',
    'node:timers/*',
    'undici',
    '@grpc/*',
    'pino',
    '@opentelemetry/*',
    // The I/O rooms, and the root of each mixed room (`*.js` stops at core/, which is pure).
    ...IO_ROOMS.map((r) => `**/${r}/*`),
    ...MIXED_ROOMS.map((r) => `**/${r}/*.js`),
  ],
  message: 'a pure module (docs/design.md): no network, files, processes, logger or telemetry; take what you need as an argument.',
  // A type brings no I/O with it (erased at build): a pure parser may name an I/O module's event type.
  allowTypeImports: true,
};

const OWN_ROOMS_IO = {
  group: ['../*.js'],
  message: "a core module (docs/design.md): nothing from its own room's root, which does the I/O; take it as an argument.",
  allowTypeImports: true,
};

export default tseslint.config(
  { ignores: ['dist/**', 'dist.next/**', 'dist.old/**', 'node_modules/**', '.tools/**', '.cache/**', '.tap/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { ecmaVersion: 2022, sourceType: 'module' },
    rules: {
      // `_`-prefixed names are deliberately unused (a required parameter, a discarded tuple slot).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
      '@typescript-eslint/consistent-type-imports': ['error', { fixStyle: 'inline-type-imports' }],
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: {
      'no-restricted-imports': ['error', { patterns: [NOT_THE_HARNESS] }],
      // import() too: a lazily loaded command would still put the harness in the service.
      'no-restricted-syntax': [
        'error',
        { selector: 'ImportExpression[source.value=/(^|\\/)(harness|test|bench)\\//]', message: NOT_THE_HARNESS.message },
      ],
    },
  },
  ...layerRules(),
  {
    files: ['src/routing/router.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { paths: [NET_PARSERS_ONLY], patterns: [NOT_THE_HARNESS, IO_MODULES] }],
    },
  },
  {
    files: PURE,
    // The seam: createRouter reads the clock and randomness per request and hands them to the
    // pure routeRequest (same file); its imports are held to the pure rule all the same.
    ignores: ['src/routing/router.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': ['error', { paths: [NET_PARSERS_ONLY], patterns: [NOT_THE_HARNESS, IO_MODULES] }],
      'no-restricted-properties': [
        'error',
        { object: 'Date', property: 'now', message: 'pure modules take the clock as an argument' },
        { object: 'Math', property: 'random', message: 'pure modules take randomness as an argument' },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'pure modules set no timers' },
        { name: 'setInterval', message: 'pure modules set no timers' },
        { name: 'process', message: 'pure modules read no environment' },
      ],
    },
  },
  {
    // A core module and its own room's root: the same rule, and `../` is the room's I/O part.
    files: ['src/*/core/**/*.ts'],
    rules: {
      '@typescript-eslint/no-restricted-imports': [
        'error',
        { paths: [NET_PARSERS_ONLY], patterns: [NOT_THE_HARNESS, IO_MODULES, OWN_ROOMS_IO] },
      ],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs'],
    languageOptions: { globals: { process: 'readonly', console: 'readonly' } },
  },
);
