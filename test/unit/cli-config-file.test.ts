import t from 'tap';
import { CONFIG_ENV, DEFAULT_CONFIG_FILE, NoConfigError, optionalConfigFile, requiredConfigFile } from '../../src/cli/config-file.js';

const yes = (): boolean => true;
const no = (): boolean => false;

t.test('which config a command reads without --config: the flag, $SKEWGATE_CONFIG, then the default file if it exists', async (t) => {
  const rows: [string, string | undefined, NodeJS.ProcessEnv, () => boolean, string | undefined][] = [
    ['the flag wins', '/a.yaml', { [CONFIG_ENV]: '/b.yaml' }, yes, '/a.yaml'],
    ['the variable next', undefined, { [CONFIG_ENV]: '/b.yaml' }, yes, '/b.yaml'],
    ['a named variable even if its file is missing (loading it then says so)', undefined, { [CONFIG_ENV]: '/b.yaml' }, no, '/b.yaml'],
    ['an empty variable is unset', undefined, { [CONFIG_ENV]: '' }, yes, DEFAULT_CONFIG_FILE],
    ['the default file when it exists', undefined, {}, yes, DEFAULT_CONFIG_FILE],
    ['nothing when it does not', undefined, {}, no, undefined],
  ];
  for (const [name, given, env, exists, want] of rows) t.equal(optionalConfigFile(given, env, exists), want, name);
});

t.test('a command that needs one says how to give it', async (t) => {
  t.equal(requiredConfigFile('/a.yaml', {}, no), '/a.yaml');
  t.equal(requiredConfigFile(undefined, { [CONFIG_ENV]: '/b.yaml' }, no), '/b.yaml');
  t.equal(requiredConfigFile(undefined, {}, yes), DEFAULT_CONFIG_FILE);
  t.throws(
    () => requiredConfigFile(undefined, {}, no),
    new NoConfigError(`no config: give --config FILE, or set ${CONFIG_ENV} (${DEFAULT_CONFIG_FILE}, the default, does not exist)`),
  );
});
