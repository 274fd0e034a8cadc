"""The grader's own checks (course_utils.grading): input families, invariants, races, out-of-bounds reads, the
GPU compile check, crashes and deadlines, and the words of its messages, on small exercises made here."""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from hypothesis import strategies as st

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from course_utils import grading
from course_utils.grading import FAMILIES, Exercise, Inputs, grade
from exercises import case, guarded_values, kinks, randn, values

NOTEBOOKS = ("nb03", "nb04", "nb05", "nb06", "nb07", "nb08", "nb09", "nb10", "nb11", "nb12", "nb13", "nb14")
interpreter_only = pytest.mark.skipif(cu.HAS_CUDA, reason="the interpreter's hooks: a CPU grading")


def _vector(n: int = 37):
    return st.just(Inputs(lambda: (guarded_values(randn(n)),), f"x: float32 ({n},)"))


def _double(x):
    return 2 * x


DOUBLE = Exercise("t.1 double", "double(x) = 2 x, a new tensor", _double, _vector(), examples=(3, 3))


def _exercise(**kwargs) -> Exercise:
    return Exercise(**{"name": "t.1 double", "task": "2 x", "reference": _double, "inputs": _vector(),
                       "examples": (3, 3), **kwargs})


# ---- families ------------------------------------------------------------------------------------------------
def test_every_exercise_of_03_to_14_declares_known_families():
    for nb in NOTEBOOKS:
        module = importlib.import_module(f"exercises.{nb}")
        for exercise in (v for v in vars(module).values() if isinstance(v, Exercise)):
            assert exercise.families, f"{exercise.name} declares no input family"
            assert set(exercise.families) <= set(FAMILIES), exercise.name
            for family, inputs in exercise.family_cases():
                assert isinstance(inputs, Inputs) and inputs.make(), (exercise.name, family)


def test_unknown_families_are_refused():
    with pytest.raises(ValueError, match="unknown input families"):
        grade(_exercise(families={"tiny": lambda: []}), _double, quiet=True)


def test_family_cases_run_and_are_named():
    only_odd = lambda x: 2 * x if x.numel() % 2 else 3 * x  # noqa: E731 - wrong on even lengths only
    exercise = _exercise(families={"edges": lambda: [case("x: float32 (4,)", values(randn(4)))]})
    report = grade(exercise, only_odd, quiet=True)
    assert report.status == "FAILED" and "x: float32 (4,) [edges]" in report.message, report


def test_kinks_and_gaps_helpers():
    k = kinks(torch.arange(1.0, 13.0))
    assert int((k == 0).sum()) == 6 and k[3] == k[2] and k[7] == k[6]
    v = guarded_values(torch.arange(24.0).view(2, 3, 4), "gaps")
    assert v.stride(0) > v.shape[1] * v.stride(1) and torch.equal(v.cpu(), torch.arange(24.0).view(2, 3, 4))


def test_programs_family_passes_the_small_block_to_a_function_that_takes_it():
    seen = []

    def double(x, block=1024):
        seen.append(block)
        return 2 * x

    exercise = _exercise(block={"block": 16}, families={"programs": lambda: [case("x (block=16)", values(randn(40)))]})
    assert grade(exercise, double, quiet=True).passed
    if cu.HAS_CUDA:  # the family runs on a CPU only (GPU-sized drawn cases need many programs): the drawn case,
        assert seen == [1024, 1024]  # looked at in the interpreter (no Triton kernel: no family looked at), then run
    else:
        assert seen[-1] == 16 and set(seen[:-1]) == {1024}


# ---- invariants ----------------------------------------------------------------------------------------------
def test_an_input_changed_by_the_call_fails():
    report = grade(DOUBLE, lambda x: x.mul_(2), quiet=True)
    assert "changed its input x" in report.message, report


def test_a_view_of_an_input_fails_unless_the_task_writes_it():
    report = grade(_exercise(reference=lambda x: x), lambda x: x[:], quiet=True)
    assert "returned a view of its input x" in report.message, report
    assert grade(_exercise(reference=lambda x: x, writes=(0,)), lambda x: x, quiet=True).passed


