"""Every Triton kernel of the course compiles, in CPU CI, for the GPUs learners have: sm_75 (Colab's
T4), sm_80 (A100) and sm_90 (H100), through `course_utils.kernel_inspect` (no GPU needed).

The kernels live in `lessons/` (exported from their notebooks); tests/compile_targets/nbNN.py says
how to compile each one. The list of what was compiled is written to .cache/compiled_targets.txt and
printed at the end of the test run (tests/conftest.py).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path

import pytest

import course_utils  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
import lessons
from course_utils import kernel_inspect as ki
from course_utils.device import CACHE_DIR
from compile_targets import ALL_ARCHS, Target

PROJECT = Path(__file__).resolve().parent.parent
REPORT = CACHE_DIR / "compiled_targets.txt"


def all_targets() -> list[Target]:
    targets = []
    folder = Path(__file__).parent / "compile_targets"
    for info in pkgutil.iter_modules([str(folder)]):
        targets += importlib.import_module(f"compile_targets.{info.name}").TARGETS
    return targets


def lesson_kernels() -> dict[tuple[str, str], object]:
    """Every @triton.jit function of lessons/ that is launched, not only called by another kernel
    (helpers such as notebook 07's tile_coords are compiled inside the kernels that call them)."""
    found, called = {}, set()
    for info in pkgutil.iter_modules(lessons.__path__):
        module = importlib.import_module(f"lessons.{info.name}")
        for name, value in vars(module).items():
            if type(value).__name__ in ("JITFunction", "InterpretedFunction") and value.fn.__module__ == module.__name__:
                found[(module.__name__, name)] = value
                called |= {(module.__name__, n) for n in value.fn.__code__.co_names}
    return {key: kernel for key, kernel in found.items() if key not in called}


def test_every_lesson_kernel_has_a_compile_target():
    listed = {(t.module, t.kernel) for t in all_targets()}
    missing = sorted(set(lesson_kernels()) - listed)
    assert not missing, f"add these kernels to tests/compile_targets/nbNN.py: {missing}"
    unknown = sorted(listed - set(lesson_kernels()))
    assert not unknown, f"compile targets name kernels that lessons/ does not define: {unknown}"


def test_targets_leave_out_an_architecture_only_with_a_reason():
    for t in all_targets():
        assert set(t.archs) <= set(ALL_ARCHS) and t.archs, f"{t.kernel}: archs must be among {ALL_ARCHS}"
        assert set(t.archs) == set(ALL_ARCHS) or t.why_not_all, f"{t.kernel} skips an architecture: say why"


def test_every_triton_kernel_in_a_notebook_is_exported():
    """A kernel pasted into a notebook cell would escape the compile test (and invite copies)."""
    for notebook in sorted((PROJECT / "notebooks").glob("[0-9][0-9]_*.ipynb")) + sorted((PROJECT / "notebooks" / "deep_dives").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text())["cells"]:
            source = "".join(cell["source"])
            decorator = re.search(r"^@triton\.jit.*\n(?:@.*\n)*def (\w+)", source, re.M)  # not a mention in a comment
            if cell["cell_type"] != "code" or decorator is None:
                continue
            name = decorator.group(1)
            exported = source.startswith("# export: lessons/")
            # notebook 08's interpreter demos, and 08b's debug-print and device-assert demos, which are defined with the
            # interpreter flag on or compiled for a GPU right in their cell (what they show)
            interpreter_only = any(mark in source for mark in ("with triton_interpret():", 'os.environ["TRITON_INTERPRET"] = "1"',
                                                               "ki.compile_triton("))
            assert exported or interpreter_only, (
                f"{notebook.name}: a cell defines a Triton kernel outside an export cell: {name}")


def test_every_lesson_kernel_compiles_for_its_targets():
    # Triton's compile runs ptxas on each kernel's PTX to make the cubin, whose registers (cuobjdump's resource usage)
    # are what this report prints. quick=True leaves out what the report does not print: a second `ptxas -v` run for
    # the spill counts and the SASS disassembly (nvdisasm, ~0.4 s a kernel): with a warm Triton cache, the test took
    # 133 s with both, 14 s without (alone on the 2-core machine). tests/test_kernel_inspect.py checks those paths.
    kernels = lesson_kernels()
    jobs, labels = [], []
    for t in all_targets():
        for arch in t.archs:
            jobs.append(dict(kernel=kernels[(t.module, t.kernel)], signature=t.signature, constexprs=t.constexprs,
                             arch=arch, num_warps=t.num_warps, num_stages=t.num_stages,
                             divisible_by_16=t.divisible_by_16))
            pointers = sorted({v.lstrip("*") for v in t.signature.values() if v.startswith(("*", "tensordesc"))})
            labels.append(f"{t.module}.{t.kernel} ({', '.join(pointers)}) {arch}")
    if not jobs:
        pytest.fail("no compile targets found in tests/compile_targets/")
    compiled = ki.compile_triton_jobs(jobs, quick=True)
    lines = []
    for label, stages in zip(labels, compiled):
        assert ".entry" in stages["ptx"] and stages.arch in stages["ptx"], label
        assert isinstance(stages.summary.registers, int), label
        lines.append(f"{label:<70} {stages.summary.registers} registers, "
                     f"{stages.summary.tensor_core_kind or 'no'} tensor cores")
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text("\n".join(lines) + "\n", encoding="utf-8")
