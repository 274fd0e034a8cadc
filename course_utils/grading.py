"""Exercises that grade themselves: a learner's function against a reference, on inputs hypothesis draws.

`grade(exercise, fn)` runs ``fn`` and ``exercise.reference`` on cases drawn from ``exercise.inputs`` (sizes
of 1, primes, around a block; the exercise's dtypes; strided views: see the `exercises` package) and
compares them with `course_utils.checks`. A failure is shrunk to the smallest failing case, which the one
printed line describes. Runs are reproducible (derandomized, no database) and short on a CPU. Inputs are
views made by `guard`, with NaN around them; what ``fn`` allocates (``torch.empty``, ``zeros``, ``full``,
``new_*``, ``*_like``, ``.contiguous()``, ``.to()``...) is guarded by `SENTINEL`, which also fills empty
ones. A kernel without a mask reads NaN or writes into a guard and the report says so, instead of
corrupting memory: the interpreter really does out-of-bounds accesses, on the CPU.

After the drawn cases, the cases of the exercise's input **families** run (`FAMILIES`: several programs
along every tiled axis, exact zeros and ties at kinks, batches with gaps between items, empty inputs,
values near the dtype's limits, NaN/inf rows). On every case the grader also checks **invariants**: the
inputs are unchanged after the call (unless the task writes into one: ``Exercise.writes``), the result
does not share memory with an input, its layout is the one the task names (``Exercise.layout``), and, in
Triton's interpreter, that no active lane of a load reads a guard (`_Watch`) and that no two programs of
one launch store to one address without atomics (a race: the interpreter runs programs one after
another, so lost updates never show in the values). Each case has a deadline; C++ extensions (``Exercise.
isolate``) run each case in a forked child, so a crash is a failed case. A passing grading on a CPU then
compiles every Triton kernel the learner launched for sm_80 and sm_90 (`kernel_inspect`, cached): what the
interpreter accepts but Triton cannot compile fails there.

On a GPU the kernels are compiled and run there, unwatched; a kernel the JIT cannot compile fails its case with
the compiler's words. A kernel that reads or writes outside its tensors there can do worse than give wrong values:
an illegal memory access loses the process's CUDA context for good (every later CUDA call of the notebook fails
alike). So before any case runs on the GPU, the grading looks at cases in the interpreter (`_interpret`: the same
call on CPU copies of the inputs, every Triton kernel interpreted, watched; bounded by `REPLAY_SECONDS`): the first
drawn case (hypothesis's simplest) and, if that launched Triton kernels, every family case ("programs" with the
small block). A write outside, a read outside or a race seen there fails the grading, and the GPU never runs that
kernel. These looks compare no values (the GPU's are compared) and what the call raises there is no verdict (the
GPU run says). After a case fails on the GPU, the smallest failing case is looked at the same way, and its message
becomes what the watch saw there, if anything; a grading whose results change from run to run, the last case run.
If the GPU is lost all the same (a larger drawn case, a CUDA C++ extension: no interpreter for those), the grading
stops at that case with one message that says so and to restart the kernel (`_gpu_lost`: torch.AcceleratorError,
Triton's "Triton Error [CUDA]"), and a grading that starts on a lost GPU says so at once, running nothing.
"""

from __future__ import annotations

import contextlib
import copy
import faulthandler
import hashlib
import inspect
import json
import math
import os
import pickle
import re
import select
import signal
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from hypothesis import HealthCheck, Phase, errors, given, settings, strategies as st
from torch.overrides import TorchFunctionMode

from course_utils.checks import DEFAULT_TOLERANCES, Case, check
from course_utils.device import CACHE_DIR, HAS_CUDA, INTERPRET

NOT_ATTEMPTED = "not attempted yet"
SENTINEL = -7776.0  # what the buffers the learner's code allocates hold until written (exact in fp16, bf16)
_ALLOCATORS = (torch.empty, torch.empty_like, torch.empty_strided, torch.zeros, torch.zeros_like, torch.full,
               torch.full_like, torch.Tensor.new_empty, torch.Tensor.new_zeros, torch.Tensor.new_full,
               torch.Tensor.contiguous, torch.Tensor.clone, torch.Tensor.to, torch.Tensor.float)
_EMPTY = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)  # filled with SENTINEL

#: The input families an exercise can declare (``Exercise.families``: name -> a function returning its
#: cases), what each is for. `grade` runs these cases first, every time; `exercises` has helpers to make them.
FAMILIES = {
    "programs": "sizes that need 2-3 programs along every tiled axis, even on a CPU (the grader may pick the block)",
    "kinks": "exact zeros and ties where the task's function has a kink (ReLU at 0, a max with two winners)",
    "gaps": "batches laid out with gaps between their items (a batch stride that is not the item's size)",
    "empty": "empty inputs, where the task allows them",
    "limits": "values near the dtype's limits (sums and partial sums that overflow a narrower type)",
    "nonfinite": "rows holding NaN or inf",
    "edges": "arguments at the edges of what the task allows (1, the largest, other input types it accepts)",
}
#: A case's deadline, in seconds (CPU: 30, since a CI worker beside builds can slow a case several times over; GPU: the
#: first case of a GPU grading compiles its kernels).
CASE_SECONDS = (30.0, 60.0)
#: The deadline of a GPU grading's look at a case in the interpreter (`_interpret`), in seconds: past it, what the
#: watch saw until then.
REPLAY_SECONDS = 5.0
#: The architectures a CPU grading compiles the learner's Triton kernels for (A100, H100).
COMPILE_ARCHS = ("sm_80", "sm_90")
_COMPILE_SIGNATURES = 1  # per kernel and grading: the first launch's (each costs a compilation per arch)


@dataclass(frozen=True)
class Inputs:
    """One drawn case: ``make()`` returns fresh arguments at every call; ``about`` says what they are."""
    make: Callable[[], tuple]
    about: str

    def __post_init__(self) -> None:
        if not callable(self.make):
            raise TypeError(f"Inputs.make must be a function returning the arguments, got {type(self.make).__name__}")
        if not isinstance(self.about, str):
            raise TypeError(f"Inputs.about must be a str that says what the inputs are, got {type(self.about).__name__}")

    def __repr__(self) -> str:
        return self.about


