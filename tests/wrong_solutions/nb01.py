"""Wrong answers to notebook 01's exercises: the writes forgotten, GiB for GB, ms taken for seconds, the element
size from torch.finfo, 4 bytes per element whatever the dtype, time per element first (n=0); half of the curve's
maximum, no sort by size, every provider at once, > for >=, the row's label for its size; no final synchronize, no
synchronize first, the start clock read before the first synchronize, seconds for milliseconds, the kernels'
times added up, the host's time.perf_counter for the device's clock."""

from __future__ import annotations

import time

import torch

from exercises import nb01 as ex


# ---- effective_gbps ----------------------------------------------------------------------------------------
def gbps_reads_only(n, dtype, reads, writes, ms):
    return reads * n * torch.empty((), dtype=dtype).element_size() / (ms / 1e3) / 1e9  # BUG: writes forgotten


def gbps_gib(n, dtype, reads, writes, ms):
    return (reads + writes) * n * torch.empty((), dtype=dtype).element_size() / (ms / 1e3) / 2**30  # BUG: GiB/s


def gbps_ms_as_seconds(n, dtype, reads, writes, ms):
    return (reads + writes) * n * torch.empty((), dtype=dtype).element_size() / ms / 1e9  # BUG: ms are not s


def gbps_finfo_bits(n, dtype, reads, writes, ms):
    element = torch.finfo(dtype).bits // 8                            # BUG: finfo knows floating types only
    return (reads + writes) * n * element / (ms / 1e3) / 1e9


def gbps_four_bytes(n, dtype, reads, writes, ms):
    return (reads + writes) * n * 4 / (ms / 1e3) / 1e9                # BUG: fp32's 4 bytes for every dtype


def gbps_per_element(n, dtype, reads, writes, ms):
    ns_per_element = ms * 1e6 / n                                     # BUG: n = 0 divides by zero
    return (reads + writes) * torch.empty((), dtype=dtype).element_size() / ns_per_element


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


def half_row_label(frame, provider):
    curve = frame[frame["provider"] == provider].sort_values("size")
    half = curve["gbps"].iloc[-1] / 2
    return int((curve["gbps"] >= half).idxmax())                      # BUG: the row's label, not its size


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


def time_kernels_summed(fn, device):
    fn()
    return sum(kernel_ms for _, kernel_ms in device.log)             # BUG: launches and gaps ignored


def time_host_clock(fn, device):
    device.synchronize()
    start = time.perf_counter()                                       # BUG: this machine's clock, not the device's
    fn()
    device.synchronize()
    return (time.perf_counter() - start) * 1e3


WRONG = [
    (ex.EFFECTIVE_GBPS, "the writes forgotten", gbps_reads_only, ["writes=", "returned", "expected"]),
    (ex.EFFECTIVE_GBPS, "GiB/s instead of GB/s", gbps_gib, ["returned", "expected"]),
    (ex.EFFECTIVE_GBPS, "milliseconds taken for seconds", gbps_ms_as_seconds, ["ms=", "returned", "expected"]),
    (ex.EFFECTIVE_GBPS, "element size from torch.finfo", gbps_finfo_bits, ["int", "raised TypeError"]),
    (ex.EFFECTIVE_GBPS, "4 bytes per element for every dtype", gbps_four_bytes, ["dtype=", "returned", "expected"]),
    (ex.EFFECTIVE_GBPS, "time per element first", gbps_per_element, ["n=0", "[empty]", "ZeroDivisionError"]),
    (ex.HALF_BANDWIDTH, "half of the maximum", half_of_max, ["rows", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "rows not sorted by size", half_unsorted, ["in another order", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "every provider's rows", half_all_providers, ["copy (clone)", "returned", "expected"]),
    (ex.HALF_BANDWIDTH, "> instead of >=", half_strict, ["returned", "expected"]),
    (ex.HALF_BANDWIDTH, "the row's label for its size", half_row_label, ["rows", "returned", "expected"]),
    (ex.TIME_CALL, "no synchronize after the call", time_no_final_sync, ["launch", "returned", "expected"]),
    (ex.TIME_CALL, "no synchronize before the call", time_no_first_sync, ["earlier work", "returned", "expected"]),
    (ex.TIME_CALL, "start clock read before the synchronize", time_clock_before_sync,
     ["earlier work", "returned", "expected"]),
    (ex.TIME_CALL, "seconds instead of milliseconds", time_in_seconds, ["returned", "expected"]),
    (ex.TIME_CALL, "the kernels' times added up", time_kernels_summed, ["launch", "returned", "expected"]),
    (ex.TIME_CALL, "the host's clock", time_host_clock, ["launch", "returned", "expected"]),
]
