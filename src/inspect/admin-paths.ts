// The admin endpoint's paths, defined once for the server and the CLI that asks it.
export const ADMIN_PATHS = Object.freeze({
  status: '/v1/status',
  skew: '/v1/skew',
  explain: '/v1/explain',
  history: '/v1/history',
  cordon: '/v1/cordon',
  uncordon: '/v1/uncordon',
  gate: '/v1/gate',
  /** 200 while skewgate serves ext_proc, 503 once it shuts down: the kubelet's httpGet probe (static pods). */
  healthz: '/healthz',
} as const);
