#!/bin/sh
# The Envoy image's entrypoint, written here to behave as upstream's does: arguments that begin
# with an option run envoy; $loglevel adds --log-level; started as root (and ENVOY_UID is not 0),
# it moves the envoy user to ENVOY_UID/ENVOY_GID when given and runs the command as envoy;
# otherwise (a `user:` in compose, or ENVOY_UID=0) it runs it as it is.
set -e
loglevel="${loglevel:-}"
if [ "${1#-}" != "$1" ]; then
  set -- envoy "$@"
fi
if [ "$1" = envoy ] && [ -n "$loglevel" ]; then
  set -- "$@" --log-level "$loglevel"
fi
if [ "${ENVOY_UID:-}" != 0 ] && [ "$(id -u)" = 0 ]; then
  if [ -n "${ENVOY_UID:-}" ]; then usermod -u "$ENVOY_UID" envoy; fi
  if [ -n "${ENVOY_GID:-}" ]; then groupmod -g "$ENVOY_GID" envoy; fi
  chown envoy:envoy /dev/stdout /dev/stderr
  exec setpriv --reuid=envoy --regid=envoy --init-groups "$@"
fi
exec "$@"
