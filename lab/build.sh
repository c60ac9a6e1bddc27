#!/usr/bin/env bash
# Builds the lab's real parts from the Go module proxy into $SKEWGATE_TOOLS/lab/bin (default
# .tools/, git-ignored; lab/tools-dir.sh):
# kube-apiserver at KUBE_OLD and KUBE_NEW, kubectl at KUBE_NEW, kube-controller-manager at
# KUBE_OLD, and etcd. Idempotent: a binary that reports the pinned version and was built by this
# script as it is now (its .key) is kept; a version bump rebuilds only that version's binaries. Go's own caches (GOMODCACHE, GOCACHE) make a
# rebuild on the same machine take minutes instead of the cold build's tens of minutes.
#   lab/build.sh [--jobs N] [--fetch] [--images|--node]   N = parallel package builds (default:
#     all cores); --fetch: download what the builds need (wrapper modules, the packages' modules)
#     and compile nothing, so that a build running beside it finds its downloads done;
#     --images: only the compose demo's etcd programs; --node: only the node's programs (kubelet,
#     kube-proxy, kube-scheduler at KUBE_OLD, crictl; see below)
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=versions.env
source lab/versions.env
JOBS=$(nproc)
[ "${1:-}" = "--jobs" ] && { JOBS=${2:?--jobs needs a number}; shift 2; }
FETCH=0
[ "${1:-}" = "--fetch" ] && { FETCH=1; shift; }
# shellcheck source=tools-dir.sh
source lab/tools-dir.sh
ROOT=$TOOLS/lab
BIN=$LAB_BIN
mkdir -p "$ROOT/src"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf 'lab/build: %s\n' "$*" >&2; }

# ldflags that make /version and the binary version report the real release (hack/lib/version.sh).
version_ldflags() {
  local v=$1 major minor
  major=${v%%.*}; minor=${v#*.}; minor=${minor%%.*}
  local f=""
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    f+=" -X $pkg.gitVersion=v$v -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    f+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
    f+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
  done
  printf '%s' "$f"
}

# A wrapper module per Kubernetes version: k8s.io/kubernetes's go.mod replaces every staging
# module with ./staging/..., which a dependency cannot use, so the wrapper pins each to v0.X.Y.
kube_module() {
  local v=$1 dir=$ROOT/src/kube-$1
  # One preparation at a time (a --fetch beside a build): the second waits, then finds it ready.
  exec 9>"$ROOT/src/.kube-$v.lock"; flock 9
  if [ ! -f "$dir/.ready" ]; then
    log "preparing the wrapper module for Kubernetes v$v"
    rm -rf "$dir"; mkdir -p "$dir"
    (
      cd "$dir"
      go mod init "local/skewgate-lab-kube-$v" >/dev/null 2>&1
      local gomod staging
      gomod=$(go mod download -json "k8s.io/kubernetes@v$v" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
      staging=$(grep -oE 'k8s\.io/[a-z0-9-]+ => \./staging/src/k8s\.io/[a-z0-9-]+' "$gomod" | awk '{print $1}' | sort -u)
      [ -n "$staging" ] || { log "no staging modules found in $gomod"; exit 1; }
      log "  $(echo "$staging" | wc -l) staging modules at v0.${v#*.}"
      for m in $staging; do go mod edit -replace="$m=$m@v0.${v#*.}"; done
      go get "k8s.io/kubernetes@v$v" >/dev/null 2>&1 || go get "k8s.io/kubernetes@v$v"
    )
    touch "$dir/.ready"
  fi
  exec 9>&-
  printf '%s' "$dir"
}

# kube-apiserver answers --version, kubectl `version --client`; both print "… v1.X.Y".
# Whole outputs are read before matching: `| head -1` or `| grep -q` can close the pipe while the
# binary still writes, and under pipefail its SIGPIPE made a current binary look stale (rebuilt).
binary_version() {
  local text
  case "$(basename "$1")" in
    kubectl-*) text=$("$1" version --client 2>/dev/null) || true ;;
    *) text=$("$1" --version 2>/dev/null) || true ;;
  esac
  printf '%s\n' "${text%%$'\n'*}"
}

build_kube() {
  local v=$1 cmd=$2 out=$3
  local key dir start
  key=$(tool_key lab/build.sh "$v" "$cmd")
  if tool_is_current "$out" "$key" && [[ "$(binary_version "$out")" == *"v$v" ]]; then log "$(basename "$out") v$v: cached"; return; fi
  dir=$(kube_module "$v")
  # The node's commands import packages whose modules the wrapper's go.sum does not list yet
  # (k8s.io/kubernetes's go.mod is complete; the wrapper's sums are what `go get` of it needed).
  case "$cmd" in
    kubelet | kube-proxy | kube-scheduler) (cd "$dir" && { go get "k8s.io/kubernetes/cmd/$cmd@v$v" >/dev/null 2>&1 || go get "k8s.io/kubernetes/cmd/$cmd@v$v"; }) ;;
  esac
  if [ "$FETCH" = 1 ]; then
    # Loading the packages downloads their modules; nothing is compiled.
    (cd "$dir" && go list -deps "k8s.io/kubernetes/cmd/$cmd" >/dev/null)
    log "fetched what $cmd v$v needs"; return
  fi
  log "building $cmd v$v (this is the slow part on a cold machine)"
  start=$(date +%s)
  (cd "$dir" && go build -p "$JOBS" -trimpath -ldflags "-s -w $(version_ldflags "$v")" -o "$out.tmp" "k8s.io/kubernetes/cmd/$cmd")
  mv "$out.tmp" "$out"
  tool_mark "$out" "$key"
  log "  built $(basename "$out") in $(( $(date +%s) - start )) s: $(binary_version "$out")"
}

