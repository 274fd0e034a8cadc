"""Notebook 06 (Triton softmax): a fused log_softmax, and the online softmax for rows longer than a block."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import sizes, tensor_arg

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "sliced", "strided")


def _rows(draw, max_cols: int) -> tuple:
    rows, cols = draw(sizes(pick_size(64, 5), block=4)), draw(sizes(max_cols))
    scale = draw(st.sampled_from((1.0, 100.0)))  # logits of 100s overflow exp() unless the max is subtracted
    x, about = tensor_arg(draw, "x", (rows, cols), draw(st.sampled_from(DTYPES)), LAYOUTS, scale=scale)
    return x, about + ("" if scale == 1 else f", values ~N(0, {scale:g}^2)")


@st.composite
def _log_softmax_inputs(draw) -> Inputs:
    x, about = _rows(draw, pick_size(32768, 3000))
    return Inputs(lambda: (x(),), about)


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


LOG_SOFTMAX = Exercise(
    "06.1 log_softmax", "log_softmax(x) over the last dim of a 2-D x, one program per row, the row in one block",
    _log_softmax, _log_softmax_inputs(), DTYPES)


@st.composite
def _looped_inputs(draw) -> Inputs:
    x, about = _rows(draw, pick_size(100_000, 3000))
    block = draw(st.sampled_from(pick_size((1024, 256, 4096), (16, 64, 1024))))
    return Inputs(lambda: (x(), block), f"{about}, block={block}")


def _softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


SOFTMAX_LOOPED = Exercise(
    "06.2 softmax_looped", "softmax_looped(x, block): softmax of rows of any length, walked in chunks of block "
    "(online max and sum, then a second pass)", _softmax, _looped_inputs(), DTYPES, examples=(20, 100))
