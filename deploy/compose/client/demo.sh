#!/bin/sh
# skewgate's scripted demo, played with kubectl only. POSIX sh: dash in the client image, and
# any sh (dash, bash) outside containers, e.g. against `skewgate-lab lab up` (test/cluster/suites/compose-demo.ts).
#
#   demo.sh setup  wait until $SETUP_URL answers /readyz, then `kubectl apply -f $RBAC_FILE`
#   demo.sh demo   wait for both gateways; create a MutatingAdmissionPolicy (served by
#                  kube-apiserver 1.36 only) through skewgate; then $ROUNDS times
#                  `kubectl get mutatingadmissionpolicies` through skewgate and through the plain
#                  round-robin Envoy, and a tally per gateway
#
# Exit codes: 0 done (demo: no request through skewgate failed; the baseline's 404s are what the
# demo shows, not a failure); 1 failed (an endpoint never became ready, kubectl apply failed, or a
# request through skewgate failed); 2 usage or configuration error.
#
# Environment (defaults: the compose demo's):
#   PKI_DIR        /pki                         ca.crt (trusted CA) and admin.token (bearer token)
#   GATEWAY_URL    https://envoy:6443           Envoy with skewgate
#   BASELINE_URL   https://envoy-baseline:6443  Envoy without skewgate: plain round robin
#   SETUP_URL      $GATEWAY_URL                 where `setup` applies the RBAC objects
#   RBAC_FILE      /deploy/rbac.yaml
#   KUBECTL        kubectl
#   ROUNDS         12
#   READY_TIMEOUT  300                          seconds to wait for each endpoint
#   JAEGER_UI, ENVOY_ADMIN, METRICS_URL         the links printed at the end
set -eu

