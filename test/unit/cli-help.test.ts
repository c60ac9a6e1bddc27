// Every command's help ends with Examples, and `skewgate completion bash|zsh` completes what the
// program defines, run in a real bash (issue 30, item 3).
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { packageRoot } from '../../src/util/package-root.js';
import { EXAMPLES } from '../../src/cli/help.js';

const CLI = join(packageRoot(), 'dist/src/cli/main.js');
const cli = (args: readonly string[]): { code: number | null; stdout: string; stderr: string } => {
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
};

/** The commands `skewgate --help` lists. */
const commands = [...(cli(['--help']).stdout.split('\nCommands:\n')[1]?.split('\n\n')[0] ?? '').matchAll(/^ {2}([a-z-]+)\b/gm)]
  .map((m) => m[1] as string)
  .filter((c) => c !== 'help');

t.test('every command has an Examples section, and every example names a command that exists', async (t) => {
  t.ok(commands.length >= 14, `the commands: ${commands.join(', ')}`);
  t.same(Object.keys(EXAMPLES).sort(), [...commands].sort(), 'examples for exactly the commands there are');
  for (const c of commands) {
    const help = cli([c, '--help']);
    t.equal(help.code, 0, `${c} --help: exit 0`);
    t.match(help.stdout, /\nExamples:\n {2}# /, `${c} --help ends with examples`);
  }
  for (const [c, list] of Object.entries(EXAMPLES))
    for (const [, line] of list)
      for (const l of line.split('\n')) t.match(l, new RegExp(`^(\\S+=\\S+ )?skewgate ${c}\\b|^source <\\(skewgate ${c} `), `${c}: ${l}`);
  t.match(cli(['--help']).stdout, /\nExamples:\n/, 'and the program');
});

/** What bash completes for this command line (the cursor after its last word). */
function complete(shell: 'bash' | 'zsh', line: string): string[] {
  const script = cli(['completion', shell]).stdout;
  // zsh's script loads bashcompinit first; here bash runs the function itself, which is the same.
  const body = shell === 'zsh' ? script.replace(/^autoload .*$/m, '') : script;
  const words = line.split(' ');
  const program = [
    body,
    `COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')})`,
    `COMP_CWORD=${words.length - 1}`,
    '_skewgate',
    'printf "%s\\n" "${COMPREPLY[@]}"',
  ].join('\n');
  const r = spawnSync('bash', ['--noprofile', '--norc', '-c', program], { encoding: 'utf8', cwd: packageRoot(), timeout: 30_000 });
  if (r.status !== 0) throw new Error(`bash: ${r.stderr}`);
  return r.stdout.split('\n').filter(Boolean).sort();
}

t.test("completion: commands, a command's flags, -o values and files, for bash and zsh", async (t) => {
  t.equal(cli(['completion', 'fish']).code, 2, 'an unknown shell: exit 2');
  for (const shell of ['bash', 'zsh'] as const) {
    t.same(complete(shell, 'skewgate st'), ['status'], `${shell}: a command`);
    t.same(complete(shell, 'skewgate --log-format json sk'), ['skew'], `${shell}: after a global flag and its value`);
    t.same(complete(shell, 'skewgate --log-format '), ['json', 'text'], `${shell}: a global flag's values`);
    t.same(complete(shell, 'skewgate status -o '), ['json', 'name', 'table', 'wide', 'yaml'], `${shell}: -o's values`);
    t.same(complete(shell, 'skewgate status --no'), ['--no-headers'], `${shell}: a flag of the command`);
    t.ok(complete(shell, 'skewgate skew --'), 'skew has flags');
    t.same(complete(shell, 'skewgate skew --if'), ['--if-removed'], `${shell}: skew's own flag`);
    t.same(complete(shell, 'skewgate status --config package.j'), ['package.json'], `${shell}: a file after --config`);
    t.same(complete(shell, 'skewgate completion '), ['bash', 'zsh'], `${shell}: an argument's choices`);
  }
  t.match(cli(['completion', 'zsh']).stdout, /^autoload -U \+X bashcompinit && bashcompinit$/m, 'zsh: through bashcompinit');
  t.match(cli(['completion', 'bash']).stdout, /^complete -o default -F _skewgate skewgate$/m);
});
