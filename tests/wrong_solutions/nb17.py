"""Wrong answers to notebook 17's exercises. Buckets: the forward order, a strict comparison, no first bucket,
the first cap on every bucket, a bucket closed before it would overflow, the last open bucket dropped, the sizes
reversed in place. Bus bandwidth: 2 for an all-reduce on any n, all_gather counted by its input, GiB for GB, the
algorithm bandwidth, broadcast's factor taken as (n-1)/n, all_to_all's as 1."""

from __future__ import annotations

from exercises import nb17 as ex
from solutions import nb17 as sol


def _buckets(order=reversed, strict=False, first=True, every_first=False, before=False, keep_last=True):
    def run(sizes, cap_bytes, first_cap_bytes):
        buckets, open_bucket, held = [], [], 0
        for i in order(range(len(sizes))):
            cap = first_cap_bytes if (first and (every_first or not buckets)) else cap_bytes
            if before and open_bucket and held + sizes[i] > cap:          # BUG (before): never overflows
                buckets.append(open_bucket)
                open_bucket, held = [], 0
            open_bucket.append(i)
            held += sizes[i]
            if (held > cap) if strict else (held >= cap):
                buckets.append(open_bucket)
                open_bucket, held = [], 0
        return buckets + ([open_bucket] if open_bucket and keep_last else [])
    return run


def buckets_reversing_in_place(sizes, cap_bytes, first_cap_bytes):
    sizes.reverse()                                                    # BUG: changes the caller's list
    return sol.ddp_buckets(sizes[::-1], cap_bytes, first_cap_bytes)


def _bus(factor_all_reduce=None, gather_by_input=False, gib=False, no_factor=False, broadcast_ring=False,
         all_to_all_one=False):
    def run(op, input_bytes, seconds, world_size):
        n = world_size
        size = input_bytes * n if op == "all_gather" and not gather_by_input else input_bytes
        factor = sol.BUS_FACTOR[op](n)
        if op == "all_reduce" and factor_all_reduce is not None:
            factor = factor_all_reduce
        if op == "broadcast" and broadcast_ring:
            factor = (n - 1) / n
        if op == "all_to_all" and all_to_all_one:
            factor = 1.0
        if no_factor:
            factor = 1.0
        return size / seconds * factor / (2**30 if gib else 1e9)
    return run


WRONG = [
    (ex.BUCKETS, "parameters walked first to last", _buckets(order=lambda r: r), ["returned", "expected"]),
    (ex.BUCKETS, "closed only above the cap", _buckets(strict=True), ["returned", "expected"]),
    (ex.BUCKETS, "no smaller first bucket", _buckets(first=False), ["returned", "expected"]),
    (ex.BUCKETS, "the first cap on every bucket", _buckets(every_first=True), ["returned", "expected"]),
    (ex.BUCKETS, "closed before it would overflow", _buckets(before=True), ["returned", "expected"]),
    (ex.BUCKETS, "the last open bucket dropped", _buckets(keep_last=False), ["returned", "expected"]),
    (ex.BUCKETS, "sizes reversed in place", buckets_reversing_in_place, ["changed its input sizes"]),
    (ex.BUS_BANDWIDTH, "all-reduce factor 2 on any n", _bus(factor_all_reduce=2.0), ["returned", "expected"]),
    (ex.BUS_BANDWIDTH, "all_gather counted by its input", _bus(gather_by_input=True), ["returned", "expected"]),
    (ex.BUS_BANDWIDTH, "GiB/s instead of GB/s", _bus(gib=True), ["returned", "expected"]),
    (ex.BUS_BANDWIDTH, "algorithm bandwidth, no bus factor", _bus(no_factor=True), ["returned", "expected"]),
    (ex.BUS_BANDWIDTH, "broadcast taken as a ring's (n-1)/n", _bus(broadcast_ring=True), ["returned", "expected"]),
    (ex.BUS_BANDWIDTH, "all_to_all taken as 1", _bus(all_to_all_one=True), ["returned", "expected"]),
]
