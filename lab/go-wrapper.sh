# Sourced, from the checkout's root, by lab/build-jaeger.sh, lab/build-promtool.sh and
# lab/build-helm.sh with the tool's name and the script's own arguments
# (`source lab/go-wrapper.sh NAME "$@"`): reads lab/versions.env and `--jobs N` (parallel package
# builds, default: all cores), makes $SKEWGATE_TOOLS/lab/bin ($LAB/bin, lab/tools-dir.sh), sets
# Go's environment, and defines `log` and the steps they share. The caller asks go_tool_cached
# first, with its own check that the binary reports the pinned version.
#   go_wrapper_module MODULE VERSION DIR NAME   prepares DIR once (DIR/.ready marks it done): a
#     wrapper module that depends on MODULE at VERSION and repeats its own single-line replace
#     directives (a dependency's replaces are ignored, and `go install pkg@version` refuses a
#     module that has any)
#   go_tool_cached NAME VERSION CHECK...   true when $LAB/bin/NAME-VERSION was built by the
#     caller's script as it is now (its .key: the script, lab/go-wrapper.sh, the version) and the
#     command CHECK... (run with the binary as its last argument) passes
#   go_tool_build NAME VERSION MODULE PKG [LDFLAGS [TAGS]]   builds PKG in that wrapper module
#     ($LAB/src/NAME-VERSION) into $LAB/bin/NAME-VERSION with the build tags TAGS (comma-separated),
#     logging how long it took; with --fetch only downloads what that needs
# shellcheck source=versions.env
source lab/versions.env
LAB_TOOL=${1:?go-wrapper.sh needs the tool name}
shift
log() { printf 'lab/build-%s: %s\n' "$LAB_TOOL" "$*" >&2; }
JOBS=$(nproc)
[ "${1:-}" = "--jobs" ] && { JOBS=${2:?--jobs needs a number}; shift 2; }
# --fetch: download what the build needs and compile nothing (see lab/build.sh).
FETCH=0
[ "${1:-}" = "--fetch" ] && FETCH=1
# shellcheck source=tools-dir.sh
source lab/tools-dir.sh
LAB=$TOOLS/lab
LAB_SCRIPT=lab/build-$LAB_TOOL.sh
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

go_wrapper_module() {
  local module=$1 version=$2 dir=$3 name=$4
  mkdir -p "$LAB/src"
  # One preparation at a time (a --fetch beside a build): the second waits, then finds it ready.
  exec 9>"$dir.lock"; flock 9
  if [ -f "$dir/.ready" ]; then exec 9>&-; return 0; fi
  log "preparing the wrapper module for $module v$version"
  rm -rf "$dir"; mkdir -p "$dir"
  (
    cd "$dir"
    go mod init "local/skewgate-lab-$name" >/dev/null 2>&1
    local gomod
    gomod=$(go mod download -json "$module@v$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
    [ -n "$gomod" ] || { log "cannot download $module@v$version"; exit 1; }
    sed -n 's/^replace[[:space:]]\+\([^[:space:]]\+\)[[:space:]]*=>[[:space:]]*\([^[:space:]]\+\)[[:space:]]\+\([^[:space:]]\+\)[[:space:]]*$/\1=\2@\3/p' "$gomod" |
      while read -r r; do go mod edit -replace="$r"; done
    go get "$module@v$version" >/dev/null 2>&1 || go get "$module@v$version"
  )
  touch "$dir/.ready"
  exec 9>&-
}

go_tool_key() { tool_key "$LAB_SCRIPT" lab/go-wrapper.sh "$1" "$2"; }

go_tool_cached() {
  local name=$1 version=$2 out=$LAB/bin/$1-$2; shift 2
  tool_is_current "$out" "$(go_tool_key "$name" "$version")" && "$@" "$out"
}

go_tool_build() {
  local name=$1 version=$2 module=$3 pkg=$4 ldflags=${5:-} tags=${6:-}
  local dir=$LAB/src/$name-$version out=$LAB/bin/$name-$version start
  start=$(date +%s)
  go_wrapper_module "$module" "$version" "$dir" "$name"
  if [ "$FETCH" = 1 ]; then
    (cd "$dir" && go list -tags "$tags" -deps "$pkg" >/dev/null)
    log "fetched what $pkg v$version needs"; return 0
  fi
  log "building $pkg v$version"
  (cd "$dir" && go build -p "$JOBS" -trimpath -tags "$tags" -ldflags "-s -w $ldflags" -o "$out.tmp" "$pkg")
  mv "$out.tmp" "$out"
  tool_mark "$out" "$(go_tool_key "$name" "$version")"
  log "built $name-$version in $(( $(date +%s) - start )) s ($(du -h "$out" | cut -f1))"
}
