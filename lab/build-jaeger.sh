#!/usr/bin/env bash
# Builds Jaeger v2 (the OpenTelemetry-Collector-based `jaeger` binary: OTLP receiver, in-memory
# storage, query HTTP API) from the Go module proxy into $SKEWGATE_TOOLS/lab/bin/jaeger-$JAEGER_VERSION
# (default .tools/; lab/tools-dir.sh).
# The tracing end-to-end test (test/e2e/tracing.test.ts) runs it on loopback ports.
#
# Jaeger publishes its Go module under v1 tags only: module version v1.N.0 is the same commit as
# the v2 release of the same date (v1.76.0 = Jaeger v2.13.0); the v2 binary is cmd/jaeger.
# Its go.mod has a replace directive, which `go install pkg@version` refuses, hence a wrapper
# module that repeats it. The UI is not in the module zip (it is a git submodule built with npm):
# this binary serves the HTTP API (/api/traces, /api/v3/...) and a placeholder page; the docker
# image jaegertracing/jaeger has the UI (docs/tracing.md).
#   lab/build-jaeger.sh [--jobs N]      N = parallel package builds (default: all cores)
# Idempotent: a binary built by this script as it is now (its .key) that answers --help is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=go-wrapper.sh
source lab/go-wrapper.sh jaeger "$@"
: "${JAEGER_VERSION:?JAEGER_VERSION missing from lab/versions.env}"
OUT=$LAB/bin/jaeger-$JAEGER_VERSION
MODULE=github.com/jaegertracing/jaeger

answers_help() { "$1" --help >/dev/null 2>&1; }
if go_tool_cached jaeger "$JAEGER_VERSION" answers_help; then
  log "jaeger $JAEGER_VERSION: cached ($OUT)"
  exit 0
fi
go_tool_build jaeger "$JAEGER_VERSION" "$MODULE" "$MODULE/cmd/jaeger"
