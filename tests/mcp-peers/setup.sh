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

needs="node npm python3 sha256sum"
# shellcheck source=../setup-common.sh
. ../setup-common.sh
setup_begin "$@"

npm ci --no-audit --no-fund --loglevel=error

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
stamp > .ready
echo "mcp peers ready: node $(node --version), $(.venv/bin/python -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))')"
