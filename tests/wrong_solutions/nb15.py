"""Wrong answers to notebook 15's exercises: D summed in half precision, over the wrong axis, without the row
mask; a window one key too wide, a window without its causal half, an online softmax that never rescales."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb15 as ex
from lessons.nb15_flash_attention import kernel_dtype


@triton.jit
def delta_wrong_kernel(o_ptr, do_ptr, out_ptr, N, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                       BUG: tl.constexpr):
    start_m, bh = tl.program_id(0), tl.program_id(1)
    rows = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, HEAD_DIM)
    offs = bh * N * HEAD_DIM + rows[:, None] * HEAD_DIM + cols[None, :]
    if BUG == "no mask":                                          # BUG: the last partial block reads and writes past N
        o = tl.load(o_ptr + offs).to(tl.float32)
        do = tl.load(do_ptr + offs).to(tl.float32)
        tl.store(out_ptr + bh * N + rows, tl.sum(o * do, axis=1))
    else:
        o = tl.load(o_ptr + offs, mask=rows[:, None] < N, other=0.0)
        do = tl.load(do_ptr + offs, mask=rows[:, None] < N, other=0.0)
        if BUG == "half sum":                                     # BUG: products and sum in fp16/bf16
            tl.store(out_ptr + bh * N + rows, tl.sum(o * do, axis=1).to(tl.float32), mask=rows < N)
        else:
            tl.store(out_ptr + bh * N + rows, tl.sum(o.to(tl.float32) * do.to(tl.float32), axis=1), mask=rows < N)


def _delta(bug: str):
    def run(o, do, block_m=16):
        B, H, N, D = o.shape
        o_, do_ = o.contiguous(), do.contiguous()
        out = torch.empty((B, H, N), device=o.device, dtype=torch.float32)
        delta_wrong_kernel[(triton.cdiv(N, block_m), B * H)](o_, do_, out, N, HEAD_DIM=D, BLOCK_M=block_m, BUG=bug)
        return out
    return run


def _delta_over_positions(o, do):
    return (o.float() * do.float()).sum(-2)                    # BUG: sums over N, not over the head dim


@triton.jit
def window_wrong_kernel(Q, K, V, O, N, window, sm_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                        BLOCK_N: tl.constexpr, BUG: tl.constexpr):
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < N, other=0.0)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    for start_n in range(0, N, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kt = tl.load(K + base + offs_n[None, :] * HEAD_DIM + offs_d[:, None], mask=offs_n[None, :] < N, other=0.0)
        v = tl.load(V + base + offs_n[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_n[:, None] < N, other=0.0)
        i, j = offs_m[:, None], offs_n[None, :]
        if BUG == "one too wide":
            keep = (j <= i) & (j >= i - window)                  # BUG: window + 1 keys
        elif BUG == "no causal half":
            keep = (j <= i + window - 1) & (j > i - window)      # BUG: sees window - 1 keys ahead too
        else:
            keep = (j <= i) & (j > i - window)
        s = tl.where(keep & (j < N), tl.dot(q, kt) * sm_scale * 1.4426950408889634, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == -float("inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        if BUG == "no rescale":
            alpha = tl.where(m_i == -float("inf"), 0.0, 1.0)     # BUG: old sums kept at the old max's scale
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    l_i = tl.where(l_i == 0.0, 1.0, l_i)
    tl.store(O + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty),
             mask=offs_m[:, None] < N)


def _window(bug: str):
    def run(q, k, v, window, block_m=16, block_n=16):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        B, H, N, D = q.shape
        q_, k_, v_ = (kernel_dtype(t) for t in (q, k, v))
        o = torch.empty_like(q_)
        window_wrong_kernel[(triton.cdiv(N, block_m), B * H)](q_, k_, v_, o, N, window, 1 / math.sqrt(D),
                                                              HEAD_DIM=D, BLOCK_M=block_m, BLOCK_N=block_n, BUG=bug)
        return o.to(q.dtype)
    return run


WRONG = [
    (ex.DELTA, "products summed in half precision", _delta("half sum"), ["values wrong"]),
    (ex.DELTA, "summed over the positions", _delta_over_positions, ["shape"]),
    (ex.DELTA, "no row mask", _delta("no mask"), ["outside"]),
    (ex.SLIDING_WINDOW, "window one key too wide", _window("one too wide"), ["values wrong"]),
    (ex.SLIDING_WINDOW, "window without its causal half", _window("no causal half"), ["values wrong"]),
    (ex.SLIDING_WINDOW, "online softmax never rescales", _window("no rescale"), ["values wrong"]),
]
