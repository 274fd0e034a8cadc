"""Solutions of notebook 15's exercises (try first)."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from lessons.nb15_flash_attention import kernel_dtype


@triton.jit
def delta_kernel(o_ptr, do_ptr, out_ptr, N, stride_ob, stride_oh, stride_on, stride_od,
                 stride_db, stride_dh, stride_dn, stride_dd, H, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr):
    start_m, bh = tl.program_id(0), tl.program_id(1)
    b, h = bh // H, bh % H
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    mask = rows[:, None] < N
    o = tl.load(o_ptr + b * stride_ob + h * stride_oh + rows[:, None] * stride_on + cols[None, :] * stride_od,
                mask=mask, other=0.0).to(tl.float32)
    do = tl.load(do_ptr + b * stride_db + h * stride_dh + rows[:, None] * stride_dn + cols[None, :] * stride_dd,
                 mask=mask, other=0.0).to(tl.float32)
    tl.store(out_ptr + bh * N + rows, tl.sum(o * do, axis=1), mask=rows < N)


def attention_delta(o: torch.Tensor, do: torch.Tensor, block_m: int = 16) -> torch.Tensor:
    B, H, N, D = o.shape
    out = torch.empty((B, H, N), device=o.device, dtype=torch.float32)
    delta_kernel[(triton.cdiv(N, block_m), B * H)](o, do, out, N, *o.stride(), *do.stride(), H,
                                                   HEAD_DIM=D, BLOCK_M=block_m)
    return out


@triton.jit
def sliding_window_kernel(Q, K, V, O, N, window, sm_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr):
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    lo = tl.maximum(0, start_m * BLOCK_M - window + 1) // BLOCK_N * BLOCK_N  # first tile the window reaches
    hi = tl.minimum((start_m + 1) * BLOCK_M, N)                              # nothing past the diagonal
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(K + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None], mask=offs_n[None, :] < N, other=0.0)
        v = tl.load(V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < N, other=0.0)
        keep = (offs_n[None, :] <= offs_m[:, None]) & (offs_n[None, :] > offs_m[:, None] - window) \
            & (offs_n[None, :] < N)
        s = tl.where(keep, tl.dot(q, kt) * qk_scale, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)   # a row with no visible key yet in this tile
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    l_i = tl.where(l_i == 0.0, 1.0, l_i)                          # padding rows past N: never stored
    tl.store(O + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty),
             mask=offs_m[:, None] < N)


def sliding_window_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int,
                             block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    B, H, N, D = q.shape
    q_, k_, v_ = (kernel_dtype(t) for t in (q, k, v))  # contiguous; fp32 copies of bf16 in the interpreter only
    o = torch.empty_like(q_)
    sliding_window_kernel[(triton.cdiv(N, block_m), B * H)](q_, k_, v_, o, N, window, 1 / math.sqrt(D),
                                                            HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n)
    return o.to(q.dtype)