@dataclass(frozen=True)
class Exercise:
    """``task``: what the learner writes; ``inputs``: a strategy of `Inputs`. Where ``reference`` raises
    TypeError/ValueError, ``fn`` must raise the same. Tolerances None: `checks.DEFAULT_TOLERANCES`.

    ``families``: name (of `FAMILIES`) -> a function returning that family's cases (`Inputs`), run after
    the drawn ones. ``writes``: the indices of the arguments the task writes into (all others must be left
    as they were; the result may be one of them). ``layout``: "contiguous" or "channels_last" if the task
    promises that layout of the result. ``returns``: names of the values of a returned tuple, for messages.
    ``block``: keyword -> value that `grade` passes to ``fn`` when ``fn`` takes that keyword (a small block,
    so that a CPU-sized input needs several programs). ``isolate``: run each case in a child process (C++
    extensions: a crash fails the case, not the notebook). ``seconds``: a case's deadline (None: `CASE_SECONDS`).
    """
    name: str
    task: str
    reference: Callable[..., Any]
    inputs: st.SearchStrategy
    dtypes: tuple = ()
    rtol: float | None = None
    atol: float | None = None
    examples: tuple[int, int] = (30, 200)  # hypothesis cases on a CPU (interpreter), on a GPU
    output: Callable[[tuple, Any], Any] | None = None  # (args, returned) -> what to compare; None: returned
    families: Mapping[str, Callable[[], Sequence[Inputs]]] = field(default_factory=dict)
    writes: tuple[int, ...] = ()
    layout: str | None = None
    returns: tuple[str, ...] = ()
    block: Mapping[str, Any] = field(default_factory=dict)
    isolate: bool = False
    seconds: float | None = None
    archs: tuple[str, ...] = COMPILE_ARCHS  # what a CPU grading compiles the learner's Triton kernels for

    def __post_init__(self) -> None:
        for name in ("name", "task"):
            if not isinstance(getattr(self, name), str) or not getattr(self, name):
                raise TypeError(f"Exercise.{name} must be a non-empty str, got {getattr(self, name)!r}")
        if not callable(self.reference):
            raise TypeError(f"{self.name}: Exercise.reference must be the reference function, got "
                            f"{type(self.reference).__name__}")
        if not isinstance(self.inputs, st.SearchStrategy):
            raise TypeError(f"{self.name}: Exercise.inputs must be a hypothesis strategy of Inputs, got "
                            f"{type(self.inputs).__name__}")
        if not isinstance(self.families, Mapping) or not all(callable(f) for f in self.families.values()):
            raise TypeError(f"{self.name}: Exercise.families must map a family's name to a function returning its cases")
        unknown = set(self.families) - set(FAMILIES)
        if unknown:
            raise ValueError(f"{self.name}: unknown input families {sorted(unknown)}; known: {sorted(FAMILIES)}")
        if (not isinstance(self.examples, tuple) or len(self.examples) != 2
                or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in self.examples)):
            raise ValueError(f"{self.name}: Exercise.examples must be (cases on a CPU, on a GPU), two ints >= 1, "
                             f"got {self.examples!r}")
        if self.layout not in (None, "contiguous", "channels_last"):
            raise ValueError(f"{self.name}: Exercise.layout must be None, 'contiguous' or 'channels_last', "
                             f"got {self.layout!r}")
        if self.seconds is not None and not (isinstance(self.seconds, (int, float)) and 0 < self.seconds < math.inf):
            raise ValueError(f"{self.name}: Exercise.seconds must be a number of seconds > 0 (or None), "
                             f"got {self.seconds!r}")

    def family_cases(self) -> list[tuple[str, Inputs]]:
        """(family, case) for every case of every declared family, in the order declared."""
        unknown = set(self.families) - set(FAMILIES)
        if unknown:
            raise ValueError(f"{self.name}: unknown input families {sorted(unknown)}; known: {sorted(FAMILIES)}")
        return [(name, case) for name, make in self.families.items() for case in make()]


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


class _Stop(BaseException):
    """A case ran past its deadline: the grading stops at once (no shrinking: each retry would wait as long)."""


