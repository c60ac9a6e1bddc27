// A config's problems: each with its path, all of them in one error (SKEWGATE_ERR_CONFIG). Pure.
import type { ErrorCode } from '../../errors/catalog.js';

/** One problem in a config: where, and what is wrong. */
export interface ConfigProblem {
  readonly path: string;
  readonly message: string;
}

export class ConfigError extends Error {
  readonly code = 'SKEWGATE_ERR_CONFIG' satisfies ErrorCode;
  constructor(
    readonly source: string,
    readonly problems: readonly ConfigProblem[],
  ) {
    super(
      `${source}: ${problems.length} problem${problems.length === 1 ? '' : 's'}:\n${problems.map((p) => `  - ${p.path || '(top)'}: ${p.message}`).join('\n')}`,
    );
    this.name = 'ConfigError';
  }
}