def test_layout_as_the_task_says():
    transposed = _exercise(reference=lambda x: x.view(-1, 1).expand(-1, 3).contiguous(), layout="contiguous")
    report = grade(transposed, lambda x: x.view(1, -1).expand(3, -1).clone().t(), quiet=True)
    assert "not contiguous as the task asks" in report.message, report


def test_out_never_written_is_said():
    def reference(x, out):
        return out.copy_(2 * x)

    inputs = st.just(Inputs(lambda: (guarded_values(randn(9)), guarded_values(randn(9, seed=1))), "x, out"))
    exercise = Exercise("t.2 into", "out = 2 x", reference, inputs, examples=(2, 2), writes=(1,),
                        output=lambda args, returned: args[1])
    report = grade(exercise, lambda x, out: 2 * x, quiet=True)
    assert "out was never written" in report.message, report


def test_messages_name_the_returned_value_and_the_failing_element():
    inputs = st.just(Inputs(lambda: (guarded_values(randn(6)),), "x: float32 (6,)"))
    exercise = Exercise("t.3 pair", "(x, 2 x)", lambda x: (x.clone(), 2 * x), inputs, examples=(2, 2),
                        returns=("same", "double"))

    def wrong(x):
        d = 2 * x
        d[1] += 0.5
        d[4] += 3.0
        return x.clone(), d

    report = grade(exercise, wrong, quiet=True)
    assert "double (the 2nd value you returned)" in report.message, report
    assert "the first at index (1,)" in report.message and "(error 0.5)" in report.message, report
    assert "the largest error, 3, at index (4,)" in report.message, report


def test_grouped_order_takes_any_array_of_integers():
    ex = importlib.import_module("exercises.nb07").GROUPED_ORDER
    sol = importlib.import_module("solutions.nb07").grouped_order
    assert grade(ex, lambda *a: sol(*a).astype(np.int32), quiet=True).passed
    assert grade(ex, lambda *a: sol(*a).tolist(), quiet=True).passed
    assert not grade(ex, lambda *a: sol(*a).astype(np.float64), quiet=True).passed


# ---- the interpreter's hooks: reads outside, races ---------------------------------------------------------------
@triton.jit
def _copy_unmasked_load_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)  # past the end on the last block, but only into lanes never stored
    tl.store(out_ptr + offs, 2 * x, mask=offs < n)


@triton.jit
def _sum_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ATOMIC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    s = tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), axis=0)
    if ATOMIC:
        tl.atomic_add(out_ptr, s)
    else:
        tl.store(out_ptr, tl.load(out_ptr) + s)


@interpreter_only
def test_a_load_outside_an_input_fails_even_when_its_lanes_are_not_stored():
    def double(x):
        out = torch.empty_like(x)
        _copy_unmasked_load_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
        return out

    report = grade(DOUBLE, double, quiet=True)
    assert "read outside the input x: 11 active lane(s) past its end" in report.message, report


@interpreter_only
def test_a_reduction_without_atomics_is_a_race():
    inputs = st.just(Inputs(lambda: (guarded_values(randn(50)),), "x: float32 (50,)"))
    exercise = Exercise("t.4 sum", "sum", lambda x: x.double().sum().float(), inputs, rtol=1e-5, atol=1e-5,
                        examples=(2, 2))

    def total(atomic):
        def vector_sum(x):
            out = torch.zeros((), dtype=torch.float32)
            _sum_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16, ATOMIC=atomic)
            return out
        return vector_sum

    report = grade(exercise, total(False), quiet=True)
    assert "a race in _sum_kernel: programs (0,) and (1,)" in report.message, report
    assert grade(exercise, total(True), quiet=True).passed


# ---- the GPU compile check --------------------------------------------------------------------------------------
@triton.jit
def _loop_dtype_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    acc = 0
    for _ in range(0, 2):
        acc = acc + x  # int, then a float tile: fine in the interpreter, not for the compiler
    tl.store(out_ptr + offs, acc, mask=offs < n)


