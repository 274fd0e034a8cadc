"""Notebook 01 (timing GPU code): effective bandwidth from a timing, where a bandwidth curve reaches half of its
top, and a timer for asynchronous work (graded on a simulated device whose clock is exact)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd
import torch
from hypothesis import strategies as st

from course_utils.grading import Exercise, Inputs
from exercises import case, sizes

# ---- Exercise 1: effective bandwidth ---------------------------------------------------------------------
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int64)


@st.composite
def _gbps_inputs(draw) -> Inputs:
    n, dtype = draw(sizes(2**31, 1024)), draw(st.sampled_from(DTYPES))
    reads, writes = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    ms = draw(st.integers(1, 10**6)) / 1000  # 0.001 ms to 1 s
    return Inputs(lambda: (n, dtype, reads, writes, ms),
                  f"n={n:,}, dtype={str(dtype).replace('torch.', '')}, reads={reads}, writes={writes}, ms={ms:g}")


def _effective_gbps(n: int, dtype: torch.dtype, reads: int, writes: int, ms: float) -> float:
    element = torch.empty((), dtype=dtype).element_size()
    return (reads + writes) * n * element / (ms / 1e3) / 1e9


def _gbps_case(n: int, dtype: torch.dtype, reads: int, writes: int, ms: float) -> Inputs:
    return case(f"n={n:,}, dtype={str(dtype).replace('torch.', '')}, reads={reads}, writes={writes}, ms={ms:g}",
                n, dtype, reads, writes, ms)


EFFECTIVE_GBPS = Exercise(
    "01.1 effective_gbps", "effective_gbps(n, dtype, reads, writes, ms): the GB/s (10^9 bytes per second) of an "
    "element-wise op that reads `reads` tensors and writes `writes` tensors of n elements of dtype in ms milliseconds",
    _effective_gbps, _gbps_inputs(), rtol=1e-9, examples=(100, 200),
    families={"edges": lambda: [_gbps_case(1, torch.int8, 1, 1, 0.001), _gbps_case(1, torch.float64, 3, 2, 1000.0)]
              + [_gbps_case(4099, dtype, 2, 1, 0.5) for dtype in DTYPES],
              "empty": lambda: [_gbps_case(0, torch.float32, 2, 1, 0.25)],
              "limits": lambda: [_gbps_case(2**31, torch.float64, 3, 2, 0.001),  # 8.6e10 bytes: past int32 and fp32's
                                 _gbps_case(2**31 - 1, torch.int64, 3, 2, 1000.0)]})  # exact integers


# ---- Exercise 2: where the bandwidth curve reaches half of its top ----------------------------------------
@st.composite
def _sweep_inputs(draw) -> Inputs:
    k = draw(st.integers(2, 9))
    size_list = [2 ** (10 + 2 * i) for i in range(k)]
    rows = []
    for provider in ("x * x", "copy (clone)"):
        for size in size_list:
            rows.append((size, provider, float(draw(st.integers(1, 40)) * 25)))  # a multiple of 25: halves are exact
    if draw(st.booleans()):  # a rising curve that reaches exactly half of its top at some size: >= is not >
        curve = sorted(g for _, p, g in rows if p == "x * x")
        first = next(j for j, g in enumerate(curve) if g >= curve[-1] / 2)
        curve[first] = curve[-1] / 2 if first < k - 1 else curve[first]
        rows = [(s, p, curve[size_list.index(s)] if p == "x * x" else g) for s, p, g in rows]
    order = draw(st.permutations(range(len(rows))))  # the rows in any order
    rows = [rows[i] for i in order]
    listing = "; ".join(f"{p} at {s}: {g:g}" for s, p, g in sorted(rows, key=lambda r: (r[1], r[0])))
    return Inputs(lambda: (pd.DataFrame(rows, columns=["size", "provider", "gbps"]), "x * x"),
                  f"provider 'x * x', rows (in another order) [{listing}]")


def _half_bandwidth_size(frame: pd.DataFrame, provider: str) -> int:
    rows = frame[frame["provider"] == provider].sort_values("size")
    half = rows["gbps"].iloc[-1] / 2  # half of what it reaches at the largest size
    return int(rows[rows["gbps"] >= half]["size"].iloc[0])


def _sweep_case(curve: list[tuple[int, float]], other: tuple[int, float] = (1024, 5.0)) -> Inputs:
    """The curve of 'x * x' (size, gbps), last row first, and one row of another provider ``other``."""
    rows = [(s, "x * x", g) for s, g in reversed(curve)] + [(other[0], "copy (clone)", other[1])]
    listing = "; ".join(f"{p} at {s}: {g:g}" for s, p, g in rows)
    return Inputs(lambda: (pd.DataFrame(rows, columns=["size", "provider", "gbps"]), "x * x"),
                  f"provider 'x * x', rows (in another order) [{listing}]")


HALF_BANDWIDTH = Exercise(
    "01.2 half_bandwidth_size", "half_bandwidth_size(frame, provider): the smallest size at which `provider` reaches "
    "at least half of the GB/s it reaches at the largest size (frame: columns size, provider, gbps; rows in any order)",
    _half_bandwidth_size, _sweep_inputs(), examples=(100, 200),
    families={"edges": lambda: [_sweep_case([(4096, 100.0)]),  # one size: it is its own top
                                _sweep_case([(1024, 300.0), (4096, 300.0), (16384, 300.0)]),  # flat: the first size
                                _sweep_case([(1000, 10.0), (3000, 80.0), (7000, 50.0)], other=(65536, 900.0))],
              "kinks": lambda: [_sweep_case([(1024, 25.0), (4096, 50.0), (16384, 75.0), (65536, 100.0)])]})  # half exactly


# ---- Exercise 3: a timer for asynchronous work ------------------------------------------------------------
@dataclass
class SimulatedDevice:
    """A GPU in miniature, with an exact clock. `launch` queues a kernel: the host pays ``launch_ms`` and goes
    on; the device runs the kernel once it is free. `synchronize` waits until the queue is empty. `clock`
    reads the host's clock in seconds, like ``time.perf_counter``."""
    busy_until_ms: float = 0.0  # work queued before the call to be timed
    now_ms: float = 0.0
    log: list = field(default_factory=list)

    def clock(self) -> float:
        return self.now_ms / 1e3

    def synchronize(self) -> None:
        self.now_ms = max(self.now_ms, self.busy_until_ms)

    def launch(self, launch_ms: float, kernel_ms: float) -> None:
        self.now_ms += launch_ms
        self.busy_until_ms = max(self.busy_until_ms, self.now_ms) + kernel_ms
        self.log.append((launch_ms, kernel_ms))


