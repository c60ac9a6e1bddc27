// TypeScript shapes of the ext_proc messages as @grpc/proto-loader hands them over (decoded, with
// keepCase/defaults/oneofs) and as skewgate writes them. Only the fields skewgate touches.

/** config.core.v3.HeaderValue. Envoy fills raw_value; older Envoys or other clients may use value. */
export interface HeaderValueMsg {
  readonly key?: string;
  readonly value?: string;
  readonly raw_value?: Uint8Array | string;
}

export interface HeaderMapMsg {
  readonly headers?: readonly HeaderValueMsg[] | null;
}

/** What skewgate writes: raw_value only, never value (Envoy rejects both) and no append flags. */
export interface HeaderValueOptionOut {
  readonly header: { readonly key: string; readonly raw_value: Uint8Array };
  /** google.protobuf.BoolValue; ext_proc reads only this flag: unset or false replaces, true adds a line. */
  readonly append?: { readonly value: boolean };
}

export interface HeaderMutationOut {
  readonly set_headers?: readonly HeaderValueOptionOut[];
  readonly remove_headers?: readonly string[];
}

export interface CommonResponseOut {
  readonly header_mutation?: HeaderMutationOut;
  readonly clear_route_cache?: boolean;
}

export interface HeadersResponseOut {
  readonly response?: CommonResponseOut;
}

export interface BodyResponseOut {
  readonly response?: CommonResponseOut;
}

export interface TrailersResponseOut {
  readonly header_mutation?: HeaderMutationOut;
}

export interface ImmediateResponseOut {
  readonly status: { readonly code: number };
  readonly headers?: HeaderMutationOut;
  readonly body?: Uint8Array;
  readonly details?: string;
}

/** A ProcessingResponse with exactly one member of the `response` oneof set. */
export type ProcessingResponseOut =
  | { readonly request_headers: HeadersResponseOut }
  | { readonly response_headers: HeadersResponseOut }
  | { readonly request_body: BodyResponseOut }
  | { readonly response_body: BodyResponseOut }
  | { readonly request_trailers: TrailersResponseOut }
  | { readonly response_trailers: TrailersResponseOut }
  | { readonly immediate_response: ImmediateResponseOut };

/** The `request` oneof of ProcessingRequest, i.e. the phase Envoy is asking about. */
export type RequestPhase =
  'request_headers' | 'response_headers' | 'request_body' | 'response_body' | 'request_trailers' | 'response_trailers';

export interface HttpHeadersMsg {
  readonly headers?: HeaderMapMsg | null;
  readonly end_of_stream?: boolean;
}

/** A decoded ProcessingRequest; `request` names the oneof member that is set. */
export interface ProcessingRequestMsg {
  readonly request?: RequestPhase | string;
  readonly request_headers?: HttpHeadersMsg | null;
  readonly response_headers?: HttpHeadersMsg | null;
  readonly observability_mode?: boolean;
}

/** A decoded ProcessingResponse as a client (the test helper, a debugging tool) receives it. */
export interface ProcessingResponseMsg {
  readonly response?: RequestPhase | 'immediate_response' | string;
  readonly request_headers?: {
    readonly response?: {
      readonly status?: string;
      readonly header_mutation?: {
        readonly set_headers?: readonly {
          readonly header?: { readonly key?: string; readonly value?: string; readonly raw_value?: Uint8Array } | null;
          readonly append?: { readonly value?: boolean } | null;
          readonly append_action?: string;
        }[];
        readonly remove_headers?: readonly string[];
      } | null;
      readonly clear_route_cache?: boolean;
    } | null;
  } | null;
  readonly immediate_response?: {
    readonly status?: { readonly code?: number } | null;
    readonly headers?: {
      readonly set_headers?: readonly {
        readonly header?: { readonly key?: string; readonly value?: string; readonly raw_value?: Uint8Array } | null;
      }[];
    } | null;
    readonly body?: Uint8Array;
    readonly details?: string;
  } | null;
  readonly [other: string]: unknown;
}

/** ProcessingRequest's `request` oneof, in field order: fields 2 to 7. */
export const REQUEST_PHASES: readonly RequestPhase[] = [
  'request_headers',
  'response_headers',
  'request_body',
  'response_body',
  'request_trailers',
  'response_trailers',
];
