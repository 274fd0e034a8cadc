"""Solutions of notebook 14's exercises: the split-K launch plan of the skinny kernel, per-row fp8 scales in
Triton, and an fp8 matmul with per-row scales in its epilogue."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0


# ---- Exercise 1: the launch plan of skinny_matmul_kernel -----------------------------------------------------
def split_k_plan(M: int, N: int, K: int, block_n: int, block_k: int, split_k: int) -> dict:
    block_m = min(64, max(16, triton.next_power_of_2(M)))  # skinny_block_m(M)
    grid = (triton.cdiv(M, block_m), triton.cdiv(N, block_n), split_k)
    k_steps = triton.cdiv(triton.cdiv(K, block_k), split_k)  # the kernel's loop: whole BLOCK_K steps per split
    busy_splits = triton.cdiv(triton.cdiv(K, block_k), k_steps)  # splits whose slice starts before K
    tiles = grid[0] * grid[1]
    return {"grid": grid, "k_steps": k_steps, "idle_programs": tiles * (split_k - busy_splits),
            # one fp32 BLOCK_N x BLOCK_M partial per program; without split-K the kernel writes C directly
            "workspace_bytes": 0 if split_k == 1 else tiles * split_k * block_n * block_m * 4}


# ---- Exercise 2: per-row fp8 scales ------------------------------------------------------------------------
@triton.jit
def fp8_row_scales_kernel(x_ptr, out_ptr, n_cols, stride_r, stride_c, FP8_MAX: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    amax = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):  # a row longer than a block: keep a running maximum per lane
        x = tl.load(x_ptr + row * stride_r + (start + cols) * stride_c, mask=start + cols < n_cols, other=0.0)
        amax = tl.maximum(amax, tl.abs(x.to(tl.float32)))  # the largest magnitude, negative values too
    scale = tl.max(amax, axis=0) / FP8_MAX
    tl.store(out_ptr + row, tl.maximum(scale, 1e-12))  # a row of zeros: a tiny scale, not a division by 0 later


def fp8_row_scales(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dtype not in (torch.float32, torch.float16, torch.bfloat16):
        raise TypeError("x must be a float32, float16 or bfloat16 tensor")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D, got shape {tuple(x.shape)}")
    out = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    if x.shape[0]:
        fp8_row_scales_kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), x.stride(1), FP8_MAX=FP8_MAX,
                                             BLOCK=block)
    return out


# ---- Exercise 3: fp8 matmul, per-row scales in the epilogue ------------------------------------------------
@triton.jit
def matmul_fp8_rowwise_kernel(a_ptr, w_ptr, c_ptr, a_scale_ptr, w_scale_ptr, M, N, K, stride_am, stride_ak,
                              stride_wn, stride_wk, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                              BLOCK_K: tl.constexpr):
    pid_m, pid_n = tl.program_id(0), tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + offs_k
        a = tl.load(a_ptr + rows[:, None] * stride_am + k[None, :] * stride_ak,
                    mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        w = tl.load(w_ptr + cols[:, None] * stride_wn + k[None, :] * stride_wk,  # rows of W: N x K
                    mask=(cols[:, None] < N) & (k[None, :] < K), other=0.0)
        # fp8 x fp8 -> fp32. By default Triton lets an H100's tensor cores add the whole K loop into acc at
        # their own precision (about 14 bits, truncated); max_num_imprecise_acc=32 makes it add each wgmma's
        # 32 products into acc in fp32 instead (at most BLOCK_K; other GPUs and the interpreter ignore it)
        acc = tl.dot(a, tl.trans(w), acc, max_num_imprecise_acc=32)
    a_scale = tl.load(a_scale_ptr + rows, mask=rows < M, other=0.0)  # one scale per row of A ...
    w_scale = tl.load(w_scale_ptr + cols, mask=cols < N, other=0.0)  # ... and per row of W: a column of C
    acc = acc * a_scale[:, None] * w_scale[None, :]
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
             mask=(rows[:, None] < M) & (cols[None, :] < N))


def matmul_fp8_rowwise(a_q: torch.Tensor, w_q: torch.Tensor, a_scale: torch.Tensor, w_scale: torch.Tensor
                       ) -> torch.Tensor:
    if a_q.dtype != FP8 or w_q.dtype != FP8:
        raise TypeError(f"a_q and w_q must be float8_e4m3fn, got {a_q.dtype} and {w_q.dtype}")
    if a_q.dim() != 2 or w_q.dim() != 2 or a_q.shape[1] != w_q.shape[1]:
        raise ValueError(f"need a_q (M x K) and w_q (N x K), got {tuple(a_q.shape)} and {tuple(w_q.shape)}")
    (M, K), N = a_q.shape, w_q.shape[0]
    if a_scale.shape != (M,) or w_scale.shape != (N,) or {a_scale.dtype, w_scale.dtype} != {torch.float32}:
        raise ValueError(f"a_scale and w_scale must be float32 of shapes ({M},) and ({N},)")
    c = torch.empty((M, N), dtype=torch.bfloat16, device=a_q.device)
    if M == 0 or N == 0:
        return c
    bm, bn, bk = cu.pick_size((128, 128, 128), (32, 32, 32))
    matmul_fp8_rowwise_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](
        a_q, w_q, c, a_scale, w_scale, M, N, K, a_q.stride(0), a_q.stride(1), w_q.stride(0), w_q.stride(1),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=cu.pick_size(8, 4))
    return c
