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

log() { printf 'lab/build-promtool: %s\n' "$*" >&2; }

if [ -x "$OUT" ] && "$OUT" --version 2>/dev/null | grep -q "version $RELEASE"; then
  log "promtool $PROMETHEUS_VERSION: cached ($OUT)"
  exit 0
fi
start=$(date +%s)
if [ ! -f "$DIR/.ready" ]; then
  log "preparing the wrapper module for $MODULE v$PROMETHEUS_VERSION"
  rm -rf "$DIR"; mkdir -p "$DIR"
  (
    cd "$DIR"
    go mod init local/skewgate-lab-promtool >/dev/null 2>&1
    # The module's own replace directives (a dependency cannot inherit them).
    gomod=$(go mod download -json "$MODULE@v$PROMETHEUS_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
    [ -n "$gomod" ] || { log "cannot download $MODULE@v$PROMETHEUS_VERSION"; exit 1; }
    sed -n 's/^replace[[:space:]]\+\([^[:space:]]\+\)[[:space:]]*=>[[:space:]]*\([^[:space:]]\+\)[[:space:]]\+\([^[:space:]]\+\)[[:space:]]*$/\1=\2@\3/p' "$gomod" |
      while read -r r; do go mod edit -replace="$r"; done
    go get "$MODULE@v$PROMETHEUS_VERSION" >/dev/null 2>&1 || go get "$MODULE@v$PROMETHEUS_VERSION"
  )
  touch "$DIR/.ready"
fi
log "building $MODULE/cmd/promtool v$PROMETHEUS_VERSION"
(cd "$DIR" && go build -p "$JOBS" -trimpath \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=$RELEASE" \
  -o "$OUT.tmp" "$MODULE/cmd/promtool")
mv "$OUT.tmp" "$OUT"
log "built $(basename "$OUT") in $(( $(date +%s) - start )) s: $("$OUT" --version 2>&1 | head -1)"
