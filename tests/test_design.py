"""The course's design (CONTRIBUTING.md), enforced: one story per notebook, numbers printed not typed, no
plumbing in lessons, raw API before helper, the learner's words only. Measurements: tools/design_check.py."""

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import design_check as dc  # noqa: E402
from colab_cell import SETUP_CELL  # noqa: E402

REDESIGNED = [p for p in dc.all_notebooks() if p.name[:2] not in dc.NOT_YET_REDESIGNED or p.parent == dc.DEEP_DIVES]
ALL = dc.all_notebooks()
MAIN = sorted(dc.NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def ids(p: Path) -> str:
    return p.stem


@pytest.mark.parametrize("path", REDESIGNED, ids=ids)
def test_one_story_reading_time_and_cells(path):
    m = dc.metrics(path)
    minutes, cells = dc.LIMITS[m.kind]
    assert m.reading_minutes <= minutes, f"{path.name} reads in {m.reading_minutes} min (a {m.kind}: at most " \
        f"{minutes}); move depth that does not serve the story to a deep dive (notebooks/deep_dives/)"
    assert m.cells <= cells, f"{path.name} has {m.cells} cells (a {m.kind}: at most {cells})"


@pytest.mark.parametrize("path", REDESIGNED, ids=ids)
def test_no_code_cell_over_40_lines(path):
    m = dc.metrics(path)
    assert m.longest_code_cell <= dc.MAX_CODE_LINES, \
        f"{path.name}: a code cell of {m.longest_code_cell} lines; long kernels live in lessons/ and are shown"


@pytest.mark.parametrize("path", REDESIGNED, ids=ids)
def test_markdown_quotes_no_measured_figure(path):
    found = dc.typed_figures(dc.load(path))
    assert not found, (f"{path.name}: measured figures typed in markdown: {found}. Print them from a cell (a "
                       "verdict line); a non-measured fact (arithmetic, a spec) goes in the notebook's "
                       "metadata.course.non_measured_figures")


@pytest.mark.parametrize("path", ALL, ids=ids)
def test_learner_facing_text_names_no_internal_process(path):
    assert not dc.process_words(dc.load(path)), f"{path.name}: {dc.process_words(dc.load(path))}"


def test_readme_and_decks_name_no_internal_process():
    for path in [ROOT / "README.md", *sorted((ROOT / "slides").glob("*.md"))]:
        hits = [m.group(0) for m in dc.PROCESS_WORDS.finditer(path.read_text(encoding="utf-8"))]
        assert not hits, f"{path.relative_to(ROOT)}: {hits}"


def test_every_deep_dive_is_linked_from_its_main_notebook_and_required_by_none():
    for dive in sorted(dc.DEEP_DIVES.glob("*.ipynb")):
        main = [p for p in MAIN if p.name[:2] == dive.name[:2]]
        assert main, f"{dive.name}: no main notebook {dive.name[:2]}_*.ipynb"
        assert f"deep_dives/{dive.name}" in main[0].read_text(encoding="utf-8"), \
            f"{main[0].name} must link its deep dive deep_dives/{dive.name}"
        for later in MAIN:
            if later.name[:2] > dive.name[:2]:
                code = "".join(dc._source(c) for c in dc.load(later)["cells"] if c["cell_type"] == "code")
                assert dive.stem not in code, f"{later.name} requires the optional {dive.name}"


# Raw API before the course's helper: the first code use of each raw API comes no later in the course (notebook
# order, then cell order) than the first use of the helper that wraps it.
RAW_BEFORE_HELPER = [
    ("triton.testing.do_bench", r"\bcu\.benchmark\(|\bbenchmark\("),
    ("torch.profiler.profile", r"device_activity\("),
    ("triton.autotune", r"cu\.tuning\.autotune|\bautotune\(configs"),
    ("load_inline(", r"build_extension\("),
    ("TORCH_LOGS", r"compiled_code\(|generated_code\("),
]


def _first(pattern: str, literal: bool) -> tuple[int, int] | None:
    for n, path in enumerate(MAIN):
        for i, cell in enumerate(dc.load(path)["cells"]):
            if cell["cell_type"] != "code":
                continue
            src = dc._source(cell)
            if (pattern in src) if literal else re.search(pattern, src):
                return n, i
    return None


@pytest.mark.parametrize("raw,helper", RAW_BEFORE_HELPER, ids=[r for r, _ in RAW_BEFORE_HELPER])
def test_raw_api_appears_before_its_helper(raw, helper):
    first_helper = _first(helper, literal=False)
    if first_helper is None:
        return  # the helper is not used in any notebook: nothing to order
    first_raw = _first(raw, literal=True)
    assert first_raw is not None and first_raw <= first_helper, \
        f"{raw} must appear raw (notebook {MAIN[first_helper[0]].name}, cell {first_helper[1]} or earlier) " \
        f"before the helper that wraps it"


def _code_lines() -> dict[str, list[str]]:
    """Normalised code lines of course_utils, lessons and every notebook's code cells, by place."""
    files: dict[str, list[str]] = {}
    for path in sorted((ROOT / "course_utils").glob("*.py")) + sorted((ROOT / "lessons").glob("*.py")):
        files[str(path.relative_to(ROOT))] = path.read_text(encoding="utf-8").splitlines()
    for path in REDESIGNED:
        lines = []
        for cell in dc.load(path)["cells"]:
            # an export cell is the source of its lessons/ module, not a copy of it
            # (the set-up cell is the same in every notebook by design: tools/colab_cell.py writes it)
            if cell["cell_type"] == "code" and not dc._source(cell).startswith("# export: lessons/") \
                    and dc._source(cell) != SETUP_CELL:
                lines += dc._source(cell).splitlines() + [""]
        files[str(path.relative_to(ROOT))] = lines
    return files


def _meaningful(line: str) -> str:
    line = line.strip()
    return "" if not line or line.startswith(("#", "print(", '"""', "import ", "from ")) or len(line) < 12 else line


def test_no_block_of_code_is_written_twice():
    window = 6
    seen: dict[tuple[str, ...], str] = {}
    repeats = defaultdict(set)
    for place, lines in _code_lines().items():
        kept = [(n, _meaningful(line)) for n, line in enumerate(lines, 1)]
        kept = [(n, line) for n, line in kept if line]
        for i in range(len(kept) - window + 1):
            block = tuple(line for _, line in kept[i:i + window])
            where = f"{place}:{kept[i][0]}"
            if block in seen and seen[block].split(":")[0] != place:
                repeats[seen[block].split(":")[0], place].add((seen[block], where))
            seen.setdefault(block, where)
    report = [f"{sorted(pairs)[0][0]} ~ {sorted(pairs)[0][1]}" for pairs in repeats.values()]
    assert not report, "the same code in two places (make it one helper in course_utils): " + "; ".join(report)


def test_design_check_counts_typed_figures_and_leaves_facts_alone():
    nb = {"metadata": {"course": {"non_measured_figures": ["20 ms"]}}, "cells": [
        {"cell_type": "markdown", "source": "We measured 3,051 GB/s and 1.07x cuBLAS in 0.19 ms; `0.5 ms` is code, "
                                            "16 x 16 is a shape, time.sleep of 20 ms is a fact, the H100 peak is "
                                            "3,350 GB/s, 91.1% of it, 2.5 GB used."}]}
    assert dc.typed_figures(nb) == ["3,051 GB/s", "1.07x", "0.19 ms", "91.1%", "2.5 GB"]
    assert dc.process_words({"cells": [{"cell_type": "markdown", "source": "the targets of issue #17"}]})
