"""Notebook 07 (Triton matmul): the grouped order in Python, split-K, and a matmul with a bias + activation
epilogue."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from course_utils.device import DEVICE, HAS_CUDA, pick_size
from course_utils.grading import Exercise, Inputs
from exercises import sizes, tensor_arg

# The CPU interpreter's tl.dot multiplies bfloat16 tiles wrongly (triton-lang/triton#11584): bf16 on a GPU only.
DTYPES = (torch.float16, torch.bfloat16) if HAS_CUDA else (torch.float16,)
TOLERANCES = {torch.float16: 1e-2, torch.bfloat16: 3e-2}  # rtol = atol, as notebook 07's checks
ACTIVATIONS = ("", "leaky_relu", "gelu_tanh")


@st.composite
def _order_inputs(draw) -> Inputs:
    tiles_m, tiles_n = draw(sizes(pick_size(200, 12), block=8)), draw(sizes(pick_size(200, 12), block=8))
    group_m = draw(st.sampled_from((1, 2, 3, 4, 8, 16)))
    return Inputs(lambda: (tiles_m, tiles_n, group_m), f"tiles_m={tiles_m}, tiles_n={tiles_n}, group_m={group_m}")


def _tile_order(tiles_m: int, tiles_n: int, group_m: int) -> np.ndarray:
    from lessons.nb07_matmul import tile_order_kernel  # notebook 07's kernel: tile_coords decides the order

    order = torch.full((tiles_m, tiles_n), -1, dtype=torch.int32, device=DEVICE)
    tile_order_kernel[(tiles_m * tiles_n,)](order, tiles_m, tiles_n, GROUP_M=group_m)
    return order.cpu().numpy().astype(np.int64)


GROUPED_ORDER = Exercise(
    "07.1 grouped_order", "grouped_order(tiles_m, tiles_n, group_m): order[i, j] = the program that computes tile "
    "(i, j), in plain Python/NumPy", _tile_order, _order_inputs(), examples=(25, 100))


def _operands(draw, m: int, n: int, k: int, dtype: torch.dtype):
    a, about_a = tensor_arg(draw, "a", (m, k), dtype, ("contiguous", "transposed", "offset"))
    b, about_b = tensor_arg(draw, "b", (k, n), dtype, ("contiguous", "strided"), seed=1)
    return a, b, f"{about_a}, {about_b}"


@st.composite
def _split_k_inputs(draw) -> Inputs:
    m, n = draw(sizes(pick_size(512, 40), 64)), draw(sizes(pick_size(512, 40), 64))
    k = draw(sizes(pick_size(65536, 600), 64))
    splits, dtype = draw(st.sampled_from((1, 2, 3, 4, 7, 16))), draw(st.sampled_from(DTYPES))
    a, b, about = _operands(draw, m, n, k, dtype)
    return Inputs(lambda: (a(), b(), splits), f"{about}, splits={splits}")


def _matmul(a: torch.Tensor, b: torch.Tensor, splits: int) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


SPLIT_K = Exercise(
    "07.2 matmul_split_k", "matmul_split_k(a, b, splits): a @ b with K cut into `splits` chunks, one program per "
    "(tile, chunk) writing an fp32 partial, then a sum", _matmul, _split_k_inputs(), DTYPES,
    rtol=max(TOLERANCES[d] for d in DTYPES), atol=max(TOLERANCES[d] for d in DTYPES))


@st.composite
def _linear_inputs(draw) -> Inputs:
    cap = pick_size(1000, 70)
    m, n, k = draw(sizes(cap, 64)), draw(sizes(cap, 64)), draw(sizes(cap, 64))
    dtype, activation = draw(st.sampled_from(DTYPES)), draw(st.sampled_from(ACTIVATIONS))
    a, b, about = _operands(draw, m, n, k, dtype)
    bias, about_bias = tensor_arg(draw, "bias", (n,), dtype, ("contiguous", "strided"), seed=2)
    return Inputs(lambda: (a(), b(), bias(), activation), f"{about}, {about_bias}, activation={activation!r}")


def _linear(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str = "") -> torch.Tensor:
    c = a.float() @ b.float() + bias.float()
    c = {"": c, "leaky_relu": F.leaky_relu(c, 0.01), "gelu_tanh": F.gelu(c, approximate="tanh")}[activation]
    return c.to(a.dtype)


LINEAR = Exercise(
    "07.3 linear", "linear(a, b, bias, activation): activation(a @ b + bias) with the bias and activation "
    "applied to the fp32 tile in the kernel (any M, N, K, strided a and b)", _linear, _linear_inputs(), DTYPES,
    rtol=max(TOLERANCES[d] for d in DTYPES), atol=max(TOLERANCES[d] for d in DTYPES))
