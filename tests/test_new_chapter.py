"""`./course.sh new NN_topic` scaffolds a chapter whose tests pass: run in a copy of the project."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    copy = tmp_path_factory.mktemp("course")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout.splitlines()
    for rel in listed:
        if (ROOT / rel).is_file():
            (copy / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / rel, copy / rel)
    return copy


def _env(project: Path) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(project), os.environ.get("PYTHONPATH", "")]),
            "OMP_NUM_THREADS": "1"}


def test_scaffolded_chapter_passes_its_tests(project):
    made = subprocess.run([sys.executable, "tools/new_chapter.py", "98_demo_topic", "A demo chapter"], cwd=project,
                          env=_env(project), capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stdout + made.stderr
    for rel in ("notebooks/98_demo_topic.ipynb", "lessons/nb98_demo_topic.py", "exercises/nb98.py", "solutions/nb98.py",
                "tests/wrong_solutions/nb98.py", "tests/test_nb98_demo_topic.py", "tests/compile_targets/nb98.py",
                "slides/98_demo_topic.md"):
        assert (project / rel).is_file(), rel
    assert "| [98_demo_topic](notebooks/98_demo_topic.ipynb)" in (project / "README.md").read_text()
    # the chapter's unit tests, exercises, design and structure checks, its compile targets' names, and its notebook
    run = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--nbval-lax",
                          "tests/test_nb98_demo_topic.py", "tests/test_design.py", "tests/test_notebooks_structure.py",
                          "tests/test_exercises.py", "tests/test_compile_targets.py", "notebooks/98_demo_topic.ipynb",
                          "-k", "98 or nb98 or readme or compile_targets_name or every_deep_dive or raw_api"],
                         cwd=project, env=_env(project), capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    for ran in ("test_nb98_demo_topic.py::test_scale_matches_pytorch_on_awkward_cases PASSED",
                "test_design.py::test_one_story_reading_time_and_cells[98_demo_topic] PASSED",
                "test_design.py::test_markdown_quotes_no_measured_figure[98_demo_topic] PASSED",
                "test_notebooks_structure.py::test_committed_outputs_come_from_the_reference_gpu[98_demo_topic] PASSED",
                "test_exercises.py::test_solution_passes[nb98-NEGATE] PASSED",
                "Cell 6 PASSED"):  # the notebook's check cell, through nbval
        assert ran in run.stdout, f"{ran!r} not in the run:\n{run.stdout[-3000:]}"


def test_scaffold_refuses_a_bad_name_or_an_existing_chapter(project):
    for name in ("15-flash", "5_x", "01_timing_gpu_code"):
        done = subprocess.run([sys.executable, "tools/new_chapter.py", name], cwd=project, env=_env(project),
                              capture_output=True, text=True, timeout=60)
        assert done.returncode != 0 and ("NN_topic" in done.stderr or "exists already" in done.stderr), done.stderr
