"""Profiling helpers for notebook 02: annotate code, then turn a ``torch.profiler`` run into tables.

- `annotate(name)`: a context manager *and* decorator that opens a ``torch.profiler.record_function``
  range (seen by ``torch.profiler`` and in its traces) and, on a CUDA machine, an NVTX range of the
  same name (seen by Nsight Systems).
- `range_times(prof)`: calls, host time and device time of each annotated range.
- `annotate_calls(target)`: annotates every call of a model's submodules, or of the functions of a
  Python module (``torch.nn.functional``...), by monkey-patching them; leaving the ``with`` block
  puts every original back, even after an exception.
- `device_activity(prof)`: the device side of a profile as a pandas DataFrame, one row per kernel,
  memcpy or memset, with the CPU op that launched it. On a machine without a GPU the "device" is
  the CPU: one row per CPU op with its self time.
- `time_breakdown`, `idle_fraction`, `top_kernels`, `plot_time_breakdown`, `plot_top_kernels`: the
  Holistic-Trace-Analysis style summaries (how much of the profiled window was kernels, copies,
  memsets or idle; which kernels dominate).
- `time_by_source(prof, by="function" | "module")`: device time (CPU time on a CPU) charged to the
  Python function or ``nn.Module`` that launched it (needs ``with_stack=True`` and `stack_config`).

Works with the FunctionEvents of torch 2.5 and later (tested on 2.11 with CUDA and 2.13 on a CPU);
attributes that older releases lack are read with fallbacks.
"""

from __future__ import annotations

import contextlib
import functools
import re
import types
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.axes import Axes
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, record_function

from course_utils.plots import STYLE

__all__ = [
    "annotate", "annotate_calls", "profiler_activities", "stack_config", "device_activity",
    "time_breakdown", "idle_fraction", "top_kernels", "short_kernel_name", "range_times", "time_by_source",
    "plot_time_breakdown", "plot_top_kernels", "CATEGORIES",
]

#: Row categories of `device_activity`, in the order the breakdown plots them ("runtime": CUDA API
#: calls such as cudaLaunchKernel or cudaMemcpyAsync, in a CPU-side frame of a GPU profile).
CATEGORIES: tuple[str, ...] = ("kernel", "memcpy", "memset", "cpu_op", "runtime")

_DEVICE_TYPES = tuple(getattr(DeviceType, n) for n in ("CUDA", "PrivateUse1", "XPU", "MTIA", "HPU")
                      if hasattr(DeviceType, n))
# CUDA runtime / driver calls and CUPTI's own work, recorded as CPU events. torch 2.13 tags them with
# activity_type; torch 2.11 does not, so their names are the fallback.
_RUNTIME_TYPES = ("cuda_runtime", "cuda_driver", "overhead", "privateuse1_runtime", "privateuse1_driver")
_RUNTIME_NAME = re.compile(r"^(cuda[A-Z_]|cu[A-Z]|Lazy Function Loading|Activity Buffer Request|"
                           r"Runtime Triggered Module Loading|Buffer Flush|Command Buffer Full)")
_PY_FRAME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<func>.*)$")
_LIBRARY_MARKERS = ("torch/", "site-packages/", "dist-packages/", "/lib/python", "course_utils/profiling.py",
                    "contextlib.py", "typing.py", "functools.py", "IPython/", "ipykernel/")


# --------------------------------------------------------------------------------------- ranges

def _check_name(name: object) -> str:
    if not isinstance(name, str):
        raise TypeError(f"a range name must be a str, got {type(name).__name__}")
    if not name.strip():
        raise ValueError("a range name must not be empty")
    return name


def _nvtx_available() -> bool:
    return torch.cuda.is_available()


@contextlib.contextmanager
def _ranges(name: str, nvtx: bool) -> Iterator[None]:
    with record_function(name):
        if nvtx:
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if nvtx:
                torch.cuda.nvtx.range_pop()


