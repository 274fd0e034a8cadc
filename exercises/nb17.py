"""Notebook 17 (training on several GPUs): DDP's bucket assignment, with its smaller first bucket; and the bus
bandwidth of a collective from its timing, given the tensor each rank passes to torch.distributed."""

from __future__ import annotations

from hypothesis import strategies as st

from course_utils.grading import Exercise, Inputs
from exercises import case

MB = 2**20


# ---- Exercise 1: DDP's buckets ----------------------------------------------------------------------------------
@st.composite
def _bucket_inputs(draw) -> Inputs:
    unit = draw(st.sampled_from([1, 4 * 1024, MB]))     # sizes in bytes, KiB-ish or MiB-ish
    sizes = draw(st.lists(st.integers(0, 40).map(lambda k: k * unit), min_size=0, max_size=30))
    cap = draw(st.integers(1, 60)) * unit
    first = draw(st.integers(1, 60)) * unit
    return Inputs(lambda: (list(sizes), cap, first), f"sizes={sizes}, cap_bytes={cap}, first_cap_bytes={first}")


def _ddp_buckets(sizes: list[int], cap_bytes: int, first_cap_bytes: int) -> list[list[int]]:
    buckets, open_bucket, held = [], [], 0
    for i in reversed(range(len(sizes))):
        open_bucket.append(i)
        held += sizes[i]
        if held >= (first_cap_bytes if not buckets else cap_bytes):
            buckets.append(open_bucket)
            open_bucket, held = [], 0
    return buckets + ([open_bucket] if open_bucket else [])


def _as_text(args: tuple, buckets) -> str:
    """What is compared: the buckets as text, or what was returned instead of a list of lists of ints."""
    if not (isinstance(buckets, (list, tuple)) and all(isinstance(b, (list, tuple)) for b in buckets)
            and all(isinstance(i, int) and not isinstance(i, bool) for b in buckets for i in b)):
        return f"not a list of lists of parameter indices: {buckets!r:.120}"
    return "; ".join(f"bucket {n}: {list(b)}" for n, b in enumerate(buckets)) or "no bucket"


def _bucket_edges():
    return [case("sizes=[4, 4, 4, 4] (MiB), cap_bytes=8 MiB, first_cap_bytes=4 MiB: buckets fill exactly",
                 lambda: [4 * MB] * 4, 8 * MB, 4 * MB),
            case("sizes=[100 MiB], cap_bytes=25 MiB, first_cap_bytes=1 MiB: one parameter above both caps",
                 lambda: [100 * MB], 25 * MB, MB),
            case("sizes=[], cap_bytes=25 MiB, first_cap_bytes=1 MiB: no parameter", lambda: [], 25 * MB, MB),
            case("sizes=[1, 2, 3] (MiB), cap_bytes=25 MiB, first_cap_bytes=25 MiB: all in one open bucket",
                 lambda: [MB, 2 * MB, 3 * MB], 25 * MB, 25 * MB)]


BUCKETS = Exercise(
    "17.1 ddp_buckets", "ddp_buckets(sizes, cap_bytes, first_cap_bytes): DDP's bucket assignment. sizes[i] is the "
    "gradient bytes of the i-th parameter of model.parameters(). Walk them from the last to the first, add each to "
    "the open bucket, and close the bucket once it holds its cap or more: first_cap_bytes for the first bucket, "
    "cap_bytes for every later one. Return the buckets in the order they close (the last one may stay open), each "
    "a list of parameter indices in the order they were added", _ddp_buckets, _bucket_inputs(),
    output=_as_text, families={"edges": _bucket_edges}, examples=(150, 300))


# ---- Exercise 2: bus bandwidth from a timing ----------------------------------------------------------------------
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all")


@st.composite
def _timing_inputs(draw) -> Inputs:
    op, world = draw(st.sampled_from(OPS)), draw(st.integers(1, 64))
    nbytes = draw(st.integers(1, 2**31))
    seconds = draw(st.floats(1e-6, 1.0, allow_nan=False, allow_infinity=False))
    return Inputs(lambda: (op, nbytes, seconds, world),
                  f"op={op!r}, input_bytes={nbytes}, seconds={seconds!r}, world_size={world}")


def _bus_bandwidth_from_timing(op: str, input_bytes: int, seconds: float, world_size: int) -> float:
    n = world_size
    size = input_bytes * n if op == "all_gather" else input_bytes   # nccl-tests counts the larger buffer
    factor = {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "reduce_scatter": (n - 1) / n,
              "broadcast": 1.0, "all_to_all": (n - 1) / n}[op]
    return size / seconds * factor / 1e9


def _timing_edges():
    return [case("op='all_reduce', input_bytes=2**30, seconds=0.004, world_size=1: nothing crosses a link",
                 "all_reduce", 2**30, 0.004, 1),
            case("op='all_gather', input_bytes=2**20, seconds=0.001, world_size=8", "all_gather", 2**20, 0.001, 8),
            case("op='broadcast', input_bytes=10**9, seconds=0.01, world_size=4", "broadcast", 10**9, 0.01, 4),
            case("op='all_to_all', input_bytes=10**9, seconds=0.01, world_size=2", "all_to_all", 10**9, 0.01, 2)]


BUS_BANDWIDTH = Exercise(
    "17.2 bus_bandwidth_from_timing", "bus_bandwidth_from_timing(op, input_bytes, seconds, world_size): nccl-tests' "
    "bus bandwidth in GB/s (1e9 bytes) of one collective that took `seconds`, where input_bytes is the size of the "
    "tensor each rank passes in (all_reduce, broadcast: the tensor; all_gather_into_tensor: each rank's piece; "
    "reduce_scatter_tensor and all_to_all_single: the whole input). ops: 'all_reduce', 'all_gather', "
    "'reduce_scatter', 'broadcast', 'all_to_all'", _bus_bandwidth_from_timing, _timing_inputs(), rtol=1e-6,
    families={"edges": _timing_edges}, examples=(150, 300))

#: exercise -> its reference solution's name in solutions.nb17 (tests/test_exercises.py reads it)
SOLUTIONS = {"BUCKETS": "ddp_buckets", "BUS_BANDWIDTH": "bus_bandwidth_from_timing"}
