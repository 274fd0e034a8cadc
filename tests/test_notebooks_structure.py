"""Every notebook keeps the course's promises: Colab badge and set-up cell, a provenance cell, and
committed outputs that come from the reference GPU run (not from a CPU run)."""

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from colab_cell import SETUP_CELL  # noqa: E402

MAIN_NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NOTEBOOKS = MAIN_NOTEBOOKS + sorted((ROOT / "notebooks" / "deep_dives").glob("[0-9][0-9]*_*.ipynb"))
#: The one way a notebook may be committed with CPU outputs: it says so to the learner in its first cell,
#: and its provenance cell shows the CPU run. The H100 run that replaces them is owed.
CPU_OUTPUTS_BANNER = "**The outputs below come from a CPU run: this notebook's H100 run is still owed.**"
#: The same for outputs from the H200 (the same software on the other card the course is run on): its provenance
#: cell shows the H200, and the README's row says so. Ratios are same-run, so they hold on either card.
H200_OUTPUTS_BANNER = "**The outputs below come from a run on H200 GPUs: this notebook's H100 run is still owed.**"


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _text_outputs(cell: dict) -> str:
    parts = []
    for out in cell.get("outputs", []):
        parts.append("".join(out.get("text", "")))
        parts.append("".join(out.get("data", {}).get("text/plain", "")))
    return "".join(parts)


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 1


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_opens_with_badge_colab_cell_and_provenance(path):
    cells = _cells(path)
    assert cells[0]["cell_type"] == "markdown" and _source(cells[0]).startswith(f"# {path.stem[:2]}")
    where = path.relative_to(ROOT).as_posix()
    assert where in _source(cells[0]), f"the Colab badge must point at this notebook ({where})"
    assert _source(cells[1]) == SETUP_CELL, "cell 2 is the set-up cell: python tools/colab_cell.py writes it"
    assert "import course_utils as cu" in _source(cells[2]) and "cu.print_environment()" in _source(cells[2])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_outputs_come_from_the_reference_gpu(path):
    cells = _cells(path)
    provenance = _text_outputs(cells[2])
    assert "triton_mode" in provenance, f"{path.name}: its provenance cell has no committed output"
    if CPU_OUTPUTS_BANNER in _source(cells[0]):
        assert "interpreter (CPU)" in provenance, \
            f"{path.name} says its outputs come from a CPU run, but its provenance shows a GPU: drop the banner"
        return
    if H200_OUTPUTS_BANNER in _source(cells[0]):
        assert "H200" in provenance, f"{path.name} says its outputs come from an H200, but its provenance does not"
    else:
        assert "H100" in provenance, f"{path.name}: commit the outputs of its H100 run (./course.sh execute on the H100)"
    assert "compiled" in provenance


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_is_skipped_or_left_failing(path):
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        assert "NBVAL_SKIP" not in _source(cell), "never skip silently: say what ran instead"
        assert not any(o.get("output_type") == "error" for o in cell.get("outputs", [])), \
            f"{path.name} has a cell that failed in its committed run: {_source(cell)[:80]!r}"


ABSOLUTE_PATH = re.compile(r"(?<![\w.])/(?:tmp|root|home|work|Users|content)/")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_outputs_hold_no_absolute_machine_path(path):
    # tools/scrub_outputs.py rewrites IPython's cell file names; every other path is printed relative
    for cell in _cells(path):
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", "")) + "".join(output.get("data", {}).get("text/plain", ""))
            found = ABSOLUTE_PATH.search(text)
            assert not found, f"{path.name}: an output holds a machine path: {text[max(0, found.start() - 60):found.end() + 60]!r}"


def test_readme_lists_every_notebook_and_says_which_have_cpu_outputs():
    readme = (NOTEBOOKS[0].parent.parent / "README.md").read_text(encoding="utf-8")
    for path in MAIN_NOTEBOOKS:
        row = next((line for line in readme.splitlines() if line.startswith(f"| [{path.stem}](notebooks/{path.name})")),
                   None)
        assert row is not None, f"README's lessons table has no row for {path.name}"
        cpu_outputs = CPU_OUTPUTS_BANNER in _source(_cells(path)[0])
        assert ("*CPU outputs*" in row) == cpu_outputs, f"README's row for {path.name} must say *CPU outputs* " \
                                                        "exactly when the notebook carries the CPU-run banner"
        h200_outputs = H200_OUTPUTS_BANNER in _source(_cells(path)[0])
        assert ("*H200 outputs*" in row) == h200_outputs, f"README's row for {path.name} must say *H200 outputs* " \
                                                          "exactly when the notebook carries the H200-run banner"
