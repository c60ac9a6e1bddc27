# Sourced by lab/build-jaeger.sh and lab/build-promtool.sh: a wrapper module that depends on a Go
# module at a version and repeats its own single-line replace directives (a dependency's replaces
# are ignored, and `go install pkg@version` refuses a module that has any). Needs `log` defined.
#   go_wrapper_module MODULE VERSION DIR NAME   prepares DIR once (DIR/.ready marks it done)
go_wrapper_module() {
  local module=$1 version=$2 dir=$3 name=$4
  [ -f "$dir/.ready" ] && return 0
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
}
