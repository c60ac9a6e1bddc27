#!/usr/bin/env bash
# Builds Prometheus' promtool from the Go module proxy into .tools/lab/bin (git-ignored), for the
# tests that check deploy/monitoring's alert rules (`promtool check rules`, `promtool test rules`).
# Idempotent: a promtool that reports the pinned version is kept.
#   lab/build-promtool.sh [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=go-wrapper.sh
source lab/go-wrapper.sh promtool "$@"
: "${PROMETHEUS_VERSION:?PROMETHEUS_VERSION missing from lab/versions.env}"
# v0.3NN.M → 3.NN.M, the version promtool reports.
minor=${PROMETHEUS_VERSION#0.}; minor=${minor%%.*}
RELEASE="3.$((10#$minor - 300)).${PROMETHEUS_VERSION##*.}"
OUT=$LAB/bin/promtool-$PROMETHEUS_VERSION
MODULE=github.com/prometheus/prometheus

if [ -x "$OUT" ] && "$OUT" --version 2>/dev/null | grep -q "version $RELEASE"; then
  log "promtool $PROMETHEUS_VERSION: cached ($OUT)"
  exit 0
fi
go_tool_build promtool "$PROMETHEUS_VERSION" "$MODULE" "$MODULE/cmd/promtool" \
  "-X github.com/prometheus/common/version.Version=$RELEASE"
log "$("$OUT" --version 2>&1 | head -1)"
