"""The set-up cell every notebook opens with (its second cell), written once here.

    python tools/colab_cell.py            # rewrite cell 2 of every notebook (main and deep dives) to SETUP_CELL
    python tools/colab_cell.py --check    # exit 1 if a notebook's cell 2 differs

tests/test_notebooks_structure.py checks every notebook against SETUP_CELL; `./course.sh new` uses it.
"""

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SETUP_CELL = '''\
# Set-up for Colab or any machine without the course: installs it from COURSE_REPO (a fork? set it here or in
# the environment). Where the course is installed (./course.sh lab, pip install -e .), this does nothing.
import importlib.util, os, subprocess, sys
COURSE_REPO = os.environ.get("COURSE_REPO", "https://github.com/gpu-perf-course/gpu-perf-course")
if importlib.util.find_spec("course_utils") is None:
    steps = [["--no-deps", f"git+{COURSE_REPO}"], ["hypothesis"]]  # the course; what Colab lacks (the grader's)
    for step in steps:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *step], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"Could not pip install {step[-1]}: {(done.stderr.strip().splitlines() or ['?'])[-1]}\\n"
                  "Check that this runtime reaches the internet, set COURSE_REPO to a repository you can reach, "
                  "or clone the course and run `pip install -e .` in it; then restart the kernel.")
            break
'''


def main(argv: list[str]) -> int:
    paths = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.ipynb")) + \
        sorted((ROOT / "notebooks" / "deep_dives").glob("[0-9][0-9]*_*.ipynb"))
    stale = []
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        cell = nb["cells"][1]
        if "".join(cell["source"]) != SETUP_CELL:
            stale.append(path.name)
            if "--check" not in argv:
                cell.update(cell_type="code", source=SETUP_CELL.splitlines(keepends=True), outputs=[],
                            execution_count=cell.get("execution_count"))
                path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    if "--check" in argv and stale:
        print("cell 2 differs from tools/colab_cell.py in: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
