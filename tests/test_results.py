"""Results flow one way: notebooks save headline records, the README's table is made from them; code a
later notebook reuses is exported from its notebook; course_utils imports in one direction."""

import ast
import json
import re
from pathlib import Path

import pandas as pd
import pytest
import torch

from course_utils import export, results
from course_utils.results import BEGIN, END, Headline, load_results, save_results

PROJECT = Path(__file__).resolve().parent.parent


def test_save_results_prints_what_the_readme_shows_and_regenerates_the_table(tmp_path, capsys):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "01_demo.ipynb").write_text("{}")
    frame = pd.DataFrame({"provider": ["a"], "size": [1], "gbps": [2.0]})
    path = save_results("01_demo", frame, [Headline("copy", 2900.0, "GB/s", "torch", 2950.0)],
                        results_dir=tmp_path / "results", notebooks_dir=notebooks)
    printed = capsys.readouterr().out
    assert "copy: 2,900 GB/s | torch: 2,950 GB/s | 0.98x" in printed
    saved = load_results(path)
    assert saved.notebook == "01_demo" and saved.environment["torch"] == torch.__version__
    assert saved.frame["gbps"].tolist() == [2.0] and saved.headlines[0].ratio == pytest.approx(2900 / 2950)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{BEGIN}\nold\n{END}\nrest\n")
    args = ["--results", str(tmp_path / "results"), "--device", path.parent.name, "--readme", str(readme)]
    assert results.main(args + ["--check"]) == 1
    assert results.main(args) == 0
    text = readme.read_text()
    # the README cell is the very string the notebook printed
    assert "| [01](notebooks/01_demo.ipynb) | copy | 2,900 GB/s | torch: 2,950 GB/s | 0.98x |" in text
    assert "old" not in text and results.main(args + ["--check"]) == 0
    json.loads(path.read_text())


def test_save_results_rejects_a_notebook_that_does_not_exist_and_bad_headlines(tmp_path):
    with pytest.raises(ValueError, match="file stem"):
        save_results("bad name/..", results_dir=tmp_path)
    with pytest.raises(ValueError, match="no notebooks/99_missing.ipynb"):
        save_results("99_missing", results_dir=tmp_path)
    with pytest.raises(TypeError, match="number"):
        Headline("copy", "fast", "GB/s")
    with pytest.raises(TypeError, match="Headline"):
        save_results("01_timing_gpu_code", None, [("copy", 1.0)], results_dir=tmp_path)


def test_readme_figures_table_is_up_to_date():
    assert results.main(["--check"]) == 0, "run: python -m course_utils.results"


def test_every_saved_result_names_an_existing_notebook():
    for path in sorted((PROJECT / "results").glob("*/*.json")):
        saved = load_results(path)
        assert path.stem == saved.notebook and any((PROJECT / "notebooks" / where / f"{saved.notebook}.ipynb").exists()
                                                   for where in (".", "deep_dives"))  # a deep dive saves under its stem


def test_lessons_modules_match_their_notebooks():
    assert export.main(["--check"]) == 0, "run: python -m course_utils.export"


def test_export_writes_marked_cells_in_order(tmp_path):
    (tmp_path / "notebooks").mkdir()
    cells = [{"cell_type": "code", "source": "# export: lessons/nb01_demo.py\nimport math\nA = 1\n"},
             {"cell_type": "code", "source": "print('not exported')"},
             {"cell_type": "markdown", "source": "# export: lessons/nb01_demo.py\nprose"},
             {"cell_type": "code", "source": ["# export: lessons/nb01_demo.py\n", "B = math.pi\n"]}]
    (tmp_path / "notebooks" / "01_demo.ipynb").write_text(json.dumps({"cells": cells}))
    (tmp_path / "lessons").mkdir()
    (tmp_path / "lessons" / "nb98_by_hand.py").write_text('"""A kernel too long for a cell, shown by its notebook."""\n')
    (tmp_path / "lessons" / "nb99_stale.py").write_text('"""Exported from notebooks/99_gone.ipynb by ...')
    assert export.main(["--project", str(tmp_path), "--check"]) == 1
    assert export.main(["--project", str(tmp_path)]) == 0
    text = (tmp_path / "lessons" / "nb01_demo.py").read_text()
    assert text.startswith('"""Exported from notebooks/01_demo.ipynb')
    assert "import math\nA = 1\n\n\nB = math.pi\n" in text and "not exported" not in text and "prose" not in text
    assert not (tmp_path / "lessons" / "nb99_stale.py").exists()  # exported by no notebook: removed
    assert (tmp_path / "lessons" / "nb98_by_hand.py").exists()  # written by hand (no export header): kept
    assert export.main(["--project", str(tmp_path), "--check"]) == 0


