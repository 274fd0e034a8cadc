"""Notebook 06 (Triton softmax): a fused log_softmax, and the online softmax for rows longer than a block."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import KINDS, case, described, kind_sizes, pairwise, randn, sizes, tensor_arg, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LAYOUTS = ("contiguous", "sliced", "strided")


# On a GPU each new specialization of a kernel is a compilation: each constexpr value (a row in one block:
# BLOCK_SIZE = next_power_of_2(cols), 16 values up to 32768), dtype, and row stride or length equal to 1 or
# a multiple of 16 (exercises.pairwise). Drawn freely, 200 cases of log_softmax made 68 compilations on an
# H100 (20 s). A case draws one of 9 configurations (dtype, layout, kind of row) instead, 10 compilations (a
# one-row strided view of one column is "contiguous": not copied); log_softmax's rows are of one of three
# kinds, each within one power of two: one column; odd lengths up to a block of 1024 (256 on a CPU);
# multiples of 16 up to one of 32768, the longest row that fits in one block (2048 on a CPU).
ROW_KINDS = {"one": (1, 1), "ragged": pick_size((513, 1023), (129, 255)),
             "aligned": pick_size((16385, 32768), (1025, 2048))}  # kind: the range of lengths
LOG_SOFTMAX_CONFIGS = pairwise(DTYPES, LAYOUTS, tuple(ROW_KINDS))


def _row_length(draw, kind: str) -> int:
    low, high = ROW_KINDS[kind]
    n = draw(st.one_of(st.sampled_from((low, high)), st.integers(low, high)))
    if kind == "aligned":
        return max(16 * -(-n // 16), 16)  # rounded up to a multiple of 16: still <= high
    n = n if n % 2 else n + 1  # odd: low and high are odd
    return n - 2 if n % 16 == 13 else n  # "sliced" rows: the row stride, n + 3, no multiple of 16 either


def _rows(draw, dtype: torch.dtype, layout: str, cols: int) -> tuple:
    rows = draw(sizes(pick_size(64, 5), block=4))
    scale = draw(st.sampled_from((1.0, 100.0)))  # logits of 100s overflow exp() unless the max is subtracted
    x, about = tensor_arg(draw, "x", (rows, cols), dtype, (layout,), scale=scale)
    return x, about + ("" if scale == 1 else f", values ~N(0, {scale:g}^2)")


@st.composite
def _log_softmax_inputs(draw) -> Inputs:
    dtype, layout, kind = draw(st.sampled_from(LOG_SOFTMAX_CONFIGS))
    x, about = _rows(draw, dtype, layout, _row_length(draw, kind))
    return Inputs(lambda: (x(),), about)


def _masked_rows(rows: int, cols: int) -> torch.Tensor:
    """Logits with -inf (masked positions): row 0 all but its last element, row 1 its first half."""
    x = randn(rows, cols, seed=5)
    x[0, :-1] = -math.inf
    x[1, : cols // 2] = -math.inf
    return x


def _log_softmax(x: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x.float(), dim=-1).to(x.dtype)


LOG_SOFTMAX = Exercise(
    "06.1 log_softmax", "log_softmax(x) over the last dim of a 2-D x, one program per row, the row in one block",
    _log_softmax, _log_softmax_inputs(), DTYPES,
    families={"nonfinite": lambda: [case(described("x", x) + ": -inf in rows 0 (all but one) and 1 (half)",
                                         values(x)) for x in [_masked_rows(5, 37)]],
              "limits": lambda: [case("x: float16 (3, 37), values near +-60000", values(
                  (randn(3, 37, seed=2) * 2e4).clamp(-6e4, 6e4).to(torch.float16)))]})


# (dtype, layout, block, kind of row length): 9 configurations, 10 compilations (as for log_softmax)
LOOPED_CONFIGS = pairwise(DTYPES, LAYOUTS, pick_size((1024, 256, 4096), (16, 64, 1024)), KINDS)


@st.composite
def _looped_inputs(draw) -> Inputs:
    dtype, layout, block, kind = draw(st.sampled_from(LOOPED_CONFIGS))
    x, about = _rows(draw, dtype, layout, draw(kind_sizes(kind, pick_size(100_000, 3000))))
    return Inputs(lambda: (x(), block), f"{about}, block={block}")


def _softmax(x: torch.Tensor, block: int) -> torch.Tensor:
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


SOFTMAX_LOOPED = Exercise(
    "06.2 softmax_looped", "softmax_looped(x, block): softmax of rows of any length, walked in chunks of block "
    "(online max and sum, then a second pass)", _softmax, _looped_inputs(), DTYPES, examples=(20, 100),
    families={"programs": lambda: [case(f"{described('x', x)}, block=16 (4 chunks a row)", values(x), 16)
                                   for x in [randn(3, 61, seed=6)]],
              # the first chunk of row 0 is all -inf: an online update exp(m_old - m_new) is exp(-inf + inf)
              "nonfinite": lambda: [case(described("x", x) + ": -inf in row 0 (all but its last element) and "
                                         "row 1 (its first half), block=16", values(x), 16)
                                    for x in [_masked_rows(3, 40)]],
              "limits": lambda: [case("x: float16 (2, 50), values near +-60000, block=16", values(
                  (randn(2, 50, seed=2) * 2e4).clamp(-6e4, 6e4).to(torch.float16)), 16)]})