@interpreter_only
def test_a_kernel_the_compiler_refuses_fails_with_its_message():
    def four_times(x):
        out = torch.empty_like(x)
        _loop_dtype_kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16)
        return out

    report = grade(_exercise(reference=lambda x: 2 * x), four_times, quiet=True)
    assert report.status == "FAILED", report
    assert "Triton cannot compile _loop_dtype_kernel for sm_80" in report.message, report
    start = time.perf_counter()
    assert grade(_exercise(reference=lambda x: 2 * x), four_times, quiet=True).message == report.message
    assert time.perf_counter() - start < 2, "the compile check's result is cached"


# ---- a GPU grading's replay in the interpreter ----------------------------------------------------------------------
@triton.jit
def _shifted_copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + 1, mask=offs < n)  # one element on: the last active lane reads past x
    tl.store(out_ptr + offs, 2 * x, mask=offs < n)


@triton.jit
def _late_shift_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs + n // 32, mask=offs < n)  # one element on from n = 32: the last lane reads past x
    tl.store(out_ptr + offs, 2 * x, mask=offs < n)


@triton.jit
def _copy_unmasked_store_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(out_ptr + offs, 2 * x)  # past the end of out on the last block


@triton.jit
def _max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr, ATOMIC: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), axis=0)  # tl.max: a @triton.jit function
    if ATOMIC:
        tl.atomic_max(out_ptr, m)
    else:
        tl.store(out_ptr, tl.maximum(tl.load(out_ptr), m))


#: Run in a fresh process with TRITON_INTERPRET=0, so that the kernels above are compiled-kind JITFunctions, as on
#: a GPU; the grader takes its CUDA path (grading.HAS_CUDA: no watch, no compile check, replays) on CPU tensors;
#: the "GPU" runs each launch in the interpreter, unwatched (values as a GPU's), after compiling the one kernel
#: whose compilation this test needs to fail (Triton's front end refuses it, as a GPU's JIT would).
_AS_ON_A_GPU = r"""
import json, sys
import torch, triton
from hypothesis import strategies as st
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.interpreter import InterpretedFunction
from triton.runtime.jit import JITFunction
from course_utils import grading
from exercises import case, randn, values
import test_grading as t

assert type(t._sum_kernel).__name__ == "JITFunction" and not grading.INTERPRET
twins, call = {}, JITFunction.__call__


def twin(kernel):
    if kernel.fn not in twins:
        twins[kernel.fn] = InterpretedFunction(kernel.fn)
    return twins[kernel.fn]


def run(self, *args, grid, warmup, **kwargs):  # the GPU's JIT: compile (that one kernel), launch
    on_gpu.append(self.fn.__name__)
    if self.fn is t._loop_dtype_kernel.fn:
        signature = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
        JITFunction.__call__, jitted = call, JITFunction.__call__
        try:
            triton.compile(ASTSource(self, signature, constexprs={"BLOCK": kwargs["BLOCK"]}),
                           target=GPUTarget("cuda", 90, 32))
        finally:
            JITFunction.__call__ = jitted
    language = grading._language_state()  # what the interpreter changes there, as the replay puts it back
    try:
        return twin(self).run(*args, grid=grid, warmup=warmup, **kwargs)
    finally:
        grading._restore_language(language)


JITFunction.run, JITFunction.__call__ = run, lambda self, *args, **kwargs: twin(self)(*args, **kwargs)
torch.cuda.synchronize = lambda *args, **kwargs: None
torch.cuda.get_device_capability = lambda *args, **kwargs: (9, 0)
grading.HAS_CUDA = True


def launching(kernel, **constexprs):
    def fn(x, block=1024):
        out = torch.empty_like(x)
        kernel[(triton.cdiv(x.numel(), 16),)](x, out, x.numel(), BLOCK=16, **constexprs)
        return out
    return fn


def reduce(kernel, start, atomic):
    def fn(x, block=1024):
        out = torch.full((), start, dtype=torch.float32)
        kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block, ATOMIC=atomic)
        return out
    return fn


calls, on_gpu = [], []
programs = {"programs": lambda: [case("x: float32 (100,) (block=16)", values(randn(100)))]}
total = t._exercise(reference=lambda x: x.double().sum().float(), rtol=1e-5, atol=1e-5, block={"block": 16},
                    families=programs)
largest = t._exercise(reference=lambda x: x.max(), block={"block": 16}, families=programs)
gradings = {"read outside, right values": (t._exercise(), launching(t._copy_unmasked_load_kernel)),
            "read outside, wrong values": (t._exercise(), launching(t._shifted_copy_kernel)),
            "race, right values": (total, reduce(t._sum_kernel, 0.0, False)),
            "atomics": (total, reduce(t._sum_kernel, 0.0, True)),
            "race in a max": (largest, reduce(t._max_kernel, -float("inf"), False)),
            "atomic max": (largest, reduce(t._max_kernel, -float("inf"), True)),
            "no kernel": (t._exercise(), lambda x: calls.append(x) or 2 * x),
            "compile error": (t._exercise(reference=lambda x: 2 * x), launching(t._loop_dtype_kernel)),
            "write outside": (t._exercise(), launching(t._copy_unmasked_store_kernel)),
            "read outside after the first case": (t._exercise(inputs=st.sampled_from([5, 37]).map(
                lambda n: t.Inputs(lambda: (t.guarded_values(randn(n)),), f"x: float32 ({n},)"))),
                launching(t._late_shift_kernel))}
reports, gpu_runs = {}, {}
for name, (exercise, fn) in gradings.items():
    on_gpu.clear()
    reports[name] = str(grading.grade(exercise, fn, quiet=True))
    gpu_runs[name] = len(on_gpu)
print(json.dumps({**reports, "calls without a kernel": len(calls), "gpu runs": gpu_runs}))
"""