def annotate(name: str, *, nvtx: bool | None = None) -> contextlib.AbstractContextManager[None]:
    """A ``record_function`` range and an NVTX range named ``name``, opened and closed together.

    Use it as ``with annotate("data"): ...`` or as a decorator, ``@annotate("train_step")`` (each call
    opens fresh ranges, so recursion and threads are fine). ``nvtx=None`` emits NVTX only where CUDA
    is available (CPU builds of torch have no NVTX); ``nvtx=True`` without CUDA raises ValueError.
    """
    _check_name(name)
    if nvtx is None:
        nvtx = _nvtx_available()
    elif not isinstance(nvtx, bool):
        raise TypeError(f"nvtx must be True, False or None, got {nvtx!r}")
    elif nvtx and not _nvtx_available():
        raise ValueError("nvtx=True needs a CUDA build of torch with a GPU; use nvtx=None to skip it here")
    return _ranges(name, nvtx)


def _wrap(fn: Callable[..., Any], name: str, nvtx: bool) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _ranges(name, nvtx):
            return fn(*args, **kwargs)

    wrapper.__course_annotated__ = True  # type: ignore[attr-defined]
    return wrapper


@contextlib.contextmanager
def annotate_calls(target: torch.nn.Module | types.ModuleType | object, names: Sequence[str] | None = None,
                   *, prefix: str | None = None, nvtx: bool | None = None) -> Iterator[list[str]]:
    """Annotate every call of ``target``'s submodules or functions, and undo it on exit.

    - ``target`` an ``nn.Module``: each submodule (the model itself included) gets an instance
      attribute ``forward`` that wraps the class's ``forward`` in `annotate` ranges named
      ``"<prefix>.<qualified name> (<class>)"``; ``names`` optionally keeps only those qualified
      names. The original state is restored by deleting the instance attribute (or putting back the
      one that was there).
    - any other object (a Python module such as ``torch.nn.functional``, a class, an instance):
      ``names`` lists the callables to wrap, e.g. ``["linear", "relu"]``; ranges are named
      ``"<prefix>.<name>"``. Callers that look the function up at call time (``F.linear(...)``) see
      the wrapper; code that imported the function object earlier does not.

    Yields the list of range names. Nothing stays patched after the block, even if it raised.
    """
    if nvtx is None:
        nvtx = _nvtx_available()
    elif nvtx and not _nvtx_available():
        raise ValueError("nvtx=True needs a CUDA build of torch with a GPU; use nvtx=None to skip it here")
    if names is not None:
        if isinstance(names, str) or not all(isinstance(n, str) for n in names):
            raise TypeError("names must be a sequence of str (e.g. ['linear', 'relu']), not a single str")
    undo: list[Callable[[], None]] = []
    ranges: list[str] = []
    try:
        if isinstance(target, torch.nn.Module):
            root = prefix if prefix is not None else type(target).__name__
            known = {qual for qual, _ in target.named_modules()}
            unknown = sorted(set(names or ()) - known)
            if unknown:
                raise ValueError(f"no submodule named {unknown}; the model has {sorted(known)[:12]}...")
            for qual, module in target.named_modules():
                if names is not None and qual not in names:
                    continue
                label = f"{root}.{qual}" if qual else root
                label = f"{label} ({type(module).__name__})"
                had = "forward" in module.__dict__
                previous = module.__dict__.get("forward")
                object.__setattr__(module, "forward", _wrap(module.forward, label, nvtx))
                undo.append(_restore_forward(module, had, previous))
                ranges.append(label)
        else:
            if names is None or len(names) == 0:
                raise ValueError("for a Python module, class or object, pass names=[...] of the functions to wrap")
            root = prefix if prefix is not None else getattr(target, "__name__", type(target).__name__)
            for name in names:
                original = getattr(target, name, None)
                if original is None or not callable(original):
                    raise ValueError(f"{root!r} has no callable attribute {name!r}")
                had = hasattr(target, "__dict__") and name in vars(target)
                raw = vars(target)[name] if had else None  # e.g. a staticmethod object, put back as is
                label = f"{root}.{name}"
                setattr(target, name, _wrap(original, label, nvtx))
                undo.append(_restore_attribute(target, name, had, raw))
                ranges.append(label)
        yield ranges
    finally:
        for step in reversed(undo):
            step()


