"""Write tests/file_seconds.json, the seconds that each test file and notebook took in a run of the suite, from that
run's output with ``--durations=0``: ``./course.sh test -v --durations=0 > run.log; python tools/file_seconds.py run.log``.

``./course.sh test`` (pytest-xdist, one file per worker at a time) hands its workers the longest files first, by
these figures (tests/conftest.py): with the default order (most tests first), files of a few long tests came last,
and one worker ran on while the other had finished. A file the figures lack counts one second per test; figures from
another machine or an older run still order the files well enough, so refresh them when files come or change a lot.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "file_seconds.json"
_DURATION = re.compile(r"^([\d.]+)s (?:setup|call|teardown)\s+(\S+?)::", re.M)
# "[gw0] [ 12%] PASSED tests/test_x.py::test_y" (-v): files whose tests all took under 5 ms have no duration lines
_RESULT = re.compile(r"(?:PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS) (\S+?)(::ipynb)?::")


def file_seconds(log: str) -> dict[str, float]:
    """{file: seconds}: the setup, call and teardown durations of its tests, summed (``--durations=0`` lines); 0 for
    a file with results but no durations (-v output)."""
    if "slowest durations" not in log:
        raise ValueError("no durations in this output: run pytest with --durations=0")
    run, durations = log.split("slowest durations", 1)
    seconds: dict[str, float] = collections.defaultdict(float)
    for match in _RESULT.finditer(run):
        seconds[match.group(1) + (".ipynb" if match.group(2) else "")] += 0.0  # -v writes notebooks as name::ipynb::Cell
    for match in _DURATION.finditer(durations):
        seconds[match.group(2)] += float(match.group(1))
    return {name: round(value, 1) for name, value in sorted(seconds.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="the output of a run with --durations=0")
    args = parser.parse_args(argv)
    OUT.write_text(json.dumps(file_seconds(args.log.read_text(encoding="utf-8", errors="replace")), indent=1) + "\n",
                   encoding="utf-8")
    print(f"wrote {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
