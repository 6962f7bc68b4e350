#!/usr/bin/env bash
# Installs the MCP peers the tests run against: the reference servers
# from the npm registry (pinned by package-lock.json, `npm ci`) and
# the official Python SDK in a virtual environment (pinned by requirements.txt).
# Needs node (>= 18), npm and python3 with venv. Safe to run again.
#
# `.ready` is written last, with the checksums of both pin files: until
# it is there, what is on disk may be half an install. The tests take
# .setup.lock, then run `setup.sh --check` (exit 0: ready for these
# pins) and, if it fails, this script. Run by hand, it takes the lock
# itself, so that it never installs while a test checks or installs.
set -euo pipefail
cd "$(dirname "$0")"

stamp() { sha256sum package-lock.json requirements.txt; }

if [ "${1-}" = "--check" ]; then
  if [ -f .ready ] && [ "$(cat .ready)" = "$(stamp)" ]; then exit 0; else exit 1; fi
fi

if [ -z "${CAIRN_PEERS_LOCKED-}" ] && command -v flock >/dev/null; then
  exec 9>.setup.lock
  flock 9
fi
rm -f .ready

for tool in node npm python3 sha256sum; do
  command -v "$tool" >/dev/null || { echo "setup.sh: $tool is missing (it needs node, npm, python3 and sha256sum)" >&2; exit 2; }
done

npm ci --no-audit --no-fund --loglevel=error

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
stamp > .ready
echo "mcp peers ready: node $(node --version), $(.venv/bin/python -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))')"
