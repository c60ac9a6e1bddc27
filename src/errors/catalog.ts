// Every error code skewgate gives, defined once: what it means and what an operator does about
// it. An error class names its code from here (a code not in the catalog does not compile); a
// failed discovery round keeps its code and kind in the server's state, so that logs, the status
// and the fetch-errors metric read them instead of parsing messages. Pure.

export interface CatalogEntry {
  /** What happened, in a sentence. */
  readonly means: string;
  /** What the operator does about it. */
  readonly action: string;
}

export const ERRORS = Object.freeze({
  SKEWGATE_ERR_CONFIG: {
    means: 'the config file has problems, each listed with its path',
    action: 'fix each one; `skewgate validate --config <file>` lists them all (exit 2) without starting anything',
  },
  SKEWGATE_ERR_CREDENTIALS: {
    means: "an apiserver's credentials (token file, client certificate and key, kubeconfig) cannot be read or used",
    action: 'check that the files exist and are readable by skewgate, and that a kubeconfig names the context given',
  },
  SKEWGATE_ERR_DISCOVERY_FETCH: {
    means:
      'a request to an apiserver got no usable answer: no connection, TLS verification failed, a timeout, an error status, or a body past discovery.maxDocumentBytes',
    action:
      "read the message (it names the URL and what failed); for TLS, the apiserver's caFile and serverName; for 401/403, skewgate's RBAC (deploy/kubernetes/rbac.yaml)",
  },
  SKEWGATE_ERR_DISCOVERY_DOCUMENT: {
    means:
      'an apiserver answered a discovery document skewgate cannot read (not JSON, or a field of the wrong shape), or one past its bounds: more resources and group/versions than discovery.maxResources, or a single entry of more than 1 MiB of JSON (counted as `too_large`)',
    action:
      'the message names the document and the field, or the bound; an aggregated apiserver (APIService) serving it is the usual cause; raise discovery.maxResources if the cluster is genuine',
  },
  SKEWGATE_ERR_AGGREGATED_DECODE: {
    means: 'an aggregated discovery document (apidiscovery.k8s.io/v2) could not be decoded',
    action: 'the message names the field; skewgate keeps the last good view of that apiserver meanwhile',
  },
  SKEWGATE_ERR_CERT_SUBJECT: {
    means: "a client certificate's subject could not be parsed as kube-apiserver parses it",
    action:
      'the request is answered 401 (the gateway cannot state that identity to the apiserver); reissue the certificate with a subject kube-apiserver reads',
  },
  SKEWGATE_ERR_CLIENT_CA: {
    means: 'the client CA bundle (envoy.tls.clientCaFile) cannot be read or holds no certificate',
    action: "point envoy.tls.clientCaFile at the cluster CA's certificate (PEM); the last good bundle stays in use meanwhile",
  },
  SKEWGATE_ERR_ENVOY_NOT_FOUND: {
    means: 'no Envoy binary was found where skewgate looks ($SKEWGATE_ENVOY_BIN, then the tools directory)',
    action: 'run `npm run setup`, or set SKEWGATE_ENVOY_BIN to an Envoy binary',
  },
  SKEWGATE_ERR_ENVOY_START: {
    means: 'Envoy exited or refused its bootstrap',
    action: "the message holds Envoy's own last lines; `skewgate envoy-config` and `envoy --mode validate` reproduce it",
  },
  SKEWGATE_ERR_BOOTSTRAP: {
    means: "Envoy's bootstrap cannot be rendered from this config",
    action: '`skewgate validate` names the field; a config it passes never reaches this',
  },
  SKEWGATE_ERR_TELEMETRY: {
    means: 'OpenTelemetry could not be started with the settings given',
    action: 'check telemetry.* and the OTEL_* environment variables (docs/tracing.md)',
  },
  SKEWGATE_ERR_EXPLAIN_INPUT: {
    means: '`skewgate explain` (or POST /v1/explain) was given a request it cannot read',
    action: 'give a method and a path (`explain GET /apis/apps/v1/deployments`); headers as -H name:value',
  },
  SKEWGATE_ERR_ADMIN_UNREACHABLE: {
    means: "the running gateway's admin endpoint did not answer",
    action: 'check that `serve` runs with admin.listen set and that the address (or socket) is the one given',
  },
  SKEWGATE_ERR_ADMIN_REFUSED: {
    means: "the running gateway's admin endpoint refused the question (a 4xx answer), or the address given is not one it may listen on",
    action:
      'the message says why: an explain request needs a method and a path; a cordon names a member; an admin address is loopback or unix:',
  },
  SKEWGATE_ERR_CORDON: {
    means:
      'a cordon or uncordon was refused: the gateway runs without envoy.xds (nowhere to keep it, and Envoy balances over a fixed list), the apiserver is not a member, or the cordons file could not be written',
    action:
      'the message says which; name a member as `skewgate status` lists it; cordons need envoy.xds.directory, writable by skewgate (cordons.json is kept there)',
  },
  SKEWGATE_ERR_INTERNAL: {
    means: 'a failure with no code of its own: a defect in skewgate',
    action: 'report it with the log line (it carries the message and where it came from)',
  },
} satisfies Record<string, CatalogEntry>);

export type ErrorCode = keyof typeof ERRORS;

/** How a request to an apiserver failed: what the fetch-errors metric and the status read (never the message). */
export const FAILURE_KINDS = ['timeout', 'connection', 'tls', 'http', 'too_large', 'malformed', 'credentials', 'aborted', 'other'] as const;
export type FailureKind = (typeof FAILURE_KINDS)[number];

/** A failure as the server's state keeps it. */
export interface Failure {
  readonly code: ErrorCode;
  readonly kind: FailureKind;
  readonly message: string;
}

/** The kind each code always has; a fetch error says its own (its `kind`). */
const KIND_OF_CODE: Partial<Record<ErrorCode, FailureKind>> = {
  // Past a bound it says `too_large` itself (DiscoveryDocumentError.kind).
  SKEWGATE_ERR_DISCOVERY_DOCUMENT: 'malformed',
  SKEWGATE_ERR_AGGREGATED_DECODE: 'malformed',
  SKEWGATE_ERR_CREDENTIALS: 'credentials',
};

export function isErrorCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERRORS, code);
}

/** The code, kind and message of anything thrown: a code outside the catalog is SKEWGATE_ERR_INTERNAL. */
export function failureOf(err: unknown): Failure {
  const e = err as { code?: unknown; kind?: unknown } | null;
  const code = isErrorCode(e?.code) ? e.code : 'SKEWGATE_ERR_INTERNAL';
  const own = e?.kind;
  const kind = (FAILURE_KINDS as readonly unknown[]).includes(own) ? (own as FailureKind) : (KIND_OF_CODE[code] ?? 'other');
  return Object.freeze({ code, kind, message: err instanceof Error ? err.message : String(err) });
}
