"""Notebook 12 (LoRA): the fused add-mul tail with another activation (tanh), its backward pass for the four
activations of the notebook, and the adapter's gradient for B as a Triton matmul that reduces over tokens."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from course_utils.device import HAS_CUDA, pick_size
from course_utils.grading import Exercise, Inputs
from exercises import KINDS, case, described, kind_sizes, kinks, pairwise, randn, sizes, tensor_arg, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
ACTIVATIONS = {"relu": torch.relu, "sigmoid": torch.sigmoid, "gelu": F.gelu, "silu": F.silu}
# The CPU interpreter's tl.dot multiplies bfloat16 tiles wrongly (triton-lang/triton#11584): bf16 on a GPU only.
MATMUL_DTYPES = (torch.float16, torch.bfloat16) if HAS_CUDA else (torch.float16,)
MATMUL_TOLERANCES = {torch.float16: 1e-2, torch.bfloat16: 3e-2}  # rtol = atol, as notebook 12's checks


# ---- Exercise 1: act(base + scale * lora) with tanh ----------------------------------------------------
@st.composite
def _tanh_inputs(draw) -> Inputs:
    rows, cols = draw(sizes(pick_size(512, 9), block=8)), draw(sizes(pick_size(4096, 300), block=128))
    dtype, scale = draw(st.sampled_from(DTYPES)), draw(st.sampled_from((0.5, 2.0, -2.0, 0.0)))  # exact products
    spread = draw(st.sampled_from((1.0, 30.0)))  # 30: pre-activations beyond +-44, where exp(2 y) overflows fp32
    layouts = ("contiguous", "strided", "transposed")
    base, about_base = tensor_arg(draw, "base", (rows, cols), dtype, layouts, scale=spread)
    lora, about_lora = tensor_arg(draw, "lora", (rows, cols), dtype, layouts, scale=spread, seed=1)
    values = "" if spread == 1.0 else f" (values: randn x {spread:g})"
    return Inputs(lambda: (base(), lora(), scale), f"{about_base}, {about_lora}{values}, scale={scale}")


def _add_mul_tanh(base: torch.Tensor, lora: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.tanh(base.float() + scale * lora.float()).to(base.dtype)


ADD_MUL_TANH = Exercise(
    "12.1 add_mul_tanh", "add_mul_tanh(base, lora, scale) = tanh(base + scale * lora) in one Triton kernel, fp32 math "
    "rounded once, for 2-D tensors of one dtype (fp32/fp16/bf16), views included",
    _add_mul_tanh, _tanh_inputs(), DTYPES,
    families={"programs": lambda: [case("base: float32 (2, 4500), lora: float32 (2, 4500), scale=0.5 (9000 "
                                        "elements: 3 blocks of 4096 bytes)", values(randn(2, 4500)),
                                        values(randn(2, 4500, seed=1)), 0.5)],
              # tanh(+-inf) = +-1: (exp(2 y) - 1) / (exp(2 y) + 1) is inf / inf there
              "nonfinite": lambda: [case("base: float32 (2, 5) with inf, -inf and NaN, lora: float32 (2, 5), "
                                         "scale=2.0", values(torch.tensor([[math.inf, -math.inf, 1.0, math.nan, 0.0],
                                                                           [3e38, -3e38, 0.5, 2.0, -1.0]])),
                                         values(randn(2, 5, seed=1)), 2.0)]})


# ---- Exercise 2: the backward pass of act(base + scale * lora) -------------------------------------------
# On a GPU each new specialization of a kernel is a compilation (exercises.pairwise): here each activation
# (a tl.constexpr) and dtype, and a length equal to 1 or a multiple of 16. Drawn freely, 200 cases made 22
# compilations on an H100 (14 s). A case draws one of 12 configurations instead: every activation with every
# dtype, the lengths of one kind (exercises.KINDS).
BACKWARD_CONFIGS = pairwise(tuple(ACTIVATIONS), DTYPES, KINDS)


@st.composite
def _backward_inputs(draw) -> Inputs:
    activation, dtype, kind = draw(st.sampled_from(BACKWARD_CONFIGS))
    n = draw(kind_sizes(kind, pick_size(1 << 20, 5000)))
    scale = draw(st.sampled_from((0.5, 2.0, -1.0, 0.25)))  # powers of two: y = base + scale * lora rounds once
    layouts = ("contiguous", "strided")
    grad, about_grad = tensor_arg(draw, "grad", (n,), dtype, layouts)
    base, about_base = tensor_arg(draw, "base", (n,), dtype, layouts, scale=2.0, seed=1)
    lora, about_lora = tensor_arg(draw, "lora", (n,), dtype, layouts, seed=2)
    return Inputs(lambda: (grad(), base(), lora(), scale, activation),
                  f"{about_grad}, {about_base}, {about_lora}, scale={scale}, activation={activation!r}")


def _add_mul_act_backward(grad, base, lora, scale: float, activation: str):
    y = (base.float() + scale * lora.float()).requires_grad_()
    with torch.enable_grad():
        (dy,) = torch.autograd.grad(ACTIVATIONS[activation](y), y, grad.float())
    return dy.to(base.dtype), (scale * dy).to(base.dtype)


ADD_MUL_ACT_BACKWARD = Exercise(
    "12.2 add_mul_act_backward", "add_mul_act_backward(grad, base, lora, scale, activation) = (d_base, d_lora), the "
    "gradients of act(base + scale * lora) given the gradient of its output, in one Triton kernel; activation "
    "'relu', 'sigmoid', 'gelu' (erf) or 'silu'",
    _add_mul_act_backward, _backward_inputs(), DTYPES, returns=("d_base", "d_lora"),
    # kinks: (activation, dtype, kind of length) of BACKWARD_CONFIGS, so that a GPU grading compiles nothing new
    families={"kinks": lambda: [case(f"grad: {str(d).replace('torch.', '')} ({n},), base and lora of {d}: y = base "
                                     f"+ scale * lora exactly 0 at half of them, scale=0.5, activation={a!r}",
                                     values(randn(n, dtype=d, seed=3)), values(kinks(randn(n, dtype=d))),
                                     values(kinks(randn(n, dtype=d, seed=2))), 0.5, a)
                                for a, d, n in (("relu", torch.float32, 41), ("relu", torch.float16, 48))],
              "programs": lambda: [case("grad, base, lora: float32 (9000,), scale=0.5, activation='silu' (3 blocks "
                                        "of 4096 bytes)", values(randn(9000, seed=3)), values(randn(9000)),
                                        values(randn(9000, seed=2)), 0.5, "silu")]})


# ---- Exercise 3: the gradient of B, scale * g^T (x A^T) ---------------------------------------------------
# Each rank is a new BLOCK_R (a tl.constexpr) and a new specialization, and so are each dtype, alignment,
# and size or stride equal to 1 or a multiple of 16: drawn freely, 200 cases made 94 compilations on an H100
# (44 s). A case draws one of the 9 rows of an orthogonal array (exercises.pairwise) of 4 factors: the
# layouts of (g, xa); the rank: 1, 13 (padded to a BLOCK_R of 16) or 128; the dtype (fp16, fp16, bf16: fp16
# only on a CPU); the kind of sizes: tokens and d_out odd (ragged), multiples of 16 (aligned), or one token.
RANKS = (1, 13, 128)
GRAD_B_CONFIGS = pairwise((("contiguous", "contiguous"), ("transposed", "strided"), ("sliced", "offset")), RANKS,
                          (MATMUL_DTYPES[0], MATMUL_DTYPES[0], MATMUL_DTYPES[-1]), KINDS)


@st.composite
def _grad_b_inputs(draw) -> Inputs:
    (layout_g, layout_xa), rank, dtype, kind = draw(st.sampled_from(GRAD_B_CONFIGS))
    tokens = draw(kind_sizes(kind, pick_size(2048, 300), 64))
    d_out = draw(kind_sizes("ragged" if kind == "one" else kind, pick_size(1024, 70), 64))
    scale = draw(st.sampled_from((0.5, 2.0, 4.0)))
    g, about_g = tensor_arg(draw, "g", (tokens, d_out), dtype, (layout_g,))
    xa, about_xa = tensor_arg(draw, "xa", (tokens, rank), dtype, (layout_xa,), seed=1)
    return Inputs(lambda: (g(), xa(), scale), f"{about_g}, {about_xa}, scale={scale}")


def _lora_grad_b(g: torch.Tensor, xa: torch.Tensor, scale: float) -> torch.Tensor:
    return (scale * (g.float().t() @ xa.float())).to(g.dtype)


LORA_GRAD_B = Exercise(
    "12.3 lora_grad_b", "lora_grad_b(g, xa, scale) = scale * g^T xa (d_out x r), the gradient of LoRA's B from the "
    "output gradient g (tokens x d_out) and x A^T (tokens x r), as a Triton kernel with fp32 accumulation",
    _lora_grad_b, _grad_b_inputs(), MATMUL_DTYPES, families={
        "programs": lambda: [case(f"{described('g', g)}, {described('xa', xa)}, scale=0.5 (d_out: 3 blocks of 32, "
                                  "tokens: 3 of 32)", values(g), values(xa), 0.5)
                             for g, xa in [(randn(97, 99, dtype=torch.float16), randn(97, 13, dtype=torch.float16))]],
        # g = 64, xa = +64 for the first half of the tokens, -64 for the second: halves of +-131072, past fp16's
        # 65504, that cancel: exact in an fp32 accumulator, inf in an fp16 one
        "limits": lambda: [case("g: float16 (64, 5) = 64, xa: float16 (64, 3) = +64 then -64, scale=0.5 (partial "
                                "sums past fp16's 65504)", values(torch.full((64, 5), 64.0, dtype=torch.float16)),
                                values(torch.cat([torch.full((32, 3), 64.0), torch.full((32, 3), -64.0)]).half()),
                                0.5)]},
    rtol=max(MATMUL_TOLERANCES[d] for d in MATMUL_DTYPES), atol=max(MATMUL_TOLERANCES[d] for d in MATMUL_DTYPES))