def _imports(module: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(module.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("course_utils"):
            names.add(node.module.split(".")[1] if "." in node.module else "")
            names |= {a.name for a in node.names if node.module == "course_utils"}
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("course_utils.")}
    return names - {""}


def test_course_utils_has_no_import_cycle_and_no_private_cross_module_names():
    package = PROJECT / "course_utils"
    graph = {p.stem: _imports(p) for p in package.glob("*.py") if p.stem != "__init__"}
    visiting, done = set(), set()

    def visit(node, path):
        assert node not in visiting, f"import cycle: {' -> '.join(path + [node])}"
        if node in done:
            return
        visiting.add(node)
        for nxt in graph.get(node, ()):
            visit(nxt, path + [node])
        visiting.discard(node)
        done.add(node)

    for node in graph:
        visit(node, [])
    for path in package.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("course_utils"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name} imports private names {private} from {node.module}"


def test_no_notebook_uses_a_private_name_of_course_utils_or_lessons():
    pattern_alias = re.compile(r"import (?:course_utils|lessons)[\w.]* as (\w+)|"
                               r"from (?:course_utils|lessons) import (\w+)(?: as (\w+))?")
    for notebook in sorted((PROJECT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        source = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        aliases = {"course_utils", "lessons"} | {a or c or b for a, b, c in pattern_alias.findall(source)}
        used = re.findall(r"\b(?:" + "|".join(sorted(aliases)) + r")\.(_(?!_)\w+)", source)
        imported = re.findall(r"from (?:course_utils|lessons)[\w.]* import \(?([^)\n]*)", source)
        used += [n.strip() for line in imported for n in line.split(",") if n.strip().startswith("_")]
        assert not used, f"{notebook.name} uses private names of course_utils/lessons: {used}"


def test_targets_judge_the_unrounded_figure_and_a_stale_target_fails_the_table(tmp_path):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "01_demo.ipynb").write_text("{}")
    headline = Headline("matmul", 1016.0, "TFLOP/s", "cuBLAS", 1000.0)  # 1.016x, printed as 1.02x
    path = save_results("01_demo", None, [headline, Headline("busy", 91.0, "%")],
                        results_dir=tmp_path / "results", notebooks_dir=notebooks)
    ratio_target = results.Target(17, "01_demo", "matmul", "cuBLAS", 1.02, "x")
    share_target = results.Target(14, "01_demo", "busy", "", 90.0, "%", note="of the final rung")
    assert ratio_target.verdict(headline) == ">= 1.02x: missed"
    table = results.figures_table(tmp_path / "results", path.parent.name, [ratio_target, share_target])
    assert "| 1.02x | >= 1.02x: missed |" in table
    assert "| 91 % | - | - | >= 90 %, of the final rung: met |" in table
    renamed = results.Target(17, "01_demo", "matmul 4096^3", "cuBLAS", 1.02, "x")
    with pytest.raises(ValueError, match="judge no saved headline.*matmul 4096"):
        results.figures_table(tmp_path / "results", path.parent.name, [renamed])
    pending = results.Target(27, "01_demo", "matmul 4096^3", "cuBLAS", 1.02, "x", pending=True)  # the next run saves it
    table = results.figures_table(tmp_path / "results", path.parent.name, [pending])
    assert "| matmul 4096^3 | not yet measured on this GPU | cuBLAS | - | >= 1.02x |" in table


def test_every_target_of_the_issues_judges_a_saved_headline():
    targets = results.load_targets()
    assert {t.issue for t in targets} >= {11, 12, 13, 14, 17}
    for t in targets:  # every goal names a notebook of the course; one not yet run on the GPU is listed as such
        assert any((results.NOTEBOOKS_DIR / folder / f"{t.notebook}.ipynb").exists() for folder in ("", "deep_dives")), t
    table = results.figures_table(results.RESULTS_DIR, results.REFERENCE_DEVICE, targets)  # raises on a stale target
    for t in targets:
        if t.pending or not (results.RESULTS_DIR / results.REFERENCE_DEVICE / f"{t.notebook}.json").exists():
            assert f"| {t.what} | not yet measured on this GPU |" in table


def test_verdict_states_figure_baseline_ratio_and_prediction(capsys):
    from course_utils.results import verdict

    v = verdict("Triton add", 3051.2, "GB/s", baseline="torch.add", baseline_value=3036.0, expect=(0.9, None), judge=True)
    assert capsys.readouterr().out.strip() == v.line
    assert v.line == "Triton add: 3,051 GB/s vs torch.add 3,036 GB/s = 1.01x; predicted >= 0.9x: holds"
    assert v.holds and v.ratio == pytest.approx(3051.2 / 3036.0)
    slow = verdict("softmax", 0.2, "ms", baseline="torch", baseline_value=0.1, expect=(0.9, None), judge=True)
    assert slow.ratio == pytest.approx(0.5) and slow.holds is False and "(speed-up)" in slow.line
    assert "does NOT hold" in slow.line
    small = verdict("peak", 700.0, "MiB", baseline="default", baseline_value=1400.0, judge=False)
    assert small.ratio == pytest.approx(2.0) and "(smaller)" in small.line and "speed-up" not in small.line
    cpu = verdict("x", 1.0, "GB/s", baseline="y", baseline_value=2.0, expect=(None, 1.0), judge=False)
    assert cpu.holds is None and "not judged" in cpu.line
    alone = verdict("share", 91.0, "%", expect=(80, None), judge=True)
    assert alone.ratio is None and alone.holds and "predicted >= 80 %" in alone.line


@pytest.mark.parametrize("kwargs, error", [
    (dict(what="", value=1.0, unit="ms"), ValueError),
    (dict(what="x", value="1", unit="ms"), TypeError),
    (dict(what="x", value=1.0, unit="ms", baseline_value=0.0), ValueError),
    (dict(what="x", value=1.0, unit="ms", expect=(None, None)), ValueError),
    (dict(what="x", value=1.0, unit="ms", expect=0.9), ValueError),
])
def test_verdict_refuses_what_it_cannot_judge(kwargs, error):
    from course_utils.results import verdict

    with pytest.raises(error):
        verdict(**kwargs)


def test_a_target_can_bound_a_headline_from_above():
    from course_utils.results import Headline, Target

    small = Target(1, "11_x", "AUC difference", "", at_most=0.005, unit="AUC")
    assert small.goal() == "<= 0.005 AUC"
    assert small.verdict(Headline("AUC difference", 0.003, "AUC", "", None)).endswith("met")
    assert small.verdict(Headline("AUC difference", 0.02, "AUC", "", None)).endswith("missed")
    with pytest.raises(ValueError, match="exactly one of at_least and at_most"):
        Target(1, "11_x", "AUC difference", "", at_least=1.0, at_most=2.0)
