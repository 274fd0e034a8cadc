"""Compare a function with a PyTorch reference over awkward cases, and say which case failed.

A kernel that is right on a 4096-element vector is often wrong on 4097 elements, on one element,
or on a strided view. `awkward_cases` builds those inputs; `check` runs both functions on each
case and returns a `CheckReport` that a notebook prints and an exercise asserts on.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd
import torch

from course_utils.device import require_device

# (rtol, atol) by dtype, as in torch.testing.assert_close for elementwise results.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1.3e-6, 1e-5),
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float64: (1e-7, 1e-7),
}

#: 1-D lengths that catch the usual mistakes with a block of 1024: one element, fewer than a
#: block, one less / more than a block, a prime, and a large size that is not a multiple of it.
AWKWARD_LENGTHS: tuple[int, ...] = (1, 7, 1000, 1023, 1024, 1025, 4099, 98_433)


@dataclass(frozen=True)
class Case:
    """One named input: ``make_inputs()`` returns the positional arguments for both functions."""

    name: str
    make_inputs: Callable[[], tuple[Any, ...]]


@dataclass(frozen=True)
class CaseResult:
    name: str
    passed: bool
    max_abs_err: float
    max_rel_err: float
    message: str = ""


@dataclass
class CheckReport:
    """The outcome of `check`: one `CaseResult` per case."""

    results: list[CaseResult] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failures(self) -> list[CaseResult]:
        return [r for r in self.results if not r.passed]

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([r.__dict__ for r in self.results])

    def summary(self) -> str:
        """One line that is the same on every machine (nbval can compare it)."""
        if self.passed:
            return f"all {len(self.results)} cases passed"
        names = ", ".join(r.name for r in self.failures)
        return f"{len(self.failures)} of {len(self.results)} cases FAILED: {names}"

    def __str__(self) -> str:
        lines = [self.summary()]
        for r in self.failures:
            lines.append(f"  {r.name}: max abs err {r.max_abs_err:.3g}, max rel err {r.max_rel_err:.3g}"
                         + (f" ({r.message})" if r.message else ""))
        return "\n".join(lines)

    def raise_if_failed(self) -> None:
        if not self.passed:
            raise AssertionError(str(self))


def make_tensor(shape: Sequence[int], dtype: torch.dtype = torch.float32, *, contiguous: bool = True,
                device: str | torch.device | None = None, generator: torch.Generator | None = None
                ) -> torch.Tensor:
    """Random normal tensor; ``contiguous=False`` gives a view with a stride of 2 in the last dim."""
    on = require_device(device)
    shape = tuple(int(s) for s in shape)
    full = shape if contiguous else (*shape[:-1], 2 * shape[-1]) if shape else shape
    x = torch.randn(full, generator=generator, dtype=torch.float32).to(dtype=dtype, device=on)
    return x if contiguous or not shape else x[..., ::2]


def awkward_cases(shapes: Sequence[int | Sequence[int]] = AWKWARD_LENGTHS, *,
                  dtypes: Sequence[torch.dtype] = (torch.float32,), n_inputs: int = 1,
                  non_contiguous: bool = True) -> list[Case]:
    """Cases of ``n_inputs`` random tensors on `DEVICE` for every shape x dtype, plus strided views.

    Inputs are generated lazily and from a fixed seed, so a failing case is reproducible by name.
    """
    if n_inputs < 1:
        raise ValueError(f"n_inputs must be >= 1, got {n_inputs}")
    layouts = (True, False) if non_contiguous else (True,)
    cases = []
    for raw in shapes:
        shape = (raw,) if isinstance(raw, int) else tuple(raw)
        for dtype in dtypes:
            for contiguous in layouts:
                def make(shape=shape, dtype=dtype, contiguous=contiguous) -> tuple[torch.Tensor, ...]:
                    gen = torch.Generator().manual_seed(0)
                    return tuple(make_tensor(shape, dtype, contiguous=contiguous, generator=gen)
                                 for _ in range(n_inputs))
                dims = "x".join(map(str, shape))
                label = str(dtype).replace("torch.", "")
                cases.append(Case(f"{dims} {label}{'' if contiguous else ' strided'}", make))
    return cases


def _compare(out: Any, expected: Any, rtol: float | None, atol: float | None) -> tuple[bool, float, float, str]:
    if isinstance(expected, (tuple, list)):  # several outputs: compare each, report the worst
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            return False, float("nan"), float("nan"), f"returned {type(out).__name__}, expected {len(expected)} outputs"
        parts = [_compare(o, e, rtol, atol) for o, e in zip(out, expected)]
        bad = [f"output {i}: {p[3]}" for i, p in enumerate(parts) if not p[0]]
        return (not bad, max((p[1] for p in parts), default=0.0), max((p[2] for p in parts), default=0.0),
                "; ".join(bad))
    if isinstance(expected, numbers.Number) and not isinstance(expected, (bool, np.bool_)):
        if isinstance(out, (bool, np.bool_)) or not isinstance(out, (numbers.Number, torch.Tensor)) or (
                isinstance(out, torch.Tensor) and out.numel() != 1):
            return False, float("nan"), float("nan"), f"returned {type(out).__name__}, expected a number"
        out, expected = torch.tensor(float(out)), torch.tensor(float(expected))  # compared in float32
    if not isinstance(out, torch.Tensor):
        return False, float("nan"), float("nan"), f"returned {type(out).__name__}, expected a tensor"
    if out.shape != expected.shape:
        return False, float("nan"), float("nan"), f"shape {tuple(out.shape)} != {tuple(expected.shape)}"
    if out.dtype != expected.dtype:
        return False, float("nan"), float("nan"), f"dtype {out.dtype} != {expected.dtype}"
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(expected.dtype, (0.0, 0.0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    a, b = out.detach().float().cpu(), expected.detach().float().cpu()
    if a.numel() == 0:
        return True, 0.0, 0.0, ""
    diff = (a - b).abs()
    max_abs = float(torch.nan_to_num(diff, nan=float("inf")).max())
    max_rel = float((diff / b.abs().clamp_min(1e-12)).max())
    ok = bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return ok, max_abs, max_rel, "" if ok else f"rtol={rtol:g}, atol={atol:g}"


def check(fn: Callable[..., Any], reference: Callable[..., Any], cases: Sequence[Case], *,
          rtol: float | None = None, atol: float | None = None) -> CheckReport:
    """Run ``fn`` and ``reference`` on every case and compare their outputs.

    A case whose ``fn`` raises is recorded as a failure with the exception's message, so one bad
    case does not hide the others. Tolerances default to `DEFAULT_TOLERANCES` by output dtype.
    """
    if not callable(fn) or not callable(reference):
        raise TypeError("fn and reference must both be callable")
    if not cases:
        raise ValueError("check needs at least one Case")
    report = CheckReport()
    for case in cases:
        if not isinstance(case, Case):
            raise TypeError(f"cases must be Case objects, got {type(case).__name__}")
        inputs = case.make_inputs()
        expected = reference(*inputs)
        try:
            out = fn(*inputs)
        except Exception as err:  # noqa: BLE001 - reported per case, by design
            report.results.append(CaseResult(case.name, False, float("nan"), float("nan"),
                                             f"{type(err).__name__}: {err}"))
            continue
        ok, max_abs, max_rel, message = _compare(out, expected, rtol, atol)
        report.results.append(CaseResult(case.name, ok, max_abs, max_rel, message))
    return report


INT32_MAX = 2**31 - 1
#: The most elements a Triton block may hold (triton.language's TRITON_MAX_TENSOR_NUMEL).
MAX_BLOCK = 2**20


def span(t: torch.Tensor) -> int:
    """The largest element offset a kernel reaches in ``t``: sum of (size - 1) * stride over its dims.

    It is ``numel - 1`` for a contiguous tensor, but a view can reach much further than it has elements:
    ``x[::1000]`` of 48 elements spans 47,000. An empty tensor reaches nothing (-1).
    """
    if t.numel() == 0:
        return -1
    return sum((size - 1) * abs(stride) for size, stride in zip(t.shape, t.stride()))


def require_tensors(*, dtypes: Sequence[torch.dtype] | None = None, ndim: int | Sequence[int] | None = None,
                    same_shape: bool = False, device: str | torch.device | None = None,
                    contiguous: bool = False, max_numel: int | None = INT32_MAX, max_span: int | None = INT32_MAX,
                    differentiable: bool = True, **tensors: Any) -> None:
    """Check a kernel wrapper's tensor arguments, raising an error that names the argument at fault.

        require_tensors(x=x, y=y, dtypes=(torch.float32, torch.float16), same_shape=True, differentiable=False)

    Checks, in order: each is a tensor; ``dtypes`` (and, with several tensors, one shared dtype);
    ``ndim`` (an int or the allowed ints); ``contiguous``; at most ``max_numel`` elements and no offset
    beyond ``max_span`` (`span`: a strided view reaches further than its element count; both default to
    2**31 - 1 because the kernels compute offsets in int32; pass None where the wrapper copies the input
    with ``.contiguous()`` first); ``differentiable=False``: none requires grad (the kernel has no
    backward, so its output would silently carry no gradient); ``same_shape``; all on ``device``
    (default: the course's DEVICE) and on one device. TypeError for a wrong type or dtype, ValueError
    for the rest.
    """
    if not tensors:
        raise TypeError("require_tensors needs the tensors to check as keyword arguments, e.g. x=x")
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if dtypes is not None and t.dtype not in dtypes:
            raise TypeError(f"{name} must have a dtype in {tuple(str(d) for d in dtypes)}, got {t.dtype}")
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if allowed is not None and t.dim() not in allowed:
            raise ValueError(f"{name} must be {' or '.join(f'{n}-D' for n in allowed)}, got shape {tuple(t.shape)}")
        if contiguous and not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous (call .contiguous() first), got strides {t.stride()}")
        if max_numel is not None and t.numel() > max_numel:
            raise ValueError(f"{name} has {t.numel():,} elements; at most {max_numel:,} (offsets are int32)")
        if max_span is not None and span(t) > max_span:
            raise ValueError(f"{name} reaches element offset {span(t):,} (shape {tuple(t.shape)}, strides "
                             f"{t.stride()}); at most {max_span:,} (offsets are int32): call .contiguous() first")
        if not differentiable and t.requires_grad and torch.is_grad_enabled():
            raise ValueError(f"{name} requires grad, but this kernel has no backward (its output would carry no "
                             f"gradient): pass {name}.detach(), or call it under torch.no_grad()")
    first_name, first = next(iter(tensors.items()))
    for name, t in list(tensors.items())[1:]:
        if dtypes is not None and t.dtype != first.dtype:
            raise TypeError(f"{first_name} and {name} must share one dtype, got {first.dtype} and {t.dtype}")
        if same_shape and t.shape != first.shape:
            raise ValueError(f"{first_name} and {name} must have the same shape, got {tuple(first.shape)} and {tuple(t.shape)}")
        if t.device != first.device:
            raise ValueError(f"{first_name} and {name} must be on one device, got {first.device} and {t.device}")
    want = require_device(device)
    if first.device.type != want.type:
        raise ValueError(f"{first_name} must be on {want} (where this kernel runs), got {first.device}")


def require_number(name: str, value: Any, *, integer: bool = False, low: float | None = None,
                   high: float | None = None) -> int | float:
    """``value`` as a Python int (``integer=True``) or float, or an error that names ``name``.

    Accepts Python and NumPy numbers (``np.float32(0.5)``, ``np.int64(3)``), never a bool; refuses NaN and
    infinities, and values outside ``low <= value <= high``.
    """
    kind = numbers.Integral if integer else numbers.Real
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, kind):
        raise TypeError(f"{name} must be {'an integer' if integer else 'a number'}, got {value!r}")
    number = int(value) if integer else float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = " and ".join(b for b in (f">= {low:g}" if low is not None else "",
                                          f"<= {high:g}" if high is not None else "") if b)
        raise ValueError(f"{name} must be {bounds}, got {value!r}")
    return number


def require_block_size(name: str, value: Any, *, at_least: int = 1, at_most: int = MAX_BLOCK) -> int:
    """A Triton block size: a power of two in ``at_least..at_most`` (``tl.arange`` needs one), as an int."""
    block = require_number(name, value, integer=True)
    if block < 1 or block & (block - 1):
        raise ValueError(f"{name} must be a positive power of two (tl.arange needs one), got {value!r}")
    if not at_least <= block <= at_most:
        raise ValueError(f"{name} must be between {at_least:,} and {at_most:,}, got {block:,}")
    return block


def require_choice(name: str, value: Any, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices``, else a ValueError that lists them."""
    if not any(value is c or (type(value) is type(c) and value == c) for c in choices):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value