PKI_DIR=${PKI_DIR:-/pki}
GATEWAY_URL=${GATEWAY_URL:-https://envoy:6443}
BASELINE_URL=${BASELINE_URL:-https://envoy-baseline:6443}
SETUP_URL=${SETUP_URL:-$GATEWAY_URL}
RBAC_FILE=${RBAC_FILE:-/deploy/rbac.yaml}
KUBECTL=${KUBECTL:-kubectl}
ROUNDS=${ROUNDS:-12}
READY_TIMEOUT=${READY_TIMEOUT:-300}
JAEGER_UI=${JAEGER_UI:-http://localhost:16686}
ENVOY_ADMIN=${ENVOY_ADMIN:-http://localhost:9901}
METRICS_URL=${METRICS_URL:-http://localhost:9464/metrics}

POLICY=skewgate-demo
RESOURCE=mutatingadmissionpolicies
RESOURCE_PATH=/apis/admissionregistration.k8s.io/v1/$RESOURCE

# Progress on stdout, tagged with the mode (compose interleaves the setup and client services' logs).
say() { printf '[%s] %s\n' "$MODE" "$*"; }
die() {
  code=$1
  shift
  printf '[%s] error: %s\n' "$MODE" "$*" >&2
  exit "$code"
}
usage() {
  printf 'usage: %s setup|demo   (environment: see the head of this script)\n' "$0" >&2
  exit 2
}
now() { date +%s; }
# The last non-empty line of a file, shortened: kubectl's final error line is the one that says why.
last_line() { grep -v '^[[:space:]]*$' "$1" | tail -n 1 | cut -c 1-200; }

MODE=${1:-}
[ $# -eq 1 ] || usage
case $MODE in setup | demo) ;; *) usage ;; esac

case $ROUNDS in '' | *[!0-9]* | 0*) die 2 "ROUNDS must be a positive integer (got '$ROUNDS')" ;; esac
case $READY_TIMEOUT in '' | *[!0-9]*) die 2 "READY_TIMEOUT must be a number of seconds (got '$READY_TIMEOUT')" ;; esac
command -v "$KUBECTL" >/dev/null 2>&1 || die 2 "kubectl not found (KUBECTL=$KUBECTL)"
[ -r "$PKI_DIR/ca.crt" ] || die 2 "$PKI_DIR/ca.crt is missing or unreadable (PKI_DIR=$PKI_DIR)"
[ -r "$PKI_DIR/admin.token" ] || die 2 "$PKI_DIR/admin.token is missing or unreadable (PKI_DIR=$PKI_DIR)"
# kubeconfig resolves relative paths against its own folder (a temp dir): make PKI_DIR absolute.
PKI_DIR=$(cd "$PKI_DIR" && pwd)
for value in "$PKI_DIR" "$GATEWAY_URL" "$BASELINE_URL" "$SETUP_URL"; do
  # They go into YAML double-quoted strings below.
  case $value in *'"'* | *\\*) die 2 "quotes and backslashes are not supported in '$value'" ;; esac
done

WORK=$(mktemp -d "${TMPDIR:-/tmp}/skewgate-demo.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
trap 'exit 1' INT TERM
KUBECONFIG_FILE=$WORK/kubeconfig

# One context per endpoint, all as the cluster admin by token. tokenFile, not token: the secret
# stays in $PKI_DIR. Each context gets its own discovery cache below, as a user of that URL would.
cluster() {
  printf -- '- name: %s\n  cluster:\n    server: "%s"\n    certificate-authority: "%s/ca.crt"\n' "$1" "$2" "$PKI_DIR"
}
context() {
  printf -- '- name: %s\n  context:\n    cluster: %s\n    user: admin\n' "$1" "$1"
}
{
  printf 'apiVersion: v1\nkind: Config\nclusters:\n'
  cluster skewgate "$GATEWAY_URL"
  cluster baseline "$BASELINE_URL"
  cluster setup "$SETUP_URL"
  printf 'users:\n- name: admin\n  user:\n    tokenFile: "%s/admin.token"\n' "$PKI_DIR"
  printf 'contexts:\n'
  context skewgate
  context baseline
  context setup
  printf 'current-context: skewgate\n'
} >"$KUBECONFIG_FILE"
chmod 600 "$KUBECONFIG_FILE"

# kubectl against one context; every call is bounded.
kc() {
  ctx=$1
  shift
  "$KUBECTL" --kubeconfig "$KUBECONFIG_FILE" --context "$ctx" --cache-dir "$WORK/cache-$ctx" \
    --request-timeout=10s "$@"
}

# wait_until WHAT STATE CMD...: runs CMD every 2 s until it succeeds (its output is left in
# $WORK/wait.out), e.g. "skewgate gateway URL" "ready": a progress line every 10 s, and exit 1 with
# the last answer when it is not STATE within READY_TIMEOUT seconds.
wait_until() {
  what=$1
  state=$2
  shift 2
  started=$(now)
  next_note=0
  while :; do
    if "$@" >"$WORK/wait.out" 2>&1; then
      say "$what: $state after $(($(now) - started)) s"
      return 0
    fi
    waited=$(($(now) - started))
    last=$(last_line "$WORK/wait.out")
    # The first failure always says so, even when that one attempt outlasted READY_TIMEOUT.
    if [ "$waited" -ge "$next_note" ]; then
      say "$what: not $state yet (${waited} s of $READY_TIMEOUT s): ${last:-no answer}"
      next_note=$((waited + 10))
    fi
    if [ "$waited" -ge "$READY_TIMEOUT" ]; then
      die 1 "$what: not $state within $READY_TIMEOUT s (READY_TIMEOUT); last answer: ${last:-none}"
    fi
    sleep 2
  done
}

# Succeeds when the endpoint's /readyz says ok (kubectl fails on any other answer).
readyz() { kc "$1" get --raw /readyz; }
# Succeeds when a list of the 1.36-only resource succeeds through the context.
lists_resource() { kc "$1" get --raw "$RESOURCE_PATH?limit=1"; }

setup() {
  [ -r "$RBAC_FILE" ] || die 2 "RBAC_FILE $RBAC_FILE is missing or unreadable"
  wait_until "setup target $SETUP_URL" ready readyz setup
  # Retried within the same bound: just after /readyz the `default` namespace a RoleBinding
  # lives in can still be on its way.
  wait_until "kubectl apply -f $RBAC_FILE" applied kc setup apply -f "$RBAC_FILE"
  sed "s/^/[$MODE]   /" "$WORK/wait.out"
  say "done"
}

# Sets RESULT (OK, 404, no-type or other) and DETAIL for one `kubectl get` through a context.
attempt() {
  if kc "$1" get "$RESOURCE" -o name >"$WORK/get.out" 2>"$WORK/get.err"; then
    RESULT=OK
    DETAIL=$(head -n 1 "$WORK/get.out")
    return 0
  fi
  DETAIL=$(last_line "$WORK/get.err")
  case $DETAIL in
    *'(NotFound)'* | *'could not find the requested resource'*) RESULT=404 ;;
    # kubectl's discovery came from an apiserver that does not serve the resource: the same
    # false "not found", one step earlier.
    *"doesn't have a resource type"*) RESULT=no-type ;;
    *) RESULT=other ;;
  esac
}

