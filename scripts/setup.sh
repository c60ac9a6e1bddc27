#!/usr/bin/env bash
# Everything `npm run demo` and `npm test` need on a fresh machine, and nothing twice:
# npm dependencies (when missing or older than package-lock.json), then a real Envoy.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "skewgate: installing npm dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund --loglevel=error
fi
bash scripts/install-envoy.sh
