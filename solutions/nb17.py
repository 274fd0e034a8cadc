"""Solutions of notebook 17's exercises (try first)."""

from __future__ import annotations


def ddp_buckets(sizes, cap_bytes, first_cap_bytes):
    buckets, open_bucket, held = [], [], 0
    for i in range(len(sizes) - 1, -1, -1):          # backward makes the last parameters' gradients first
        open_bucket.append(i)
        held += sizes[i]
        cap = first_cap_bytes if not buckets else cap_bytes  # a small first bucket: communication starts early
        if held >= cap:
            buckets.append(open_bucket)
            open_bucket, held = [], 0
    if open_bucket:
        buckets.append(open_bucket)                  # the rest, under its cap
    return buckets


# nccl-tests' factor from the algorithm bandwidth (size / time) to the bus bandwidth, for n ranks
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "all_to_all": lambda n: (n - 1) / n}


def bus_bandwidth_from_timing(op, input_bytes, seconds, world_size):
    # nccl-tests' size is the larger buffer: all_gather's output holds world_size pieces
    size = input_bytes * world_size if op == "all_gather" else input_bytes
    return size / seconds * BUS_FACTOR[op](world_size) / 1e9
