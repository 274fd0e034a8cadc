"""Profiling helpers: label code (`annotate`, `annotate_calls`), then turn a ``torch.profiler`` run
into pandas tables: `device_activity` (one row per kernel, memcpy or memset, with the op that launched
it), summarised by `time_breakdown`, `idle_fraction`, `top_kernels`, `range_times`, `time_by_source`
and `plot_time_breakdown`; and Nsight Compute, run on a script and read back as a table (`run_ncu`). Tested with torch 2.11 (CUDA) and 2.13 (CPU).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import io
import numbers
import re
import types
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence

import matplotlib.pyplot as plt
import pandas as pd
import torch
from matplotlib.axes import Axes
from torch.autograd import DeviceType
from torch.profiler import record_function

from course_utils.device import HAS_CUDA
from course_utils.plots import STYLE

_CATEGORIES = ("kernel", "memcpy", "memset", "cpu_op", "runtime")
_COLORS = {"kernel": "tab:blue", "memcpy": "tab:orange", "memset": "tab:purple", "cpu_op": "tab:green",
           "runtime": "tab:red", "idle": "lightgray"}
_COLUMNS = ["name", "category", "op", "op_chain", "start_us", "end_us", "duration_us", "stream"]
# CUDA runtime/driver calls and CUPTI's own work, recorded as CPU events: torch 2.13 tags them with
# activity_type, torch 2.11 does not, so their names are the fallback.
_RUNTIME_TYPES = ("cuda_runtime", "cuda_driver", "overhead")
_RUNTIME_NAME = re.compile(r"^(cuda[A-Z_]|cu[A-Z]|Lazy Function Loading|Activity Buffer Request|"
                           r"Runtime Triggered Module Loading|Buffer Flush|Command Buffer Full)")
_PY_FRAME = re.compile(r"^(?P<file>.*?)\((?P<line>\d+)\): (?P<func>.*)$")
_LIBRARY_MARKERS = ("torch/", "site-packages/", "dist-packages/", "/lib/python", "course_utils/profiling.py",
                    "contextlib.py", "typing.py", "functools.py", "IPython/", "ipykernel/")


@contextlib.contextmanager
def _ranges(name: str) -> Iterator[None]:
    with record_function(name):
        if HAS_CUDA:  # CPU builds of torch have no NVTX
            torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            if HAS_CUDA:
                torch.cuda.nvtx.range_pop()


def annotate(name: str) -> contextlib.AbstractContextManager[None]:
    """A ``record_function`` range and, where CUDA is available, an NVTX range named ``name``, opened
    and closed together: ``with annotate("data"): ...`` or ``@annotate("train_step")`` (each call
    opens fresh ranges)."""
    if not isinstance(name, str):
        raise TypeError(f"a range name must be a str, got {type(name).__name__}")
    if not name.strip():
        raise ValueError("a range name must not be empty")
    return _ranges(name)


@contextlib.contextmanager
def annotate_calls(target: torch.nn.Module | types.ModuleType | object, names: Sequence[str] | None = None,
                   *, prefix: str | None = None) -> Iterator[list[str]]:
    """Annotate every call of ``target``'s submodules or functions; yields the range names.

    - an ``nn.Module``: each submodule (itself included; or only the qualified ``names``) gets an
      instance attribute ``forward`` that opens `annotate` ranges ``"<prefix>.<qualified name> (<class>)"``.
    - anything else (a Python module, class, object): the callables ``names`` are wrapped, ranges
      ``"<prefix>.<name>"``; callers that look them up at call time (``F.linear(...)``) see the wrapper.

    On exit, even after an exception, every attribute is deleted or put back as it was.
    """
    if names is not None and (isinstance(names, str) or not all(isinstance(n, str) for n in names)):
        raise TypeError("names must be a sequence of str (e.g. ['linear', 'relu']), not a single str")
    if isinstance(target, torch.nn.Module):
        root = prefix if prefix is not None else type(target).__name__
        known = {qual for qual, _ in target.named_modules()}
        unknown = sorted(set(names or ()) - known)
        if unknown:
            raise ValueError(f"no submodule named {unknown}; the model has {sorted(known)[:12]}...")
        patches = [(m, "forward", f"{f'{root}.{qual}' if qual else root} ({type(m).__name__})")
                   for qual, m in target.named_modules() if names is None or qual in names]
    else:
        if not names:
            raise ValueError("for a Python module, class or object, pass names=[...] of the functions to wrap")
        root = prefix if prefix is not None else getattr(target, "__name__", type(target).__name__)
        missing = [name for name in names if not callable(getattr(target, name, None))]
        if missing:
            raise ValueError(f"{root!r} has no callable attribute {missing[0]!r}")
        patches = [(target, name, f"{root}.{name}") for name in names]
    undo: list[Callable[[], None]] = []
    try:
        for obj, attr, label in patches:
            if attr in getattr(obj, "__dict__", {}):  # put back the raw entry (an instance forward, a staticmethod)
                undo.append(functools.partial(setattr, obj, attr, vars(obj)[attr]))
            else:  # it came from the class: drop the shadowing copy
                undo.append(functools.partial(delattr, obj, attr))
            setattr(obj, attr, _ranges(label)(getattr(obj, attr)))
        yield [label for _, _, label in patches]
    finally:
        for step in reversed(undo):
            step()


def stack_config() -> Any:
    """Pass ``experimental_config=stack_config()`` with ``with_stack=True`` to fill each op's ``stack``:
    ``with_stack=True`` alone records Python calls in the trace, but ``FunctionEvent.stack`` (read by
    `time_by_source` and ``key_averages(group_by_stack_n=...)``) stays empty without ``verbose=True``
    (pytorch issue #100253; still so in torch 2.13)."""
    return torch.profiler._ExperimentalConfig(verbose=True)


def _events(prof: Any) -> list[Any]:
    events = prof.events() if callable(getattr(prof, "events", None)) else prof
    if events is None:
        raise ValueError("the profiler has no events yet: read them after the `with` block "
                         "(or inside on_trace_ready when using a schedule)")
    if not isinstance(events, Iterable):
        raise TypeError(f"expected a torch.profiler.profile or its events(), got {type(prof).__name__}")
    return list(events)


def _is_python(evt: Any) -> bool:
    return (getattr(evt, "is_python_function", False) or getattr(evt, "activity_type", None) == "python_function"
            or evt.name.startswith(("<built-in", "nn.Module:")) or bool(_PY_FRAME.match(evt.name)))


def _is_annotation(evt: Any, names: set[str] = frozenset()) -> bool:
    return (getattr(evt, "is_user_annotation", False) or evt.name.startswith("ProfilerStep") or evt.name in names
            or getattr(evt, "activity_type", None) in ("user_annotation", "gpu_user_annotation"))


def _is_runtime(evt: Any) -> bool:
    kind = getattr(evt, "activity_type", None)
    return kind in _RUNTIME_TYPES if kind else bool(_RUNTIME_NAME.match(evt.name))


def _is_cpu_op(evt: Any) -> bool:
    return (evt.device_type == DeviceType.CPU and not evt.is_async and not _is_python(evt)
            and not _is_annotation(evt) and evt.name not in ("[memory]", "[OutOfMemory]"))


def _device_category(evt: Any) -> str:
    kind = getattr(evt, "activity_type", None)
    if kind == "gpu_memcpy" or evt.name.startswith("Memcpy"):
        return "memcpy"
    return "memset" if kind == "gpu_memset" or evt.name.startswith("Memset") else "kernel"


def _op_chain(evt: Any | None) -> str:
    chain = []
    while evt is not None:
        if not _is_python(evt) and not evt.name.startswith("ProfilerStep"):
            chain.append(evt.name)
        evt = evt.cpu_parent
    return " > ".join(reversed(chain))


def _launchers(events: list[Any], device: list[Any]) -> dict[int, Any]:
    """id(device event) -> the CPU op that launched it. Runtime calls are never candidates: their
    CUPTI correlation ids live in another number space, and torch 2.11 attaches a kernel to a runtime
    call whose id happens to collide with the kernel's op."""
    cpu = [e for e in events if e.device_type == DeviceType.CPU and not _is_python(e) and not _is_runtime(e)]
    if device and all(hasattr(e, "linked_correlation_id") for e in device):  # torch that exposes the link
        by_id = {e.id: e for e in reversed(cpu)}  # the first op with an id wins
        return {id(e): by_id[e.linked_correlation_id] for e in device if e.linked_correlation_id in by_id}
    pending: dict[tuple[str, float], list[Any]] = {}  # else: the (name, duration) each op lists
    for e in cpu:
        for k in getattr(e, "kernels", []):
            pending.setdefault((k.name, round(k.duration, 3)), []).append(e)
    found = {}
    for e in device:
        queue = pending.get((e.name, round(e.time_range.elapsed_us(), 3)))
        if queue:
            found[id(e)] = queue.pop(0)
    return found


def device_activity(prof: Any, *, device: str = "auto") -> pd.DataFrame:
    """One row per kernel, memcpy and memset of a profile, sorted by start.

    Columns: ``name``, ``category`` ("kernel" | "memcpy" | "memset"), ``op`` (the CPU op that
    launched it, e.g. "aten::pow"), ``op_chain`` (enclosing ops and ranges, outermost first, e.g.
    "aten::square > aten::pow"), ``start_us``, ``end_us``, ``duration_us``, ``stream``.
    Without device rows (or with ``device="cpu"``) there is one row per CPU op ("cpu_op", or
    "runtime" for CUDA API calls) with its *self* CPU time. ``frame.attrs``: ``device`` and
    ``window_us``, the profiled window (first profiler step or activity to the end of the last one).
    """
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f"device must be 'auto', 'cuda' or 'cpu', got {device!r}")
    events = _events(prof)
    annotations = {e.name for e in events if e.device_type == DeviceType.CPU and _is_annotation(e)}
    on_device = [e for e in events if e.device_type == DeviceType.CUDA and not _is_annotation(e, annotations)]
    use = device if device != "auto" else ("cuda" if on_device else "cpu")
    if use == "cuda":
        launchers = _launchers(events, on_device)
        rows = [(e.name, _device_category(e), getattr(launchers.get(id(e)), "name", ""),
                 _op_chain(launchers.get(id(e))), e.time_range.start, e.time_range.end, e.time_range.elapsed_us(),
                 int(getattr(e, "device_resource_id", 0) or 0)) for e in on_device]
    else:
        rows = [(e.name, "runtime" if _is_runtime(e) else "cpu_op", e.name, _op_chain(e), e.time_range.start,
                 e.time_range.end, e.self_cpu_time_total, int(e.thread)) for e in events if _is_cpu_op(e)]
    frame = pd.DataFrame(rows, columns=_COLUMNS).astype({c: float for c in _COLUMNS[4:7]})
    frame = frame.sort_values("start_us", kind="stable").reset_index(drop=True)
    steps = [e.time_range for e in events if e.name.startswith("ProfilerStep") and e.device_type == DeviceType.CPU]
    starts = list(frame["start_us"]) + [s.start for s in steps]
    ends = list(frame["end_us"]) + [s.end for s in steps]
    frame.attrs["device"] = use
    frame.attrs["window_us"] = (float(min(starts, default=0.0)), float(max(ends, default=0.0)))
    return frame


