// The lab's error: what failed, and the tail of the process's log when one is to blame.

export class LabError extends Error {
  readonly code = 'SKEWGATE_ERR_LAB';
  constructor(
    message: string,
    readonly logTail?: string,
  ) {
    super(logTail === undefined ? message : `${message}\n--- log (tail) ---\n${logTail}`);
    this.name = 'LabError';
  }
}
