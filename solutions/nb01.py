"""Solutions of notebook 01's exercises: effective bandwidth, the half-bandwidth size of a sweep, a timer for
asynchronous work."""

from __future__ import annotations

import torch


# ---- Exercise 1 -------------------------------------------------------------------------------------------
def effective_gbps(n, dtype, reads, writes, ms) -> float:
    bytes_moved = (reads + writes) * n * torch.empty((), dtype=dtype).element_size()  # each tensor once
    return bytes_moved / (ms / 1e3) / 1e9  # ms -> s; GB are 10^9 bytes, like the spec sheets


# ---- Exercise 2 -------------------------------------------------------------------------------------------
def half_bandwidth_size(frame, provider) -> int:
    curve = frame[frame["provider"] == provider].sort_values("size")
    half = curve["gbps"].iloc[-1] / 2
    return int(curve.loc[curve["gbps"] >= half, "size"].iloc[0])


# ---- Exercise 3 -------------------------------------------------------------------------------------------
def time_call(fn, device) -> float:
    device.synchronize()  # wait for work queued earlier, or it lands inside our interval
    start = device.clock()
    fn()  # only queues the work
    device.synchronize()  # wait for it to finish
    return (device.clock() - start) * 1e3
