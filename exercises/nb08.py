"""Notebook 08 (debugging Triton): fix a planted bug (flip), strides on the output side, and a transpose
with a planted bug to find with the interpreter."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, kind_sizes, pairwise, randn, sizes, tensor_arg, values

DTYPES = (torch.float32, torch.float16)
VIEWS = ("contiguous", "strided", "transposed", "sliced")


@st.composite
def _flip_inputs(draw) -> Inputs:
    x, about = tensor_arg(draw, "x", (draw(sizes(pick_size(1 << 20, 5000))),), draw(st.sampled_from(DTYPES)))
    return Inputs(lambda: (x(),), about)


FLIP = Exercise(
    "08.1 flip", "flip(x) = x reversed (out[i] = x[n - 1 - i]) for a contiguous 1-D x: fix flip_kernel_buggy",
    lambda x: torch.flip(x, [0]), _flip_inputs(), DTYPES, block={"block": 16},
    families={"programs": lambda: [case(f"{described('x', x)} (block=16)", values(x)) for x in [randn(45)]],
              "empty": lambda: [case("x: float32 (0,)", values(randn(0)))]})


# A kernel that takes sizes and strides as arguments compiles anew for each dtype, and for each size or
# stride that is 1 or a multiple of 16 (exercises.pairwise): drawn freely, 200 cases made 53 compilations
# (double_2d_into) and 40 (transpose) on an H100. A case draws one of 12 configurations instead, with rows
# and columns of one kind: odd (ragged), multiples of 16 (aligned), or a single row.
INTO_CONFIGS = pairwise(DTYPES, VIEWS, ("contiguous", "transposed", "sliced"), ("ragged", "aligned", "one"))
TRANSPOSE_CONFIGS = pairwise(DTYPES, VIEWS, ("ragged", "aligned", "one"))


def _matrix(draw, kind: str, cap: int) -> tuple[int, int]:
    return (draw(kind_sizes(kind, cap, block=16)),
            draw(kind_sizes("ragged" if kind == "one" else kind, cap, block=32)))


@st.composite
def _into_inputs(draw) -> Inputs:
    dtype, x_view, out_view, kind = draw(st.sampled_from(INTO_CONFIGS))
    rows, cols = _matrix(draw, kind, pick_size(2048, 70))
    x, about_x = tensor_arg(draw, "x", (rows, cols), dtype, (x_view,))
    out, about_out = tensor_arg(draw, "out", (rows, cols), dtype, (out_view,), seed=1)
    return Inputs(lambda: (x(), out()), f"{about_x}, {about_out}")


def _double_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return out.copy_(2 * x)


DOUBLE_INTO = Exercise(
    "08.2 double_2d_into", "double_2d_into(x, out): write 2 * x into out, whatever the strides of x and of out",
    _double_into, _into_inputs(), DTYPES, output=lambda args, returned: args[1],  # what is in out afterwards
    writes=(1,), block={"block": (4, 8)},
    families={"programs": lambda: [case(f"{described('x', x)}, {described('out', o, 'sliced')} (block=(4, 8))",
                                        values(x), values(o, "sliced")) for x, o in [(randn(11, 19), randn(11, 19))]]})


@st.composite
def _transpose_inputs(draw) -> Inputs:
    dtype, view, kind = draw(st.sampled_from(TRANSPOSE_CONFIGS))
    rows, cols = _matrix(draw, kind, pick_size(2048, 70))
    x, about = tensor_arg(draw, "x", (rows, cols), dtype, (view,))
    return Inputs(lambda: (x(),), about)


TRANSPOSE = Exercise(
    "08.3 transpose", "transpose(x): a new contiguous x.t() for a 2-D x of any strides: fix transpose_kernel_buggy",
    lambda x: x.t().contiguous(), _transpose_inputs(), DTYPES, layout="contiguous", block={"block": 8},
    families={"programs": lambda: [case(f"{described('x', x)} (block=8)", values(x)) for x in [randn(19, 21)]],
              "empty": lambda: [case("x: float32 (0, 5)", values(randn(0, 5)))]})
