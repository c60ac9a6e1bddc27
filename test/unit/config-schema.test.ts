// The published JSON Schema of the config (docs/skewgate-config.schema.json) is what the
// schema skewgate validates with emits today, and describes what skewgate accepts.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { configJsonSchema } from '../../src/config/core/schema.js';
import { parseConfig } from '../../src/config/load.js';
import { packageRoot } from '../../src/util/package-root.js';

const published = JSON.parse(readFileSync(join(packageRoot(), 'docs/skewgate-config.schema.json'), 'utf8')) as Record<string, unknown>;
const fresh = configJsonSchema();

t.test('the published schema is current (regenerate: skewgate config-schema > docs/skewgate-config.schema.json)', async (t) => {
  t.same(published, fresh);
});

t.test('it names every section, requires what skewgate requires, and refuses unknown keys', async (t) => {
  t.equal(fresh['$schema'], 'https://json-schema.org/draft/2020-12/schema');
  const properties = fresh['properties'] as Record<string, { additionalProperties?: unknown; properties?: Record<string, unknown> }>;
  t.same(Object.keys(properties).sort(), [
    'admin',
    'apiservers',
    'discovery',
    'envoy',
    'extproc',
    'gate',
    'kubernetesService',
    'log',
    'membership',
    'routing',
    'telemetry',
  ]);
  t.same(fresh['required'], ['apiservers'], 'envoy is for envoy-config and validate only');
  t.equal(fresh['additionalProperties'], false, 'a misspelt section is an error in the editor too');
  t.equal(properties['discovery']?.additionalProperties, false);
  t.match(JSON.stringify(properties['discovery']?.properties?.['interval']), /Go writes it/, 'durations say how they are written');
  // What the schema requires of an empty document, skewgate requires too.
  t.throws(() => parseConfig({}, 'empty.yaml', '/'), /1 problem:\n.*apiservers: /);
});
