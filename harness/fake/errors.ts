// Kubernetes Status failures of the fake apiserver; the same shape as src/k8s/status.ts, with the
// extra reasons (401, 405, 409, 410, 415, 422) a real apiserver also gives.

export interface FakeStatus {
  readonly kind: 'Status';
  readonly apiVersion: 'v1';
  readonly metadata: Record<string, never>;
  readonly status: 'Failure';
  readonly message: string;
  readonly reason: string;
  readonly details?: Record<string, unknown>;
  readonly code: number;
}

export class FakeApiError extends Error {
  constructor(
    readonly code: number,
    readonly reason: string,
    message: string,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }

  toStatus(): FakeStatus {
    return {
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: this.message,
      reason: this.reason,
      ...(this.details ? { details: this.details } : {}),
      code: this.code,
    };
  }
}

export const notFound = (resource: string, name: string, group: string): FakeApiError =>
  new FakeApiError(404, 'NotFound', `${resource}${group ? `.${group}` : ''} "${name}" not found`, { name, group, kind: resource });
export const badRequest = (message: string): FakeApiError => new FakeApiError(400, 'BadRequest', message);
export const invalid = (message: string): FakeApiError => new FakeApiError(422, 'Invalid', message);