def guard(t: torch.Tensor, fill: float = math.nan, copy: bool = True, pad: int | None = None) -> torch.Tensor:
    """``t`` (shape, strides and, if ``copy``, values) in a new buffer that holds ``fill`` around it."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"t must be a torch.Tensor, got {type(t).__name__}")
    if pad is not None and (not isinstance(pad, (int, np.integer)) or isinstance(pad, bool) or pad < 0):
        raise ValueError(f"pad must be a whole number of elements >= 0 (or None), got {pad!r}")
    pad = pad or 4096 + 64 * max(t.stride(), default=0)  # room for a block, or 64 rows of a tile, past either end
    span = 1 + sum((s - 1) * d for s, d in zip(t.shape, t.stride())) if t.numel() else 0
    pinned = HAS_CUDA and t.device.type == "cpu" and t.is_pinned()  # a pinned buffer stays pinned
    buf = torch.full((span + 2 * pad,), fill, dtype=t.dtype, device=t.device, pin_memory=pinned)
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


# ---- Triton's interpreter, watched: reads of guards, races between programs, the kernels to compile ----------
def _json_value(v: Any) -> bool:
    return v is None or isinstance(v, (bool, int, float, str))


class _Watch:
    """While a case runs in Triton's interpreter: which active lanes of loads read a guard (per tensor), which
    addresses two programs of one launch store to without atomics, and the (kernel, signature) launched."""

    def __init__(self, guarded: Callable[[], list[tuple[torch.Tensor, str]]]) -> None:
        self.guarded, self.reads, self.race, self.launches, self.runs = guarded, {}, "", [], 0
        self._regions: list = []
        self._count = -1
        self._stores: list = []

    def regions(self) -> list:
        tensors = self.guarded()
        if len(tensors) != self._count:  # allocations add tensors during the call
            self._count, self._regions = len(tensors), []
            for t, what in tensors:
                buf, pad, span, _ = t._course_guard
                base, size = buf.data_ptr(), buf.element_size()
                self._regions.append((base, base + pad * size, base + (pad + span) * size,
                                      base + (2 * pad + span) * size, size, what))
        return self._regions

    def _load(self, ptrs, mask) -> None:
        addr = ptrs.data[np.broadcast_to(mask.data, ptrs.data.shape)]
        if not addr.size:
            return
        for start, lo, hi, end, size, what in self.regions():
            before = int(((addr >= start) & (addr < lo)).sum())
            after = int(((addr >= hi) & (addr < end)).sum())
            if before or after:
                b, a = self.reads.get(what, (0, 0))
                self.reads[what] = (b + before, a + after)

    def _store(self, ptrs, mask, atomic: bool) -> None:
        from triton.runtime.interpreter import interpreter_builder as ib

        addr = ptrs.data[np.broadcast_to(mask.data, ptrs.data.shape)] if mask is not None else ptrs.data.ravel()
        if addr.size:
            gx, gy, _ = ib.grid_dim
            x, y, z = ib.grid_idx
            self._stores.append((addr.astype(np.uint64).ravel(), x + gx * (y + gy * z), atomic))

    def _launch_done(self, name: str, grid: tuple) -> None:
        plain = [(a, p) for a, p, atomic in self._stores if not atomic]
        self._stores = []
        if self.race or len({p for _, p in plain}) < 2:
            return
        addr = np.concatenate([a for a, _ in plain])
        pid = np.concatenate([np.full(a.size, p, dtype=np.int64) for a, p in plain])
        pairs = np.unique(np.stack([addr, pid.astype(np.uint64)], axis=1), axis=0)
        shared, first, counts = np.unique(pairs[:, 0], return_index=True, return_counts=True)
        if not (counts > 1).any():
            return
        where = shared[counts > 1]
        one = int(where[0])
        programs = sorted(int(p) for p in pairs[pairs[:, 0] == one][:, 1])[:2]
        what, index = "a tensor", None
        for _, lo, hi, _, size, label in self.regions():
            if lo <= one < hi:
                what, index = label, (one - lo) // size
        at = f" (element {index} of its buffer)" if index is not None else ""
        coords = [self._coords(p, grid) for p in programs]
        self.race = (f"a race in {name}: programs {coords[0]} and {coords[1]} both tl.store to one address of {what}"
                     f"{at}, {where.size} such address(es): on a GPU the programs run at once and all but one "
                     "update is lost; add with tl.atomic_add, or give each program its own slot")

    @staticmethod
    def _coords(p: int, grid: tuple) -> tuple:
        g = tuple(grid) + (1,) * (3 - len(grid))
        return (p % g[0], p // g[0] % g[1], p // (g[0] * g[1]))[:max(1, len(tuple(grid)))]

    def _record(self, kernel, args, kwargs) -> None:
        try:
            params = list(inspect.signature(kernel.fn).parameters.values())
            bound = {**dict(zip([p.name for p in params], args)), **kwargs}
            signature, constexprs = {}, {}
            for p in params:
                if p.name not in bound:
                    continue
                v = bound[p.name]
                if "constexpr" in str(p.annotation) or v is None or isinstance(v, str):
                    if not _json_value(v):
                        return
                    constexprs[p.name] = v
                elif isinstance(v, torch.Tensor):
                    from course_utils.kernel_inspect import triton_type

                    signature[p.name] = triton_type(v)
                elif isinstance(v, bool):
                    signature[p.name] = "i1"
                elif isinstance(v, int):
                    signature[p.name] = "i32" if -2**31 <= v < 2**31 else "i64"
                elif isinstance(v, float):
                    signature[p.name] = "fp32"
                else:
                    return
            options = {k: v for k, v in kwargs.items() if k in ("num_warps", "num_stages") and isinstance(v, int)}
            self.launches.append((kernel, signature, constexprs, options))
        except Exception:  # noqa: BLE001 - a launch the compile check cannot describe is not compiled
            return

    def __enter__(self) -> "_Watch":
        from triton.runtime import interpreter as ti

        self._saved = (ti.InterpreterBuilder.create_masked_load, ti.InterpreterBuilder.create_masked_store,
                       ti.InterpreterBuilder.create_atomic_rmw, ti.InterpreterBuilder.create_atomic_cas,
                       ti.InterpretedFunction.run)
        load, store, rmw, cas, run = self._saved
        watch = self

        def masked_load(builder, ptrs, mask, *rest):
            watch._load(ptrs, mask)
            return load(builder, ptrs, mask, *rest)

        def masked_store(builder, ptrs, value, mask, *rest):
            watch._store(ptrs, mask, False)
            return store(builder, ptrs, value, mask, *rest)

        def atomic_rmw(builder, op, ptr, val, mask, *rest):
            watch._store(ptr, mask, True)
            return rmw(builder, op, ptr, val, mask, *rest)

        def atomic_cas(builder, ptr, *rest):
            watch._store(ptr, None, True)
            return cas(builder, ptr, *rest)

        def launch(kernel, *args, grid, warmup, **kwargs):
            if not warmup:
                watch._record(kernel, args, kwargs)
                watch.runs += 1
            watch._stores = []
            out = run(kernel, *args, grid=grid, warmup=warmup, **kwargs)
            if not warmup:
                shape = grid(kwargs) if callable(grid) else grid
                watch._launch_done(kernel.fn.__name__, tuple(shape) if isinstance(shape, (tuple, list)) else (shape,))
            return out

        (ti.InterpreterBuilder.create_masked_load, ti.InterpreterBuilder.create_masked_store,
         ti.InterpreterBuilder.create_atomic_rmw, ti.InterpreterBuilder.create_atomic_cas,
         ti.InterpretedFunction.run) = masked_load, masked_store, atomic_rmw, atomic_cas, launch
        self._patch_tensor = getattr(ti, "_patch_lang_tensor", None)
        if self._patch_tensor is not None:
            ti._patch_lang_tensor = _index_of_one_element(self._patch_tensor)
        return self

    def __exit__(self, *exc) -> None:
        from triton.runtime import interpreter as ti

        (ti.InterpreterBuilder.create_masked_load, ti.InterpreterBuilder.create_masked_store,
         ti.InterpreterBuilder.create_atomic_rmw, ti.InterpreterBuilder.create_atomic_cas,
         ti.InterpretedFunction.run) = self._saved
        if self._patch_tensor is not None:
            ti._patch_lang_tensor = self._patch_tensor

    def read_outside(self) -> str:
        order = [what for _, what in self.guarded()]  # the inputs in the order of the arguments, then allocations
        rank = lambda what: order.index(what) if what in order else len(order)  # noqa: E731
        for what, (before, after) in sorted(self.reads.items(), key=lambda item: rank(item[0])):
            return (f"read outside {what}: {after} active lane(s) past its end, {before} before its start (a load "
                    "outside an input: a missing mask? a mask on the store only? an unmasked load of a scale?)")
        return ""


def _index_of_one_element(patch: Callable) -> Callable:
    """Triton's ``_patch_lang_tensor`` (what the interpreter sets on ``tl.tensor`` while a kernel runs), with an
    ``__index__`` that takes a scalar held in a 1-element array: Triton 3.6's ``int(array)`` is an error in NumPy 2.4,
    so ``range(0, tl.cdiv(K, BLOCK_K))`` in a kernel failed there (Triton 3.7 does what this does)."""
    def patched(tensor, scope) -> None:
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(np.asarray(self.handle.data).reshape(-1)[0])
                       if np.size(self.handle.data) == 1 else int(self.handle.data))

    return patched


class _NoWatch:
    launches: list = []
    race = ""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def read_outside(self) -> str:
        return ""


# ---- a GPU grading's second look: cases replayed in the interpreter, watched -----------------------------------
class _Launches:
    """While a GPU grading runs its cases: how many compiled Triton kernels the learner's code launched (only
    then does the grading replay cases in the interpreter)."""

    def __init__(self) -> None:
        self.count = 0

    def __enter__(self) -> "_Launches":
        from triton.runtime.jit import JITFunction

        self._saved = run = JITFunction.run
        launches = self

        def counted(kernel, *args, grid, warmup, **kwargs):
            launches.count += not warmup
            return run(kernel, *args, grid=grid, warmup=warmup, **kwargs)

        JITFunction.run = counted
        return self

    def __exit__(self, *exc) -> None:
        from triton.runtime.jit import JITFunction

        JITFunction.run = self._saved


class _Interpreted:
    """While a GPU grading replays a case: every compiled Triton kernel launched (Autotuner and Heuristics end in
    one) and every @triton.jit function a kernel calls runs in Triton's interpreter instead, on the replay's CPU
    tensors, where `_Watch` sees its loads and stores."""

    def __enter__(self) -> "_Interpreted":
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction

        self._saved = (JITFunction.run, JITFunction.__call__)
        twins: dict = {}

        def twin(kernel):
            if kernel.fn not in twins:
                twins[kernel.fn] = InterpretedFunction(kernel.fn)
            return twins[kernel.fn]

        def run(kernel, *args, grid, warmup, **kwargs):
            return twin(kernel).run(*args, grid=grid, warmup=warmup, **kwargs)

        def call(kernel, *args, **kwargs):  # a @triton.jit function called inside a kernel
            return twin(kernel)(*args, **kwargs)

        self._language = _language_state()
        JITFunction.run, JITFunction.__call__ = run, call
        return self

    def __exit__(self, *exc) -> None:
        from triton.runtime.jit import JITFunction

        JITFunction.run, JITFunction.__call__ = self._saved
        _restore_language(self._language)


def _language_state() -> list:
    """The attributes of Triton's language modules and of their classes. The interpreter replaces their builtins
    while a kernel runs, and does not put back those it replaced for a @triton.jit function called inside a
    kernel (tl.sum is one): compiled, later, with those in place, a GPU grading's next kernel would not compile."""
    objs: dict = {}
    for name, module in list(sys.modules.items()):
        if module is not None and (name == "triton.language" or name.startswith("triton.language.")):
            objs[id(module)] = module
            for value in list(vars(module).values()):
                if isinstance(value, type) and value.__module__ == name:
                    objs[id(value)] = value
    return [(obj, dict(vars(obj))) for obj in objs.values()]


