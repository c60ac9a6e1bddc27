# Sourced by every script that builds, installs or uses a tool (lab/*.sh, scripts/*.sh), from the
# checkout's root. The one place that says where tools live: $SKEWGATE_TOOLS, default .tools/ in
# the checkout. CI keeps it outside the clone (.ci/run), so a fresh clone on a warm machine finds
# every binary built and relinks nothing.
#   TOOLS        the tools directory (created)
#   LAB_BIN      $TOOLS/lab/bin: the Go-built binaries, named NAME-VERSION
#   tool_key FILE...   a key for what a binary was built from: the sha256 of the files' contents
#                      and the remaining words (a version, flags)
#   tool_is_current OUT KEY   OUT is executable and was built with KEY (OUT.key)
#   tool_mark OUT KEY         records KEY beside OUT
TOOLS=${SKEWGATE_TOOLS:-$PWD/.tools}
case "$TOOLS" in /*) ;; *) TOOLS=$PWD/$TOOLS ;; esac
LAB_BIN=$TOOLS/lab/bin
mkdir -p "$LAB_BIN"

tool_key() {
  local files=() words=() a
  for a in "$@"; do if [ -f "$a" ]; then files+=("$a"); else words+=("$a"); fi; done
  # No file named: hash the words alone (a bare `cat` would read standard input).
  { [ ${#files[@]} -eq 0 ] || cat "${files[@]}"; printf '%s\n' "${words[@]}"; } | sha256sum | cut -c1-16
}
tool_is_current() { [ -x "$1" ] && [ -f "$1.key" ] && [ "$(cat "$1.key")" = "$2" ]; }
tool_mark() { printf '%s\n' "$2" >"$1.key"; }