def _busy_us(frame: pd.DataFrame) -> float:
    """Length of the union of the rows' [start, end] intervals (overlapping streams counted once)."""
    f = frame.sort_values("start_us")
    block = (f["start_us"] > f["end_us"].cummax().shift()).cumsum()  # a new block starts after a gap
    spans = f.groupby(block).agg(start=("start_us", "min"), end=("end_us", "max"))
    return float((spans["end"] - spans["start"]).sum())


def time_breakdown(frame: pd.DataFrame) -> pd.DataFrame:
    """Where the profiled window went: one row per category plus "idle", in us and % of the window.

    "idle" is the window minus the union of all rows: on a GPU no kernel, copy or memset on any
    stream; on a CPU the thread outside any op (in Python, or waiting).
    """
    if not isinstance(frame, pd.DataFrame) or "category" not in frame:
        raise TypeError("time_breakdown expects the DataFrame returned by device_activity")
    start, end = frame.attrs.get("window_us", (0.0, 0.0))
    if not frame.empty and end <= start:
        start, end = frame["start_us"].min(), frame["end_us"].max()
    window = max(float(end - start), 0.0)
    busy = _busy_us(frame.assign(start_us=frame["start_us"].clip(start, end), end_us=frame["end_us"].clip(start, end)))
    sums = frame.groupby("category")["duration_us"].sum()
    out = pd.DataFrame({"us": sums.reindex([c for c in _CATEGORIES if c in sums.index]).astype(float)})
    out.loc["idle", "us"] = max(window - busy, 0.0)
    out["percent"] = 100 * out["us"] / window if window > 0 else 0.0
    out.index.name = None
    out.attrs.update(window_us=window, device=frame.attrs.get("device", "cuda"))
    return out


