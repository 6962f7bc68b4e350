"""Validates ATIF trajectory files with Harbor's own models.

Usage: validate.py FILE...   (exit 0: every file is valid; 1: some are not, each
error printed as `FILE: error`); validate.py --version prints the harbor version and
the newest schema version its models know.

The modules come from the harbor wheel, unpacked by setup.sh into harbor-models/
under an empty `harbor` package (the wheel's own `harbor/__init__.py` needs the
whole package installed).
"""

import json
import os
import sys
import typing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "harbor-models"))

from harbor.models.trajectories import Trajectory  # noqa: E402
from harbor.utils.trajectory_validator import TrajectoryValidator  # noqa: E402

HARBOR_VERSION = "0.26.0"


def newest_schema() -> str:
    versions = typing.get_args(Trajectory.model_fields["schema_version"].annotation)
    return max(versions, key=lambda v: tuple(int(p) for p in v.removeprefix("ATIF-v").split(".")))


def main() -> int:
    args = sys.argv[1:]
    if args == ["--version"]:
        print(f"harbor {HARBOR_VERSION} {newest_schema()}")
        return 0
    if not args:
        print("usage: validate.py FILE...", file=sys.stderr)
        return 2
    bad = 0
    for path in args:
        validator = TrajectoryValidator()
        if validator.validate(path, validate_images=False):
            # Round trip through the models too: what they dump must be what was read
            # (nothing dropped or renamed on the way).
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
            dumped = Trajectory.model_validate(data).to_json_dict()
            if dumped != data:
                bad += 1
                print(f"{path}: the models dump the trajectory differently than it was written")
            continue
        bad += 1
        for e in validator.get_errors():
            print(f"{path}: {e}")
    print(f"validated {len(args) - bad} of {len(args)} trajectories")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
