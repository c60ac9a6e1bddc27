#!/usr/bin/env bash
# Everything every test tier needs, installed and built once (what .ci/run does before the tiers):
# npm dependencies and Envoy (scripts/setup.sh) beside the Go builds (lab/build-all.sh, which
# downloads beside its own compiles), then the compose demo's stand-in images, which need the
# binaries. On a warm machine every step only checks what it has. Prints how long each took.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
log() { printf 'setup-all: %s\n' "$*" >&2; }
npm_log=$(mktemp)
bash scripts/setup.sh >"$npm_log" 2>&1 &
npm_pid=$!
bash lab/build-all.sh --images
go_done=$(date +%s)
if ! wait "$npm_pid"; then
  cat "$npm_log" >&2
  rm -f "$npm_log"
  log "scripts/setup.sh failed"
  exit 1
fi
cat "$npm_log" >&2
rm -f "$npm_log"
log "npm dependencies, Envoy and the Go-built tools ready in $((go_done - start)) s"
bash scripts/demo-images.sh
log "everything ready in $(($(date +%s) - start)) s"
