"""Notebook 05 (Triton vector add): axpy, a broadcasting add over any strides, a sum with atomics."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, kind_sizes, pairwise, randn, sizes, tensor_arg, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@st.composite
def _axpy_inputs(draw) -> Inputs:
    n, dtype = draw(sizes(pick_size(1 << 20, 5000))), draw(st.sampled_from(DTYPES))
    alpha = draw(st.sampled_from((2.5, -1.0, 0.0, 1e-3)))
    x, about_x = tensor_arg(draw, "x", (n,), dtype, ("contiguous", "strided"))
    y, about_y = tensor_arg(draw, "y", (n,), dtype, ("contiguous", "strided"), seed=1)
    return Inputs(lambda: (alpha, x(), y()), f"alpha={alpha}, {about_x}, {about_y}")


def _axpy(alpha: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (alpha * x.float() + y.float()).to(x.dtype)


AXPY = Exercise(
    "05.1 axpy", "axpy(alpha, x, y) = alpha * x + y for 1-D x, y of one dtype (fp32/fp16/bf16), as a Triton kernel",
    _axpy, _axpy_inputs(), DTYPES, block={"block_size": 16},
    families={"programs": lambda: [case(f"alpha=2.5, {described('x', x)}, {described('y', y)} (block_size=16)",
                                        2.5, values(x), values(y)) for x, y in [(randn(41), randn(41, seed=1))]],
              "empty": lambda: [case("alpha=2.5, x: float32 (0,), y: float32 (0,)", 2.5, values(randn(0)),
                                     values(randn(0)))],
              # 2.5 * 30000 overflows fp16 (65504): the product must be taken in fp32, as the task's math is
              "limits": lambda: [case("alpha=2.5, x: float16 (5,) = 30000, y: float16 (5,) = -20000", 2.5,
                                      values(torch.full((5,), 30000.0, dtype=torch.float16)),
                                      values(torch.full((5,), -20000.0, dtype=torch.float16)))]})


# A kernel that takes the sizes and strides as arguments compiles anew for each dtype, and for each size or
# stride that is 1 or a multiple of 16 (exercises.pairwise): drawn freely, 200 cases made 63 compilations on
# an H100. A case draws one of these 12 configurations, with rows and columns of one kind: odd (ragged),
# multiples of 16 (aligned), or a single row; the reference compiles at most 12 times.
BIAS_CONFIGS = pairwise(DTYPES, ("contiguous", "sliced", "transposed", "strided"), ("contiguous", "strided"),
                        ("ragged", "aligned", "one"))


@st.composite
def _bias_inputs(draw) -> Inputs:
    dtype, x_layout, bias_layout, kind = draw(st.sampled_from(BIAS_CONFIGS))
    rows = draw(kind_sizes(kind, pick_size(512, 9), block=8))
    cols = draw(kind_sizes("ragged" if kind == "one" else kind, pick_size(4096, 300), block=128))
    x, about_x = tensor_arg(draw, "x", (rows, cols), dtype, (x_layout,))
    b, about_b = tensor_arg(draw, "bias", (cols,), dtype, (bias_layout,), seed=1)
    return Inputs(lambda: (x(), b()), f"{about_x}, {about_b}")


def _add_bias(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    return (x.float() + bias.float()).to(x.dtype)


ADD_BIAS = Exercise(
    "05.2 add_bias", "add_bias(x, bias) = x + bias[None, :] for a 2-D x and a 1-D bias of any strides, no copies",
    _add_bias, _bias_inputs(), DTYPES, examples=(30, 100), block={"block_size": 16},
    families={"programs": lambda: [case(f"{described('x', x, 'sliced')}, {described('bias', b)} (block_size=16)",
                                        values(x, "sliced"), values(b))
                                   for x, b in [(randn(5, 23), randn(23, seed=1))]],
              "empty": lambda: [case("x: float32 (0, 7), bias: float32 (7,)", values(randn(0, 7)),
                                     values(randn(7)))]})  # 100 on a GPU: 200 took 11 s to run on an H100


@st.composite
def _sum_inputs(draw) -> Inputs:
    n, dtype = draw(sizes(pick_size(1 << 22, 8000))), draw(st.sampled_from(DTYPES))
    x, about_x = tensor_arg(draw, "x", (n,), dtype, scale=draw(st.sampled_from((1.0, 30.0))))
    return Inputs(lambda: (x(),), about_x)


def _vector_sum(x: torch.Tensor) -> torch.Tensor:
    return x.double().sum().float()


VECTOR_SUM = Exercise(
    "05.3 vector_sum", "vector_sum(x): the sum of a 1-D x as a 0-d float32 tensor, one tl.atomic_add per program",
    _vector_sum, _sum_inputs(), DTYPES, rtol=1e-4, atol=1e-3, block={"block_size": 16},
    families={"programs": lambda: [case(f"{described('x', x)} (block_size=16: 7 programs)", values(x))
                                   for x in [randn(100, seed=4)]],
              "empty": lambda: [case("x: float32 (0,)", values(randn(0)))],
              # pairs of +-60000: each pair sums to 0, but two +60000 in a row overflow fp16: sum in fp32
              "limits": lambda: [case("x: float16 (64,) = 60000, 60000, -60000, -60000, ... (sums overflow fp16)",
                                      values(torch.tensor([6e4, 6e4, -6e4, -6e4] * 16, dtype=torch.float16)))]})
