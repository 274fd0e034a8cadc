"""`benchmark`: the one way the course times code, and `device_peaks`, what it compares against.

On a GPU `benchmark` follows ``triton.testing.do_bench``'s recipe (warm-up, CUDA events around each
call, the L2 cache flushed in between; a GPU test checks the two agree within 5%). It does not simply
call ``do_bench`` because it also runs on a CPU (``time.perf_counter``, same result type, so cells need
no branches), can leave L2 warm (``flush_l2=False``, to measure launch overhead), and returns
quantiles, GB/s, TFLOP/s and % of peak in one result.
"""

from __future__ import annotations

import functools
import math
import numbers
import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from course_utils.device import require_device
from course_utils.peaks import DevicePeaks, lookup_peaks

#: Bytes written between repetitions to evict the L2 cache: larger than any GPU's L2 (H100: 50 MB).
L2_FLUSH_BYTES = 256 * 2**20

_AUTO = "auto"


@dataclass(frozen=True)
class BenchmarkResult:
    """Timing of one function; throughputs are None where bytes or FLOPs were not given."""

    median_ms: float
    q20_ms: float
    q80_ms: float
    reps: int
    timer: str  # "cuda-events", "cuda-graph-replay", "wall-clock" or "cpu-perf-counter"
    bytes_moved: int | None = None
    flops: int | None = None
    gbps: float | None = None
    tflops: float | None = None
    pct_peak_bandwidth: float | None = None
    pct_peak_flops: float | None = None

    def __str__(self) -> str:
        parts = [f"{self.median_ms:.4f} ms (q20 {self.q20_ms:.4f}, q80 {self.q80_ms:.4f}, "
                 f"{self.reps} reps, {self.timer})"]
        if self.gbps is not None:
            pct = f", {self.pct_peak_bandwidth:.0f}% of peak" if self.pct_peak_bandwidth is not None else ""
            parts.append(f"{self.gbps:,.1f} GB/s{pct}")
        if self.tflops is not None:
            pct = f", {self.pct_peak_flops:.0f}% of peak" if self.pct_peak_flops is not None else ""
            parts.append(f"{self.tflops:,.2f} TFLOP/s{pct}")
        return " | ".join(parts)


