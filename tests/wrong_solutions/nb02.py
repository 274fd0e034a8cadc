"""Wrong answers to notebook 02's exercises: the kernel with the most calls, the longest single launch, a copy
counted as a kernel, a share of kernel time only, the top op for the top kernel, a fraction for a percent; every
copy counted, syncs not divided by steps, rows looked up by the op aten::item (a device-to-host copy is launched
by the op under it), a floor division by the steps, the copies' time for their number."""

from __future__ import annotations

from exercises import nb02 as ex


# ---- top_kernel ------------------------------------------------------------------------------------------
def top_by_calls(acts):
    kernels = acts[acts["category"] == "kernel"]
    name = kernels["name"].value_counts().idxmax()                      # BUG: most launches, not most time
    return name, 100.0 * kernels.loc[kernels["name"] == name, "duration_us"].sum() / acts["duration_us"].sum()


def top_by_longest_launch(acts):
    kernels = acts[acts["category"] == "kernel"]
    name = kernels.loc[kernels["duration_us"].idxmax(), "name"]         # BUG: the longest single launch
    return name, 100.0 * kernels.loc[kernels["name"] == name, "duration_us"].sum() / acts["duration_us"].sum()


def top_with_copies(acts):
    totals = acts.groupby("name")["duration_us"].sum()                  # BUG: copies and memsets compete too
    return totals.idxmax(), 100.0 * totals.max() / acts["duration_us"].sum()


def top_share_of_kernels(acts):
    kernels = acts[acts["category"] == "kernel"].groupby("name")["duration_us"].sum()
    return kernels.idxmax(), 100.0 * kernels.max() / kernels.sum()      # BUG: share of the kernels' time only


def top_op(acts):
    kernels = acts[acts["category"] == "kernel"].groupby("op")["duration_us"].sum()  # BUG: ops, not kernels
    return kernels.idxmax(), 100.0 * kernels.max() / acts["duration_us"].sum()


def top_fraction(acts):
    kernels = acts[acts["category"] == "kernel"].groupby("name")["duration_us"].sum()
    return kernels.idxmax(), kernels.max() / acts["duration_us"].sum()  # BUG: a fraction, not a percent


# ---- syncs_per_step --------------------------------------------------------------------------------------
def syncs_every_copy(acts, steps):
    return int((acts["category"] == "memcpy").sum()) / steps           # BUG: host-to-device copies too


def syncs_not_per_step(acts, steps):
    return float(((acts["category"] == "memcpy") & acts["name"].str.contains("DtoH")).sum())  # BUG: all steps


def syncs_by_item_op(acts, steps):
    return int((acts["op"] == "aten::item").sum()) / steps             # BUG: the copy's op is the one under it


def syncs_floor_division(acts, steps):
    return int(((acts["category"] == "memcpy") & acts["name"].str.contains("DtoH")).sum()) // steps  # BUG: floor


def syncs_copy_time(acts, steps):
    dtoh = (acts["category"] == "memcpy") & acts["name"].str.contains("DtoH")
    return float(acts.loc[dtoh, "duration_us"].sum()) / steps         # BUG: their time, not their number


WRONG = [
    (ex.TOP_KERNEL, "most launches", top_by_calls, ["rows:", "returned", "expected"]),
    (ex.TOP_KERNEL, "longest single launch", top_by_longest_launch, ["returned", "expected"]),
    (ex.TOP_KERNEL, "a copy counted as a kernel", top_with_copies, ["Memcpy", "returned", "expected"]),
    (ex.TOP_KERNEL, "share of the kernels' time only", top_share_of_kernels, ["rows:", "returned", "expected"]),
    (ex.TOP_KERNEL, "the top op for the top kernel", top_op, ["rows:", "returned", "expected"]),
    (ex.TOP_KERNEL, "a fraction instead of a percent", top_fraction, ["rows:", "returned", "expected"]),
    (ex.SYNCS_PER_STEP, "every copy counted", syncs_every_copy, ["Memcpy", "returned", "expected"]),
    (ex.SYNCS_PER_STEP, "not divided by the steps", syncs_not_per_step, ["steps=", "returned", "expected"]),
    (ex.SYNCS_PER_STEP, "rows looked up by aten::item", syncs_by_item_op, ["DtoH", "returned", "expected"]),
    (ex.SYNCS_PER_STEP, "floor division by the steps", syncs_floor_division, ["steps=", "returned", "expected"]),
    (ex.SYNCS_PER_STEP, "the copies' time for their number", syncs_copy_time, ["DtoH", "returned", "expected"]),
]
