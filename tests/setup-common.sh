# Sourced by each peer folder's setup.sh (tests/agents, tests/agents/opencode,
# tests/python, tests/mcp-peers) once it is in its folder and has defined `stamp` (the
# checksums of its pins) and `needs` (the programs it runs), as `setup_begin "$@"`.
#
# `--check` exits 0 when `.ready` starts with the stamp (what is on disk is whole, for
# these pins), else 1. Otherwise it takes `.setup.lock` (unless the tests, which take it
# themselves, say so with CAIRN_PEERS_LOCKED), removes `.ready` (until the script writes
# it again last, what is on disk may be half an install) and checks for the programs.
setup_begin() {
  if [ "${1-}" = "--check" ]; then
    local want
    want=$(stamp)
    if [ -f .ready ] && [ "$(head -n "$(printf '%s\n' "$want" | wc -l)" .ready)" = "$want" ]; then
      exit 0
    fi
    exit 1
  fi
  if [ -z "${CAIRN_PEERS_LOCKED-}" ] && command -v flock >/dev/null; then
    exec 9>.setup.lock
    flock 9
  fi
  rm -f .ready
  local tool
  for tool in $needs; do
    command -v "$tool" >/dev/null || { echo "setup.sh: $tool is missing (it needs $needs)" >&2; exit 2; }
  done
}
