"""Notebook 14 (the matmul frontier): the launch plan of the split-K skinny kernel, per-row fp8 scales in Triton,
and an fp8 matmul with per-row scales in its epilogue."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import describe, guarded_values, sizes

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max


# ---- Exercise 1: the launch plan of skinny_matmul_kernel ------------------------------------------------
@st.composite
def _plan_inputs(draw) -> Inputs:
    m, n, k = draw(sizes(600, 64)), draw(sizes(20000, 128)), draw(sizes(20000, 256))
    block_n, block_k = draw(st.sampled_from((32, 64, 128))), draw(st.sampled_from((32, 64, 128, 256)))
    split_k = draw(st.sampled_from((1, 2, 3, 4, 7, 8)))
    return Inputs(lambda: (m, n, k, block_n, block_k, split_k),
                  f"M={m}, N={n}, K={k}, BLOCK_N={block_n}, BLOCK_K={block_k}, SPLIT_K={split_k}")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _split_k_plan(m: int, n: int, k: int, block_n: int, block_k: int, split_k: int) -> dict:
    block_m = min(64, max(16, 1 << (m - 1).bit_length()))  # skinny_block_m: a power of two in 16..64
    grid = (_cdiv(m, block_m), _cdiv(n, block_n), split_k)
    k_steps = _cdiv(_cdiv(k, block_k), split_k)  # whole BLOCK_K steps per program, as the kernel's loop
    empty_splits = sum(1 for s in range(split_k) if s * k_steps * block_k >= k)
    tiles = grid[0] * grid[1]
    return {"grid": grid, "k_steps": k_steps, "idle_programs": tiles * empty_splits,
            "workspace_bytes": 0 if split_k == 1 else tiles * split_k * block_n * block_m * 4}


SPLIT_K_PLAN = Exercise(
    "14.1 split_k_plan", "split_k_plan(M, N, K, BLOCK_N, BLOCK_K, SPLIT_K): the dict {'grid', 'k_steps', "
    "'idle_programs', 'workspace_bytes'} of skinny_matmul_kernel's launch, in plain Python",
    _split_k_plan, _plan_inputs(), examples=(200, 400))


# ---- Exercise 2: per-row fp8 scales ------------------------------------------------------------------------
@st.composite
def _scale_inputs(draw) -> Inputs:
    rows, cols = draw(sizes(pick_size(256, 40), block=16)), draw(sizes(pick_size(8192, 2100), block=1024))
    dtype = draw(st.sampled_from(DTYPES))
    layout = draw(st.sampled_from(("contiguous", "sliced", "transposed", "strided")))
    gen = torch.Generator().manual_seed(rows * 7 + cols)
    x = torch.randn(rows, cols, generator=gen)
    special = draw(st.sampled_from(("none", "a row of zeros", "an outlier row", "rows whose largest value is < 0")))
    if special == "a row of zeros":
        x[rows // 2] = 0.0
    elif special == "an outlier row":
        x[rows // 2] *= 1000.0
    elif special == "rows whose largest value is < 0":
        x = x.abs().neg()
        x[:, cols // 2] = -50.0  # the largest magnitude of every row is negative
    x = x.to(dtype)

    def make() -> tuple:
        return (guarded_values(x, layout),)

    view = "" if layout == "contiguous" else f" ({layout}, strides {make()[0].stride()})"
    return Inputs(make, f"{describe('x', x)}{view}" + ("" if special == "none" else f", {special}"))


def _fp8_row_scales(x: torch.Tensor) -> torch.Tensor:
    return (x.abs().amax(dim=1).float() / FP8_MAX).clamp(min=1e-12)


FP8_ROW_SCALES = Exercise(
    "14.2 fp8_row_scales", "fp8_row_scales(x): for each row of a 2-D x (fp32/fp16/bf16, any strides), "
    "max(max |x[row]| / 448, 1e-12) as a float32 (rows,) tensor, one Triton program per row",
    _fp8_row_scales, _scale_inputs(), DTYPES, rtol=1e-6, atol=0.0, examples=(30, 150))


# ---- Exercise 3: an fp8 matmul with per-row scales -----------------------------------------------------------
def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (2-D, fp32) -> (q in e4m3, one fp32 scale per row) with x ~ q * scale, as notebook 14's quantize_fp8."""
    scale = _fp8_row_scales(x)
    return (x / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


@st.composite
def _fp8_matmul_inputs(draw) -> Inputs:
    m, n = draw(sizes(pick_size(512, 40), 64)), draw(sizes(pick_size(512, 40), 64))
    k = draw(sizes(pick_size(2048, 200), 64))
    layout_a, layout_w = draw(st.sampled_from(("contiguous", "sliced"))), draw(st.sampled_from(("contiguous",
                                                                                                  "offset")))
    gen = torch.Generator().manual_seed(m * 31 + n * 7 + k)
    a = torch.randn(m, k, generator=gen) / k**0.25
    w = torch.randn(n, k, generator=gen) / k**0.25
    if draw(st.booleans()):
        a[m // 2] *= 100.0  # an outlier row: its own scale keeps the others precise
    (a_q, a_scale), (w_q, w_scale) = quantize_rows(a), quantize_rows(w)

    def make() -> tuple:
        return (guarded_values(a_q, layout_a), guarded_values(w_q, layout_w), guarded_values(a_scale),
                guarded_values(w_scale))

    args = make()
    about = [describe("a_q", args[0], layout_a), describe("w_q", args[1], layout_w)]
    return Inputs(make, ", ".join(about).replace("float8_e4m3fn", "fp8 e4m3")
                  + f", a_scale: float32 ({m},), w_scale: float32 ({n},)")


def _matmul_fp8_rowwise(a_q, w_q, a_scale, w_scale) -> torch.Tensor:
    a = a_q.float() * a_scale[:, None]  # both operands back in fp32, one fp32 matmul, rounded to bf16 once
    w = w_q.float() * w_scale[:, None]
    return (a @ w.t()).to(torch.bfloat16)


MATMUL_FP8_ROWWISE = Exercise(
    "14.3 matmul_fp8_rowwise", "matmul_fp8_rowwise(a_q, w_q, a_scale, w_scale) = (a_q * a_scale[:, None]) @ "
    "(w_q * w_scale[:, None])^T in bf16: a_q (M x K) and w_q (N x K) in fp8 e4m3, fp32 accumulation in tl.dot, "
    "the per-row scales applied to the fp32 tile in the epilogue",
    _matmul_fp8_rowwise, _fp8_matmul_inputs(), (FP8,), rtol=1e-2, atol=1e-2, examples=(30, 150))