def idle_fraction(frame: pd.DataFrame) -> float:
    """Fraction (0..1) of the profiled window in which the device did nothing (see `time_breakdown`)."""
    return float(time_breakdown(frame).loc["idle", "percent"]) / 100


_INFORMATIVE = re.compile(r"\b([A-Za-z_]\w*(?:Functor|functor|kernel_impl|KernelImpl|_kernel_cuda))\b")
_SCALAR_TYPES = {"float", "double", "int", "unsigned", "long", "short", "char", "bool", "half", "bfloat16",
                 "std::array", "at::Half", "c10::Half", "c10::BFloat16", "signed", "const", "true", "false"}


def short_kernel_name(name: str, width: int = 60) -> str:
    """The function without namespaces plus its most telling template argument, cut to ``width``.

    ``void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<..., MulFunctor<float>
    >, ...>(int, ...)`` -> ``vectorized_elementwise_kernel<MulFunctor>``; "aten::mm" stays as it is.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a kernel name (str), got {type(name).__name__}")
    if isinstance(width, bool) or not isinstance(width, numbers.Integral) or width < 4:
        raise ValueError(f"width must be an int >= 4, got {width!r}")
    text = name.replace("(anonymous namespace)::", "").strip()
    is_function = text.startswith("void ")
    text = text[5:] if is_function else text
    lt, paren = text.find("<"), text.find("(")
    if lt == -1 and (paren == -1 or not is_function):  # "aten::mm", "Memcpy HtoD (Pageable -> Device)"
        short = text
    elif lt == -1 or (paren != -1 and paren < lt):
        short = text[:paren].rsplit("::", 1)[-1]
    else:
        base, inner = text[:lt].rsplit("::", 1)[-1], text[lt:]
        hits = _INFORMATIVE.findall(inner)
        args = [a for a in re.findall(r"[<,]\s*([A-Za-z_][\w:]*)", inner)
                if a not in _SCALAR_TYPES and not a.startswith("std::")]
        short = f"{base}<{hits[-1]}>" if hits else f"{base}<{args[0].rsplit('::', 1)[-1]}>" if args else base
    return short if len(short) <= width else short[: width - 3] + "..."


def top_kernels(frame: pd.DataFrame, n: int = 10, *, by: str = "name") -> pd.DataFrame:
    """The ``n`` groups of rows (by ``name``, ``op`` or ``category``) with the most total time.
    Columns: ``calls``, ``total_us``, ``mean_us``, ``percent`` (of all rows' time), ``short_name``."""
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


def range_times(prof: Any, names: Sequence[str] | None = None) -> pd.DataFrame:
    """Calls, host time and device time of the annotated ranges, in order of first appearance.

    ``cpu_us``: host time inside the range (``key_averages()``'s CPU total); ``device_us`` (GPU only):
    the `device_activity` rows whose launching op ran inside the range, wherever they ran on the GPU.
    """
    events = _events(prof)
    spans = pd.DataFrame([(e.name, e.time_range.elapsed_us()) for e in events
                          if e.device_type == DeviceType.CPU and not e.is_async and _is_annotation(e)
                          and not e.name.startswith("ProfilerStep")], columns=["range", "cpu_us"])
    out = spans.groupby("range", sort=False)["cpu_us"].agg(calls="count", cpu_us="sum")
    if names is not None:
        out = out.reindex(list(names), fill_value=0)
    frame = device_activity(events)
    if frame.attrs["device"] == "cuda":
        chains = frame["op_chain"].str.split(" > ")
        out["device_us"] = [float(frame.loc[chains.map(lambda c: r in c), "duration_us"].sum()) for r in out.index]
    return out


def _user_frame(stack: Sequence[str]) -> str | None:
    for entry in stack:  # innermost first: the first frame outside torch and the standard library
        path = entry.replace("\\", "/")
        m = _PY_FRAME.match(path)
        if m and not path.startswith("<") and not any(marker in path for marker in _LIBRARY_MARKERS):
            return f"{m['func']} ({m['file'].rsplit('/', 1)[-1]}:{m['line']})"
    return None


def _module_path(stack: Sequence[str]) -> str | None:
    return ".".join(reversed([e[len("nn.Module: "):] for e in stack if e.startswith("nn.Module: ")])) or None


def time_by_source(prof: Any, *, by: str = "function") -> pd.DataFrame:
    """Each op's self device time (CPU time without a GPU) charged to the Python code that ran it.

    ``by="function"``: the innermost stack frame outside torch and the standard library
    ("train_step (1234.py:7)"); ``by="module"``: the chain of ``nn.Module`` instances
    ("Sequential_0.Linear_1"; backward ops inherit their forward op's). Time no op claims is
    "(unattributed)", so ``us`` adds up to the total. Needs ``with_stack=True, experimental_config=stack_config()``.
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
    find, nobody = (_user_frame, "(no user frame)") if by == "function" else (_module_path, "(outside any module)")
    charged = pd.DataFrame([(find(e.stack) or nobody, float(e.self_device_time_total if on_device
                                                             else e.self_cpu_time_total)) for e in ops],
                           columns=[by, "us"])
    out = charged[charged["us"] > 0].groupby(by)["us"].agg(us="sum", ops="count")
    total = float(frame["duration_us"].sum())
    if total - out["us"].sum() > 0.01:  # microseconds: more than rounding noise
        out.loc["(unattributed)"] = [total - out["us"].sum(), 0]
    out = out.astype({"ops": int}).sort_values("us", ascending=False)
    out["percent"] = 100 * out["us"] / total if total > 0 else 0.0
    out.attrs["device"] = frame.attrs["device"]
    return out[["us", "percent", "ops"]]


def plot_time_breakdown(frames: Mapping[str, pd.DataFrame], *, unit: str = "percent",
                        title: str = "", ax: Axes | None = None) -> Axes:
    """Stacked horizontal bars of `time_breakdown`, one per profile ({label: frame}), in % or ms."""
    if unit not in ("percent", "ms"):
        raise ValueError(f"unit must be 'percent' or 'ms', got {unit!r}")
    if not frames:
        raise ValueError("frames must not be empty")
    column, scale = ("percent", 1.0) if unit == "percent" else ("us", 1e-3)
    table = pd.DataFrame({label: time_breakdown(f)[column] * scale for label, f in frames.items()}).T.fillna(0.0)
    table = table[[c for c in (*_CATEGORIES, "idle") if c in table and (table[c] > 0).any()]]
    with plt.rc_context(STYLE):
        if ax is None:
            _, ax = plt.subplots(figsize=(7.5, 1.2 + 0.6 * len(frames)))
        table.iloc[::-1].plot.barh(stacked=True, width=0.8, ax=ax, legend=False,
                                   color=[_COLORS[c] for c in table.columns])
        smallest = 8 if unit == "percent" else 0.08 * table.sum(axis=1).max()  # label only wide segments
        for bars in ax.containers:
            ax.bar_label(bars, labels=[f"{w:.0f}" if w >= smallest else "" for w in bars.datavalues],
                         label_type="center", fontsize=8)
        ax.set_axisbelow(True)
        ax.set_xlabel("% of profiled window" if unit == "percent" else "time (ms)")
        ax.set_ylabel("")
        ax.set_title(title)
        ax.legend(ncol=5, loc="upper center", bbox_to_anchor=(0.5, -0.35 if len(frames) < 3 else -0.2), fontsize=8)
    return ax


# --- Nsight Compute -------------------------------------------------------------------------------------

NCU_PERMISSION_HINT = ("ERR_NVGPUCTRPERM means the counters need root or the driver option "
                       "NVreg_RestrictProfilingToAdminUsers=0.")


def ncu_command(metrics: Sequence[str], *, nvtx_range: str | None = None) -> list[str]:
    """The ``ncu`` arguments `run_ncu` uses: CSV, base units (durations in ns), only the profiled window.

    ``nvtx_range=None``: the script brackets what to profile with ``torch.cuda.profiler.start()/stop()``;
    a name: only kernels inside that NVTX range (``torch.cuda.nvtx.range_push(name)``).
    """
    if isinstance(metrics, str) or not metrics or not all(isinstance(m, str) and m for m in metrics):
        raise ValueError("metrics must be a non-empty list of ncu metric names")
    window = (["--profile-from-start", "off"] if nvtx_range is None
              else ["--nvtx", "--nvtx-include", f"{nvtx_range}/"])
    return ["ncu", *window, "--metrics", ",".join(metrics), "--print-units", "base", "--csv"]


def read_ncu_csv(text: str, label: Callable[[str], str] | None = None) -> tuple[pd.DataFrame, dict[str, str]]:
    """ncu's CSV (one row per launch and metric) -> (one row per metric, one column per launch; {column: kernel}).

    ``label(kernel_name)`` names a launch's column (default: the kernel's short name); a second launch with
    the same label gets " (2)" added.
    """
    rows = [line for line in text.splitlines() if line.startswith('"')]
    if not rows:
        raise ValueError("no CSV rows in ncu's output (was anything profiled?)")
    raw = pd.read_csv(io.StringIO("\n".join(rows)), dtype=str)
    raw["value"] = pd.to_numeric(raw["Metric Value"].str.replace(",", ""), errors="coerce")  # "n/a" -> NaN
    columns: dict[str, str] = {}
    for launch, name in raw.drop_duplicates("ID")[["ID", "Kernel Name"]].itertuples(index=False):
        base = (label or short_kernel_name)(name)
        column, n = base, 1
        while column in columns.values():
            n += 1
            column = f"{base} ({n})"
        columns[launch] = column
    names = {columns[launch]: name for launch, name in raw.drop_duplicates("ID")[["ID", "Kernel Name"]].itertuples(index=False)}
    table = raw.pivot_table(index="Metric Name", columns="ID", values="value", aggfunc="first")
    table = table.rename(columns=columns)[list(columns.values())]
    return table.rename_axis(index="metric", columns=None), names


@dataclasses.dataclass
class NcuReport:
    """What `run_ncu` found: a table (None if nothing was profiled), the kernels' full names, a note."""

    table: pd.DataFrame | None
    kernels: dict[str, str]
    note: str

    def __str__(self) -> str:
        if self.table is None:
            return self.note
        shown = self.table.to_string(float_format=lambda v: f"{v:,.0f}" if abs(v) >= 1e4 else f"{v:.4g}")
        return "\n".join([shown, *(f"{k}: {v}" for k, v in self.kernels.items()), *([self.note] if self.note else [])])