def _check_count(name: str, value: int | float | None) -> int | float | None:
    """A count of bytes or FLOPs: None, or a number >= 0 (NumPy numbers too), as a Python number."""
    if value is None:
        return None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number of {name.split('_')[0]}, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def _time_cuda(fn: Callable[[], Any], warmup_ms: float, rep_ms: float, flush_l2: bool,
               max_reps: int) -> list[float]:
    fn()
    torch.cuda.synchronize()
    cache = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device="cuda")
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(5):
        if flush_l2:
            cache.zero_()
        fn()
    end.record()
    torch.cuda.synchronize()
    estimate_ms = max(start.elapsed_time(end) / 5, 1e-6)
    n_warmup = max(1, int(warmup_ms / estimate_ms))
    n_reps = min(max_reps, max(1, int(rep_ms / estimate_ms)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n_reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n_reps)]
    for _ in range(n_warmup):
        fn()
    for i in range(n_reps):
        if flush_l2:
            cache.zero_()  # a kernel on the same stream, so it finishes before the start event
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def _time_cpu(fn: Callable[[], Any], warmup_ms: float, rep_ms: float, max_reps: int) -> list[float]:
    t0 = time.perf_counter()
    fn()
    estimate_ms = max((time.perf_counter() - t0) * 1e3, 1e-6)
    for _ in range(min(max(0, int(warmup_ms / estimate_ms)), max_reps)):
        fn()
    n_reps = min(max_reps, max(1, int(rep_ms / estimate_ms)))
    times = []
    for _ in range(n_reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def cuda_graph(fn: Callable[[], Any], *, warmup: int = 3) -> Callable[[], None]:
    """Capture ``fn()`` in a CUDA graph and return its replay: one launch that runs all of ``fn``'s kernels
    with no Python, no autograd and no launch overhead in between (warm-up runs on a side stream first, as
    ``torch.cuda.graphs`` asks). ``fn`` must allocate nothing new per call and never synchronize.

    A graph holds addresses, not tensors: each replay reads and writes the memory that ``fn``'s tensors (a
    model's weights, an optimizer's state) had at capture. The replay returned keeps ``fn``, and so what it
    refers to, alive; without that, a caller that keeps only the replay lets those tensors be freed and
    their memory handed to new ones, which the replays then overwrite."""
    if not callable(fn):
        raise TypeError(f"fn must be callable (a function of no arguments), got {type(fn).__name__}")
    if not torch.cuda.is_available():
        raise ValueError("cuda_graph needs a CUDA GPU")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()

    def replay() -> None:
        graph.replay()
    replay.graph, replay.fn = graph, fn  # what the replays read and write must live as long as they do
    return replay


def _time_wall(fn: Callable[[], Any], warmup_ms: float, rep_ms: float, max_reps: int,
               sync: Callable[[], None]) -> list[float]:
    # back to back, no flush: each figure is a batch's wall time (host and device) divided by its calls
    sync()
    t0 = time.perf_counter()
    fn()
    sync()
    calls = int(min(1000, max(1, 1.0 / max((time.perf_counter() - t0) * 1e3, 1e-6))))  # about 1 ms a batch

    def batch() -> None:
        for _ in range(calls):
            fn()
        sync()

    return [t / calls for t in _time_cpu(batch, warmup_ms, rep_ms, max_reps)]


#: What `benchmark` measures. "gpu": the device time of one call, CUDA events around it (L2 flushed before,
#: unless flush_l2=False). "wall": the wall time per call of calls run back to back, host work included:
#: what a loop of small calls really costs. "graph": the device time of one call replayed from a CUDA graph,
#: launch overhead excluded: what the GPU work alone takes.
MODES = ("gpu", "wall", "graph")


def benchmark(fn: Callable[[], Any], *, bytes_moved: int | None = None, flops: int | None = None,
              dtype: torch.dtype = torch.float16, warmup_ms: float = 25.0, rep_ms: float = 100.0,
              flush_l2: bool = True, max_reps: int = 10_000, device: str | torch.device | None = None,
              peaks: DevicePeaks | None | str = _AUTO, mode: str = "gpu") -> BenchmarkResult:
    """Time ``fn()`` and report median, quantiles and (optionally) throughput.

    Args:
        fn: a function of no arguments that launches the work (for example ``lambda: x + y``).
        bytes_moved: bytes read plus bytes written by one call; gives GB/s and % of peak bandwidth.
        flops: floating-point operations of one call; gives TFLOP/s and % of peak FLOP/s.
        dtype: which peak FLOP/s ``flops`` is compared with (see `DevicePeaks.tflops_for`).
        warmup_ms, rep_ms: time spent warming up and measuring (the number of calls follows).
        flush_l2: write a 256 MiB buffer before each call so it starts with a cold L2 (GPU only).
        device: 'cuda' or 'cpu'; default is the course's `DEVICE`.
        peaks: the device's peaks; "auto" looks them up, None leaves the % fields empty.
        mode: "gpu", "wall" or "graph" (see `MODES`); on a CPU all three time wall-clock calls.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable (a function of no arguments), got {type(fn).__name__}")
    bytes_moved, flops = _check_count("bytes_moved", bytes_moved), _check_count("flops", flops)
    for name, value in (("warmup_ms", warmup_ms), ("rep_ms", rep_ms), ("max_reps", max_reps)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise TypeError(f"{name} must be a finite number, got {value!r}")
    if warmup_ms < 0 or rep_ms <= 0:
        raise ValueError(f"warmup_ms must be >= 0 and rep_ms > 0, got {warmup_ms} and {rep_ms}")
    if max_reps < 1 or int(max_reps) != max_reps:
        raise ValueError(f"max_reps must be a whole number >= 1, got {max_reps}")
    max_reps = int(max_reps)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype (which peak FLOP/s flops is compared with), got {dtype!r}")
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    on = require_device(device)
    if on.type == "cuda" and mode == "wall":
        times, timer = _time_wall(fn, warmup_ms, rep_ms, max_reps, torch.cuda.synchronize), "wall-clock"
        if peaks == _AUTO:
            peaks = device_peaks()
    elif on.type == "cuda":
        replay = cuda_graph(fn) if mode == "graph" else fn
        times = _time_cuda(replay, warmup_ms, rep_ms, flush_l2, max_reps)
        timer = "cuda-graph-replay" if mode == "graph" else "cuda-events"
        if peaks == _AUTO:
            peaks = device_peaks()
    else:
        times, timer = _time_cpu(fn, warmup_ms, rep_ms, max_reps), "cpu-perf-counter"
        if peaks == _AUTO:
            peaks = None  # no spec sheet for CPUs: the % columns stay empty
    if peaks is not None and not isinstance(peaks, DevicePeaks):
        raise TypeError(f"peaks must be a DevicePeaks, None or 'auto', got {peaks!r}")
    median = statistics.median(times)
    q20, q80 = (float(q) for q in np.quantile(times, [0.2, 0.8]))  # linear interpolation, as do_bench
    seconds = median / 1e3
    gbps = bytes_moved / seconds / 1e9 if bytes_moved is not None and seconds > 0 else None
    tflops = flops / seconds / 1e12 if flops is not None and seconds > 0 else None
    return BenchmarkResult(
        median_ms=median, q20_ms=q20, q80_ms=q80, reps=len(times), timer=timer,
        bytes_moved=bytes_moved, flops=flops, gbps=gbps, tflops=tflops,
        pct_peak_bandwidth=100 * gbps / peaks.bandwidth_gbps if (gbps is not None and peaks) else None,
        pct_peak_flops=100 * tflops / peaks.tflops_for(dtype) if (tflops is not None and peaks) else None,
    )


def benchmark_interleaved(fns: dict[str, Callable[[], Any]], *, rounds: int = 5,
                          **benchmark_kwargs: Any) -> dict[str, float]:
    """Median over ``rounds`` of each function's `benchmark` median (ms), the functions timed in turn.

    GPU clocks drift by several percent between runs and as the chip warms; timing A, B, A, B... rather
    than A, A, A, B, B, B makes the drift hit every function alike, so their ratio is what counts.
    """
    if not isinstance(fns, dict) or not fns or not all(callable(f) for f in fns.values()):
        raise TypeError("fns must be a non-empty dict of name -> function of no arguments")
    if isinstance(rounds, (bool, np.bool_)) or not isinstance(rounds, numbers.Integral) or rounds < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(benchmark(fn, **benchmark_kwargs).median_ms)
    return {name: statistics.median(t) for name, t in times.items()}


def measure_peaks() -> DevicePeaks:
    """Measure copy bandwidth and matmul FLOP/s on the current GPU (for GPUs not in the spec table)."""
    if not torch.cuda.is_available():
        raise ValueError("measure_peaks needs a CUDA GPU")
    n = 2**26
    src = torch.empty(n, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    copy = benchmark(lambda: dst.copy_(src), bytes_moved=2 * src.nbytes, peaks=None)
    size = 4096
    rates = {}
    for dtype in (torch.float32, torch.float16):
        a = torch.randn(size, size, device="cuda", dtype=dtype)
        rates[dtype] = benchmark(lambda: a @ a, flops=2 * size**3, peaks=None).tflops
    return DevicePeaks(torch.cuda.get_device_name(0), copy.gbps or 0.0, rates[torch.float32] or 0.0, None,
                       rates[torch.float16] or 0.0, source="measured")


@functools.lru_cache(maxsize=1)
def device_peaks() -> DevicePeaks | None:
    """Peaks of the current GPU (spec sheet, else measured); None on a machine without CUDA."""
    if not torch.cuda.is_available():
        return None
    return lookup_peaks(torch.cuda.get_device_name(0)) or measure_peaks()