def _restore_language(state: list) -> None:
    """Put back what `_language_state` saved: the values replaced, and, in classes, no attribute added (a module
    keeps the names the interpreter adds to the globals of the @triton.jit functions it rewrites: they use them)."""
    for obj, saved in state:
        now = vars(obj)
        for name in [k for k in now if k not in saved and isinstance(obj, type)]:
            try:
                delattr(obj, name)
            except (AttributeError, TypeError):
                pass
        for name, value in saved.items():
            if now.get(name, _restore_language) is not value:
                try:
                    setattr(obj, name, value)
                except (AttributeError, TypeError):
                    pass


def _on_cpu(value: Any, copies: dict) -> Any:
    """``value`` (a case's arguments) with its tensors copied to the CPU: same shapes, strides, guards (the buffer
    of a guarded view is copied whole, once: ``copies``), and requires_grad."""
    if isinstance(value, torch.Tensor):
        guarded = getattr(value, "_course_guard", None)
        if guarded is None:
            out = value.detach().cpu()
        else:
            buf, pad, span, fill = guarded
            key = (buf.untyped_storage().data_ptr(), buf.storage_offset())
            if key not in copies:
                copies[key] = buf.detach().cpu()
            base = copies[key]
            out = base.as_strided(value.shape, value.stride(), base.storage_offset() + value.storage_offset()
                                  - buf.storage_offset())
            out._course_guard = (base, pad, span, fill)
        return out.requires_grad_() if value.requires_grad else out
    if isinstance(value, (tuple, list)):
        return type(value)(_on_cpu(v, copies) for v in value)
    if isinstance(value, dict):
        return {k: _on_cpu(v, copies) for k, v in value.items()}
    return value


def _replay(exercise: Exercise, fn: Callable[..., Any], case: Inputs, small_block: bool = False) -> str:
    """A GPU grading's look at ``case`` in the interpreter (`_interpret`): '' or what the watch saw."""
    return _interpret(exercise, fn, case, small_block)[0]


def _interpret(exercise: Exercise, fn: Callable[..., Any], case: Inputs, small_block: bool = False) -> tuple[str, int]:
    """``fn`` on CPU copies of ``case``'s inputs, its Triton kernels in the interpreter, watched as on a CPU: (a
    write outside a tensor, a read outside an input or a race the watch saw, or ''; the kernels launched). A GPU
    grading does this before it runs a case on the GPU (where such a kernel could make the process lose the GPU,
    and a read outside returns what lies there, which the result may never show; lost updates depend on timing),
    and at the smallest case that failed there. Values are not compared (the GPU's are); what ``fn`` raises here
    is no verdict (the interpreter is not the GPU): the GPU run says. Past `REPLAY_SECONDS` (or the case's deadline,
    if shorter): what was seen until then."""
    mode = _GuardAllocations()
    try:
        args = _on_cpu(case.make(), {})
    except Exception:  # noqa: BLE001 - inputs that cannot live on the CPU: no second look
        return "", 0
    inputs = [(a, f"the input {n}") for a, n in zip(args, _arg_names(exercise) + [""] * len(args))
              if hasattr(a, "_course_guard")]
    watch = _Watch(lambda: inputs + mode.made)
    kwargs = _block_kwargs(exercise, fn, small_block)

    def call() -> None:
        with mode, _Interpreted(), watch, np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fn(*args, **kwargs)

    try:
        _within(min(REPLAY_SECONDS, _deadline(exercise)), call)
    except (Exception, _Timeout):  # noqa: BLE001 - what the watch saw still counts
        pass
    try:
        wrote = next((d for d in (_damage(t, what) for t, what in inputs + mode.made) if d), "")
    except Exception:  # noqa: BLE001 - a guard the call replaced: no verdict on writes
        wrote = ""
    return wrote or watch.read_outside() or watch.race, watch.runs


# ---- a GPU the process lost: CUDA's sticky errors --------------------------------------------------------------
#: CUDA's words for the errors after which a process's CUDA context is lost: every later CUDA call fails alike.
_LOST_WORDS = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
               "illegal instruction", "invalid program counter", "hardware stack error", "launch timed out",
               "uncorrectable ecc error")
#: What to do then, in the learner's words.
_RESTART = ("Restart the notebook's kernel (Jupyter: Kernel > Restart; Colab: Runtime > Restart session) and run "
            "its cells again.")