def _restore_forward(module: torch.nn.Module, had: bool, previous: Any) -> Callable[[], None]:
    def restore() -> None:
        if had:
            object.__setattr__(module, "forward", previous)
        else:
            module.__dict__.pop("forward", None)
    return restore


def _restore_attribute(target: object, name: str, had: bool, raw: Any) -> Callable[[], None]:
    def restore() -> None:
        if had:
            setattr(target, name, raw)
        else:  # the attribute came from a class (or __getattr__): drop the shadowing copy
            delattr(target, name)
    return restore


def profiler_activities() -> list[ProfilerActivity]:
    """``[CPU]`` plus ``CUDA`` where a GPU is available: what ``torch.profiler.profile`` should record."""
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    return acts


def stack_config() -> Any:
    """The experimental config that makes ``with_stack=True`` fill ``FunctionEvent.stack``.

    Since torch 2.0 the Python call stacks of ops are kept only with ``verbose=True`` (pytorch issue
    #100253); pass ``experimental_config=stack_config()`` together with ``with_stack=True``.
    """
    return torch._C._profiler._ExperimentalConfig(verbose=True)


# ------------------------------------------------------------------------------- event classes

def _events(prof: Any) -> list[Any]:
    if hasattr(prof, "events") and callable(prof.events):
        events = prof.events()
        if events is None:
            raise ValueError("the profiler has no events yet: read them after the `with` block "
                             "(or inside on_trace_ready when using a schedule)")
        return list(events)
    if isinstance(prof, Iterable):
        return list(prof)
    raise TypeError(f"expected a torch.profiler.profile or its events(), got {type(prof).__name__}")


def _is_device(evt: Any) -> bool:
    return evt.device_type in _DEVICE_TYPES


def _is_python(evt: Any) -> bool:
    if getattr(evt, "is_python_function", False) or getattr(evt, "activity_type", None) == "python_function":
        return True
    name = evt.name
    return name.startswith("<built-in") or name.startswith("nn.Module:") or bool(_PY_FRAME.match(name))


def _is_annotation(evt: Any, annotation_names: set[str] | None = None) -> bool:
    if getattr(evt, "is_user_annotation", False):
        return True
    kind = getattr(evt, "activity_type", None)
    if kind in ("user_annotation", "gpu_user_annotation"):
        return True
    if evt.name.startswith("ProfilerStep"):
        return True
    return annotation_names is not None and evt.name in annotation_names


def _is_runtime(evt: Any) -> bool:
    kind = getattr(evt, "activity_type", None)
    return kind in _RUNTIME_TYPES if kind else bool(_RUNTIME_NAME.match(evt.name))


def _device_category(evt: Any) -> str:
    kind = getattr(evt, "activity_type", None)
    if kind == "gpu_memcpy" or evt.name.startswith("Memcpy"):
        return "memcpy"
    if kind == "gpu_memset" or evt.name.startswith("Memset"):
        return "memset"
    return "kernel"


def _is_cpu_op(evt: Any) -> bool:
    return (evt.device_type == DeviceType.CPU and not evt.is_async and not _is_python(evt)
            and not _is_annotation(evt) and evt.name not in ("[memory]", "[OutOfMemory]"))


def _op_chain(evt: Any | None) -> list[str]:
    chain: list[str] = []
    while evt is not None:
        if not _is_python(evt) and not evt.name.startswith("ProfilerStep"):
            chain.append(evt.name)
        evt = evt.cpu_parent
    return chain[::-1]


def _launchers(events: list[Any]) -> dict[int, Any]:
    """Map id(device event) -> the CPU op that launched it (by correlation id).

    Runtime calls are left out: their CUPTI correlation ids live in another number space than the
    ops' ids, and torch 2.11 attaches a kernel to a runtime call whose id happens to collide.
    """
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not _is_python(e) and not _is_runtime(e)]
    found: dict[int, Any] = {}
    device = [e for e in events if _is_device(e)]
    if device and all(hasattr(e, "linked_correlation_id") for e in device):
        by_id = {}
        for e in cpu:
            by_id.setdefault(e.id, e)
        for e in device:
            launcher = by_id.get(e.linked_correlation_id)
            if launcher is not None:
                found[id(e)] = launcher
        return found
    # Older torch: match the (name, duration) that each CPU op lists in .kernels.
    pending: dict[tuple[str, float], list[Any]] = {}
    for e in cpu:
        for k in getattr(e, "kernels", []):
            pending.setdefault((k.name, round(k.duration, 3)), []).append(e)
    for e in device:
        queue = pending.get((e.name, round(e.time_range.elapsed_us(), 3)))
        if queue:
            found[id(e)] = queue.pop(0)
    return found


