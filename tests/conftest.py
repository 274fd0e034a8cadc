"""GPU-marked tests skip without CUDA (run them with `./course.sh gpu` on a machine with a GPU); the
run ends with the list of Triton kernels and targets the compile test compiled. Under pytest-xdist the files go to the
workers longest first (tests/file_seconds.json)."""

import collections
import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch

# First, before any test module imports torchvision (which imports Triton): on a machine without CUDA
# this switches Triton to its interpreter, and Triton must see that before any kernel is defined.
import course_utils  # noqa: F401,E402

sys.path.insert(0, str(Path(__file__).parent))  # tests/compile_targets is imported as `compile_targets`

# Under pytest-xdist, each worker gets its share of the cores for torch's CPU threads. With torch's default
# (every core per worker), `pytest -n 12 tests/test_exercises.py` on the 16-core H100 machine took up to 116 s per
# grading (52 s for one whose reference is plain Python, 1 s when graded alone); with this line, at most 12.5 s,
# and 87 s for the file.
if "PYTEST_XDIST_WORKER_COUNT" in os.environ:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])))


SESSION_START = time.time()


#: Seconds each test file and notebook took in a CI-like run (`python tools/file_seconds.py`, which says more).
FILE_SECONDS = Path(__file__).parent / "file_seconds.json"


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "loadfile":  # ./course.sh test: the files in the collection's order,
        config.option.loadscopereorder = False              # which the workers make longest first (below)


def _longest_files_first(items: list[pytest.Item]) -> None:
    """Under pytest-xdist, the files in the order of the seconds they took (one a test where unknown), each file's
    tests in their order: the controller hands out files in that order as workers free up, so that the short ones
    come last and the two workers end together. (By default it hands out files with the most tests first, and in a
    CI-like run one worker then ran on 45 s longer, on a test file of two tests and 35 s.)"""
    seconds = json.loads(FILE_SECONDS.read_text(encoding="utf-8")) if FILE_SECONDS.is_file() else {}
    files = [item.nodeid.split("::")[0] for item in items]
    counts = collections.Counter(files)
    first = {name: files.index(name) for name in counts}
    order = {name: (-seconds.get(name, float(counts[name])), first[name]) for name in counts}
    items[:] = [item for _, item in sorted(zip(files, items), key=lambda pair: order[pair[0]])]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ:
        _longest_files_first(items)
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU: run ./course.sh gpu on a machine with one")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    from course_utils.device import CACHE_DIR

    report = Path(CACHE_DIR) / "compiled_targets.txt"
    if report.exists() and report.stat().st_mtime >= SESSION_START:
        lines = report.read_text(encoding="utf-8").splitlines()
        terminalreporter.write_sep("-", f"Triton kernels compiled for sm_75/sm_80/sm_90 ({len(lines)} targets)")
        for line in lines:
            terminalreporter.write_line(line)
