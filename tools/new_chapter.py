"""`./course.sh new NN_topic "Title"`: scaffold every file of a new chapter, its tests passing from the start.

Writes (never overwrites) the files CONTRIBUTING.md lists: the main notebook (title and badge, set-up cell,
provenance, a kernel shown from lessons/, its correctness check, a raw `do_bench` timing and the course's
verdict, two graded exercises), the lesson module, exercises with references and three wrong answers each,
unit tests, compile targets, a deck and a README row. The starting kernel is a scaled copy: replace it with
the chapter's own, keeping the shape. The notebook is executed on this machine (CPU outputs, with the banner
that says its H100 run is owed) unless ``--no-execute``.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from colab_cell import SETUP_CELL  # noqa: E402

BADGE = ("[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
         "(https://colab.research.google.com/github/gpu-perf-course/gpu-perf-course/blob/main/{path})")
CPU_BANNER = "**The outputs below come from a CPU run: this notebook's H100 run is still owed.**"

LESSON = '''"""Notebook {nn}'s kernels and their wrappers (shown by notebooks/{stem}.ipynb with course_utils.export.show)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu

SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def scale_kernel(x_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x).to(out_ptr.dtype.element_ty), mask=mask)


def scale(x: torch.Tensor, alpha: float, block_size: int = 1024) -> torch.Tensor:
    """alpha * x for a 1-D tensor of a supported dtype (a strided view is copied first)."""
    cu.require_tensors(x=x, dtypes=SUPPORTED, ndim=1)
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a number, got {{type(alpha).__name__}}")
    x = x.contiguous()
    out = torch.empty_like(x)
    scale_kernel[(triton.cdiv(x.numel(), block_size),)](x, out, float(alpha), x.numel(), BLOCK_SIZE=block_size)
    return out
'''

EXERCISES = '''"""Notebook {nn}: the exercises (replace them with the chapter's own, keeping 2-4 of them)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, kinks, randn, sizes, tensor_arg, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@st.composite
def _one_vector(draw) -> Inputs:
    n, dtype = draw(sizes(pick_size(1 << 20, 5000))), draw(st.sampled_from(DTYPES))
    x, about = tensor_arg(draw, "x", (n,), dtype, ("contiguous", "strided"))
    return Inputs(lambda: (x(),), about)


def _negate(x: torch.Tensor) -> torch.Tensor:
    return -x


def _relu(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x)


def _programs():  # 41 elements in blocks of 16: three programs, the last one partial, even on a CPU
    x = randn(41)
    return [case(f"{{described('x', x)}} (block_size=16: 3 programs)", values(x))]


#: The grader's input families (course_utils.grading.FAMILIES) that apply, each with its cases.
NEGATE = Exercise("{nn}.1 negate", "negate(x) = -x for a 1-D x (fp32/fp16/bf16, any stride), as a Triton kernel",
                  _negate, _one_vector(), DTYPES, block={{"block_size": 16}},
                  families={{"programs": _programs,
                            "empty": lambda: [case("x: float32 (0,)", values(randn(0)))]}})
RELU = Exercise("{nn}.2 relu", "relu(x) = max(x, 0) for a 1-D x (fp32/fp16/bf16, any stride), as a Triton kernel",
                _relu, _one_vector(), DTYPES, block={{"block_size": 16}},
                families={{"programs": _programs,
                          "kinks": lambda: [case("x: float32 (33,), about half exact zeros", values(kinks(randn(33))))]}})

#: exercise -> its reference solution's name in solutions.nb{nn} (tests/test_exercises.py reads it)
SOLUTIONS = {{"NEGATE": "negate", "RELU": "relu"}}
'''

SOLUTIONS = '''"""Solutions of notebook {nn}'s exercises (try first)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter


@triton.jit
def negate_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)  # in fp32: Triton 3.7's interpreter negates bf16 wrongly
    tl.store(out_ptr + offsets, (-x).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0).to(x.dtype), mask=mask)


