#!/bin/sh
# The Node image's entrypoint, written here to behave as upstream's does: node runs the arguments
# when the first is an option, is no command on PATH, or is a file that is not executable.
set -e
if [ "${1#-}" != "$1" ] || [ -z "$(command -v "$1" || true)" ] || { [ -f "$1" ] && [ ! -x "$1" ]; }; then
  set -- node "$@"
fi
exec "$@"
