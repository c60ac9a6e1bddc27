// `skewgate completion bash|zsh`: a completion script for the shell, written from the commands
// and options the program defines (so it never lags behind them): command names, each command's
// flags, the values of a flag with choices (-o table|wide|…), and file names after a flag that
// takes a file. zsh runs the same function through bashcompinit. Pure: a spec in, text out.

export interface CompletionOption {
  /** Every spelling: -o, --output. */
  readonly flags: readonly string[];
  /** Whether a value follows it. */
  readonly takesValue: boolean;
  /** The values it accepts, when they are a fixed list. */
  readonly choices?: readonly string[];
  /** Its value is a file. */
  readonly file?: boolean;
}

export interface CompletionCommand {
  readonly name: string;
  readonly options: readonly CompletionOption[];
  /** Words its arguments may be (explain's METHOD), if a fixed list. */
  readonly arguments?: readonly string[];
}

export interface CompletionSpec {
  readonly program: string;
  readonly globalOptions: readonly CompletionOption[];
  readonly commands: readonly CompletionCommand[];
}

export const COMPLETION_SHELLS = ['bash', 'zsh'] as const;
export type CompletionShell = (typeof COMPLETION_SHELLS)[number];

const words = (list: readonly string[]): string => list.join(' ');
/** A shell function name from the program's (skewgate-lab → _skewgate_lab). */
const fnName = (program: string): string => `_${program.replace(/[^A-Za-z0-9_]/g, '_')}`;

/** What to offer after `prev`, if it is a flag that takes a value; '' when not one. */
function valueCases(options: readonly CompletionOption[], indent: string): string {
  return options
    .filter((o) => o.takesValue)
    .map((o) => {
      const offer =
        o.choices !== undefined
          ? `COMPREPLY=($(compgen -W "${words(o.choices)}" -- "$cur"))`
          : o.file === true
            ? 'COMPREPLY=($(compgen -f -- "$cur"))'
            : 'COMPREPLY=()';
      return `${indent}${o.flags.join('|')}) ${offer}; return ;;`;
    })
    .join('\n');
}

/** Flags that take a value, as one case pattern (the word after one is not the command's name). */
function valueFlags(options: readonly CompletionOption[]): string[] {
  return options.filter((o) => o.takesValue).flatMap((o) => o.flags);
}

export function completionScript(spec: CompletionSpec, shell: CompletionShell): string {
  const fn = fnName(spec.program);
  const globalValueFlags = valueFlags(spec.globalOptions);
  const lines = [
    `# ${shell} completion for ${spec.program}; load it with: source <(${spec.program} completion ${shell})`,
    ...(shell === 'zsh' ? ['autoload -U +X bashcompinit && bashcompinit'] : []),
    `${fn}() {`,
    '  local cur prev cmd i skip=0',
    '  cur="${COMP_WORDS[COMP_CWORD]}"',
    '  prev="${COMP_WORDS[COMP_CWORD-1]}"',
    '  cmd=""',
    '  for ((i = 1; i < COMP_CWORD; i++)); do',
    '    if [ "$skip" = 1 ]; then skip=0; continue; fi',
    '    case "${COMP_WORDS[i]}" in',
    ...(globalValueFlags.length > 0 ? [`      ${globalValueFlags.join('|')}) skip=1 ;;`] : []),
    '      -*) ;;',
    '      *) cmd="${COMP_WORDS[i]}"; break ;;',
    '    esac',
    '  done',
    '  case "$prev" in',
    valueCases(spec.globalOptions, '    '),
    '  esac',
    '  if [ -z "$cmd" ]; then',
    `    COMPREPLY=($(compgen -W "${words([...spec.commands.map((c) => c.name), ...spec.globalOptions.flatMap((o) => o.flags)])}" -- "$cur"))`,
    '    return',
    '  fi',
    '  case "$cmd" in',
    ...spec.commands.map((c) => {
      const values = valueCases(c.options, '        ');
      const flags = words([...c.options.flatMap((o) => o.flags), ...spec.globalOptions.flatMap((o) => o.flags), '--help']);
      return [
        `    ${c.name})`,
        ...(values === '' ? [] : ['      case "$prev" in', values, '      esac']),
        '      if [[ "$cur" == -* ]]; then',
        `        COMPREPLY=($(compgen -W "${flags}" -- "$cur"))`,
        c.arguments === undefined ? '      else COMPREPLY=()' : `      else COMPREPLY=($(compgen -W "${words(c.arguments)}" -- "$cur"))`,
        '      fi',
        '      ;;',
      ].join('\n');
    }),
    '  esac',
    '}',
    `complete -o default -F ${fn} ${spec.program}`,
    '',
  ];
  return lines.filter((l) => l !== '').join('\n') + '\n';
}
