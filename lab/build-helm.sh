#!/usr/bin/env bash
# Builds helm from the Go module proxy into $SKEWGATE_TOOLS/lab/bin (default .tools/, git-ignored), for the tests that
# render deploy/helm/skewgate (`helm lint`, `helm template`: test/integration/helm.test.ts and
# test/cluster/deploy-manifests.test.ts). Idempotent: a helm built by this script as it is now (its .key)
# that reports the pinned version is kept. helm's go.mod has no replace directives today: the wrapper module repeats none, and is
# only the main module that `go build -o` needs.
#   lab/build-helm.sh [--jobs N]
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=go-wrapper.sh
source lab/go-wrapper.sh helm "$@"
: "${HELM_VERSION:?HELM_VERSION missing from lab/versions.env}"
OUT=$LAB/bin/helm-$HELM_VERSION
MODULE=helm.sh/helm/v${HELM_VERSION%%.*}

# `helm version --short` prints v4.3.1: the release's tag, set below as Helm's Makefile does.
reports_version() { [ "$("$1" version --short 2>/dev/null)" = "v$HELM_VERSION" ]; }
if go_tool_cached helm "$HELM_VERSION" reports_version; then
  log "helm $HELM_VERSION: cached ($OUT)"
  exit 0
fi
go_tool_build helm "$HELM_VERSION" "$MODULE" "$MODULE/cmd/helm" \
  "-X $MODULE/internal/version.version=v$HELM_VERSION -X $MODULE/internal/version.gitTreeState=clean"
[ "$FETCH" = 1 ] || log "$("$OUT" version --short 2>&1)"