@interpreter_only
def test_a_gpu_grading_looks_in_the_interpreter_before_the_gpu_and_after_a_failure():
    """On a GPU there is no watch. Before any case runs there, the grader runs the first drawn case (and, if it
    launched Triton kernels, every family case, with the small block) in the interpreter, on CPU copies, watched: a
    write or read outside or a race fails the grading there, and the GPU never runs that kernel (it could make the
    process lose the GPU). After a case fails on the GPU, the smallest failing case is looked at the same way. Here
    a CPU plays the GPU (see `_AS_ON_A_GPU`), and counts the kernels launched on it."""
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "TRITON_INTERPRET": "0", "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    run = subprocess.run([sys.executable, "-c", _AS_ON_A_GPU], cwd=root, env=env, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    reports = json.loads(run.stdout.splitlines()[-1])
    gpu = reports["gpu runs"]
    assert "FAILED. The smallest failing case: x: float32 (37,): read outside the input x: 11 active lane(s) past " \
           "its end" in reports["read outside, right values"], reports  # the GPU's values would be right
    assert "x: float32 (37,): read outside the input x: 1 active lane(s) past its end" in \
           reports["read outside, wrong values"], reports
    assert "x: float32 (37,): wrote outside a tensor your code allocated (empty_like): 11 element(s) past its end" \
           in reports["write outside"], reports
    assert "x: float32 (100,) (block=16) [programs]: a race in _sum_kernel: programs (0,) and (1,)" in \
           reports["race, right values"], reports  # one program in the drawn case: the family's small block
    assert "[programs]: a race in _max_kernel" in reports["race in a max"], reports  # its 2nd look: tl.max
    for name in ("read outside, right values", "read outside, wrong values", "write outside", "race, right values",
                 "race in a max"):
        assert gpu[name] == 0, (name, gpu)  # failed in the interpreter: no kernel of theirs reached the GPU
    assert reports["atomics"].endswith("passed (1 cases)") and gpu["atomics"] >= 1, reports
    assert reports["atomic max"].endswith("passed (1 cases)") and gpu["atomic max"] >= 1, reports
    # the first drawn case (5) looks right in the interpreter: the GPU runs the cases, 37 fails there (values), and
    # the look at that smallest failing case in the interpreter says why
    assert "FAILED. The smallest failing case: x: float32 (37,): read outside the input x: 1 active lane(s) past " \
           "its end" in reports["read outside after the first case"], reports
    assert gpu["read outside after the first case"] >= 2, gpu
    # no kernel: one look on CPU copies, one run; nothing more to look at
    assert reports["no kernel"].endswith("passed (1 cases)") and reports["calls without a kernel"] == 2, reports
    assert "x: float32 (37,): Triton cannot compile _loop_dtype_kernel for sm_90 (this GPU): AssertionError(" \
           "\"Loop-carried variable acc has initial type int32" in reports["compile error"], reports  # (the
    # looks before it left Triton's language modules as they were: else the compiler fails otherwise)


