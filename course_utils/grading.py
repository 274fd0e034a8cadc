"""Exercises that grade themselves: a learner's function against a reference, on inputs hypothesis draws.

`grade(exercise, fn)` runs ``fn`` and ``exercise.reference`` on cases drawn from ``exercise.inputs`` (sizes
of 1, primes, around a block; the exercise's dtypes; strided views: see the `exercises` package) and
compares them with `course_utils.checks`. A failure is shrunk to the smallest failing case, which the one
printed line describes. Runs are reproducible (derandomized, no database) and short on a CPU. Inputs are
views made by `guard`, with NaN around them; what ``fn`` allocates (``torch.empty``, ``zeros``, ``full``,
``new_*``, ``*_like``, ``.contiguous()``, ``.to()``...) is guarded by `SENTINEL`, which also fills empty
ones. A kernel without a mask reads NaN or writes into a guard and the report says so, instead of
corrupting memory: the interpreter really does out-of-bounds accesses, on the CPU.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, errors, given, settings, strategies as st
from torch.overrides import TorchFunctionMode

from course_utils.checks import DEFAULT_TOLERANCES, Case, check
from course_utils.device import HAS_CUDA

NOT_ATTEMPTED = "not attempted yet"
SENTINEL = -7776.0  # what the buffers the learner's code allocates hold until written (exact in fp16, bf16)
_ALLOCATORS = (torch.empty, torch.empty_like, torch.empty_strided, torch.zeros, torch.zeros_like, torch.full,
               torch.full_like, torch.Tensor.new_empty, torch.Tensor.new_zeros, torch.Tensor.new_full,
               torch.Tensor.contiguous, torch.Tensor.clone, torch.Tensor.to, torch.Tensor.float)
_EMPTY = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)  # filled with SENTINEL


@dataclass(frozen=True)
class Inputs:
    """One drawn case: ``make()`` returns fresh arguments at every call; ``about`` says what they are."""
    make: Callable[[], tuple]
    about: str

    def __repr__(self) -> str:
        return self.about


@dataclass(frozen=True)
class Exercise:
    """``task``: what the learner writes; ``inputs``: a strategy of `Inputs`. Where ``reference`` raises
    TypeError/ValueError, ``fn`` must raise the same. Tolerances None: `checks.DEFAULT_TOLERANCES`."""
    name: str
    task: str
    reference: Callable[..., Any]
    inputs: st.SearchStrategy
    dtypes: tuple = ()
    rtol: float | None = None
    atol: float | None = None
    examples: tuple[int, int] = (30, 200)  # hypothesis cases on a CPU (interpreter), on a GPU
    output: Callable[[tuple, Any], Any] | None = None  # (args, returned) -> what to compare; None: returned


@dataclass(frozen=True)
class Report:
    exercise: str
    status: str  # "passed", "FAILED" or NOT_ATTEMPTED
    cases: int
    seconds: float
    message: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __str__(self) -> str:
        tail = f" ({self.cases} cases)" if self.passed else f". {self.message}" if self.message else ""
        return f"{self.exercise}: {self.status}{tail}"


class _Failed(Exception):
    """``fn`` is wrong on a case (the message says how), or it raised NotImplementedError (no message)."""


def guard(t: torch.Tensor, fill: float = math.nan, copy: bool = True, pad: int | None = None) -> torch.Tensor:
    """``t`` (shape, strides and, if ``copy``, values) in a new buffer that holds ``fill`` around it."""
    pad = pad or 4096 + 64 * max(t.stride(), default=0)  # room for a block, or 64 rows of a tile, past either end
    span = 1 + sum((s - 1) * d for s, d in zip(t.shape, t.stride()))
    buf = torch.full((span + 2 * pad,), fill, dtype=t.dtype, device=t.device)
    view = buf.as_strided(t.shape, t.stride(), pad)
    if copy:
        view.copy_(t)
    view._course_guard = (buf, pad, span, buf[0].item())
    return view


class _GuardAllocations(TorchFunctionMode):
    def __init__(self) -> None:
        super().__init__()
        self.made: list[tuple[torch.Tensor, str]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if (func in _ALLOCATORS and isinstance(out, torch.Tensor) and out.numel() and not (args and out is args[0])
                and (out.dtype.is_floating_point or out.dtype in (torch.int32, torch.int64))):
            out = guard(out, SENTINEL, copy=func not in _EMPTY)
            self.made.append((out, f"a tensor your code allocated ({func.__name__})"))
        return out


def _damage(t: torch.Tensor, what: str) -> str:
    buf, pad, span, fill = t._course_guard
    edges = torch.cat([buf[:pad], buf[pad + span:]])
    bad = ~torch.isnan(edges) if math.isnan(fill) else edges != fill
    return (f"wrote outside {what}: {int(bad[pad:].sum())} element(s) past its end, {int(bad[:pad].sum())} before "
            "its start (a missing mask? a wrong offset?)") if bad.any() else ""


def _differ(out: Any, expected: Any, rtol: float | None, atol: float | None) -> str:
    """'' when ``out`` matches ``expected``, else what is wrong, in words."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            return f"returned {out!r}, expected {len(expected)} values like {expected!r}"
        whys = (f"value {i}: {w}" for i, (o, e) in enumerate(zip(out, expected)) if (w := _differ(o, e, rtol, atol)))
        return next(whys, "")
    out, expected = (torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in (out, expected))
    if not isinstance(expected, torch.Tensor):
        number = (isinstance(expected, (int, float)) and isinstance(out, (int, float, np.number))
                  and not isinstance(out, bool))
        ok = math.isclose(out, expected, rel_tol=rtol or 1e-9, abs_tol=atol or 0.0) if number else out == expected
        return "" if ok else f"returned {out!r}, expected {expected!r}"
    result = check(lambda: out, lambda: expected, [Case("", tuple)], rtol=rtol, atol=atol).results[0]
    ok, max_abs, message = result.passed, result.max_abs_err, result.message
    if ok or not isinstance(out, torch.Tensor) or out.shape != expected.shape or out.dtype != expected.dtype:
        message = message.replace("!=", "instead of")  # "shape (3,) != (4,)", "returned list, expected a tensor"
        return "" if ok else message if message.startswith("returned") else f"returned {message}"
    r, a = DEFAULT_TOLERANCES.get(expected.dtype, (0.0, 0.0))
    got, want = out.detach().cpu().double(), expected.detach().cpu().double()
    rtol, atol = (r if rtol is None else rtol), (a if atol is None else atol)
    wrong = ~torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=True)
    at = tuple(int(i) for i in wrong.nonzero()[0])
    hint = (" (NaN: a load outside an input, where the grader puts NaN? or an inf - inf, an inf / inf, a 0 / 0?)"
            if math.isnan(got[at]) and not math.isnan(want[at]) else
            f" ({SENTINEL:g} is what the grader puts in the tensors your code allocates: never written)"
            if got[at] == SENTINEL != want[at] else "")
    head = f"{int(wrong.sum())} of {got.numel()} values wrong, the first at index {at}: " if got.dim() else ""
    return f"{head}got {float(got[at]):.5g}, expected {float(want[at]):.5g} (largest error {max_abs:.3g}){hint}"


