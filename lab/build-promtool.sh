#!/usr/bin/env bash
# Builds Prometheus' promtool from the Go module proxy into $SKEWGATE_TOOLS/lab/bin (default .tools/, git-ignored), for the
# tests that check deploy/monitoring's alert rules (`promtool check rules`, `promtool test rules`).
# Idempotent: a promtool built by this script as it is now (its .key) that reports the pinned
# version is kept.
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

reports_release() { grep -q "version $RELEASE" <<<"$("$1" --version 2>/dev/null || true)"; }
if go_tool_cached promtool "$PROMETHEUS_VERSION" reports_release; then
  log "promtool $PROMETHEUS_VERSION: cached ($OUT)"
  exit 0
fi
# remove_all_sd: Prometheus' own build tag that leaves out its service-discovery plugins (the
# clouds' SDKs, ~30 plugins): promtool only checks rule files here, and they were most of its cold
# compile.
go_tool_build promtool "$PROMETHEUS_VERSION" "$MODULE" "$MODULE/cmd/promtool" \
  "-X github.com/prometheus/common/version.Version=$RELEASE" remove_all_sd
[ "$FETCH" = 1 ] || log "$("$OUT" --version 2>&1 | head -1)"
