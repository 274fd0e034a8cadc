"""Notebook 07 (Triton matmul): the grouped order in Python, split-K, and a matmul with a bias + activation
epilogue."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from course_utils.device import DEVICE, HAS_CUDA, pick_size
from course_utils.grading import Exercise, Inputs
from exercises import pairwise, sizes, tensor_arg

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


# On a GPU each new specialization of a kernel is a compilation, 0.5-1 s for these matmuls: Triton compiles
# again for every constexpr value, pointer dtype and 16-byte alignment, and integer argument equal to 1 or a
# multiple of 16 (sizes, strides). Drawn independently, M, N, K, the dtype, the layouts and the activation
# made about one new kernel every other case (200 cases: 75 compilations for split-K, 52 s; 97 for linear,
# 104 s, on an H100). So a case draws one of 9 configurations, in which every pair of values of two factors
# appears (an orthogonal array: exercises.pairwise), and sizes of one kind: a kernel that specializes on
# nothing else (as the solutions) compiles at most 9 times per grading; shrinking a failure stays inside
# these 9 as well.
SHAPE_KINDS = ("ragged", "aligned", "row")  # odd sizes > 1; multiples of 16; M = 1 (a row vector), N, K odd
_THREE_DTYPES = tuple(DTYPES[i % len(DTYPES)] for i in range(3))  # (fp16, bf16, fp16); (fp16,) * 3 on a CPU


def _dims(draw, kind: str, caps: tuple[int, int, int]) -> tuple[int, ...]:
    """(M, N, K) of one kind: 1, primes, around a block of 64, or any, made odd (> 1) or a multiple of 16."""
    odd = lambda cap: sizes(cap, 64).map(lambda x: min(max(x | 1, 3), (cap - 1) | 1))  # noqa: E731
    if kind == "aligned":
        return tuple(16 * draw(sizes(max(1, cap // 16), 4)) for cap in caps)
    return (1 if kind == "row" else draw(odd(caps[0])), draw(odd(caps[1])), draw(odd(caps[2])))


def _operands(draw, m: int, n: int, k: int, dtype: torch.dtype, layouts: tuple[str, str]):
    a, about_a = tensor_arg(draw, "a", (m, k), dtype, layouts[:1])
    b, about_b = tensor_arg(draw, "b", (k, n), dtype, layouts[1:2], seed=1)
    return a, b, f"{about_a}, {about_b}"


# layouts of (a, b): contiguous; a transposed and b every 2nd column; a 2 bytes off 16-byte alignment
SPLIT_K_CONFIGS = pairwise((("contiguous", "contiguous"), ("transposed", "strided"), ("offset", "contiguous")),
                          SHAPE_KINDS, _THREE_DTYPES, (1, 3, 16))


@st.composite
def _split_k_inputs(draw) -> Inputs:
    layouts, kind, dtype, splits = draw(st.sampled_from(SPLIT_K_CONFIGS))
    m, n, k = _dims(draw, kind, (pick_size(512, 40), pick_size(512, 40), pick_size(65536, 600)))
    a, b, about = _operands(draw, m, n, k, dtype, layouts)
    return Inputs(lambda: (a(), b(), splits), f"{about}, splits={splits}")


def _matmul(a: torch.Tensor, b: torch.Tensor, splits: int) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


SPLIT_K = Exercise(
    "07.2 matmul_split_k", "matmul_split_k(a, b, splits): a @ b with K cut into `splits` chunks, one program per "
    "(tile, chunk) writing an fp32 partial, then a sum", _matmul, _split_k_inputs(), DTYPES,
    rtol=max(TOLERANCES[d] for d in DTYPES), atol=max(TOLERANCES[d] for d in DTYPES), examples=(30, 100))

# layouts of (a, b, bias), as for split-K, the bias contiguous or every 2nd element
LINEAR_CONFIGS = pairwise(ACTIVATIONS, (("contiguous", "contiguous", "contiguous"),
                                       ("transposed", "strided", "strided"), ("offset", "contiguous", "strided")),
                         SHAPE_KINDS, _THREE_DTYPES)


@st.composite
def _linear_inputs(draw) -> Inputs:
    activation, layouts, kind, dtype = draw(st.sampled_from(LINEAR_CONFIGS))
    m, n, k = _dims(draw, kind, (pick_size(1000, 70),) * 3)
    a, b, about = _operands(draw, m, n, k, dtype, layouts)
    bias, about_bias = tensor_arg(draw, "bias", (n,), dtype, layouts[2:], seed=2)
    return Inputs(lambda: (a(), b(), bias(), activation), f"{about}, {about_bias}, activation={activation!r}")


def _linear(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str = "") -> torch.Tensor:
    c = a.float() @ b.float() + bias.float()
    c = {"": c, "leaky_relu": F.leaky_relu(c, 0.01), "gelu_tanh": F.gelu(c, approximate="tanh")}[activation]
    return c.to(a.dtype)


LINEAR = Exercise(
    "07.3 linear", "linear(a, b, bias, activation): activation(a @ b + bias) with the bias and activation "
    "applied to the fp32 tile in the kernel (any M, N, K, strided a and b)", _linear, _linear_inputs(), DTYPES,
    rtol=max(TOLERANCES[d] for d in DTYPES), atol=max(TOLERANCES[d] for d in DTYPES), examples=(30, 40))
