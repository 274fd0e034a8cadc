"""Notebook 07 (Triton matmul): the grouped order in Python, split-K, and a matmul with a bias + activation
epilogue."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from course_utils.device import DEVICE, HAS_CUDA, pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, pairwise, randn, sizes, tensor_arg, values

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


def _as_int_array(args: tuple, returned):
    """The task takes any array of integers: a NumPy array of any integer dtype, a tensor, nested lists."""
    try:
        array = np.asarray(returned.cpu() if isinstance(returned, torch.Tensor) else returned)
    except (TypeError, ValueError):
        return returned
    return array.astype(np.int64) if array.dtype.kind in "iu" else returned


GROUPED_ORDER = Exercise(
    "07.1 grouped_order", "grouped_order(tiles_m, tiles_n, group_m): order[i, j] = the program that computes tile "
    "(i, j), in plain Python/NumPy (an array of integers of any dtype, or nested lists)", _tile_order,
    _order_inputs(), examples=(25, 100), output=_as_int_array,
    families={"edges": lambda: [case("tiles_m=1, tiles_n=1, group_m=8", 1, 1, 8),
                                case("tiles_m=3, tiles_n=5, group_m=16 (group_m > tiles_m)", 3, 5, 16),
                                case("tiles_m=7, tiles_n=2, group_m=3 (a last group of 1 row)", 7, 2, 3)]})


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


def _pair(m: int, n: int, k: int, dtype: torch.dtype = torch.float16) -> tuple[torch.Tensor, torch.Tensor]:
    return randn(m, k, dtype=dtype, seed=m), randn(k, n, dtype=dtype, seed=n)


def _cancelling(m: int, n: int, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """a = 64 everywhere, b = +64 in the first half of K, -64 in the second: each half sums to +-524288 (past
    fp16's 65504), the whole to 0: exact in fp32, inf in an fp16 partial or accumulator."""
    a = torch.full((m, k), 64.0, dtype=torch.float16)
    b = torch.cat([torch.full((k // 2, n), 64.0), torch.full((k - k // 2, n), -64.0)]).to(torch.float16)
    return a, b


def _matmul(a: torch.Tensor, b: torch.Tensor, splits: int) -> torch.Tensor:
    return (a.float() @ b.float()).to(a.dtype)


SPLIT_K = Exercise(
    "07.2 matmul_split_k", "matmul_split_k(a, b, splits): a @ b with K cut into `splits` chunks, one program per "
    "(tile, chunk) writing an fp32 partial, then a sum", _matmul, _split_k_inputs(), DTYPES,
    rtol=max(TOLERANCES[d] for d in DTYPES), atol=max(TOLERANCES[d] for d in DTYPES), examples=(30, 100),
    families={"programs": lambda: [case(f"{described('a', a)}, {described('b', b)}, splits=3 (3 tiles each way)",
                                        values(a), values(b), 3) for a, b in [_pair(97, 99, 67)]],
              "limits": lambda: [case(f"{described('a', a)}, {described('b', b)}, splits=2: partial sums of "
                                      "+-524288 (past fp16's 65504) that cancel", values(a), values(b), 2)
                                 for a, b in [_cancelling(5, 3, 256)]]})

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
    rtol=max(TOLERANCES[d] for d in DTYPES), atol=max(TOLERANCES[d] for d in DTYPES), examples=(30, 40),
    families={"programs": lambda: [case(f"{described('a', a)}, {described('b', b)}, bias: float16 (99,), "
                                        "activation='leaky_relu' (3 tiles each way)", values(a), values(b),
                                        values(randn(99, dtype=torch.float16)), "leaky_relu")
                                   for a, b in [_pair(97, 99, 33)]],
              "limits": lambda: [case(f"{described('a', a)}, {described('b', b)}, bias: float16 (3,), "
                                      "activation='': sums of +-524288 (past fp16's 65504) that cancel", values(a),
                                      values(b), values(randn(3, dtype=torch.float16)), "")
                                 for a, b in [_cancelling(5, 3, 256)]]})