def _gpu_lost(err: BaseException | None) -> str:
    """CUDA's words if ``err`` (or an exception it came from or holds) says that this process lost its CUDA
    context (`_LOST_WORDS`: torch.AcceleratorError, Triton's "Triton Error [CUDA]: ..."), else ''."""
    todo, seen = [err], set()
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, RuntimeError):
            line = next((ln.strip() for ln in str(e).splitlines() if any(w in ln.lower() for w in _LOST_WORDS)), "")
            if line:
                return line[:200]
        todo += [e.__cause__, e.__context__, *getattr(e, "exceptions", ())]
    return ""


class _Lost(BaseException):
    """The GPU failed for good during a case (`_gpu_lost`): the grading stops at once; ``where``: the case."""

    def __init__(self, words: str, where: str = "") -> None:
        super().__init__(words, where)
        self.words, self.where = words, where

    def message(self) -> str:
        where = f"The smallest failing case: {self.where}: the GPU failed" if self.where else \
            "The GPU failed while the grader made the inputs of a case"
        return (f"{where} ({self.words}), and this Python process can no longer use it (every later CUDA call fails "
                "alike), so the grading stopped here. The usual cause is a kernel that reads or writes outside its "
                f"tensors: a load or a store without a mask, a wrong offset or stride. {_RESTART}")


def _gpu_state() -> str:
    """'' if this process can use its GPU, else CUDA's words for why not (a kernel run earlier lost it)."""
    try:
        torch.cuda.synchronize()
    except Exception as err:  # noqa: BLE001
        return _gpu_lost(err)
    return ""


def _compile_failure(err: BaseException) -> str:
    """'' unless ``err`` is Triton's CompilationError, raised on a GPU; else what the CPU grading's compile check
    says: the kernel (the JITFunction being launched), this GPU's architecture, and the compiler's error."""
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:
        return ""
    if not isinstance(err, CompilationError):
        return ""
    name, tb = "your kernel", err.__traceback__
    while tb is not None:
        kernel = tb.tb_frame.f_locals.get("self")
        if tb.tb_frame.f_code.co_name == "run" and type(kernel).__name__ == "JITFunction":
            name = getattr(kernel.fn, "__name__", name)
        tb = tb.tb_next
    try:
        arch = "sm_{}{}".format(*torch.cuda.get_device_capability())
    except Exception:  # noqa: BLE001
        arch = "this GPU"
    cause = f"\n{type(err.__cause__).__name__}: {err.__cause__}" if err.__cause__ is not None else ""
    return f"Triton cannot compile {name} for {arch} (this GPU): {_first_error(f'{err}{cause}')[:300]}"


def _damage(t: torch.Tensor, what: str) -> str:
    buf, pad, span, fill = t._course_guard
    edges = torch.cat([buf[:pad], buf[pad + span:]])
    bad = ~torch.isnan(edges) if math.isnan(fill) else edges != fill
    return (f"wrote outside {what}: {int(bad[pad:].sum())} element(s) past its end, {int(bad[:pad].sum())} before "
            "its start (a missing mask? a wrong offset?)") if bad.any() else ""


def _ordinal(i: int) -> str:
    return {0: "1st", 1: "2nd", 2: "3rd"}.get(i, f"{i + 1}th")


def _what(v: Any) -> str:
    """What a value is, in the learner's words: 'a float16 tensor of shape (3, 5)', 'a list of 4', 'None'."""
    if isinstance(v, torch.Tensor):
        return f"a {str(v.dtype).replace('torch.', '')} tensor of shape {tuple(v.shape)}"
    if isinstance(v, np.ndarray):
        return f"a NumPy {v.dtype} array of shape {v.shape}"
    if isinstance(v, (tuple, list)):
        return f"a {type(v).__name__} of {len(v)}"
    return "None" if v is None else f"a {type(v).__name__}"


def _differ(out: Any, expected: Any, rtol: float | None, atol: float | None, names: Sequence[str] = ()) -> str:
    """'' when ``out`` matches ``expected``, else what is wrong, in words."""
    if isinstance(expected, (tuple, list)):
        if not isinstance(out, (tuple, list)) or len(out) != len(expected):
            return f"returned {_what(out)}, expected {len(expected)} values like {expected!r}"
        label = lambda i: (f"{names[i]} (the {_ordinal(i)} value you returned)" if i < len(names)  # noqa: E731
                           else f"the {_ordinal(i)} value you returned")
        whys = (f"{label(i)}: {w}" for i, (o, e) in enumerate(zip(out, expected)) if (w := _differ(o, e, rtol, atol)))
        return next(whys, "")
    out, expected = (torch.from_numpy(v) if isinstance(v, np.ndarray) else v for v in (out, expected))
    if not isinstance(expected, torch.Tensor):
        number = (isinstance(expected, (int, float)) and isinstance(out, (int, float, np.number))
                  and not isinstance(out, bool))
        ok = math.isclose(out, expected, rel_tol=rtol or 1e-9, abs_tol=atol or 0.0) if number else out == expected
        return "" if ok else f"returned {out!r}, expected {expected!r}"
    result = check(lambda: out, lambda: expected, [Case("", tuple)], rtol=rtol, atol=atol).results[0]
    ok, message = result.passed, result.message
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
            if got[at] == SENTINEL != want[at] else
            f" (off by about {SENTINEL:g}, what the grader puts in the tensors your code allocates: an accumulator "
            "never zeroed? torch.empty where torch.zeros was needed?)"
            if abs(float(got[at] - want[at]) - SENTINEL) < 1e-2 * abs(SENTINEL) else "")
    err = (got - want).abs().nan_to_num(nan=math.inf, posinf=math.inf).where(wrong, 0.0)
    worst = tuple(int(i) for i in np.unravel_index(int(err.flatten().argmax()), tuple(err.shape))) if got.dim() else ()
    far = f"; the largest error, {float(err[worst]):.3g}, at index {worst}" if got.dim() and worst != at else ""
    head = f"{int(wrong.sum())} of {got.numel()} values wrong, the first at index {at}: " if got.dim() else ""
    return (f"{head}got {float(got[at]):.5g}, expected {float(want[at]):.5g} (error {float(err[at]):.3g}){far}"
            f"{hint}")


def _arg_names(exercise: Exercise) -> list[str]:
    try:
        return list(inspect.signature(exercise.reference).parameters)
    except (TypeError, ValueError):
        return []


