"""Wrong answers to notebook 03's exercises: grids rounded down or off by one, one side's overhang only; and
C++ twins of square_strided that ignore a stride, skip an input check or keep the input's layout.

The C++ variants are sources (`CPP`, each defining ``square_strided_<tag>``): tests/test_exercises.py builds
them, with notebook 04's, into one extension (a build costs tens of seconds) and grades ``ext.<name>``.
"""

from __future__ import annotations

import math

from exercises import nb03 as ex
from solutions import nb03 as sol


def idle_round_down(rows, cols, block):
    return (cols // block[0]) * block[0] * (rows // block[1]) * block[1] - rows * cols    # BUG: floor, not ceil


def idle_off_by_one_grid(rows, cols, block):
    gx, gy = (cols + block[0]) // block[0], (rows + block[1]) // block[1]                 # BUG: + bx, not + bx - 1
    return gx * block[0] * gy * block[1] - rows * cols


def idle_columns_only(rows, cols, block):
    return (math.ceil(cols / block[0]) * block[0] - cols) * rows          # BUG: forgets the overhang of the rows


def _variant(tag: str, wrapper: str = sol.STRIDED_WRAPPER, twin: str = sol.STRIDED_TWIN) -> str:
    return (wrapper + twin).replace("square_strided", f"square_strided_{tag}")


CPP = {  # name in the extension -> source (kDevice = CPU is defined once, before all of them)
    "square_strided_ref": _variant("ref"),
    "square_strided_no_stride1": _variant("no_stride1", twin=sol.STRIDED_TWIN.replace("col * in.stride(1)", "col")),
    "square_strided_no_dtype_check": _variant("no_dtype_check", wrapper=sol.STRIDED_WRAPPER.replace(
        'TORCH_CHECK_TYPE(m.scalar_type() == torch::kFloat32, "square_strided: m must be float32, got ", '
        'm.scalar_type());', "")),
    "square_strided_no_dim_check": _variant("no_dim_check", wrapper=sol.STRIDED_WRAPPER.replace(
        'TORCH_CHECK_VALUE(m.dim() == 2, "square_strided: m must be 2-D, got ", m.dim(), "-D");', "")),
    "square_strided_keeps_layout": _variant("keeps_layout", wrapper=sol.STRIDED_WRAPPER.replace(
        "torch::empty({m.size(0), m.size(1)}, m.options())", "torch::empty_like(m)")),
}
assert len(set(CPP.values())) == len(CPP), "a replacement did not apply"

WRONG = [
    (ex.IDLE_THREADS, "grid rounded down", idle_round_down, ["rows=", "returned -"]),
    (ex.IDLE_THREADS, "grid one block too big", idle_off_by_one_grid, ["cols=", "returned", "expected"]),
    (ex.IDLE_THREADS, "the rows' overhang forgotten", idle_columns_only, ["returned", "expected"]),
    (ex.SQUARE_STRIDED, "stride(1) ignored", "cpp:square_strided_no_stride1", ["strides", "values wrong"]),
    (ex.SQUARE_STRIDED, "no dtype check", "cpp:square_strided_no_dtype_check",
     ["should raise TypeError", "but it raised"]),
    (ex.SQUARE_STRIDED, "no dim check", "cpp:square_strided_no_dim_check", ["should raise ValueError", "but it"]),
    (ex.SQUARE_STRIDED, "output keeps the input's layout", "cpp:square_strided_keeps_layout",
     ["transposed", "not contiguous"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def idle_axes_swapped(rows, cols, block):
    gx, gy = math.ceil(rows / block[0]), math.ceil(cols / block[1])     # BUG: block.x runs along the columns
    return gx * block[0] * gy * block[1] - rows * cols


def idle_true_division(rows, cols, block):
    gx, gy = (cols + block[0] - 1) / block[0], (rows + block[1] - 1) / block[1]   # BUG: / is not // in Python
    return gx * block[0] * gy * block[1] - rows * cols


CPP.update({
    # BUG: the row loop runs over numel(), not size(0): far past both tensors' ends (a crash, not a wrong value)
    "square_strided_rows_numel": _variant("rows_numel", twin=sol.STRIDED_TWIN.replace(
        "row < in.size(0); ++row", "row < in.numel() * 4096; ++row")),
    # BUG: out = m.contiguous() is m itself when m is contiguous: the squares overwrite the input
    "square_strided_into_input": _variant("into_input", wrapper=sol.STRIDED_WRAPPER.replace(
        "auto out = torch::empty({m.size(0), m.size(1)}, m.options());", "auto out = m.contiguous();")),
})
assert len(set(CPP.values())) == len(CPP), "a replacement did not apply"

WRONG += [
    (ex.IDLE_THREADS, "block axes swapped", idle_axes_swapped, ["rows=", "returned", "expected"]),
    (ex.IDLE_THREADS, "true division", idle_true_division, ["returned", "expected"]),
    (ex.SQUARE_STRIDED, "rows looped to numel: out of bounds", "cpp:square_strided_rows_numel",
     ["crashed the process", "out-of-bounds"]),
    (ex.SQUARE_STRIDED, "written into its input", "cpp:square_strided_into_input", ["changed its input m"]),
]