# ------------------------------------------------------------------------------ the DataFrame

FRAME_COLUMNS = ["name", "category", "op", "op_chain", "start_us", "end_us", "duration_us", "stream"]


def device_activity(prof: Any, *, device: str = "auto") -> pd.DataFrame:
    """One row per device activity of a profile: kernels, memcpys and memsets, sorted by start.

    Columns: ``name`` (kernel name, or "Memcpy HtoD (Pageable -> Device)"...), ``category``
    ("kernel" | "memcpy" | "memset"), ``op`` (the CPU op that launched it, e.g. "aten::pow"),
    ``op_chain`` (the enclosing ops and annotated ranges, outermost first, e.g.
    "aten::square > aten::pow"), ``start_us`` / ``end_us`` (profiler clock), ``duration_us``, ``stream``.

    ``device="auto"`` uses the device rows when the profile has any and falls back to ``"cpu"``:
    one row per CPU op (category "cpu_op") whose ``duration_us`` is its *self* CPU time, so the
    rows add up to the profile's "Self CPU time total" of ops (annotations and Python frames left out).

    ``frame.attrs`` holds ``device`` ("cuda" or "cpu") and ``window_us`` (start, end): the profiled
    window that `time_breakdown` measures idle time against, from the first profiler step (or first
    activity) to the end of the last activity.
    """
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device must be 'auto', 'cuda' or 'cpu', got {device!r}")
    events = _events(prof)
    cpu_annotations = {e.name for e in events if e.device_type == DeviceType.CPU and _is_annotation(e)}
    device_events = [e for e in events if _is_device(e) and not _is_annotation(e, cpu_annotations)]
    use = device if device != "auto" else ("cuda" if device_events else "cpu")
    rows = []
    if use == "cuda":
        launchers = _launchers(events)
        for e in device_events:
            launcher = launchers.get(id(e))
            rows.append({
                "name": e.name, "category": _device_category(e),
                "op": launcher.name if launcher is not None else "",
                "op_chain": " > ".join(_op_chain(launcher)),
                "start_us": float(e.time_range.start), "end_us": float(e.time_range.end),
                "duration_us": float(e.time_range.elapsed_us()),
                "stream": int(getattr(e, "device_resource_id", 0) or 0),
            })
    else:
        for e in events:
            if not _is_cpu_op(e):
                continue
            rows.append({
                "name": e.name, "category": "runtime" if _is_runtime(e) else "cpu_op", "op": e.name, "op_chain": " > ".join(_op_chain(e)),
                "start_us": float(e.time_range.start), "end_us": float(e.time_range.end),
                "duration_us": float(e.self_cpu_time_total), "stream": int(e.thread),
            })
    frame = pd.DataFrame(rows, columns=FRAME_COLUMNS).sort_values("start_us", kind="stable")
    frame = frame.reset_index(drop=True)
    steps = [e for e in events if e.name.startswith("ProfilerStep") and e.device_type == DeviceType.CPU]
    if len(frame):
        start = min([frame["start_us"].min()] + [s.time_range.start for s in steps])
        end = max([frame["end_us"].max()] + [s.time_range.end for s in steps])
    elif steps:
        start, end = min(s.time_range.start for s in steps), max(s.time_range.end for s in steps)
    else:
        start = end = 0.0
    frame.attrs["device"] = use
    frame.attrs["window_us"] = (float(start), float(end))
    return frame


