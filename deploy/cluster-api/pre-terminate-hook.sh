#!/usr/bin/env bash
# Holds the deletion of a control-plane Machine (Cluster API, KubeadmControlPlane) until skewgate's
# gate says its apiserver may leave: nothing only it serves still in use, not the last one ready,
# the plane otherwise sound (`skewgate gate --removing`). Cluster API waits before it drains and
# deletes a Machine while any `pre-terminate.delete.hook.machine.cluster.x-k8s.io/...` annotation
# is on it; this script removes skewgate's once the gate proceeds. docs/cluster-api.md says how the
# annotation gets onto the Machines (the KubeadmControlPlane's machineTemplate) and where this runs.
#
#   pre-terminate-hook.sh [--once] [--interval SECONDS] [--namespace NS] [-- SKEWGATE-GATE-ARGS...]
#
# kubectl talks to the management cluster (KUBECONFIG); `skewgate gate` to a gateway of the
# workload cluster (its admin endpoint: run this on a control-plane node, or pass --admin). The
# Machine's apiserver is named to the gate by its Node's name, else its first InternalIP. Every
# decision is a line on stderr. Exit: 0 (--once: every hook looked at); 2 bad usage.
set -euo pipefail

HOOK=pre-terminate.delete.hook.machine.cluster.x-k8s.io/skewgate
SKEWGATE=${SKEWGATE:-skewgate}
once=0 interval=10 ns_args=(--all-namespaces)
while [ $# -gt 0 ]; do
  case $1 in
    --once) once=1 ;;
    --interval) interval=${2:?--interval needs seconds}; shift ;;
    --namespace) ns_args=(--namespace "${2:?--namespace needs a name}"); shift ;;
    --) shift; break ;;
    *) echo "pre-terminate-hook: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
  shift
done
gate_args=("$@")
log() { printf '%s pre-terminate-hook: %s\n' "$(date -u +%FT%TZ)" "$*" >&2; }

# One pass: every control-plane Machine being deleted that still carries skewgate's hook.
pass() {
  local rows
  rows=$(kubectl get machines "${ns_args[@]}" -l cluster.x-k8s.io/control-plane -o jsonpath="{range .items[?(@.metadata.deletionTimestamp)]}{.metadata.namespace}{'\t'}{.metadata.name}{'\t'}{.status.nodeRef.name}{'\t'}{.status.addresses[?(@.type=='InternalIP')].address}{'\n'}{end}") || {
    log "cannot list Machines (kubectl failed); trying again"
    return 0
  }
  while IFS=$'\t' read -r ns name node ips; do
    [ -n "$name" ] || continue
    # The annotation's value is not looked at; its presence is the hook (as Cluster API reads it).
    kubectl get machine -n "$ns" "$name" -o jsonpath="{.metadata.annotations}" | grep -q "\"$HOOK\"" || continue
    local member=${node:-${ips%% *}}
    if [ -z "$member" ]; then
      log "$ns/$name: no Node and no InternalIP to name its apiserver by; leaving the hook (remove it by hand: kubectl annotate machine -n $ns $name $HOOK-)"
      continue
    fi
    local out
    if out=$("$SKEWGATE" gate --removing "$member" "${gate_args[@]}" 2>&1); then
      kubectl annotate machine -n "$ns" "$name" "$HOOK-" >/dev/null
      log "$ns/$name ($member): gate proceeds; hook removed, Cluster API goes on deleting it"
    else
      log "$ns/$name ($member): gate holds; asking again in ${interval}s: $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-400)"
    fi
  done <<<"$rows"
}

while :; do
  pass
  [ "$once" = 1 ] && exit 0
  sleep "$interval"
done
