#!/usr/bin/env bash
# Every Go-built tool the tests use, in one go: the lab (lab/build.sh), Jaeger, promtool, helm,
# capi-hook-check, the node's programs (lab/build.sh --node), and with --images the compose demo's etcd programs. Downloads run beside the compiles: a --fetch pass
# of every script goes ahead in the background (network), while the builds compile one after the
# other (each already uses every core), so a cold machine waits for the network only once.
# Idempotent: what is built and current is kept (lab/tools-dir.sh's keys).
#   lab/build-all.sh [--images]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=("lab/build.sh" "lab/build-jaeger.sh" "lab/build-promtool.sh" "lab/build-helm.sh" "lab/build-capi-hooks.sh" "lab/build.sh --node")
[ "${1:-}" = "--images" ] && steps+=("lab/build.sh --images")
start=$(date +%s)
fetch_log=$(mktemp)
(
  for s in "${steps[@]}"; do
    read -r -a cmd <<<"$s"
    # shellcheck disable=SC2086
    bash "${cmd[0]}" --fetch "${cmd[@]:1}" || printf 'lab/build-all: fetch for %s failed (the build will fetch again)\n' "$s"
  done
) >"$fetch_log" 2>&1 &
fetcher=$!
for s in "${steps[@]}"; do
  read -r -a cmd <<<"$s"
  bash "${cmd[0]}" "${cmd[@]:1}"
done
wait "$fetcher" || true
grep 'failed' "$fetch_log" >&2 || true
rm -f "$fetch_log"
printf 'lab/build-all: every tool ready in %s s\n' "$(( $(date +%s) - start ))" >&2