def _union_us(frame: pd.DataFrame) -> float:
    """Length of the union of the rows' [start, end] intervals (overlapping streams counted once)."""
    total, cur_start, cur_end = 0.0, None, None
    for s, e in sorted(zip(frame["start_us"], frame["end_us"])):
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def time_breakdown(frame: pd.DataFrame, window_us: tuple[float, float] | None = None) -> pd.DataFrame:
    """Where the profiled window went: one row per category plus "idle", in us and % of the window.

    Busy time per category is the sum of its rows; "idle" is the window minus the union of all rows
    (on a GPU: no kernel, copy or memset running on any stream; on a CPU: the thread outside any op,
    i.e. in Python or waiting). With one stream the rows add up to the window exactly.
    """
    if not isinstance(frame, pd.DataFrame) or "category" not in frame:
        raise TypeError("time_breakdown expects the DataFrame returned by device_activity")
    start, end = window_us if window_us is not None else frame.attrs.get("window_us", (0.0, 0.0))
    if not frame.empty and end <= start:
        start, end = frame["start_us"].min(), frame["end_us"].max()
    window = max(float(end - start), 0.0)
    clipped = frame.assign(start_us=frame["start_us"].clip(start, end), end_us=frame["end_us"].clip(start, end))
    busy = _union_us(clipped)
    values = {c: float(frame.loc[frame["category"] == c, "duration_us"].sum()) for c in CATEGORIES
              if (frame["category"] == c).any()}
    values["idle"] = max(window - busy, 0.0)
    out = pd.DataFrame({"us": pd.Series(values)})
    out["percent"] = 100 * out["us"] / window if window > 0 else 0.0
    out.attrs["window_us"] = window
    out.attrs["device"] = frame.attrs.get("device", "cuda")
    return out


def idle_fraction(frame: pd.DataFrame) -> float:
    """Fraction (0..1) of the profiled window in which the device did nothing (see `time_breakdown`)."""
    bd = time_breakdown(frame)
    window = bd.attrs["window_us"]
    return float(bd.loc["idle", "us"] / window) if window > 0 else 0.0


_INFORMATIVE = re.compile(r"\b([A-Za-z_]\w*(?:Functor|functor|kernel_impl|KernelImpl|_kernel_cuda))\b")
_SCALAR_TYPES = {"float", "double", "int", "unsigned", "long", "short", "char", "bool", "half", "bfloat16",
                 "std::array", "at::Half", "c10::Half", "c10::BFloat16", "signed", "const", "true", "false"}


def short_kernel_name(name: str, width: int = 60) -> str:
    """A readable kernel name: the function without namespaces plus its most telling template argument.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float,
    at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul> >(int, ...)`` becomes
    ``vectorized_elementwise_kernel<MulFunctor>``; names without templates (cuBLAS's ``sm90_xmma_gemm_...``,
    CPU ops such as ``aten::mm``) are kept and cut to ``width`` characters.
    """
    text = name.replace("(anonymous namespace)::", "").strip()
    is_function = text.startswith("void ")
    if is_function:
        text = text[5:]
    lt, paren = text.find("<"), text.find("(")
    if lt == -1 and (paren == -1 or not is_function):  # "aten::mm", "Memcpy HtoD (Pageable -> Device)"
        short = text
    elif lt == -1 or (paren != -1 and paren < lt):
        short = text[:paren].rsplit("::", 1)[-1]
    else:
        base, inner = text[:lt].rsplit("::", 1)[-1], text[lt:]
        hits = _INFORMATIVE.findall(inner)
        if hits:
            short = f"{base}<{hits[-1]}>"
        else:
            args = [a.strip() for a in re.findall(r"[<,]\s*([A-Za-z_][\w:]*)", inner)]
            args = [a for a in args if a not in _SCALAR_TYPES and not a.startswith("std::")]
            short = f"{base}<{args[0].rsplit('::', 1)[-1]}>" if args else base
    return short if len(short) <= width else short[: width - 3] + "..."


