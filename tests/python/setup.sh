#!/usr/bin/env bash
# The Python peers the tests run cairn's exports against, in one virtual environment:
# Harbor's own models of the Agent Trajectory Interchange Format (validate.py), and
# an OTLP/HTTP receiver built on OpenTelemetry's `opentelemetry-proto` package
# (otlp_receiver.py). The venv gets pydantic, opentelemetry-proto and protobuf (pinned
# by requirements.txt); the harbor wheel (pinned, with its hash, by
# harbor.txt) is downloaded without its dependencies (it declares Python >= 3.12 and
# needs a whole agent stack; its trajectory models need only pydantic), and its
# modules `harbor/models/trajectories/` and `harbor/utils/trajectory_validator.py`
# are taken out of it into harbor-models/ under an empty `harbor` package, which
# validate.py puts on its path. Needs python3 with venv. Safe to run again.
#
# `.ready` is written last, with the checksums of the pin files: until it is there,
# what is on disk may be half an install. The tests take .setup.lock, then run
# `setup.sh --check` (exit 0: ready for these pins) and, if it fails, this script.
# Run by hand, it takes the lock itself.
set -euo pipefail
cd "$(dirname "$0")"

stamp() { sha256sum requirements.txt harbor.txt; }

needs="python3 sha256sum"
# shellcheck source=../setup-common.sh
. ../setup-common.sh
setup_begin "$@"

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check)
"${pip[@]}" install --quiet -r requirements.txt

wheels=$(mktemp -d)
trap 'rm -rf "$wheels"' EXIT
"${pip[@]}" download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
  --require-hashes -r harbor.txt -d "$wheels"
rm -rf harbor-models
.venv/bin/python - "$wheels"/harbor-*.whl <<'PY'
import sys, zipfile
keep = ("harbor/models/trajectories/", "harbor/utils/trajectory_validator.py")
with zipfile.ZipFile(sys.argv[1]) as z:
    names = [n for n in z.namelist() if n.startswith(keep)]
    if not any(n.endswith("trajectory.py") for n in names):
        sys.exit("setup.sh: the harbor wheel has no harbor/models/trajectories/trajectory.py")
    for n in names:
        z.extract(n, "harbor-models")
for pkg in ("harbor", "harbor/models", "harbor/utils"):
    open(f"harbor-models/{pkg}/__init__.py", "a").close()
PY
.venv/bin/python validate.py --version >/dev/null
.venv/bin/python otlp_receiver.py --version >/dev/null
stamp > .ready
echo "python peers ready: $(.venv/bin/python validate.py --version); $(.venv/bin/python otlp_receiver.py --version)"