demo() {
  say "skewgate at $GATEWAY_URL, plain round-robin Envoy at $BASELINE_URL"
  wait_until "skewgate gateway $GATEWAY_URL" ready readyz skewgate
  wait_until "baseline gateway $BASELINE_URL" ready readyz baseline
  # The gateways are up; the demo also needs an apiserver that serves the resource (1.36).
  wait_until "an apiserver serving $RESOURCE, asked through skewgate" found lists_resource skewgate

  # Inert without a MutatingAdmissionPolicyBinding: the demo needs an object of a kind that only
  # kube-apiserver 1.36 serves, not a policy that acts.
  cat >"$WORK/policy.yaml" <<EOF
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: $POLICY
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["configmaps"]
  failurePolicy: Ignore
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"skewgate-demo": "seen"}}}'
EOF
  say "creating MutatingAdmissionPolicy $POLICY through skewgate (kubectl apply)"
  if ! kc skewgate apply -f "$WORK/policy.yaml" >"$WORK/apply.out" 2>&1; then
    sed "s/^/[$MODE]   /" "$WORK/apply.out" >&2
    die 1 "kubectl apply of MutatingAdmissionPolicy $POLICY through skewgate failed: $(last_line "$WORK/apply.out")"
  fi
  sed "s/^/[$MODE]   /" "$WORK/apply.out"

  say "$ROUNDS rounds of \`kubectl get $RESOURCE\`, through skewgate and through plain round robin"
  sg_ok=0 sg_404=0 sg_notype=0 sg_other=0
  bl_ok=0 bl_404=0 bl_notype=0 bl_other=0
  round=1
  while [ "$round" -le "$ROUNDS" ]; do
    attempt skewgate
    sg=$RESULT sg_detail=$DETAIL
    case $RESULT in OK) sg_ok=$((sg_ok + 1)) ;; 404) sg_404=$((sg_404 + 1)) ;; no-type) sg_notype=$((sg_notype + 1)) ;; *) sg_other=$((sg_other + 1)) ;; esac
    attempt baseline
    bl=$RESULT bl_detail=$DETAIL
    case $RESULT in OK) bl_ok=$((bl_ok + 1)) ;; 404) bl_404=$((bl_404 + 1)) ;; no-type) bl_notype=$((bl_notype + 1)) ;; *) bl_other=$((bl_other + 1)) ;; esac
    line=$(printf 'round %2d/%d  skewgate %-7s  plain %s' "$round" "$ROUNDS" "$sg" "$bl")
    [ "$sg" = OK ] || line="$line  skewgate: $sg_detail"
    [ "$bl" = OK ] || line="$line  plain: $bl_detail"
    say "$line"
    round=$((round + 1))
  done

  say "tally of $ROUNDS \`kubectl get $RESOURCE\` per gateway (404 = not found; no-type = kubectl's discovery came from an apiserver without it):"
  say "  skewgate  $GATEWAY_URL  OK $sg_ok  404 $sg_404  no-type $sg_notype  other $sg_other"
  say "  baseline  $BASELINE_URL  OK $bl_ok  404 $bl_404  no-type $bl_notype  other $bl_other"
  if [ $((bl_404 + bl_notype)) -gt 0 ]; then
    say "the baseline's not-founds are the false 404s of a mixed-version control plane: the request reached an apiserver that does not serve $RESOURCE yet; skewgate sent it to one that does"
  fi
  say "where to look:"
  say "  Jaeger UI         $JAEGER_UI  (service skewgate: the routing decision; kube-apiserver's spans in the same trace)"
  say "  Envoy admin       $ENVOY_ADMIN  (/clusters: upstream health; /stats?filter=ext_proc)"
  say "  skewgate metrics  $METRICS_URL"
  say "an upgrade step: docker compose stop kas-1 && docker compose --profile upgrade up -d kas-1-upgraded; then run this again: docker compose run --rm client"

  failures=$((sg_404 + sg_notype + sg_other))
  if [ "$failures" -gt 0 ]; then
    die 1 "$failures of $ROUNDS requests through skewgate did not succeed"
  fi
  say "skewgate: $sg_ok of $ROUNDS OK"
}

case $MODE in
  setup) setup ;;
  demo) demo ;;
esac