@st.composite
def _timer_inputs(draw) -> Inputs:
    queued = draw(st.sampled_from([0, 0, 3, 40, 250])) / 4  # ms of earlier work still on the device
    kernels = draw(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 4000)), min_size=1, max_size=4))
    kernels = [(launch / 200, run / 200) for launch, run in kernels]  # ms: launches of 5-200 us, kernels up to 20 ms

    def make() -> tuple:
        device = SimulatedDevice(busy_until_ms=queued)
        return (lambda: [device.launch(*k) for k in kernels]), device

    listing = ", ".join(f"(launch {a:g} ms, runs {b:g} ms)" for a, b in kernels)
    return Inputs(make, f"{queued:g} ms of earlier work still queued; the call launches [{listing}]")


def _time_call(fn, device) -> float:
    device.synchronize()  # start with an empty queue: earlier work is not ours
    start = device.clock()
    fn()
    device.synchronize()  # the work is done only when the device says so
    return (device.clock() - start) * 1e3


def _timer_case(queued: float, kernels: list[tuple[float, float]]) -> Inputs:
    def make() -> tuple:
        device = SimulatedDevice(busy_until_ms=queued)
        return (lambda: [device.launch(*k) for k in kernels]), device

    listing = ", ".join(f"(launch {a:g} ms, runs {b:g} ms)" for a, b in kernels)
    return Inputs(make, f"{queued:g} ms of earlier work still queued; the call launches [{listing}]")


TIME_CALL = Exercise(
    "01.3 time_call", "time_call(fn, device): the milliseconds from an empty queue to the end of the work that one "
    "call of fn queues; device.synchronize() waits for the queue, device.clock() reads the host clock in seconds",
    _time_call, _timer_inputs(), rtol=1e-9, examples=(100, 200),
    families={"empty": lambda: [_timer_case(10.0, [])],  # no work: 0 ms, however much was queued before
              "edges": lambda: [_timer_case(0.0, [(0.005, 20.0)]),  # one launch, a long kernel
                                _timer_case(0.0, [(0.2, 0.005)] * 4),  # host-bound: launches longer than kernels
                                _timer_case(62.5, [(0.01, 0.01)])]})  # long earlier work, a tiny call