def range_times(prof: Any, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Calls, host time and device time of the annotated ranges (`annotate`, ``record_function``).

    ``cpu_us``: host time spent inside the range (its children included); ``device_us`` (GPU
    profiles only): total time of the kernels, copies and memsets launched by ops inside the range,
    wherever they ran on the GPU's timeline. One row per range name, in order of first appearance.
    """
    events = _events(prof)
    ranges = [e for e in events if e.device_type == DeviceType.CPU and not e.is_async and _is_annotation(e)
              and not e.name.startswith("ProfilerStep")]
    wanted = list(dict.fromkeys(e.name for e in ranges)) if names is None else list(names)
    frame = device_activity(events)
    on_device = frame.attrs["device"] == "cuda"
    chains = [set(c.split(" > ")) for c in frame["op_chain"]] if on_device else []
    rows = []
    for name in wanted:
        mine = [e for e in ranges if e.name == name]
        row = {"range": name, "calls": len(mine), "cpu_us": sum(e.time_range.elapsed_us() for e in mine)}
        if on_device:
            row["device_us"] = float(sum(d for d, c in zip(frame["duration_us"], chains) if name in c))
        rows.append(row)
    return pd.DataFrame(rows).set_index("range") if rows else pd.DataFrame(columns=["calls", "cpu_us"])


def top_kernels(frame: pd.DataFrame, n: int = 10, *, by: str = "name") -> pd.DataFrame:
    """The ``n`` rows groups (by ``name`` or ``op``) with the most total time, with share of all rows.

    Columns: ``calls``, ``total_us``, ``mean_us``, ``percent`` (of all rows' time), ``short_name``.
    """
    if by not in ("name", "op", "category"):
        raise ValueError(f"by must be 'name', 'op' or 'category', got {by!r}")
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    grouped = frame.groupby(by)["duration_us"].agg(calls="count", total_us="sum", mean_us="mean")
    grouped = grouped.sort_values("total_us", ascending=False)
    total = frame["duration_us"].sum()
    grouped["percent"] = 100 * grouped["total_us"] / total if total > 0 else 0.0
    grouped["short_name"] = [short_kernel_name(str(k)) for k in grouped.index]
    return grouped.head(n)


# --------------------------------------------------------------------------------- attribution

def _frame_label(entry: str) -> str:
    m = _PY_FRAME.match(entry)
    if not m:
        return entry
    file = m["file"].replace("\\", "/").rsplit("/", 1)[-1]
    return f"{m['func']} ({file}:{m['line']})"


def _user_frame(stack: Sequence[str]) -> str | None:
    for entry in stack:  # innermost first
        if entry.startswith("<built-in") or entry.startswith("nn.Module:"):
            continue
        if not _PY_FRAME.match(entry):
            continue
        path = entry.replace("\\", "/")
        if any(marker in path for marker in _LIBRARY_MARKERS) or path.startswith(("torch/", "<")):
            continue
        return _frame_label(entry)
    return None


def _module_path(stack: Sequence[str]) -> str | None:
    mods = [entry[len("nn.Module: "):] for entry in stack if entry.startswith("nn.Module: ")]
    return ".".join(reversed(mods)) if mods else None


def time_by_source(prof: Any, *, by: str = "function", n: int | None = None) -> pd.DataFrame:
    """Device time (CPU time without a GPU) charged to the Python code that launched it.

    Every op's *self* device time (the kernels it launched itself) goes to:

    - ``by="function"``: the innermost frame of its Python stack outside torch and the standard
      library (``"train_step (1234.py:7)"``: function, file and the line where it starts);
    - ``by="module"``: the chain of ``nn.Module`` instances it ran in (``"Sequential_0.Linear_1"``);
      ops of the backward pass are charged to the module of their forward op.

    Needs a profile taken with ``with_stack=True, experimental_config=stack_config()``. Time that no
    op claims (e.g. kernels launched outside any op) is reported as ``"(unattributed)"``, so the
    ``us`` column adds up to the profile's total device time. Columns: ``us``, ``percent``, ``ops``.
    """
    if by not in ("function", "module"):
        raise ValueError(f"by must be 'function' or 'module', got {by!r}")
    events = _events(prof)
    ops = [e for e in events if _is_cpu_op(e) and not _is_runtime(e)]
    if not any(e.stack for e in ops):
        raise ValueError("the profile has no Python stacks: profile with with_stack=True and "
                         "experimental_config=stack_config()")
    frame = device_activity(events)
    on_device = frame.attrs["device"] == "cuda"
    totals: dict[str, float] = {}
    counts: dict[str, int] = {}
    for e in ops:
        us = float(e.self_device_time_total if on_device else e.self_cpu_time_total)
        if us <= 0:
            continue
        key = (_user_frame(e.stack) if by == "function" else _module_path(e.stack)) or (
            "(no user frame)" if by == "function" else "(outside any module)")
        totals[key] = totals.get(key, 0.0) + us
        counts[key] = counts.get(key, 0) + 1
    total = float(frame["duration_us"].sum())
    rest = total - sum(totals.values())
    if rest > 0.01:  # microseconds: more than rounding noise
        totals["(unattributed)"] = rest
        counts["(unattributed)"] = 0
    out = pd.DataFrame({"us": pd.Series(totals, dtype=float), "ops": pd.Series(counts, dtype=int)})
    out = out.sort_values("us", ascending=False)
    out["percent"] = 100 * out["us"] / total if total > 0 else 0.0
    out.index.name = by
    out.attrs["device"] = frame.attrs["device"]
    return out[["us", "percent", "ops"]] if n is None else out[["us", "percent", "ops"]].head(n)


# ----------------------------------------------------------------------------------------- plots

_COLORS = {"kernel": "tab:blue", "memcpy": "tab:orange", "memset": "tab:purple", "cpu_op": "tab:green",
           "idle": "lightgray"}


def plot_time_breakdown(frames: pd.DataFrame | Mapping[str, pd.DataFrame], *, unit: str = "percent",
                        title: str = "", ax: Axes | None = None) -> Axes:
    """Stacked horizontal bars of `time_breakdown`: one bar per profile (pass {label: frame}).

    ``unit="percent"`` shows shares of each window; ``"ms"`` shows absolute times.
    """
    if unit not in ("percent", "ms"):
        raise ValueError(f"unit must be 'percent' or 'ms', got {unit!r}")
    if isinstance(frames, pd.DataFrame):
        frames = {"profile": frames}
    if not frames:
        raise ValueError("frames must not be empty")
    with plt.rc_context(STYLE):
        if ax is None:
            _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.6 * len(frames)))
        labels = list(frames)[::-1]
        lefts = [0.0] * len(labels)
        seen: set[str] = set()
        for cat in (*CATEGORIES, "idle"):
            widths = []
            for label in labels:
                bd = time_breakdown(frames[label])
                value = bd.loc[cat, "percent" if unit == "percent" else "us"] if cat in bd.index else 0.0
                widths.append(float(value) / (1 if unit == "percent" else 1e3))
            if not any(w > 0 for w in widths):
                continue
            bars = ax.barh(labels, widths, left=lefts, color=_COLORS[cat], label=cat if cat not in seen else None)
            seen.add(cat)
            ax.bar_label(bars, labels=[f"{w:.0f}" if w >= (8 if unit == "percent" else 0.08 * max(lefts + widths))
                                       else "" for w in widths], label_type="center", fontsize=8)
            lefts = [a + b for a, b in zip(lefts, widths)]
        ax.set_xlabel("% of profiled window" if unit == "percent" else "time (ms)")
        ax.set_title(title)
        ax.legend(ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(frames) < 3 else -0.2), fontsize=8)
    return ax


def plot_top_kernels(top: pd.DataFrame, *, title: str = "", ax: Axes | None = None) -> Axes:
    """Horizontal bars of `top_kernels`: total time per kernel (short names), largest on top."""
    if top.empty:
        raise ValueError("nothing to plot: the table of kernels is empty")
    with plt.rc_context(STYLE):
        if ax is None:
            _, ax = plt.subplots(figsize=(7.5, 0.5 + 0.35 * len(top)))
        names = list(top["short_name"])[::-1]
        values = list(top["total_us"] / 1e3)[::-1]
        bars = ax.barh(names, values, color="tab:blue")
        ax.bar_label(bars, labels=[f"{p:.0f}%" for p in list(top["percent"])[::-1]], fontsize=8, padding=2)
        ax.set_xlabel("total time (ms)")
        ax.set_title(title)
        ax.tick_params(axis="y", labelsize=8)
    return ax
