#!/usr/bin/env bash
# Installs the real coding agents the tests run offline against a fake model server:
# Codex CLI, Claude Code and Gemini CLI, from the npm registry, pinned by
# package-lock.json (`npm ci`). Codex and Claude Code carry their native binaries;
# Gemini CLI is one JavaScript bundle. Needs node and npm. Claude Code
# declares node >= 22 and runs on node 20 with a warning. Safe to run again.
#
# `.ready` is written last, with the checksum of the pins and the versions the
# binaries report: until it is there, what is on disk may be half an install. The
# tests take .setup.lock, then run `setup.sh --check` (exit 0: ready for these pins)
# and, if it fails, this script. Run by hand, it takes the lock itself.
set -euo pipefail
cd "$(dirname "$0")"

stamp() { sha256sum package-lock.json; }

needs="node npm sha256sum"
# shellcheck source=../setup-common.sh
. ../setup-common.sh
setup_begin "$@"

npm ci --no-audit --no-fund --loglevel=error --engine-strict=false

codex=$(node_modules/.bin/codex --version)
claude=$(node_modules/@anthropic-ai/claude-code/bin/claude.exe --version)
gemini=$(node node_modules/@google/gemini-cli/bundle/gemini.js --version)
{ stamp; echo "$codex"; echo "$claude"; echo "gemini $gemini"; } > .ready
echo "agents ready: $codex, claude $claude, gemini $gemini"
