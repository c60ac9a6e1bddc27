#!/usr/bin/env bash
# Builds Prometheus' promtool from the Go module proxy into .tools/lab/bin (git-ignored), for the
# tests that check deploy/monitoring's alert rules (`promtool check rules`, `promtool test rules`).
# Idempotent: a promtool that reports the pinned version is kept.
#   lab/build-promtool.sh [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
source lab/versions.env
: "${PROMETHEUS_VERSION:?PROMETHEUS_VERSION missing from lab/versions.env}"
# v0.3NN.M → 3.NN.M, the version promtool reports.
minor=${PROMETHEUS_VERSION#0.}; minor=${minor%%.*}
RELEASE="3.$((10#$minor - 300)).${PROMETHEUS_VERSION##*.}"
JOBS=$(nproc)
[ "${1:-}" = "--jobs" ] && JOBS=${2:?--jobs needs a number}
ROOT=$PWD/.tools/lab
OUT=$ROOT/bin/promtool-$PROMETHEUS_VERSION
DIR=$ROOT/src/promtool-$PROMETHEUS_VERSION
MODULE=github.com/prometheus/prometheus
mkdir -p "$ROOT/bin"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

# shellcheck source=go-wrapper.sh
source lab/go-wrapper.sh
log() { printf 'lab/build-promtool: %s\n' "$*" >&2; }

if [ -x "$OUT" ] && "$OUT" --version 2>/dev/null | grep -q "version $RELEASE"; then
  log "promtool $PROMETHEUS_VERSION: cached ($OUT)"
  exit 0
fi
start=$(date +%s)
go_wrapper_module "$MODULE" "$PROMETHEUS_VERSION" "$DIR" promtool
log "building $MODULE/cmd/promtool v$PROMETHEUS_VERSION"
(cd "$DIR" && go build -p "$JOBS" -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$RELEASE" \
  -o "$OUT.tmp" "$MODULE/cmd/promtool")
mv "$OUT.tmp" "$OUT"
log "built $(basename "$OUT") in $(( $(date +%s) - start )) s: $("$OUT" --version 2>&1 | head -1)"
