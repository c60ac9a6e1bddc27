#!/usr/bin/env bash
# Builds capi-hook-check (lab/capi-hooks/main.go, our own source) against the Cluster API Runtime
# SDK's published Go types, sigs.k8s.io/cluster-api/api from the Go module proxy, into
# $SKEWGATE_TOOLS/lab/bin (default .tools/, git-ignored): it checks a Runtime Extension's HTTPS
# endpoint (Discovery, then the upgrade hooks) against those types. Idempotent: a capi-hook-check
# built by this script and main.go as they are now (its .key) that reports the pinned version is kept.
#   lab/build-capi-hooks.sh [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=go-wrapper.sh
source lab/go-wrapper.sh capi-hooks "$@"
: "${CAPI_API_VERSION:?CAPI_API_VERSION missing from lab/versions.env}"
NAME=capi-hook-check
OUT=$LAB/bin/$NAME-$CAPI_API_VERSION
MODULE=sigs.k8s.io/cluster-api/api
SRC=lab/capi-hooks/main.go

# The program is ours, not the module's: its source belongs in the key too (go-wrapper.sh's key is
# this script, go-wrapper.sh and the version), and late binding makes go_tool_cached and
# go_tool_build use this one. The binary keeps its NAME-VERSION path.
go_tool_key() { tool_key "$LAB_SCRIPT" lab/go-wrapper.sh "$SRC" "$1" "$2"; }

reports_version() { [ "$("$1" --version 2>/dev/null)" = "$NAME $CAPI_API_VERSION" ]; }
if go_tool_cached "$NAME" "$CAPI_API_VERSION" reports_version; then
  log "$NAME $CAPI_API_VERSION: cached ($OUT)"
  exit 0
fi
# The wrapper module (which requires the module at the pinned version) is the main module here:
# main.go goes into its root and go_tool_build builds "." there. A rename keeps a --fetch running
# beside the build from seeing a half-copied file.
dir=$LAB/src/$NAME-$CAPI_API_VERSION
go_wrapper_module "$MODULE" "$CAPI_API_VERSION" "$dir" "$NAME"
cp "$SRC" "$dir/main.go.$$" && mv "$dir/main.go.$$" "$dir/main.go"
go_tool_build "$NAME" "$CAPI_API_VERSION" "$MODULE" . "-X main.version=$CAPI_API_VERSION"
[ "$FETCH" = 1 ] || log "$("$OUT" --version 2>&1)"
