"""Wrong answers to notebook 14's exercises: a round-down grid, BLOCK_M taken as M, K cut into equal slices
(not whole BLOCK_K steps), a workspace without split-K; the max instead of the largest magnitude, no floor
for a row of zeros, the first block of each row only, the row stride taken as the width; the scales
swapped between rows and columns, one scale per tensor, no mask on K, W read as K x N."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb14 as ex
from solutions import nb14 as sol


# ---- split_k_plan ----------------------------------------------------------------------------------------
def plan_round_down_grid(M, N, K, block_n, block_k, split_k):
    plan = sol.split_k_plan(M, N, K, block_n, block_k, split_k)
    block_m = min(64, max(16, triton.next_power_of_2(M)))
    return {**plan, "grid": (M // block_m, N // block_n, split_k)}     # BUG: floor: a partial tile is lost


def plan_block_m_is_m(M, N, K, block_n, block_k, split_k):
    tiles = triton.cdiv(N, block_n)                                     # BUG: BLOCK_M = M (not a power of two
    plan = sol.split_k_plan(M, N, K, block_n, block_k, split_k)        # >= 16): one row tile, M rows in it
    return {**plan, "grid": (1, tiles, split_k), "workspace_bytes": 0 if split_k == 1 else
            tiles * split_k * block_n * M * 4}


def plan_equal_slices(M, N, K, block_n, block_k, split_k):
    plan = sol.split_k_plan(M, N, K, block_n, block_k, split_k)
    k_steps = triton.cdiv(triton.cdiv(K, split_k), block_k)            # BUG: K / SPLIT_K, then steps: the
    return {**plan, "k_steps": k_steps, "idle_programs": 0}             # kernel rounds the steps, not K


def plan_workspace_always(M, N, K, block_n, block_k, split_k):
    plan = sol.split_k_plan(M, N, K, block_n, block_k, split_k)
    block_m = min(64, max(16, triton.next_power_of_2(M)))
    tiles = plan["grid"][0] * plan["grid"][1]
    return {**plan, "workspace_bytes": tiles * split_k * block_n * block_m * 4}  # BUG: SPLIT_K = 1 needs none


# ---- fp8_row_scales ------------------------------------------------------------------------------------
@triton.jit
def scales_variant_kernel(x_ptr, out_ptr, n_cols, stride_r, stride_c, BLOCK: tl.constexpr, BUG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    amax = tl.full([BLOCK], float("-inf") if BUG == "max" else 0.0, dtype=tl.float32)
    end = BLOCK if BUG == "first block only" else n_cols                # BUG: the rest of a long row is ignored
    if BUG == "whole blocks only":
        end = n_cols - BLOCK + 1                                        # BUG: the last partial block is skipped
    for start in range(0, end, BLOCK):
        x = tl.load(x_ptr + row * stride_r + (start + cols) * stride_c, mask=start + cols < n_cols,
                    other=float("-inf") if BUG == "max" else 0.0).to(tl.float32)
        if BUG == "sqrt of the square":                                 # BUG: x * x in the input dtype
            x = tl.sqrt((x.to(x_ptr.dtype.element_ty) * x.to(x_ptr.dtype.element_ty)).to(tl.float32))
        amax = tl.maximum(amax, x if BUG == "max" else tl.abs(x))      # BUG (max): -5 beats 3 in magnitude
    scale = tl.max(amax, axis=0) / 448.0
    tl.store(out_ptr + row, scale if BUG == "no floor" else tl.maximum(scale, 1e-12))  # BUG: zeros give 0


def _scales_with(bug):
    def fp8_row_scales(x, block=1024):
        out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
        stride_r, stride_c = (x.shape[1], 1) if bug == "width as row stride" else x.stride()  # BUG: contiguous
        scales_variant_kernel[(x.shape[0],)](x, out, x.shape[1], stride_r, stride_c, BLOCK=block, BUG=bug)
        return out
    return fp8_row_scales


# ---- matmul_fp8_rowwise --------------------------------------------------------------------------------
@triton.jit
def fp8_variant_kernel(a_ptr, w_ptr, c_ptr, a_scale_ptr, w_scale_ptr, M, N, K, stride_am, stride_ak,
                       stride_wn, stride_wk, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       BUG: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        k_ok = (k < K) if BUG != "no K mask" else (k >= 0)             # BUG (no K mask): the last K-step reads
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,  # past the end of each row
                    mask=(rows[:, None] < M) & k_ok[None, :], other=0.0)
        if BUG == "W as K x N":                                         # BUG: W indexed as if it were K x N
            wt = tl.load(w_ptr + k[:, None] * stride_wn + cols[None, :] * stride_wk,
                         mask=k_ok[:, None] & (cols[None, :] < N), other=0.0)
        else:
            wt = tl.trans(tl.load(w_ptr + cols[:, None] * stride_wn + k[None, :] * stride_wk,
                                  mask=(cols[:, None] < N) & k_ok[None, :], other=0.0))
        acc = tl.dot(a, wt, acc)
    if BUG == "scales swapped":                                         # BUG: A's scales go with C's rows
        acc = acc * tl.load(w_scale_ptr + rows, mask=rows < M, other=0.0)[:, None]
        acc = acc * tl.load(a_scale_ptr + cols, mask=cols < N, other=0.0)[None, :]
    elif BUG == "one scale":                                            # BUG: the per-tensor formula
        acc = acc * (tl.load(a_scale_ptr) * tl.load(w_scale_ptr))
    elif BUG == "unmasked scales":                                      # BUG: the edge tiles' scale loads run
        acc = acc * tl.load(a_scale_ptr + rows)[:, None]                # past the scales (the rows they feed
        acc = acc * tl.load(w_scale_ptr + cols)[None, :]                # are never stored: no value shows it)
    else:
        acc = acc * tl.load(a_scale_ptr + rows, mask=rows < M, other=0.0)[:, None]
        acc = acc * tl.load(w_scale_ptr + cols, mask=cols < N, other=0.0)[None, :]
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def _fp8_with(bug):
    def matmul_fp8_rowwise(a_q, w_q, a_scale, w_scale):
        (M, K), N = a_q.shape, w_q.shape[0]
        c = torch.empty((M, N), dtype=torch.bfloat16, device=a_q.device)
        grid = (triton.cdiv(M, 32), 1 if bug == "one column of tiles" else triton.cdiv(N, 32))
        fp8_variant_kernel[grid](
            a_q, w_q, c, a_scale, w_scale, M, N, K, a_q.stride(0), a_q.stride(1), w_q.stride(0), w_q.stride(1),
            BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, BUG=bug)
        return c
    return matmul_fp8_rowwise


WRONG = [
    (ex.SPLIT_K_PLAN, "round-down grid", plan_round_down_grid, ["'grid': (0", "M=1"]),
    (ex.SPLIT_K_PLAN, "BLOCK_M taken as M", plan_block_m_is_m, ["'grid'", "expected"]),
    (ex.SPLIT_K_PLAN, "K cut into equal slices", plan_equal_slices, ["'k_steps'", "SPLIT_K="]),
    (ex.SPLIT_K_PLAN, "a workspace without split-K", plan_workspace_always, ["'workspace_bytes'", "SPLIT_K=1"]),
    (ex.FP8_ROW_SCALES, "max, not the largest magnitude", _scales_with("max"),
     ["values wrong", "got 1e-12"]),
    (ex.FP8_ROW_SCALES, "no floor for a row of zeros", _scales_with("no floor"), ["got 0", "a row of zeros"]),
    (ex.FP8_ROW_SCALES, "the first block of each row only", _scales_with("first block only"), ["values wrong"]),
    (ex.FP8_ROW_SCALES, "the width as the row stride", _scales_with("width as row stride"), ["strides", "wrong"]),
    (ex.MATMUL_FP8_ROWWISE, "scales swapped", _fp8_with("scales swapped"), ["a_scale"]),
    (ex.MATMUL_FP8_ROWWISE, "one scale per tensor", _fp8_with("one scale"), ["values wrong"]),
    (ex.MATMUL_FP8_ROWWISE, "no mask on K", _fp8_with("no K mask"), ["read outside the input", "a_q: fp8 e4m3"]),
    (ex.MATMUL_FP8_ROWWISE, "W read as K x N", _fp8_with("W as K x N"), ["values wrong"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def plan_idle_steps(m, n, k, block_n, block_k, split_k):
    plan = sol.split_k_plan(m, n, k, block_n, block_k, split_k)
    tiles = plan["grid"][0] * plan["grid"][1]
    spare = split_k * plan["k_steps"] - triton.cdiv(k, block_k)         # BUG: idle K steps, not idle programs
    return {**plan, "idle_programs": tiles * spare}


def plan_grid_list(m, n, k, block_n, block_k, split_k):
    plan = sol.split_k_plan(m, n, k, block_n, block_k, split_k)
    return {**plan, "grid": list(plan["grid"])}                         # BUG: a list where a tuple is asked for


WRONG += [
    (ex.SPLIT_K_PLAN, "idle K steps counted", plan_idle_steps, ["'idle_programs'", "expected"]),
    (ex.SPLIT_K_PLAN, "the grid as a list", plan_grid_list, ["'grid': [", "expected"]),
    (ex.FP8_ROW_SCALES, "|x| as the root of x * x in the input dtype", _scales_with("sqrt of the square"),
     ["values wrong"]),
    (ex.FP8_ROW_SCALES, "whole blocks only", _scales_with("whole blocks only"), ["values wrong"]),
    (ex.MATMUL_FP8_ROWWISE, "unmasked scale loads", _fp8_with("unmasked scales"),
     ["read outside the input a_scale", "unmasked load of a scale"]),
    (ex.MATMUL_FP8_ROWWISE, "one column of tiles", _fp8_with("one column of tiles"), ["values wrong"]),
]
