#!/usr/bin/env bash
# Builds the code of an earlier commit with this tree's (f) bench child, for bench (f)'s side-by-side
# arm: STALL_BASELINE_DIST=<dir>/dist STALL_BASELINE_LABEL="<label>" node dist/bench/run.js f
# Usage: bench/stall-baseline.sh <commit> <dir>
set -euo pipefail
ref=${1:?commit}
dir=${2:?directory}
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$dir"
git -C "$root" worktree prune
git -C "$root" worktree add --detach "$dir" "$ref" >/dev/null
# The bench's own files from this tree: the child must answer what this bench asks.
for f in bench/stall-child.ts bench/protocol.ts bench/child-ipc.ts; do cp "$root/$f" "$dir/$f"; done
ln -s "$root/node_modules" "$dir/node_modules"
(cd "$dir" && npx tsc -p .)
echo "built $ref into $dir/dist"
