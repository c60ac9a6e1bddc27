// What every command's help ends with (Examples, as kubectl's), and the `completion` command whose
// script is written from the program's own commands and options.
import { Argument, type Command, type Option } from 'commander';
import { COMPLETION_SHELLS, type CompletionCommand, type CompletionOption, type CompletionShell } from './completion.js';

/** Per command: [what it does, the command line]. Every command has some (a test holds it). */
export const EXAMPLES: Readonly<Record<string, readonly (readonly [string, string])[]>> = {
  serve: [
    ['Run the service (Envoy asks it over ext_proc)', 'skewgate serve --config /etc/skewgate/skewgate.yaml'],
    ['The same, the config from the environment', 'SKEWGATE_CONFIG=/etc/skewgate/skewgate.yaml skewgate serve'],
  ],
  'envoy-config': [
    ["Envoy's bootstrap for this config", 'skewgate envoy-config > /run/envoy/envoy.yaml'],
    ['One to commit, its paths relative to the repository', 'skewgate envoy-config --config examples/skewgate.yaml --relative-to .'],
  ],
  status: [
    ["The running gateway's members", 'skewgate status'],
    ['More columns, no header, or the names alone', 'skewgate status -o wide --no-headers\nskewgate status -o name'],
    ['Follow it during an upgrade', 'skewgate status -w'],
  ],
  history: [
    ["What changed in the gateway's view lately", 'skewgate history'],
    ['The same for a script', 'skewgate history -o json'],
  ],
  explain: [
    [
      'What the gateway does with a request, and why',
      'skewgate explain GET /apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies',
    ],
    [
      'As a kubelet would send it',
      'skewgate explain --client-cert kubelet.crt -H "Accept: application/json" PUT /apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-1',
    ],
  ],
  skew: [
    ['What not every apiserver serves', 'skewgate skew'],
    ['A column per apiserver; or the resource names alone', 'skewgate skew -o wide\nskewgate skew -o name'],
    ['Without the gateway: a discovery round of its own', 'skewgate skew --discover'],
    ['What would go if kas-1 left, and who uses it', 'skewgate skew --if-removed kas-1'],
  ],
  gate: [
    ['May the rollout go on?', 'skewgate gate'],
    ['Before removing a machine', 'skewgate gate --removing 10.0.0.11'],
    ['Wait until the new apiserver is in, at most 10 minutes', 'skewgate gate --expect 10.0.0.14 --wait --wait-timeout 10m'],
  ],
  cordon: [
    ['Keep requests off kas-2 but what only it serves', 'skewgate cordon kas-2 --reason "bad build" --by alice'],
    ['Nothing new to kas-2 at all', 'skewgate cordon kas-2 --drain'],
  ],
  uncordon: [['Give kas-2 its share again', 'skewgate uncordon kas-2']],
  validate: [
    ['Check the config, the apiservers and the credentials', 'skewgate validate'],
    ['The apiservers that fail, for a script', 'skewgate validate -o json'],
  ],
  'config-schema': [['The JSON Schema, for an editor', 'skewgate config-schema > skewgate-config.schema.json']],
  health: [
    ["The probe: skewgate's gRPC health", 'skewgate health --timeout 2s'],
    ["And Envoy's readiness", 'skewgate health --envoy'],
  ],
  'gateway-cert': [
    [
      "The gateway's serving certificate from kubeadm's CA",
      'skewgate gateway-cert --ca-cert /etc/kubernetes/pki/ca.crt --ca-key /etc/kubernetes/pki/ca.key --san api.example.com --san 10.0.0.10',
    ],
  ],
  completion: [
    ['Completion in this bash session', 'source <(skewgate completion bash)'],
    ['For every zsh session', 'skewgate completion zsh > "${fpath[1]}/_skewgate"'],
  ],
};

export function examplesText(name: string): string {
  const list = EXAMPLES[name] ?? [];
  if (list.length === 0) return '';
  return `\nExamples:\n${list
    .map(
      ([what, line]) =>
        `  # ${what}\n${line
          .split('\n')
          .map((l) => `  ${l}`)
          .join('\n')}`,
    )
    .join('\n\n')}\n`;
}

/** Flags whose value is a file or a folder: their values complete as file names. */
const FILE_VALUE = /<(file|dir)>/;

function optionOf(o: Option): CompletionOption {
  return {
    flags: [o.short, o.long].filter((f): f is string => f !== undefined),
    takesValue: o.required || o.optional,
    ...(o.argChoices === undefined ? {} : { choices: o.argChoices }),
    ...(FILE_VALUE.test(o.flags) ? { file: true } : {}),
  };
}

/** The commands and options, as commander has them, for the completion script. */
export function completionCommands(program: Command): CompletionCommand[] {
  return program.commands.map((c) => {
    const first = (c as Command & { registeredArguments: readonly Argument[] }).registeredArguments[0];
    return {
      name: c.name(),
      options: c.options.map(optionOf),
      ...(first?.argChoices === undefined ? {} : { arguments: first.argChoices }),
    };
  });
}

/** The `completion` command and every command's Examples; call once every other command is defined. */
export function addHelpExtras(program: Command): void {
  program
    .command('completion')
    .description('print a shell completion script: commands, flags, -o values and file names')
    .addArgument(new Argument('<shell>', 'bash or zsh').choices(COMPLETION_SHELLS))
    .action(async (shell: CompletionShell) => {
      const { completionScript } = await import('./completion.js');
      process.stdout.write(
        completionScript(
          { program: program.name(), globalOptions: program.options.map(optionOf), commands: completionCommands(program) },
          shell,
        ),
      );
    });
  for (const c of program.commands) c.addHelpText('after', examplesText(c.name()));
  program.addHelpText(
    'after',
    `\nExamples:\n  skewgate status\n  skewgate skew -o wide\n  skewgate explain GET /apis/apps/v1/deployments\n  skewgate <command> --help\n`,
  );
}