def run_ncu(script: str | Path, metrics: Sequence[str], *, args: Sequence[str] = (), nvtx_range: str | None = None,
            label: Callable[[str], str] | None = None, timeout: float = 300) -> NcuReport:
    """Profile ``python script args`` under Nsight Compute and read the counters back (`read_ncu_csv`).

    Without a GPU or without ``ncu`` nothing runs: the report's note says so and prints the command, so a
    CPU run of the notebook shows what a GPU run does. ncu's failures (permissions, nothing profiled, a
    timeout) come back as a note with ncu's last lines, never as an exception.
    """
    import shutil
    from course_utils.scripts import run_python

    if not Path(script).is_file():
        raise FileNotFoundError(f"script: no such file {script}")
    from course_utils.scripts import PROJECT_DIR

    command = ncu_command(metrics, nvtx_range=nvtx_range)
    where = Path(script).resolve()
    where = where.relative_to(PROJECT_DIR) if where.is_relative_to(PROJECT_DIR) else Path(where.name)
    shown = " ".join(command + ["python", str(where), *args])  # no machine path in a notebook's output
    if not HAS_CUDA or shutil.which("ncu") is None:
        why = "no GPU here" if not HAS_CUDA else "no ncu on the PATH (Nsight Compute comes with the CUDA toolkit)"
        return NcuReport(None, {}, f"{why}: nothing profiled. On a GPU this runs\n  {shown}")
    run = run_python(script, *args, prefix=[shutil.which("ncu"), *command[1:]], timeout=timeout, interpret=False)
    if run.ok and '"Metric Name"' in run.stdout:
        table, names = read_ncu_csv(run.stdout, label)
        return NcuReport(table, names, "")
    status = "timed out" if run.returncode is None else f"exit {run.returncode}"
    return NcuReport(None, {}, f"ncu profiled nothing ({status}); its last lines:\n{run.tail()}\n{NCU_PERMISSION_HINT}")
