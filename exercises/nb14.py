"""Notebook 14 (the matmul frontier): the launch plan of the split-K skinny kernel, per-row fp8 scales in Triton,
and an fp8 matmul with per-row scales in its epilogue."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import case, described, describe, guarded_values, kind_sizes, pairwise, randn, sizes, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max
# The outlier row of exercise 3: its outputs are OUTLIER times the others', and atol = 1e-2 stays absolute. An
# H100's fp8 tensor cores add the 32 products of one wgmma at about 14 bits (e8m13, truncated), even with
# max_num_imprecise_acc=32: errors of about 1e-4 of the largest terms. At 100 (outputs of order 100) that is
# the tolerance itself: the reference failed on an H100 (1 of 90 values); at 10 it is a tenth of it.
OUTLIER = 10.0


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
    _split_k_plan, _plan_inputs(), examples=(200, 400),
    families={"edges": lambda: [case("M=1, N=1, K=1, BLOCK_N=32, BLOCK_K=256, SPLIT_K=8", 1, 1, 1, 32, 256, 8),
                                case("M=600, N=20000, K=20000, BLOCK_N=128, BLOCK_K=32, SPLIT_K=7",
                                     600, 20000, 20000, 128, 32, 7)]})


# ---- Exercise 2: per-row fp8 scales ------------------------------------------------------------------------
# On a GPU each new specialization of a kernel is a compilation (exercises.pairwise): each dtype, alignment,
# and size or stride equal to 1 or a multiple of 16. Drawn freely, 150 cases made 33 compilations
# (fp8_row_scales) and 35 (matmul_fp8_rowwise, 27 s on an H100). A case draws one configuration instead,
# with sizes of one kind: odd (ragged), multiples of 16 (aligned), or one (a column of x; a row of a_q):
# 12 configurations (dtype, layout, kind) for the scales, 6 (layout of a_q, of w_q, kind) for the matmul.
SCALE_CONFIGS = pairwise(DTYPES, ("contiguous", "sliced", "transposed", "strided"), ("one", "ragged", "aligned"))


@st.composite
def _scale_inputs(draw) -> Inputs:
    dtype, layout, kind = draw(st.sampled_from(SCALE_CONFIGS))
    rows = draw(kind_sizes("ragged" if kind == "one" else kind, pick_size(256, 40), block=16))
    cols = draw(kind_sizes(kind, pick_size(8192, 2100), block=1024))
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
    _fp8_row_scales, _scale_inputs(), DTYPES, rtol=1e-6, atol=0.0, examples=(30, 150), block={"block": 16},
    families={"programs": lambda: [case(f"{described('x', x, 'sliced')} (block=16: 4 chunks a row)",
                                        values(x, "sliced")) for x in [randn(5, 61, seed=9)]],
              "kinks": lambda: [case("x: float32 (3, 6): rows whose largest magnitudes tie, +m and -m, and a row "
                                     "of zeros", values(torch.tensor([[1.0, -3.0, 3.0, 0.5, -0.5, 2.0],
                                                                      [-7.0, 7.0, -7.0, 0.0, 1.0, 6.5],
                                                                      [0.0] * 6])))],
              "limits": lambda: [case("x: float16 (2, 5) with values near +-65504", values(torch.tensor(
                  [[65504.0, -1.0, 3.0, -65504.0, 2.0], [-60000.0, 1.0, 0.5, 2.0, 7.0]], dtype=torch.float16)))]})


# ---- Exercise 3: an fp8 matmul with per-row scales -----------------------------------------------------------
def quantize_rows(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x (2-D, fp32) -> (q in e4m3, one fp32 scale per row) with x ~ q * scale, as notebook 14's quantize_fp8."""
    scale = _fp8_row_scales(x)
    return (x / scale[:, None]).clamp(-FP8_MAX, FP8_MAX).to(FP8), scale


FP8_MATMUL_CONFIGS = pairwise(("contiguous", "sliced"), ("contiguous", "offset"), ("ragged", "aligned", "one"))


@st.composite
def _fp8_matmul_inputs(draw) -> Inputs:
    layout_a, layout_w, kind = draw(st.sampled_from(FP8_MATMUL_CONFIGS))
    m = draw(kind_sizes(kind, pick_size(512, 40), 64))
    kind = "ragged" if kind == "one" else kind
    n, k = draw(kind_sizes(kind, pick_size(512, 40), 64)), draw(kind_sizes(kind, pick_size(2048, 200), 64))
    gen = torch.Generator().manual_seed(m * 31 + n * 7 + k)
    a = torch.randn(m, k, generator=gen) / k**0.25
    w = torch.randn(n, k, generator=gen) / k**0.25
    if draw(st.booleans()):
        a[m // 2] *= OUTLIER  # an outlier row: its own scale keeps the others precise
    (a_q, a_scale), (w_q, w_scale) = quantize_rows(a), quantize_rows(w)

    def make() -> tuple:
        return (guarded_values(a_q, layout_a), guarded_values(w_q, layout_w), guarded_values(a_scale),
                guarded_values(w_scale))

    args = make()
    about = [describe("a_q", args[0], layout_a), describe("w_q", args[1], layout_w)]
    return Inputs(make, ", ".join(about).replace("float8_e4m3fn", "fp8 e4m3")
                  + f", a_scale: float32 ({m},), w_scale: float32 ({n},)")


def _fp8_case(m: int, n: int, k: int, more: str = ""):
    (a_q, a_scale), (w_q, w_scale) = quantize_rows(randn(m, k, seed=m)), quantize_rows(randn(n, k, seed=n))
    return case(f"a_q: fp8 e4m3 ({m}, {k}), w_q: fp8 e4m3 ({n}, {k}), a_scale: float32 ({m},), w_scale: float32 "
                f"({n},){more}", values(a_q), values(w_q), values(a_scale), values(w_scale))


def _matmul_fp8_rowwise(a_q, w_q, a_scale, w_scale) -> torch.Tensor:
    a = a_q.float() * a_scale[:, None]  # both operands back in fp32, one fp32 matmul, rounded to bf16 once
    w = w_q.float() * w_scale[:, None]
    return (a @ w.t()).to(torch.bfloat16)


MATMUL_FP8_ROWWISE = Exercise(
    "14.3 matmul_fp8_rowwise", "matmul_fp8_rowwise(a_q, w_q, a_scale, w_scale) = (a_q * a_scale[:, None]) @ "
    "(w_q * w_scale[:, None])^T in bf16: a_q (M x K) and w_q (N x K) in fp8 e4m3, fp32 accumulation in tl.dot "
    "(max_num_imprecise_acc=32: by default an H100 adds the whole K loop at about 14 bits), the per-row scales "
    "applied to the fp32 tile in the epilogue",
    _matmul_fp8_rowwise, _fp8_matmul_inputs(), (FP8,), rtol=1e-2, atol=1e-2, examples=(30, 150),
    archs=("sm_90",),  # fp8 e4m3 tensor cores: Hopper (sm_89 and later); an A100 (sm_80) has none
    families={"programs": lambda: [_fp8_case(67, 69, 40, " (3 tiles of 32 each way)")],
              "edges": lambda: [_fp8_case(33, 5, 17, ": M, N, K one past a block or below it")]})