def _launch(kernel, x: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    x = x.contiguous()  # the kernels read a flat array: copy a strided view first
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
    return out


def negate(x: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    return _launch(negate_kernel, x, block_size)


def relu(x: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    return _launch(relu_kernel, x, block_size)
'''

WRONG = '''"""Wrong answers to notebook {nn}'s exercises: a missing mask, a round-down grid, a strided view read flat."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb{nn} as ex
from solutions import nb{nn} as sol


@triton.jit
def copy_no_mask_kernel(x_ptr, out_ptr, n_elements, NEGATE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)                                  # BUG: no mask
    y = (-x.to(tl.float32)).to(x.dtype) if NEGATE else tl.where(x > 0, x, 0.0).to(x.dtype)
    tl.store(out_ptr + offsets, y)


def _no_mask(negate: bool):
    def run(x, block_size=1024):
        x = x.contiguous()
        out = torch.empty_like(x)
        copy_no_mask_kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), NEGATE=negate,
                                                                  BLOCK_SIZE=block_size)
        return out
    return run


def _round_down(kernel):
    def run(x, block_size=1024):
        x = x.contiguous()
        out = torch.empty_like(x)
        kernel[(max(1, x.numel() // block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)  # BUG: drops the tail
        return out
    return run


def _read_flat(kernel):
    def run(x, block_size=1024):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)   # BUG: no .contiguous(): a view is read flat
        kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
        return out
    return run


WRONG = [
    (ex.NEGATE, "missing mask", _no_mask(True), ["wrote outside", "past its end"]),
    (ex.NEGATE, "round-down grid", _round_down(sol.negate_kernel), ["values wrong, the first at index"]),
    (ex.NEGATE, "strided view read flat", _read_flat(sol.negate_kernel), ["strides (2,)", "values wrong"]),
    (ex.RELU, "missing mask", _no_mask(False), ["wrote outside", "past its end"]),
    (ex.RELU, "round-down grid", _round_down(sol.relu_kernel), ["values wrong, the first at index"]),
    (ex.RELU, "strided view read flat", _read_flat(sol.relu_kernel), ["strides (2,)", "values wrong"]),
]
'''

UNIT_TESTS = '''"""Notebook {nn}'s lesson (lessons/nb{nn}_{topic}.py): right on awkward shapes and every dtype it claims; bad
input gets an error that names the argument."""

import pytest
import torch

import course_utils as cu
from lessons.nb{nn}_{topic} import SUPPORTED, scale


def test_scale_matches_pytorch_on_awkward_cases():
    report = cu.check(lambda x: scale(x, 2.5), lambda x: (2.5 * x.float()).to(x.dtype),
                      cu.awkward_cases((1, 7, 1023, 1025, 4099), dtypes=SUPPORTED))
    assert report.passed, str(report)


@pytest.mark.parametrize("args, error, words", [
    (([1.0, 2.0], 2.0), TypeError, "x must be a torch.Tensor"),
    ((torch.ones(3, dtype=torch.int32), 2.0), TypeError, "x must have a dtype"),
    ((torch.ones(2, 3), 2.0), ValueError, "x must be 1-D"),
    ((torch.ones(3), "2"), TypeError, "alpha must be a number"),
])
def test_scale_refuses_bad_input_naming_the_argument(args, error, words):
    x, alpha = args
    if isinstance(x, torch.Tensor):
        x = x.to(cu.DEVICE)
    with pytest.raises(error, match=words):
        scale(x, alpha)
'''

COMPILE_TARGETS = '''"""Notebook {nn}'s kernels (lessons/nb{nn}_{topic}.py), at the block size the notebook launches."""

from compile_targets import Target

M = "lessons.nb{nn}_{topic}"

TARGETS = [
    Target(M, "scale_kernel", {{"x_ptr": "*fp32", "out_ptr": "*fp32", "alpha": "fp32", "n_elements": "i32"}},
           {{"BLOCK_SIZE": 1024}}),
]
'''

DECK = '''{{{{ title_slide("{title}: the lecture's question, in one sentence?") }}}}

Note:
What this lecture answers, and what the learner will be able to do after it.

---
<!-- kind: question -->
## The question

- What the chapter measures, and against which baseline
- The prediction, from the mechanism (bytes moved, FLOPs, the roofline)

Note:
State the prediction before any figure.

---
## The kernel

{{{{ code("lessons/nb{nn}_{topic}.py", "scale_kernel") }}}}

Note:
Walk through the kernel: offsets, mask, load, store.

---
## One program per block

{{{{ diagram("programs_and_mask", size="short", caption="one program per block; the mask keeps the last block inside the vector") }}}}

Note:
Draw your chapter's own mechanism here (slides/diagrams.py draws every diagram by code; add one there).

---
<!-- kind: try -->
## Try it

1. The first exercise of the notebook, in one line: what to write, what the grader checks
2. A change to the measured code, and the question it answers

Note:
Which exercise teaches the most, and what a learner usually gets wrong first.

---
<!-- kind: summary -->
## Summary

- The mechanism, in one line
- The verdict line the notebook prints says whether the prediction held on your GPU

Note:
What to try next: the exercises at the end of the notebook.
'''


def _cell(kind: str, source: str, **extra) -> dict:
    cell = {"cell_type": kind, "id": uuid.uuid4().hex[:8], "metadata": {}, "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell.update(execution_count=None, outputs=[])
    return {**cell, **extra}


def notebook(nn: str, topic: str, title: str) -> dict:
    stem = f"{nn}_{topic}"
    cells = [
        _cell("markdown", f"# {nn}. {title}\n\n{BADGE.format(path=f'notebooks/{stem}.ipynb')}\n\n{CPU_BANNER}\n\n"
                          "What this chapter teaches, in three bullets; what you will be able to do after it."),
        _cell("code", SETUP_CELL),
        _cell("code", "import course_utils as cu  # first: on a CPU it switches Triton to its interpreter\n\n"
                      "import torch\nimport triton\nimport triton.testing\n\n"
                      f"from course_utils.export import show\nfrom lessons.nb{nn}_{topic} import scale, scale_kernel\n\n"
                      "cu.print_environment()"),
        _cell("markdown", "## 1. The kernel\n\nOne program scales one block of the vector; the mask keeps the last "
                          "block inside it. The kernel lives in `lessons/` and is shown here:"),
        _cell("code", "show(scale_kernel)"),
        _cell("markdown", "## 2. Correct before fast\n\nAgainst PyTorch on awkward lengths (1, a prime, a block "
                          "plus one) and every dtype the wrapper claims, contiguous and strided:"),
        _cell("code", "# NBVAL_CHECK_OUTPUT\n"
                      "report = cu.check(lambda x: scale(x, 2.5), lambda x: (2.5 * x.float()).to(x.dtype),\n"
                      "                  cu.awkward_cases((1, 7, 1023, 1025, 4099), "
                      "dtypes=(torch.float32, torch.float16, torch.bfloat16)))\n"
                      "print('all cases pass' if report.passed else report)"),
        _cell("markdown", "## 3. Fast: the prediction, then the measurement\n\nThe kernel reads every element "
                          "once and writes it once, like a copy: expect its bandwidth within 10% of "
                          "`torch`'s own copy. First with Triton's raw timer, `triton.testing.do_bench`; then "
                          "with the course's `cu.benchmark` against the copy, and the verdict line."),
        _cell("code", "n = cu.pick_size(2**26, 2**12)\nx = torch.randn(n, device=cu.DEVICE)\n"
                      "if cu.HAS_CUDA:\n    print(f\"do_bench: {triton.testing.do_bench(lambda: scale(x, 2.5)):.4f} ms\")\n"
                      "mine = cu.benchmark(lambda: scale(x, 2.5), bytes_moved=2 * x.nbytes)\n"
                      "copy = cu.benchmark(lambda: x.clone(), bytes_moved=2 * x.nbytes)\n"
                      "cu.verdict(f\"scale, {n:,} fp32\", mine.gbps, \"GB/s\", baseline=\"torch copy\", "
                      "baseline_value=copy.gbps,\n           expect=(0.9, None));"),
        _cell("markdown", "## Exercises\n\nEach task is a stub: write it, run the cell, and the grader says "
                          "`passed`, or shows the smallest input on which your function is wrong. Reference "
                          f"solutions: `solutions/nb{nn}.py` (try first).\n\n**{nn}.1** `negate(x)`: `-x` for a "
                          "1-D tensor of any stride, as a Triton kernel."),
        _cell("code", f"from course_utils.grading import grade\nfrom exercises.nb{nn} import NEGATE, RELU\n\n\n"
                      "def negate(x, block_size=1024):\n    raise NotImplementedError(\"exercise 1: your Triton kernel and its launch\")"),
        _cell("code", "# NBVAL_CHECK_OUTPUT\nreport = grade(NEGATE, negate)"),
        _cell("markdown", f"**{nn}.2** `relu(x)`: `max(x, 0)` for a 1-D tensor of any stride."),
        _cell("code", "def relu(x, block_size=1024):\n    raise NotImplementedError(\"exercise 2: your Triton kernel and its launch\")"),
        _cell("code", "# NBVAL_CHECK_OUTPUT\nreport = grade(RELU, relu)"),
    ]
    return {"cells": cells, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"}, "course": {"non_measured_figures": ["10%"]}},
        "nbformat": 4, "nbformat_minor": 5}


def scaffold(name: str, title: str, root: Path = ROOT, execute: bool = True) -> list[Path]:
    match = re.fullmatch(r"(\d\d)_([a-z][a-z0-9_]*)", name or "")
    if not match:
        raise SystemExit(f"name must look like NN_topic (two digits, lowercase words joined by _), got {name!r}")
    nn, topic = match.groups()
    if list((root / "notebooks").glob(f"{nn}_*.ipynb")):
        raise SystemExit(f"chapter {nn} exists already: {[p.name for p in (root / 'notebooks').glob(f'{nn}_*.ipynb')]}")
    fields = dict(nn=nn, topic=topic, stem=name, title=title)
    files = {
        f"lessons/nb{nn}_{topic}.py": LESSON.format(**fields),
        f"exercises/nb{nn}.py": EXERCISES.format(**fields),
        f"solutions/nb{nn}.py": SOLUTIONS.format(**fields),
        f"tests/wrong_solutions/nb{nn}.py": WRONG.format(**fields),
        f"tests/test_nb{nn}_{topic}.py": UNIT_TESTS.format(**fields),
        f"tests/compile_targets/nb{nn}.py": COMPILE_TARGETS.format(**fields),
        f"slides/{name}.md": DECK.format(**fields),
        f"notebooks/{name}.ipynb": json.dumps(notebook(nn, topic, title), indent=1, ensure_ascii=False) + "\n",
    }
    written = []
    for rel, text in files.items():
        path = root / rel
        if path.exists():
            raise SystemExit(f"{rel} exists already: nothing written")
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
        written.append(root / rel)
    readme = root / "README.md"
    lines = readme.read_text(encoding="utf-8").splitlines(keepends=True)
    rows = [i for i, line in enumerate(lines) if re.match(r"\| \[\d\d_", line)]
    row = (f"| [{name}](notebooks/{name}.ipynb) | {title} *CPU outputs* | "
           f"[slides](slides/{name}.md) |\n")
    lines.insert(rows[-1] + 1 if rows else len(lines), row)
    readme.write_text("".join(lines), encoding="utf-8")
    if execute:
        subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute", "--inplace",
                        "--ExecutePreprocessor.timeout=600", str(root / f"notebooks/{name}.ipynb")], check=True,
                       cwd=root, capture_output=True)
        subprocess.run([sys.executable, str(root / "tools/scrub_outputs.py"), str(root / f"notebooks/{name}.ipynb")],
                       check=True, cwd=root, capture_output=True)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaffold a new chapter of the course.")
    parser.add_argument("name", help="NN_topic, e.g. 15_flash_attention")
    parser.add_argument("title", nargs="?", help="the chapter's title (default: from the topic)")
    parser.add_argument("--root", type=Path, default=ROOT)
    parser.add_argument("--no-execute", action="store_true", help="leave the notebook without outputs")
    args = parser.parse_args(argv)
    title = args.title or args.name[3:].replace("_", " ").capitalize()
    for path in scaffold(args.name, title, args.root, execute=not args.no_execute):
        print("wrote", path.relative_to(args.root))
    print("and a row in README.md. Next: CONTRIBUTING.md; ./course.sh test -k", args.name[:2])
    return 0


if __name__ == "__main__":
    sys.exit(main())
