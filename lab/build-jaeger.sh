#!/usr/bin/env bash
# Builds Jaeger v2 (the OpenTelemetry-Collector-based `jaeger` binary: OTLP receiver, in-memory
# storage, query HTTP API) from the Go module proxy into .tools/lab/bin/jaeger-$JAEGER_VERSION.
# The tracing end-to-end test (test/e2e/tracing.test.ts) runs it on loopback ports.
#
# Jaeger publishes its Go module under v1 tags only: module version v1.N.0 is the same commit as
# the v2 release of the same date (v1.76.0 = Jaeger v2.13.0); the v2 binary is cmd/jaeger.
# Its go.mod has a replace directive, which `go install pkg@version` refuses, hence a wrapper
# module that repeats it. The UI is not in the module zip (it is a git submodule built with npm):
# this binary serves the HTTP API (/api/traces, /api/v3/...) and a placeholder page; the docker
# image jaegertracing/jaeger has the UI (docs/tracing.md).
#   lab/build-jaeger.sh [--jobs N]      N = parallel package builds (default: all cores)
# Idempotent: a binary that is already there is kept (its name carries the version).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
source lab/versions.env
: "${JAEGER_VERSION:?JAEGER_VERSION missing from lab/versions.env}"
JOBS=$(nproc)
[ "${1:-}" = "--jobs" ] && JOBS=${2:?--jobs needs a number}
ROOT=$PWD/.tools/lab
BIN=$ROOT/bin
OUT=$BIN/jaeger-$JAEGER_VERSION
DIR=$ROOT/src/jaeger-$JAEGER_VERSION
MODULE=github.com/jaegertracing/jaeger
mkdir -p "$BIN"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

# shellcheck source=go-wrapper.sh
source lab/go-wrapper.sh
log() { printf 'lab/build-jaeger: %s\n' "$*" >&2; }

if [ -x "$OUT" ] && "$OUT" --help >/dev/null 2>&1; then
  log "jaeger $JAEGER_VERSION: cached ($OUT)"
  exit 0
fi

start=$(date +%s)
go_wrapper_module "$MODULE" "$JAEGER_VERSION" "$DIR" jaeger
log "building $MODULE/cmd/jaeger v$JAEGER_VERSION"
(cd "$DIR" && go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$OUT.tmp" "$MODULE/cmd/jaeger")
mv "$OUT.tmp" "$OUT"
log "built $(basename "$OUT") in $(( $(date +%s) - start )) s ($(du -h "$OUT" | cut -f1))"