def _snapshot(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return v.detach().clone(memory_format=torch.contiguous_format).reshape(-1)
    if isinstance(v, (list, dict)) and all(isinstance(x, (int, float, str, tuple)) for x in v):
        return copy.deepcopy(v)
    return None


def _changed(before: Any, after: Any) -> str:
    """'' if ``after`` holds what ``before`` held, else where it differs."""
    if isinstance(before, torch.Tensor):
        now = after.detach().clone(memory_format=torch.contiguous_format).reshape(-1)
        if now.shape != before.shape or now.dtype != before.dtype:
            return "its shape or dtype changed"
        if not now.numel():
            return ""
        bits = lambda t: t.view(torch.uint8).reshape(t.numel(), -1) if t.element_size() > 0 else t  # noqa: E731
        diff = (bits(now) != bits(before)).any(dim=1)
        if not diff.any():
            return ""
        i = int(diff.nonzero()[0])
        return (f"{int(diff.sum())} of {now.numel()} values changed, the first at flat index {i} (was "
                f"{before[i].item():.5g}, now {now[i].item():.5g})")
    return "" if before is None or before == after else "its contents changed"


def _returned_tensors(out: Any) -> list[torch.Tensor]:
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _returned_tensors(o)]
    return []


def _invariants(exercise: Exercise, args: tuple, out: Any, before: list) -> str:
    """'' if the call left the inputs alone, returned no view of one (unless the task writes it) and returned
    the layout the task names; else what went wrong."""
    names = _arg_names(exercise)
    name = lambda i: names[i] if i < len(names) else f"argument {i}"  # noqa: E731
    for i, (a, b) in enumerate(zip(args, before)):
        if i not in exercise.writes and (why := _changed(b, a)):
            return (f"changed its input {name(i)} ({why}): the task leaves its inputs as they were (write the "
                    "result into a new tensor)")
    storages = {a.untyped_storage().data_ptr(): i for i, a in enumerate(args)
                if isinstance(a, torch.Tensor) and a.numel() and i not in exercise.writes}
    for t in _returned_tensors(out):
        i = storages.get(t.untyped_storage().data_ptr()) if t.numel() else None
        if i is not None:
            return (f"returned a view of its input {name(i)} (they share memory): the task wants a new tensor, "
                    "so that writing into the result cannot change the input")
    if exercise.layout and isinstance(out, torch.Tensor):
        fmt = torch.channels_last if exercise.layout == "channels_last" else torch.contiguous_format
        if not (out.dim() == 4 or fmt is torch.contiguous_format) or not out.is_contiguous(memory_format=fmt):
            return (f"returned {_what(out)} of strides {tuple(out.stride())}, not {exercise.layout} as the task "
                    f"asks{' (memory_format=torch.channels_last)' if exercise.layout == 'channels_last' else ''}")
    return ""


def _never_written(exercise: Exercise, args: tuple, before: list) -> str:
    names = _arg_names(exercise)
    for i in exercise.writes:
        if isinstance(args[i], torch.Tensor) and args[i].numel() and not _changed(before[i], args[i]):
            name = names[i] if i < len(names) else f"argument {i}"
            return f"{name} was never written: after the call it holds what it held before; "
    return ""


def _line(err: BaseException) -> str:
    return f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:200]}"


def _check_here(exercise: Exercise, fn: Callable[..., Any], case: Inputs) -> str:
    """`_check` in this process: '' if ``fn`` does what the reference does on ``case``, else what went wrong."""
    pick = exercise.output or (lambda args, returned: returned)
    args, got, mode = case.make(), None, _GuardAllocations()
    before = [_snapshot(a) for a in args]
    kwargs = _block_kwargs(exercise, fn, _RUN["small_block"] and not HAS_CUDA)
    _RUN["watchable"] = False
    inputs = [(a, f"the input {n}") for a, n in zip(args, _arg_names(exercise) + [""] * len(args))
              if hasattr(a, "_course_guard")]
    watch = _Watch(lambda: inputs + mode.made) if INTERPRET and not HAS_CUDA else _NoWatch()
    try:
        with mode, watch, np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the interpreter's overflow warnings: the values will tell
            out = fn(*args, **kwargs)
        if HAS_CUDA:
            torch.cuda.synchronize()
    except NotImplementedError as err:
        raise _Failed() from err
    except Exception as err:  # noqa: BLE001 - what the learner's code raised is the answer to report
        got = err
    if got is not None and (lost := _gpu_lost(got)):
        raise _Lost(lost)
    if _RUN["jobs"] is not None:
        _RUN["jobs"].extend(watch.launches)
    try:
        expected = pick(ref_args := case.make(), exercise.reference(*ref_args))
    except (TypeError, ValueError) as err:
        expected = err
    if isinstance(expected, Exception) or got is not None:
        if isinstance(expected, Exception) and isinstance(got, type(expected)):
            return ""
        did = ((HAS_CUDA and _compile_failure(got)) or f"raised {_line(got)}") if got else f"returned {_what(out)}"
        return f"should raise {_line(expected)}, but it {did}" if isinstance(expected, Exception) else did
    guarded = inputs + mode.made
    if why := next((d for d in (_damage(t, what) for t, what in guarded) if d), ""):
        return why
    _RUN["watchable"] = True  # what follows ranks below a read outside and a race: a GPU grading replays for them
    if why := watch.read_outside() or watch.race or _invariants(exercise, args, out, before):
        return why
    if why := _differ(pick(args, out), expected, exercise.rtol, exercise.atol, exercise.returns):
        return _never_written(exercise, args, before) + why
    return ""


#: What `grade` tells `_check` about the case it runs: the launches seen (for the compile check), and whether
#: the case is of the "programs" family (then ``fn`` gets the exercise's small ``block``, if it takes it); and
#: what `_check` tells `grade`: whether its answer came after the place of the watch's (a read outside, a race).
_RUN: dict = {"jobs": None, "small_block": False, "watchable": False}


def _block_kwargs(exercise: Exercise, fn: Callable[..., Any], small: bool) -> dict:
    """The small blocks of ``exercise.block`` that ``fn`` takes as keywords, if ``small`` (a "programs" case of a
    CPU grading, or of a GPU grading's replay in the interpreter)."""
    if not small or not exercise.block:
        return {}
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    return {k: v for k, v in exercise.block.items() if k in params}


@contextlib.contextmanager
def _same_draws_anywhere():
    """Hypothesis draws from the constants it finds in the project's imported modules (about 1 draw in 20): a
    grading's cases would then depend on what this process imported before, e.g. which test files a CI worker
    collected (one wrong answer shrank over 3017 cases there, 39 alone). Within this block it sees none, so a
    grading draws the same cases in a notebook, a test and a CI worker."""
    try:
        from hypothesis.internal.conjecture import providers
        empty, cache = providers.Constants(), providers.CONSTANTS_CACHE
        original = providers._get_local_constants
    except (ImportError, AttributeError):  # another hypothesis: tests/test_grading.py says whether it still holds
        yield
        return
    cache.cache.clear()  # pools computed with the constants of earlier runs
    providers._get_local_constants = lambda: empty
    try:
        yield
    finally:
        providers._get_local_constants = original
        cache.cache.clear()


def _deadline(exercise: Exercise) -> float:
    return exercise.seconds or CASE_SECONDS[HAS_CUDA]


