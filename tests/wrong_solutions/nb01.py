"""Wrong answers to notebook 01's exercises: the writes forgotten, GiB for GB, ms taken for seconds; half of the
curve's maximum, no sort by size, every provider at once, > for >=; no final synchronize, no synchronize first,
the start clock read before the first synchronize, seconds for milliseconds."""

from __future__ import annotations

import torch

from exercises import nb01 as ex


# ---- effective_gbps ----------------------------------------------------------------------------------------
def gbps_reads_only(n, dtype, reads, writes, ms):
    return reads * n * torch.empty((), dtype=dtype).element_size() / (ms / 1e3) / 1e9  # BUG: writes forgotten


def gbps_gib(n, dtype, reads, writes, ms):
    return (reads + writes) * n * torch.empty((), dtype=dtype).element_size() / (ms / 1e3) / 2**30  # BUG: GiB/s


def gbps_ms_as_seconds(n, dtype, reads, writes, ms):
    return (reads + writes) * n * torch.empty((), dtype=dtype).element_size() / ms / 1e9  # BUG: ms are not s


# ---- half_bandwidth_size ----------------------------------------------------------------------------------
def half_of_max(frame, provider):
    curve = frame[frame["provider"] == provider].sort_values("size")
    half = curve["gbps"].max() / 2                                    # BUG: half of the peak, not of the end
    return int(curve.loc[curve["gbps"] >= half, "size"].iloc[0])


def half_unsorted(frame, provider):
    curve = frame[frame["provider"] == provider]                      # BUG: rows in the frame's order
    half = curve["gbps"].iloc[-1] / 2
    return int(curve.loc[curve["gbps"] >= half, "size"].iloc[0])


def half_all_providers(frame, provider):
    curve = frame.sort_values("size", kind="stable")                  # BUG: the other provider's rows too
    half = curve[curve["provider"] == provider]["gbps"].iloc[-1] / 2
    return int(curve.loc[curve["gbps"] >= half, "size"].iloc[0])


def half_strict(frame, provider):
    curve = frame[frame["provider"] == provider].sort_values("size")
    half = curve["gbps"].iloc[-1] / 2
    return int(curve.loc[curve["gbps"] > half, "size"].iloc[0])      # BUG: > misses a size exactly at half


# ---- time_call --------------------------------------------------------------------------------------------
def time_no_final_sync(fn, device):
    device.synchronize()
    start = device.clock()
    fn()
    return (device.clock() - start) * 1e3                             # BUG: the launches only


def time_no_first_sync(fn, device):
    start = device.clock()                                            # BUG: earlier work lands in the interval
    fn()
    device.synchronize()
    return (device.clock() - start) * 1e3


def time_clock_before_sync(fn, device):
    start = device.clock()                                            # BUG: read before the queue is empty
    device.synchronize()
    fn()
    device.synchronize()
    return (device.clock() - start) * 1e3


def time_in_seconds(fn, device):
    device.synchronize()
    start = device.clock()
    fn()
    device.synchronize()
    return device.clock() - start                                     # BUG: seconds, not milliseconds


WRONG = [
    (ex.EFFECTIVE_GBPS, "the writes forgotten", gbps_reads_only, ["writes=", "returned", "expected"]),
    (ex.EFFECTIVE_GBPS, "GiB/s instead of GB/s", gbps_gib, ["returned", "expected"]),
    (ex.EFFECTIVE_GBPS, "milliseconds taken for seconds", gbps_ms_as_seconds, ["ms=", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "half of the maximum", half_of_max, ["rows", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "rows not sorted by size", half_unsorted, ["in another order", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "every provider's rows", half_all_providers, ["copy (clone)", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "> instead of >=", half_strict, ["returned", "expected"]),
    (ex.TIME_CALL, "no synchronize after the call", time_no_final_sync, ["launch", "returned", "expected"]),
    (ex.TIME_CALL, "no synchronize before the call", time_no_first_sync, ["earlier work", "returned", "expected"]),
    (ex.TIME_CALL, "start clock read before the synchronize", time_clock_before_sync,
     ["earlier work", "returned", "expected"]),
    (ex.TIME_CALL, "seconds instead of milliseconds", time_in_seconds, ["returned", "expected"]),
]