def _check(exercise: Exercise, fn: Callable[..., Any], case: Inputs) -> str:
    """'' if ``fn`` does what the reference does on this case, else what went wrong."""
    line = lambda err: f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"  # noqa: E731
    pick = exercise.output or (lambda args, returned: returned)
    args, got, mode = case.make(), None, _GuardAllocations()
    try:
        with mode, np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the interpreter's overflow warnings: the values will tell
            out = fn(*args)
        if HAS_CUDA:
            torch.cuda.synchronize()
    except NotImplementedError as err:
        raise _Failed() from err
    except Exception as err:  # noqa: BLE001 - what the learner's code raised is the answer to report
        got = err
    try:
        expected = pick(ref_args := case.make(), exercise.reference(*ref_args))
    except (TypeError, ValueError) as err:
        expected = err
    if isinstance(expected, Exception) or got is not None:
        if isinstance(expected, Exception) and isinstance(got, type(expected)):
            return ""
        did = f"raised {line(got)}" if got else "returned a result"
        return f"should raise {line(expected)}, but it {did}" if isinstance(expected, Exception) else did
    guarded = [(a, "an input") for a in args if hasattr(a, "_course_guard")] + mode.made
    return next((d for d in (_damage(t, what) for t, what in guarded) if d), "") or _differ(
        pick(args, out), expected, exercise.rtol, exercise.atol)


def grade(exercise: Exercise, fn: Callable[..., Any] | None, *, quiet: bool = False) -> Report:
    """Run ``fn`` against ``exercise.reference`` on hypothesis-drawn inputs; print one line, return a `Report`.

    ``fn`` None, or raising NotImplementedError (an unfilled stub), is "not attempted yet", not a failure.
    """
    if fn is not None and not callable(fn):
        raise TypeError(f"grade needs the function you wrote (or None), got {type(fn).__name__}")
    start, cases, status, message = time.perf_counter(), [], "passed" if fn else NOT_ATTEMPTED, ""

    @settings(database=None, deadline=None, derandomize=True, max_examples=exercise.examples[HAS_CUDA],
              phases=(Phase.explicit, Phase.generate, Phase.shrink), report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(exercise.inputs)
    def run(case: Inputs) -> None:
        cases.append(case)
        if why := _check(exercise, fn, case):
            raise _Failed(f"{case.about}: {why}")

    try:
        if fn is not None:
            run()
    except _Failed as err:
        status, message = ("FAILED", f"The smallest failing case: {err}") if err.args else (NOT_ATTEMPTED, "")
    except errors.Flaky:
        status, message = "FAILED", "the same input gave different results from run to run (a race between programs?)"
    report = Report(exercise.name, status, len(cases), time.perf_counter() - start, message)
    if not quiet:
        print(report)
    return report