# etcd's programs at a version: `etcd` (the server module), `etcdctl`, `etcdutl`.
build_etcd_tool() {
  local v=$1 tool=$2 out=$3 dir=$ROOT/src/etcd-$1 module
  case "$tool" in
    etcd) module=go.etcd.io/etcd/server/v3 ;;
    *) module=go.etcd.io/etcd/$tool/v3 ;;
  esac
  # etcd answers --version ("etcd Version: X"); etcdctl and etcdutl a `version` command.
  local asks=(--version) key; [ "$tool" = etcd ] || asks=(version)
  key=$(tool_key lab/build.sh "$v" "$tool")
  if tool_is_current "$out" "$key" && grep -qiE "^$tool version: $v\$" <<<"$("$out" "${asks[@]}" 2>/dev/null || true)"; then log "$tool $v: cached"; return; fi
  mkdir -p "$dir"
  exec 9>"$dir.lock"; flock 9
  if [ "$FETCH" = 1 ]; then
    log "fetching $tool $v"
    (cd "$dir" && { [ -f go.mod ] || go mod init local/skewgate-lab-etcd >/dev/null 2>&1; } && go get "$module@v$v" >/dev/null 2>&1 && go list -deps "$module" >/dev/null)
    exec 9>&-; return
  fi
  log "building $tool $v"
  (
    cd "$dir"
    [ -f go.mod ] || go mod init local/skewgate-lab-etcd >/dev/null 2>&1
    go get "$module@v$v" >/dev/null 2>&1 || go get "$module@v$v"
    go build -p "$JOBS" -trimpath -ldflags "-s -w" -o "$out.tmp" "$module"
  )
  exec 9>&-
  mv "$out.tmp" "$out"
  tool_mark "$out" "$key"
  log "  built $(basename "$out")"
}

# crictl (CRI_TOOLS_VERSION): a CRI client, the runtime's view of the node's pods and images.
build_crictl() {
  local v=$CRI_TOOLS_VERSION out=$BIN/crictl-$CRI_TOOLS_VERSION dir=$ROOT/src/cri-tools-$CRI_TOOLS_VERSION key text
  key=$(tool_key lab/build.sh "$v" crictl)
  text=$("$out" --version 2>/dev/null || true)
  if tool_is_current "$out" "$key" && [[ "$text" == *"v$v"* ]]; then log "crictl $v: cached"; return; fi
  mkdir -p "$dir"
  exec 9>"$dir.lock"; flock 9
  (
    cd "$dir"
    [ -f go.mod ] || go mod init local/skewgate-lab-cri-tools >/dev/null 2>&1
    go get "sigs.k8s.io/cri-tools@v$v" >/dev/null 2>&1 || go get "sigs.k8s.io/cri-tools@v$v"
    [ "$FETCH" = 1 ] && { go list -deps sigs.k8s.io/cri-tools/cmd/crictl >/dev/null; exit 0; }
    go build -p "$JOBS" -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=v$v" -o "$out.tmp" sigs.k8s.io/cri-tools/cmd/crictl
  )
  exec 9>&-
  [ "$FETCH" = 1 ] && { log "fetched crictl $v"; return; }
  mv "$out.tmp" "$out"
  tool_mark "$out" "$key"
  log "  built crictl-$v: $("$out" --version 2>/dev/null || true)"
}

build_etcd() { build_etcd_tool "$ETCD_VERSION" etcd "$BIN/etcd-$ETCD_VERSION"; }

# --images: also the programs of the compose demo's etcd image (registry.k8s.io/etcd:$ETCD_IMAGE_TAG
# is etcd's own release image, v<tag without -N>, with etcd, etcdctl and etcdutl): for
# scripts/demo-images.sh, which builds the stand-in images.
# --node: the node's programs (kubelet, kube-proxy) and the scheduler that places pods on it, at
# KUBE_OLD (kubeadm upgrades the node last), and crictl to look into its container runtime.
if [ "${1:-}" = "--node" ]; then
  total=$(date +%s)
  for cmd in kubelet kube-proxy kube-scheduler; do build_kube "$KUBE_OLD" "$cmd" "$BIN/$cmd-$KUBE_OLD"; done
  build_crictl
  log "node parts ready in $(( $(date +%s) - total )) s"
  exit 0
fi

if [ "${1:-}" = "--images" ]; then
  v=${ETCD_IMAGE_TAG%-*}
  for tool in etcd etcdctl etcdutl; do build_etcd_tool "$v" "$tool" "$BIN/$tool-$v"; done
  exit 0
fi

total=$(date +%s)
build_etcd
build_kube "$KUBE_OLD" kube-apiserver "$BIN/kube-apiserver-$KUBE_OLD"
build_kube "$KUBE_NEW" kube-apiserver "$BIN/kube-apiserver-$KUBE_NEW"
build_kube "$KUBE_NEW" kubectl "$BIN/kubectl-$KUBE_NEW"
# The controllers whose harms a false 404 causes (garbage collector, namespace deletion): the old
# version, as in the first phase of an upgrade the controller managers are upgraded last.
build_kube "$KUBE_OLD" kube-controller-manager "$BIN/kube-controller-manager-$KUBE_OLD"
[ "$FETCH" = 1 ] && { log "fetched in $(( $(date +%s) - total )) s"; exit 0; }
log "all parts ready in $(( $(date +%s) - total )) s; $(du -sh "$BIN" | cut -f1) of binaries in $BIN"