class _Timeout(BaseException):
    pass


def _within(seconds: float, call: Callable[[], Any]) -> Any:
    """``call()``, interrupted by `_Timeout` after ``seconds`` (in the main thread, where signals arrive)."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return call()

    def alarm(signum, frame):
        raise _Timeout()

    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        return call()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def _in_process(exercise: Exercise, fn: Callable[..., Any], case: Inputs) -> str:
    try:
        return _within(_deadline(exercise), lambda: _check_here(exercise, fn, case))
    except _Timeout:
        return "\0timeout"


def _in_child(exercise: Exercise, fn: Callable[..., Any], case: Inputs) -> str:
    """`_check_here` in a forked child: a crash or a hang there fails the case, the notebook lives on."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe, never return into the parent's code
        code = 0
        try:
            faulthandler.disable()  # a crash is the answer, reported by the parent: no dump of the child's stack
            os.close(read)
            try:
                answer = ("ok", _check_here(exercise, fn, case))
            except _Failed:
                answer = ("not attempted", "")
            except BaseException as err:  # noqa: BLE001
                answer = ("ok", f"the grader could not run this case: {_line(err)}")
            os.write(write, pickle.dumps(answer))
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    data, end = b"", time.monotonic() + _deadline(exercise)
    try:
        while True:
            ready, _, _ = select.select([read], [], [], max(0.0, end - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                return "\0timeout"
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            data += chunk
    finally:
        os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status) or not data:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        what = f"signal {sig} ({signal.Signals(sig).name})" if sig else f"exit status {os.WEXITSTATUS(status)}"
        return (f"your extension crashed the process ({what}): likely an out-of-bounds write or read (an index "
                "past the end of a tensor, a stride ignored, a missing bounds check) that corrupted memory")
    kind, message = pickle.loads(data)
    if kind == "not attempted":
        raise _Failed()
    return message


def _check(exercise: Exercise, fn: Callable[..., Any], case: Inputs) -> str:
    """'' if ``fn`` does what the reference does on this case, else what went wrong ("\\0timeout": the deadline)."""
    if exercise.isolate and not HAS_CUDA and hasattr(os, "fork"):
        return _in_child(exercise, fn, case)
    return _in_process(exercise, fn, case)


# ---- the GPU compile check ----------------------------------------------------------------------------------
_COMPILED = CACHE_DIR / "grading" / "compiled.json"


def _compile_key(kernel, signature: dict, constexprs: dict, options: dict, arch: str) -> str:
    from course_utils.kernel_inspect import kernel_source

    text = json.dumps([kernel_source(kernel), signature, constexprs, options, arch], sort_keys=True, default=str)
    return hashlib.sha1(text.encode()).hexdigest()


def _load_compiled() -> dict:
    try:
        return json.loads(_COMPILED.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _save_compiled(done: dict) -> None:
    try:
        _COMPILED.parent.mkdir(parents=True, exist_ok=True)
        merged = {**_load_compiled(), **done}
        tmp = _COMPILED.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(merged), encoding="utf-8")
        os.replace(tmp, _COMPILED)
    except OSError:
        pass


def _pick_launches(launches: list) -> list:
    """At most `_COMPILE_SIGNATURES` launches per kernel: the first, then the first with other pointer types."""
    chosen, seen = [], {}
    for kernel, signature, constexprs, options in launches:
        fn = getattr(kernel, "fn", kernel)
        pointers = tuple(sorted((k, v) for k, v in signature.items() if v.startswith("*")))
        kinds = seen.setdefault(fn, [])
        if pointers in kinds or len(kinds) >= _COMPILE_SIGNATURES:
            continue
        kinds.append(pointers)
        chosen.append((kernel, signature, constexprs, options))
    return chosen


def _first_error(text: str) -> str:
    """The line of a compiler's message that says what is wrong (the last error named, else a line with "rror")."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("^")]
    errors_ = [line for line in lines if re.match(r"^[\w.]*(Error|Exception)\b", line)
               and not re.match(r"^CompilationError: at \d+:\d+:?$", line)]
    return errors_[-1] if errors_ else next((line for line in lines if "rror" in line), lines[0] if lines else text)


def compile_check(launches: list, archs: Sequence[str] = COMPILE_ARCHS) -> str:
    """'' if every kernel of ``launches`` (kernel, signature, constexprs, options) compiles for `COMPILE_ARCHS`,
    else the first compiler error, in a line. Results are cached in CACHE_DIR by kernel source and signature."""
    from course_utils.kernel_inspect import compile_triton_jobs

    if not isinstance(launches, (list, tuple)) or not all(isinstance(j, tuple) and len(j) == 4 for j in launches):
        raise TypeError("launches must be a list of (kernel, signature, constexprs, options), as the grader records "
                        f"them; got {type(launches).__name__}")
    if isinstance(archs, str) or not all(isinstance(a, str) and re.fullmatch(r"sm_\d+a?", a) for a in archs):
        raise ValueError(f"archs must be a list of architectures like 'sm_90', got {archs!r}")
    cached, todo, keys = _load_compiled(), [], []
    for kernel, signature, constexprs, options in _pick_launches(launches):
        for arch in archs:
            try:
                key = _compile_key(kernel, signature, constexprs, options, arch)
            except (OSError, TypeError):
                continue  # no source to compile (a kernel typed at a prompt)
            if key in cached:
                if cached[key]:
                    return cached[key]
                continue
            todo.append(dict(kernel=kernel, signature=signature, constexprs=constexprs, arch=arch, **options))
            keys.append((key, kernel.fn.__name__, arch))
    if not todo:
        return ""
    try:
        compile_triton_jobs(todo, quick=True)  # whether it compiles: no disassembly, no second ptxas run
    except Exception as err:  # noqa: BLE001 - the compiler's message is the answer
        text = str(err)
        which = next(((k, n, a) for k, n, a in keys if text.startswith(f"{n} for sm_{a[3:]}")), None)
        first = _first_error(text.split(":", 1)[1] if ":" in text else text)
        if "is not defined" in text:  # a global the compile worker's copy of the kernel lacks: the grader's gap
            return ""
        name, arch = (which[1], which[2]) if which else ("your kernel", "the GPU")
        message = (f"the interpreter ran it, but Triton cannot compile {name} for {arch} (a GPU): {first[:300]}")
        if which:
            _save_compiled({which[0]: message})
        if "Triton compile worker failed" in text and not which:
            return ""  # the worker itself failed (no compiler here?): not the learner's fault
        return message
    _save_compiled({k: "" for k, _, _ in keys})
    return ""


def grade(exercise: Exercise, fn: Callable[..., Any] | None, *, quiet: bool = False) -> Report:
    """Run ``fn`` against ``exercise.reference`` on hypothesis-drawn inputs, then on the exercise's family
    cases, checking the invariants on each; on a CPU compile the Triton kernels it ran for the GPU; print one
    line, return a `Report`.

    ``fn`` None, or raising NotImplementedError (an unfilled stub), is "not attempted yet", not a failure.
    """
    if not isinstance(exercise, Exercise):
        raise TypeError(f"grade needs an Exercise (the exercise to grade) first, got {type(exercise).__name__}")
    if fn is not None and not callable(fn):
        raise TypeError(f"grade needs the function you wrote (or None), got {type(fn).__name__}")
    start, cases, status, message = time.perf_counter(), [], "passed" if fn else NOT_ATTEMPTED, ""
    jobs: list = []
    compiling = {"sent": 0, "thread": None, "why": ""}
    check_compiles = INTERPRET and not HAS_CUDA

    def compile_in_background() -> None:  # on the other core while the cases run: a worker process compiles
        if compiling["thread"] is None and len(jobs) > compiling["sent"]:
            batch, compiling["sent"] = jobs[compiling["sent"]:], len(jobs)

            def work() -> None:
                compiling["why"] = compiling["why"] or compile_check(batch, exercise.archs)

            compiling["thread"] = threading.Thread(target=work, daemon=True)
            compiling["thread"].start()

    replays = HAS_CUDA and not exercise.isolate  # a GPU grading's looks in the interpreter, if kernels are launched
    launches, failing, screened = _Launches(), {}, {"all": False}

    def tag(family: str) -> str:
        return f" [{family}]" if family else ""

    def one(case: Inputs, family: str = "") -> None:
        cases.append(case)
        _RUN.update(jobs=jobs, small_block=family == "programs", watchable=False)
        try:
            why = _check(exercise, fn, case)
            failing.update(case=case, family=family, watchable=_RUN["watchable"])
        except _Lost as lost:
            raise _Lost(lost.words, f"{case.about}{tag(family)}") from None
        except Exception as err:  # the reference or the grader's own GPU work, after the GPU was lost
            if lost := _gpu_lost(err):
                raise _Lost(lost, f"{case.about}{tag(family)}") from None
            raise
        finally:
            _RUN.update(jobs=None, small_block=False, watchable=False)
        if check_compiles:
            compile_in_background()
        if why == "\0timeout":
            raise _Stop(f"case {len(cases)} timed out after {_deadline(exercise):g} s ({case.about}): an endless "
                        "loop? a kernel launched over a huge grid?")
        if why:
            raise _Failed(f"{case.about}{tag(family)}: {why}")

    @settings(database=None, deadline=None, derandomize=True, max_examples=exercise.examples[HAS_CUDA],
              phases=(Phase.explicit, Phase.generate, Phase.shrink), report_multiple_bugs=False,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(exercise.inputs)
    def run(case: Inputs) -> None:
        one(case)

    def first_case() -> Inputs:
        """The case the drawn ones start with (hypothesis's simplest), drawn alone."""
        drawn: list = []

        @settings(database=None, deadline=None, derandomize=True, max_examples=1, phases=(Phase.generate,),
                  suppress_health_check=list(HealthCheck), print_blob=False)
        @given(exercise.inputs)
        def draw(case: Inputs) -> None:
            drawn.append(case)

        draw()
        return drawn[0]

    def screen() -> None:
        """On a GPU, before any case runs there: the first drawn case in the interpreter, watched, and, if that
        launched Triton kernels, every family case (the "programs" ones with the small block). A write or read
        outside, or a race, fails the grading there: the GPU never runs a kernel the interpreter saw doing that."""
        for family, case in [("", first_case()), *exercise.family_cases()]:
            why, kernels = _interpret(exercise, fn, case, family == "programs")
            if why:
                raise _Failed(f"{case.about}{tag(family)}: {why}")
            if not family and not kernels:
                return  # no Triton kernel: nothing for the interpreter to watch (looked at again if the GPU runs one)
        screened["all"] = True

    def all_cases() -> None:
        if replays:
            screen()
        try:
            run()  # the drawn cases first: a failure among them is shrunk to the smallest
            for family, case in exercise.family_cases():
                if not (HAS_CUDA and family == "programs"):  # GPU-sized cases already need many programs
                    one(case, family)
        except _Failed as err:  # on a GPU, the last failing case is the smallest: what the watch sees there first
            if (err.args and launches.count and failing["watchable"]
                    and (why := _replay(exercise, fn, failing["case"], failing["family"] == "programs"))):
                raise _Failed(f"{failing['case'].about}{tag(failing['family'])}: {why}") from None
            raise
        except errors.Flaky:  # results that change from run to run: a race? The last case run, watched on a GPU
            where = f"{failing['case'].about}{tag(failing['family'])}" if failing else "a case"
            if (launches.count and failing
                    and (why := _replay(exercise, fn, failing["case"], failing["family"] == "programs"))):
                raise _Failed(f"{where}: {why}") from None
            raise _Failed(f"{where}: the same input gave different results from run to run (a race between "
                          "programs?)") from None
        if launches.count and not screened["all"]:  # the GPU ran Triton kernels that the first case's look did
            for family, case in [("", cases[0]), *exercise.family_cases()]:  # not launch: the looks skipped then
                if why := _replay(exercise, fn, case, family == "programs"):
                    raise _Failed(f"{case.about}{tag(family)}: {why}")

    try:
        if fn is not None and HAS_CUDA and (lost := _gpu_state()):  # a kernel run before this grading lost it
            status, message = "FAILED", (
                f"The GPU failed before this grading ({lost}), in code run earlier in this Python process, which can "
                "no longer use it: every CUDA call fails alike, so nothing was graded. The usual cause is a kernel "
                f"that read or wrote outside its tensors. {_RESTART}")
        elif fn is not None:
            with launches if replays else contextlib.nullcontext(), _same_draws_anywhere():
                all_cases()
            if check_compiles and jobs:
                if compiling["thread"] is not None:
                    compiling["thread"].join()
                why = compiling["why"] or compile_check(jobs[compiling["sent"]:], exercise.archs)
                if why:
                    status, message = "FAILED", f"The smallest failing case: {cases[0].about}: {why}"
    except _Failed as err:
        status, message = ("FAILED", f"The smallest failing case: {err}") if err.args else (NOT_ATTEMPTED, "")
    except _Stop as err:
        status, message = "FAILED", f"The smallest failing case: {err}"
    except _Lost as lost:
        status, message = "FAILED", lost.message()
    except Exception as err:  # noqa: BLE001 - the GPU lost while hypothesis made a case's inputs: the same words
        if not (lost := _gpu_lost(err)):
            raise
        status, message = "FAILED", _Lost(lost).message()
    report = Report(exercise.name, status, len(cases), time.perf_counter() - start, message)
    if not quiet:
        print(report)
    return report
