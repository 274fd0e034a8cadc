"""Notebook 02 (profiling PyTorch): the top kernel of a profile and its share of the device time, and the host
syncs per step, both read from a `device_activity`-like DataFrame that hypothesis draws."""

from __future__ import annotations

import pandas as pd
from hypothesis import strategies as st

from course_utils.grading import Exercise, Inputs

COLUMNS = ["name", "category", "op", "duration_us"]  # what the exercises read of device_activity's columns
KERNELS = {  # kernel name -> the op that launches it, as in the notebook's profiles
    "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3": "aten::mm",
    "Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>": "aten::addmm",
    "vectorized_elementwise_kernel<GeluCUDAKernelImpl>": "aten::gelu",
    "vectorized_elementwise_kernel<MulFunctor>": "aten::mul",
    "reduce_kernel<sum_functor>": "aten::sum",
    "multi_tensor_apply_kernel<BinaryOpScalarFunctor>": "aten::_foreach_add_",
}
COPIES = {  # copy name -> the ops that may launch it
    "Memcpy HtoD (Pageable -> Device)": ("aten::copy_", "aten::to"),
    "Memcpy HtoD (Pinned -> Device)": ("aten::copy_",),
    "Memcpy DtoH (Device -> Pageable)": ("aten::_local_scalar_dense", "aten::copy_"),
    "Memcpy DtoD (Device -> Device)": ("aten::copy_",),
}


@st.composite
def _frames(draw) -> tuple[list[tuple], str]:
    rows = []
    names = draw(st.lists(st.sampled_from(sorted(KERNELS)), min_size=1, max_size=5, unique=True))
    for name in names:
        for duration in draw(st.lists(st.integers(1, 400), min_size=1, max_size=6)):
            rows.append((name, "kernel", KERNELS[name], duration / 2))
    for name in draw(st.lists(st.sampled_from(sorted(COPIES)), max_size=8)):
        rows.append((name, "memcpy", draw(st.sampled_from(COPIES[name])), draw(st.integers(1, 1200)) / 2))
    if draw(st.booleans()):
        rows.append(("Memset (Device)", "memset", "aten::zero_", draw(st.integers(1, 20)) / 2))
    totals = pd.DataFrame(rows, columns=COLUMNS).query("category == 'kernel'").groupby("name")["duration_us"].sum()
    tied = totals[totals == totals.max()].index
    for extra, name in enumerate(tied[1:], 1):  # one kernel on top: break a tie by half a microsecond or more
        rows.append((name, "kernel", KERNELS[name], extra / 2))
    rows = [rows[i] for i in draw(st.permutations(range(len(rows))))]  # sorted by start, not by name
    listing = "; ".join(f"{n[:40]} [{c}, {o}] {d:g} us" for n, c, o, d in rows)
    return rows, f"{len(rows)} rows: [{listing}]"


# ---- Exercise 1: the top kernel ----------------------------------------------------------------------------
@st.composite
def _top_inputs(draw) -> Inputs:
    rows, about = draw(_frames())
    return Inputs(lambda: (pd.DataFrame(rows, columns=COLUMNS),), about)


def _top_kernel(acts: pd.DataFrame) -> tuple[str, float]:
    kernels = acts[acts["category"] == "kernel"].groupby("name")["duration_us"].sum()
    return kernels.idxmax(), 100.0 * float(kernels.max()) / float(acts["duration_us"].sum())


_GEMM = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3"
_MUL, _GELU = "vectorized_elementwise_kernel<MulFunctor>", "vectorized_elementwise_kernel<GeluCUDAKernelImpl>"


def _rows_case(rows: list[tuple], *more) -> Inputs:
    """A family case: the profile ``rows`` (and the further arguments ``more``)."""
    listing = "; ".join(f"{n[:40]} [{c}, {o}] {d:g} us" for n, c, o, d in rows)
    head = "".join(f"steps={m}, " for m in more)
    return Inputs(lambda: (pd.DataFrame(rows, columns=COLUMNS), *more), f"{head}{len(rows)} rows: [{listing}]")


TOP_KERNEL = Exercise(
    "02.1 top_kernel", "top_kernel(acts): (name, percent) of the kernel (category 'kernel') with the most total time, "
    "percent being its share of the time of all rows (kernels, copies and memsets)",
    _top_kernel, _top_inputs(), rtol=1e-9, examples=(100, 200),
    families={"edges": lambda: [_rows_case([(_GEMM, "kernel", KERNELS[_GEMM], 12.5)]),  # one launch: 100 percent
                                _rows_case([(_MUL, "kernel", KERNELS[_MUL], 1.0)] * 30  # many short launches
                                           + [(_GELU, "kernel", KERNELS[_GELU], 29.5),  # or one long one
                                              ("Memcpy DtoH (Device -> Pageable)", "memcpy", "aten::copy_", 600.0)])]})


# ---- Exercise 2: host syncs per step -----------------------------------------------------------------------
@st.composite
def _sync_inputs(draw) -> Inputs:
    rows, about = draw(_frames())
    steps = draw(st.integers(1, 5))
    return Inputs(lambda: (pd.DataFrame(rows, columns=COLUMNS), steps), f"steps={steps}, {about}")


def _syncs_per_step(acts: pd.DataFrame, steps: int) -> float:
    copies = acts[(acts["category"] == "memcpy") & acts["name"].str.contains("DtoH")]
    return len(copies) / steps


SYNCS_PER_STEP = Exercise(
    "02.2 syncs_per_step", "syncs_per_step(acts, steps): the device-to-host copies (memcpy rows whose name says "
    "DtoH: each a host waiting for the GPU, as .item() or .cpu() do) per profiled step",
    _syncs_per_step, _sync_inputs(), rtol=1e-9, examples=(100, 200),
    families={"empty": lambda: [_rows_case([], 2)],  # an empty profile: no sync
              "edges": lambda: [_rows_case([(_MUL, "kernel", KERNELS[_MUL], 3.0)], 1),  # no copy at all
                                _rows_case([("Memcpy DtoH (Device -> Pageable)", "memcpy", "aten::copy_", 4.0)] * 3
                                           + [("Memcpy DtoD (Device -> Device)", "memcpy", "aten::copy_", 9.0)], 2)]})
