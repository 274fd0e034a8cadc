"""Notebook 08 (debugging Triton): fix a planted bug (flip), strides on the output side, and a transpose
with a planted bug to find with the interpreter."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import sizes, tensor_arg

DTYPES = (torch.float32, torch.float16)
VIEWS = ("contiguous", "strided", "transposed", "sliced")


@st.composite
def _flip_inputs(draw) -> Inputs:
    x, about = tensor_arg(draw, "x", (draw(sizes(pick_size(1 << 20, 5000))),), draw(st.sampled_from(DTYPES)))
    return Inputs(lambda: (x(),), about)


FLIP = Exercise(
    "08.1 flip", "flip(x) = x reversed (out[i] = x[n - 1 - i]) for a contiguous 1-D x: fix flip_kernel_buggy",
    lambda x: torch.flip(x, [0]), _flip_inputs(), DTYPES)


def _matrix(draw, cap: int) -> tuple[int, int]:
    return draw(sizes(cap, block=16)), draw(sizes(cap, block=32))


@st.composite
def _into_inputs(draw) -> Inputs:
    (rows, cols), dtype = _matrix(draw, pick_size(2048, 70)), draw(st.sampled_from(DTYPES))
    x, about_x = tensor_arg(draw, "x", (rows, cols), dtype, VIEWS)
    out, about_out = tensor_arg(draw, "out", (rows, cols), dtype, ("contiguous", "transposed", "sliced"), seed=1)
    return Inputs(lambda: (x(), out()), f"{about_x}, {about_out}")


def _double_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return out.copy_(2 * x)


DOUBLE_INTO = Exercise(
    "08.2 double_2d_into", "double_2d_into(x, out): write 2 * x into out, whatever the strides of x and of out",
    _double_into, _into_inputs(), DTYPES, output=lambda args, returned: args[1])  # what is in out afterwards


@st.composite
def _transpose_inputs(draw) -> Inputs:
    (rows, cols), dtype = _matrix(draw, pick_size(2048, 70)), draw(st.sampled_from(DTYPES))
    x, about = tensor_arg(draw, "x", (rows, cols), dtype, VIEWS)
    return Inputs(lambda: (x(),), about)


TRANSPOSE = Exercise(
    "08.3 transpose", "transpose(x): a new contiguous x.t() for a 2-D x of any strides: fix transpose_kernel_buggy",
    lambda x: x.t().contiguous(), _transpose_inputs(), DTYPES)
