#!/usr/bin/env bash
# Installs OpenCode, the real coding agent the tests run offline against a fake model
# server, from the npm registry, pinned by package-lock.json (`npm ci`). Its wrapper
# package, opencode-ai, lists an optional native package per platform, and a lock of it
# names packages a registry mirror may not carry, so `npm ci` refuses it: this folder
# pins the Linux x64 native package alone, and the tests run its binary directly.
# Needs node and npm. Safe to run again.
#
# `.ready` is written last, with the checksum of the pins and the version the binary
# reports: until it is there, what is on disk may be half an install. The tests take
# .setup.lock, then run `setup.sh --check` (exit 0: ready for these pins) and, if it
# fails, this script. Run by hand, it takes the lock itself.
set -euo pipefail
cd "$(dirname "$0")"

stamp() { sha256sum package-lock.json; }

needs="node npm sha256sum"
# shellcheck source=../../setup-common.sh
. ../../setup-common.sh
setup_begin "$@"

npm ci --no-audit --no-fund --loglevel=error

opencode=$(node_modules/opencode-linux-x64/bin/opencode --version)
{ stamp; echo "opencode $opencode"; } > .ready
echo "agents ready: opencode $opencode"