@triton.jit
def _looped_copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    for start in range(0, tl.cdiv(n, BLOCK)):  # the bound: a tensor holding one number, made an int by __index__
        offs = start * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@interpreter_only
def test_a_loop_bound_from_a_tensor_runs_in_the_watched_interpreter(monkeypatch):
    """Triton 3.6's interpreter (a GPU machine's, where the grader looks at cases in it) makes a 1-element tensor an
    int with int(array), an error in NumPy 2.4: every kernel looping to tl.cdiv(K, BLOCK_K) failed there, unseen.
    Its line, put back here: under the watch the loop still runs."""
    from triton.runtime import interpreter as ti

    original = ti._patch_lang_tensor

    def as_in_triton_3_6(tensor, scope):
        original(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

    monkeypatch.setattr(ti, "_patch_lang_tensor", as_in_triton_3_6)

    def double(x):
        out = torch.empty_like(x)
        _looped_copy_kernel[(1,)](x, out, x.numel(), BLOCK=16)
        return out

    with pytest.raises(Exception, match="0-dimensional"):  # NumPy's words, without the watch
        double(guarded_values(randn(37)))
    assert grade(DOUBLE, double, quiet=True).passed


# ---- a GPU the process lost ----------------------------------------------------------------------------------------
def _illegal_access():
    return torch.AcceleratorError("CUDA error: an illegal memory access was encountered")


@pytest.mark.parametrize("where", ["your function", "the reference"])
def test_a_lost_gpu_stops_the_grading_with_one_message(where):
    """After an illegal memory access, a process's CUDA context is lost: every later CUDA call fails alike. The
    grading stops at the case that lost it (no more cases, no shrinking) and says so once, with what to do. (Here
    the error is raised, not made.)"""
    calls = []

    def fn(x):
        calls.append(x.numel())
        if where == "your function":
            raise _illegal_access()
        return 2 * x

    def reference(x):
        if where == "the reference":
            raise _illegal_access()
        return 2 * x

    inputs = st.sampled_from([5, 37, 64]).map(
        lambda n: Inputs(lambda: (guarded_values(randn(n)),), f"x: float32 ({n},)"))
    exercise = _exercise(reference=reference, inputs=inputs, examples=(6, 6),
                         families={"edges": lambda: [case("x: float32 (4,)", values(randn(4)))]})
    report = grade(exercise, fn, quiet=True)
    assert report.status == "FAILED" and report.cases == 1, report
    assert report.message.startswith("The smallest failing case: x: float32 (5,): the GPU failed (CUDA error: an "
                                     "illegal memory access was encountered), and this Python process can no "
                                     "longer use it"), report
    assert "the grading stopped here" in report.message and "Restart the notebook's kernel" in report.message
    assert calls[-1] == 5 and len(calls) == 1 + cu.HAS_CUDA, calls  # (on a GPU: the first case's look in the
    # interpreter, where what the function raises is no verdict, then the GPU run)


def test_a_gpu_lost_before_the_grading_is_said_at_once(monkeypatch):
    """A kernel run earlier (another cell) lost the GPU: the grading runs nothing and says what to do."""
    def lost(*args, **kwargs):
        raise _illegal_access()

    monkeypatch.setattr(grading, "HAS_CUDA", True)
    monkeypatch.setattr(torch.cuda, "synchronize", lost)
    calls = []
    report = grade(DOUBLE, lambda x: calls.append(x) or 2 * x, quiet=True)
    assert report.status == "FAILED" and not calls and report.cases == 0, report
    assert report.message.startswith("The GPU failed before this grading (CUDA error: an illegal memory access was "
                                     "encountered), in code run earlier"), report
    assert "Restart the notebook's kernel" in report.message
    assert grade(DOUBLE, None, quiet=True).status == grading.NOT_ATTEMPTED  # nothing to grade: nothing to say


def test_only_cuda_errors_that_lose_the_context_count():
    assert grading._gpu_lost(_illegal_access()) == "CUDA error: an illegal memory access was encountered"
    wrapped = RuntimeError("the kernel failed")
    wrapped.__cause__ = RuntimeError("Triton Error [CUDA]: device-side assert triggered")
    assert grading._gpu_lost(wrapped) == "Triton Error [CUDA]: device-side assert triggered"
    assert grading._gpu_lost(torch.AcceleratorError("CUDA error: out of memory")) == ""  # the process lives on
    assert grading._gpu_lost(ValueError("an illegal memory access")) == ""  # not CUDA's


# ---- crashes and deadlines ---------------------------------------------------------------------------------------
@pytest.mark.skipif(cu.HAS_CUDA or not hasattr(os, "fork"), reason="the child process of a CPU grading")
def test_a_crash_in_an_isolated_exercise_fails_the_case_not_the_process():
    def crash(x):
        os.kill(os.getpid(), signal.SIGSEGV)

    report = grade(_exercise(isolate=True), crash, quiet=True)
    assert "your extension crashed the process (signal 11 (SIGSEGV))" in report.message, report
    assert "out-of-bounds write" in report.message
    assert grade(_exercise(isolate=True), _double, quiet=True).passed


@pytest.mark.parametrize("isolate", [False, True])
def test_every_case_has_a_deadline(isolate):
    if isolate and (cu.HAS_CUDA or not hasattr(os, "fork")):
        pytest.skip("the child process of a CPU grading")

    def slow(x):
        time.sleep(5)
        return 2 * x

    start = time.perf_counter()
    report = grade(_exercise(seconds=0.5, isolate=isolate), slow, quiet=True)
    assert "case 1 timed out after 0.5 s" in report.message, report
    assert time.perf_counter() - start < 3, "no shrinking after a timeout"


def test_unfilled_stubs_stay_not_attempted_in_a_child():
    def stub(x):
        raise NotImplementedError

    assert grade(_exercise(isolate=True), stub, quiet=True).status == grading.NOT_ATTEMPTED


def _first_wrong_sum(intervals, window):  # overlaps counted twice: fails once two kernels overlap
    return 100.0 * sum(max(0.0, min(e, window[1]) - max(s, window[0])) for s, e in intervals) / (window[1] - window[0])


def test_a_grading_draws_the_same_cases_whatever_was_imported_before(tmp_path, monkeypatch):
    """Hypothesis also draws constants found in the project's imported modules; a grading must not: its cases
    (and so its cost and its smallest failing case) would change with what a process, e.g. a CI worker that
    collected every test file, had imported before."""
    from hypothesis.internal.conjecture import providers

    busy = importlib.import_module("exercises.nb10").BUSY_SHARE
    before = grade(busy, _first_wrong_sum, quiet=True)
    constants = ", ".join(str(v) for v in range(-60, 700, 7))
    (tmp_path / "course_many_constants.py").write_text(f"VALUES = [{constants}]\nSCALE = 0.375\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("course_many_constants")
    assert 577 in providers._get_local_constants().integers  # hypothesis sees the new module's constants
    after = grade(busy, _first_wrong_sum, quiet=True)
    assert before.status == after.status == "FAILED"
    assert (after.cases, after.message) == (before.cases, before.message)
    assert 577 in providers._get_local_constants().integers  # and the grading gave them back afterwards
