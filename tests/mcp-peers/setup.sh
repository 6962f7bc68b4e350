#!/usr/bin/env bash
# Installs the MCP peers the tests run against: the reference servers
# from the npm registry (pinned by package-lock.json, `npm ci`) and
# the official Python SDK in a virtual environment (pinned by requirements.txt).
# Needs node (>= 18), npm and python3 with venv. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")"

for tool in node npm python3; do
  command -v "$tool" >/dev/null || { echo "setup.sh: $tool is missing (install node, npm and python3)" >&2; exit 2; }
done

npm ci --no-audit --no-fund --loglevel=error

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
echo "mcp peers ready: node $(node --version), $(.venv/bin/python -c 'import importlib.metadata as m; print("mcp", m.version("mcp"))')"
