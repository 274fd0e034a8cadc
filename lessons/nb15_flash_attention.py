"""Notebook 15's attention: the naive and tiled PyTorch versions, the FlashAttention-2 forward and backward in
Triton (one program per query tile and batch x head, the online softmax of notebook 06, the logsumexp kept for
the backward), the autograd Function that joins them, and the Hopper rung with tensor descriptors (TMA).
Shown by notebooks/15_flash_attention.ipynb with course_utils.export.show.

Layout: q, k, v and the output are (B, H, N, d) and contiguous (the wrapper copies a view once), so a
(batch x head) slice starts at ``bh * N * d`` and row n of it at ``n * d``. Scores are scaled by
``sm_scale * log2(e)`` so that every exponential is an ``exp2`` (the hardware's instruction); the saved
logsumexp is in those base-2 units.
"""

from __future__ import annotations

import math
from pathlib import Path

import torch
import triton
import triton.language as tl

import course_utils as cu
from course_utils.tuning import autotune

SUPPORTED = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
HEAD_DIMS = (16, 32, 64, 128)
LOG2E = 1.4426950408889634  # exp(x) = exp2(x * log2(e))


# ---- 1. Naive attention and the tiled forward in PyTorch ------------------------------------------------------
def _check_reference_inputs(q, k, v, causal=False, sm_scale=None) -> None:
    """The PyTorch versions' checks (any device, any length, any head dim): tensors of one float dtype, 4-D, k and v
    of one shape, q's head dim that of k; causal a bool; sm_scale None or a positive number."""
    cu.require_tensors(q=q, k=k, v=v, dtypes=SUPPORTED, ndim=4, max_numel=None, max_span=None,
                       device=q.device if isinstance(q, torch.Tensor) and q.device.type == "cuda" else "cpu")
    if k.shape != v.shape or q.shape[:2] + q.shape[3:] != k.shape[:2] + k.shape[3:]:
        raise ValueError(f"k and v must have one shape (B, H, N, d) and q the same B, H and d, got "
                         f"{tuple(q.shape)}, {tuple(k.shape)} and {tuple(v.shape)}")
    _require_flag("causal", causal)
    if sm_scale is not None:
        cu.require_number("sm_scale", sm_scale, low=1e-6)


def _require_flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None) -> torch.Tensor:
    """softmax(q k^T * scale) v with the whole N x N score matrix in memory (B, H, N, N)."""
    _check_reference_inputs(q, k, v, causal, sm_scale)
    scale = 1 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if causal:
        n = q.shape[-2]
        above = torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1)  # key after query: hidden
        scores = scores.masked_fill(above, float("-inf"))
    wide = torch.promote_types(q.dtype, torch.float32)                          # fp32 softmax (fp64 stays fp64)
    return torch.softmax(scores.to(wide), dim=-1).to(q.dtype) @ v


# tiled reference
def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    block_m: int = 16, block_n: int = 16) -> torch.Tensor:
    """The FlashAttention forward in PyTorch: one query tile at a time, K/V streamed tile by tile, the online
    softmax (running max m, running sum l, rescaled accumulator acc); never an N x N matrix. Slow: a model."""
    _check_reference_inputs(q, k, v, causal)
    if causal and q.shape != k.shape:
        raise ValueError(f"causal needs q and k of one shape, got {tuple(q.shape)} and {tuple(k.shape)}")
    block_m = cu.require_number("block_m", block_m, integer=True, low=1)
    block_n = cu.require_number("block_n", block_n, integer=True, low=1)
    n, d = q.shape[-2], q.shape[-1]
    scale, wide = 1 / math.sqrt(d), torch.promote_types(q.dtype, torch.float32)  # fp32 on chip (fp64 stays)
    out = torch.empty_like(q)
    for i in range(0, n, block_m):
        qi = q[..., i:i + block_m, :].to(wide)
        rows = torch.arange(i, min(i + block_m, n), device=q.device)
        m = torch.full(qi.shape[:-1], float("-inf"), dtype=wide, device=q.device)  # running max of each row
        l = torch.zeros(qi.shape[:-1], dtype=wide, device=q.device)  # running sum of exp(s - m)
        acc = torch.zeros(qi.shape, dtype=wide, device=q.device)     # running sum of exp(s - m) v
        for j in range(0, (i + block_m) if causal else n, block_n):  # causal: no tile past the diagonal
            s = qi @ k[..., j:j + block_n, :].to(wide).transpose(-2, -1) * scale
            if causal:
                cols = torch.arange(j, min(j + block_n, n), device=q.device)
                s = s.masked_fill(cols[None, :] > rows[:, None], float("-inf"))
            m_new = torch.maximum(m, s.amax(-1))
            alpha = torch.exp(m - m_new)                                 # rescales what was summed so far
            p = torch.exp(s - m_new[..., None])
            l = l * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p @ v[..., j:j + block_n, :].to(wide)
            m = m_new
        out[..., i:i + block_m, :] = (acc / l[..., None]).to(q.dtype)
    return out
# tiled reference:end


# ---- 2. The forward kernel ----------------------------------------------------------------------------------
@triton.jit
def fwd_tiles(acc, l_i, m_i, q, K, V, kv_base, offs_m, lo, hi, N_CTX, qk_scale,
              HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
              PRECISION: tl.constexpr):
    # Streams the key/value tiles lo..hi past one query tile: the online softmax of notebook 06, tile by tile.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        kt_ptrs = K + kv_base + offs_n[None, :] * HEAD_DIM + offs_d[:, None]   # K^T tile: d x BLOCK_N
        v_ptrs = V + kv_base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
        if MASK:  # the tile on the diagonal, or the last one past N: mask it
            kt = tl.load(kt_ptrs, mask=offs_n[None, :] < N_CTX, other=0.0)
            v = tl.load(v_ptrs, mask=offs_n[:, None] < N_CTX, other=0.0)
        else:     # a full tile below the diagonal: no mask at all
            kt = tl.load(kt_ptrs)
            v = tl.load(v_ptrs)
        s = tl.dot(q, kt, input_precision=PRECISION) * qk_scale              # scores, log2 units
        if MASK:
            keep = offs_n[None, :] < N_CTX
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)                                           # rescale the old sums
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=PRECISION)
        m_i = m_new
    return acc, l_i, m_i


def fwd_metadata(grid, kernel, args) -> dict:
    """What Proton attaches to each forward launch: a readable name and the FLOPs (4 B H N^2 d, halved if causal)."""
    n, d, causal = args["N_CTX"], args["HEAD_DIM"], args["CAUSAL"]
    flops = 4 * grid[1] * n * n * d * (0.5 if causal else 1.0)
    q, kind = (args["Q"], "attn_fwd") if "Q" in args else (args["q_desc"].base, "attn_fwd_tma")  # pointers or TMA
    bits = q.element_size() * 8
    return {"name": f"{kind} [BH={grid[1]}, N={n}, d={d}, causal={bool(causal)}]", f"flops{bits}": flops}


@triton.jit(launch_metadata=fwd_metadata, do_not_specialize=["N_CTX"])
def attn_fwd_kernel(Q, K, V, O, LSE, sm_scale, N_CTX, N_KEY, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr, PRECISION: tl.constexpr, FP64: tl.constexpr):
    # Program (i, bh): query rows i*BLOCK_M.. of one (batch, head); O = softmax(Q K^T * scale) V for them.
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    q = tl.load(Q + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], mask=offs_m[:, None] < N_CTX, other=0.0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32  # fp64 only for gradcheck
    m_i = tl.full([BLOCK_M], -float("inf"), ACC)      # running max (on chip, per row)
    l_i = tl.zeros([BLOCK_M], ACC)                    # running sum of exp2(s - m)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], ACC)          # running sum of exp2(s - m) v
    qk_scale = sm_scale * 1.4426950408889634          # log2(e): exp2 instead of exp
    if CAUSAL:  # tiles left of the diagonal unmasked, the diagonal tiles masked, nothing to its right
        diag = start_m * BLOCK_M
        acc, l_i, m_i = fwd_tiles(acc, l_i, m_i, q, K, V, base, offs_m, 0, diag, N_CTX, qk_scale,
                                  HEAD_DIM, BLOCK_N, False, CAUSAL, PRECISION)
        acc, l_i, m_i = fwd_tiles(acc, l_i, m_i, q, K, V, base, offs_m, diag,
                                  tl.minimum(diag + BLOCK_M, N_CTX), N_CTX, qk_scale,
                                  HEAD_DIM, BLOCK_N, True, CAUSAL, PRECISION)
    else:       # every full tile unmasked, the last partial one masked
        full = (N_CTX // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = fwd_tiles(acc, l_i, m_i, q, K, V, base, offs_m, 0, full, N_CTX, qk_scale,
                                  HEAD_DIM, BLOCK_N, False, CAUSAL, PRECISION)
        acc, l_i, m_i = fwd_tiles(acc, l_i, m_i, q, K, V, base, offs_m, full, N_CTX, N_CTX, qk_scale,
                                  HEAD_DIM, BLOCK_N, True, CAUSAL, PRECISION)
    rows = offs_m < N_CTX
    tl.store(LSE + bh * N_CTX + offs_m, m_i + tl.log2(l_i), mask=rows)   # logsumexp, for the backward
    tl.store(O + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :], (acc / l_i[:, None]).to(O.dtype.element_ty),
             mask=rows[:, None])


# ---- 3. The backward kernels ----------------------------------------------------------------------------------
@triton.jit(do_not_specialize=["N_CTX"])
def attn_bwd_preprocess_kernel(O, DO, DELTA, N_CTX, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                               FP64: tl.constexpr):
    # D = rowsum(dO * O): one number per query row, the softmax backward's correction term.
    start_m, bh = tl.program_id(0), tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs = bh * N_CTX * HEAD_DIM + offs_m[:, None] * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :]
    rows = offs_m < N_CTX
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32
    o = tl.load(O + offs, mask=rows[:, None], other=0.0).to(ACC)
    do = tl.load(DO + offs, mask=rows[:, None], other=0.0).to(ACC)
    tl.store(DELTA + bh * N_CTX + offs_m, tl.sum(o * do, axis=1), mask=rows)


@triton.jit
def dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, base, bh, offs_n, lo, hi, N_CTX, qk_scale,
               HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
               PRECISION: tl.constexpr):
    # Streams the query tiles lo..hi past one key tile; recomputes P^T from the saved logsumexp.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        rows = offs_m < N_CTX
        qt_ptrs = Q + base + offs_m[None, :] * HEAD_DIM + offs_d[:, None]     # Q^T tile: d x BLOCK_M
        do_ptrs = DO + base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
        if MASK:
            qt = tl.load(qt_ptrs, mask=rows[None, :], other=0.0)
            do = tl.load(do_ptrs, mask=rows[:, None], other=0.0)
            lse = tl.load(LSE + bh * N_CTX + offs_m, mask=rows, other=0.0)
            delta = tl.load(DELTA + bh * N_CTX + offs_m, mask=rows, other=0.0)
        else:
            qt = tl.load(qt_ptrs)
            do = tl.load(do_ptrs)
            lse = tl.load(LSE + bh * N_CTX + offs_m)
            delta = tl.load(DELTA + bh * N_CTX + offs_m)
        pt = tl.exp2(tl.dot(k, qt, input_precision=PRECISION) * qk_scale - lse[None, :])   # P^T: keys x queries
        if MASK:  # queries past N, and (causal) queries before the key
            keep = rows[None, :]
            if CAUSAL:
                keep = keep & (offs_m[None, :] >= offs_n[:, None])
            pt = tl.where(keep, pt, 0.0)
        dv += tl.dot(pt.to(do.dtype), do, input_precision=PRECISION)                      # dV += P^T dO
        dpt = tl.dot(v, tl.trans(do), input_precision=PRECISION)                          # (dO V^T)^T
        dst = pt * (dpt - delta[None, :])                                                 # dS^T
        dk += tl.dot(dst.to(qt.dtype), tl.trans(qt), input_precision=PRECISION)           # dK += dS^T Q
    return dk, dv


@triton.jit(do_not_specialize=["N_CTX"])
def attn_bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, sm_scale, N_CTX, N_KEY, HEAD_DIM: tl.constexpr,
                         BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                         PRECISION: tl.constexpr, FP64: tl.constexpr):
    # Program (j, bh): key rows j*BLOCK_N.. of one (batch, head); dK and dV for them, no atomics.
    start_n, bh = tl.program_id(0) * BLOCK_N, tl.program_id(1)
    base = bh * N_CTX * HEAD_DIM
    offs_n = start_n + tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, HEAD_DIM)
    kv = base + offs_n[:, None] * HEAD_DIM + offs_d[None, :]
    k = tl.load(K + kv, mask=offs_n[:, None] < N_CTX, other=0.0)
    v = tl.load(V + kv, mask=offs_n[:, None] < N_CTX, other=0.0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32
    dk = tl.zeros([BLOCK_N, HEAD_DIM], ACC)
    dv = tl.zeros([BLOCK_N, HEAD_DIM], ACC)
    qk_scale = sm_scale * 1.4426950408889634
    full = (N_CTX // BLOCK_M) * BLOCK_M
    if CAUSAL:  # queries before start_n see none of these keys: start at the diagonal
        diag_end = tl.minimum(start_n + BLOCK_N, N_CTX)
        dk, dv = dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, base, bh, offs_n, start_n, diag_end, N_CTX,
                            qk_scale, HEAD_DIM, BLOCK_M, True, CAUSAL, PRECISION)
        lo = start_n + BLOCK_N
    else:
        lo = 0
    dk, dv = dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, base, bh, offs_n, lo, full, N_CTX,
                        qk_scale, HEAD_DIM, BLOCK_M, False, CAUSAL, PRECISION)
    dk, dv = dkdv_tiles(dk, dv, k, v, Q, DO, LSE, DELTA, base, bh, offs_n, tl.maximum(lo, full), N_CTX, N_CTX,
                        qk_scale, HEAD_DIM, BLOCK_M, True, CAUSAL, PRECISION)
    keys = offs_n[:, None] < N_CTX
    tl.store(DK + kv, (dk * sm_scale).to(DK.dtype.element_ty), mask=keys)
    tl.store(DV + kv, dv.to(DV.dtype.element_ty), mask=keys)


@triton.jit
def dq_tiles(dq, q, do, lse, delta, K, V, base, offs_m, lo, hi, N_CTX, qk_scale,
             HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
             PRECISION: tl.constexpr):
    # Streams the key/value tiles lo..hi past one query tile, as the forward does.
    offs_d = tl.arange(0, HEAD_DIM)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        t_ptrs = base + offs_n[None, :] * HEAD_DIM + offs_d[:, None]          # K^T and V^T tiles: d x BLOCK_N
        if MASK:
            kt = tl.load(K + t_ptrs, mask=offs_n[None, :] < N_CTX, other=0.0)
            vt = tl.load(V + t_ptrs, mask=offs_n[None, :] < N_CTX, other=0.0)
        else:
            kt = tl.load(K + t_ptrs)
            vt = tl.load(V + t_ptrs)
        p = tl.exp2(tl.dot(q, kt, input_precision=PRECISION) * qk_scale - lse[:, None])
        if MASK:
            keep = offs_n[None, :] < N_CTX
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            p = tl.where(keep, p, 0.0)
        dp = tl.dot(do, vt, input_precision=PRECISION)                                   # dP = dO V^T
        ds = p * (dp - delta[:, None])                                                  # dS = P (dP - D)
        dq += tl.dot(ds.to(kt.dtype), tl.trans(kt), input_precision=PRECISION)          # dQ += dS K
    return dq


@triton.jit(do_not_specialize=["N_CTX"])
def attn_bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, sm_scale, N_CTX, N_KEY, HEAD_DIM: tl.constexpr,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                       PRECISION: tl.constexpr, FP64: tl.constexpr):
    # Program (i, bh): query rows i*BLOCK_M.. of one (batch, head); dQ for them, P recomputed.
    start_m, bh = tl.program_id(0), tl.program_id(1)
    base = bh * N_CTX * HEAD_DIM
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = offs_m < N_CTX
    qo = base + offs_m[:, None] * HEAD_DIM + offs_d[None, :]
    q = tl.load(Q + qo, mask=rows[:, None], other=0.0)
    do = tl.load(DO + qo, mask=rows[:, None], other=0.0)
    lse = tl.load(LSE + bh * N_CTX + offs_m, mask=rows, other=0.0)
    delta = tl.load(DELTA + bh * N_CTX + offs_m, mask=rows, other=0.0)
    ACC: tl.constexpr = tl.float64 if FP64 else tl.float32
    dq = tl.zeros([BLOCK_M, HEAD_DIM], ACC)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        diag = start_m * BLOCK_M
        dq = dq_tiles(dq, q, do, lse, delta, K, V, base, offs_m, 0, diag, N_CTX, qk_scale,
                      HEAD_DIM, BLOCK_N, False, CAUSAL, PRECISION)
        dq = dq_tiles(dq, q, do, lse, delta, K, V, base, offs_m, diag, tl.minimum(diag + BLOCK_M, N_CTX), N_CTX,
                      qk_scale, HEAD_DIM, BLOCK_N, True, CAUSAL, PRECISION)
    else:
        full = (N_CTX // BLOCK_N) * BLOCK_N
        dq = dq_tiles(dq, q, do, lse, delta, K, V, base, offs_m, 0, full, N_CTX, qk_scale,
                      HEAD_DIM, BLOCK_N, False, CAUSAL, PRECISION)
        dq = dq_tiles(dq, q, do, lse, delta, K, V, base, offs_m, full, N_CTX, N_CTX, qk_scale,
                      HEAD_DIM, BLOCK_N, True, CAUSAL, PRECISION)
    tl.store(DQ + qo, (dq * sm_scale).to(DQ.dtype.element_ty), mask=rows[:, None])


# ---- 4. Tuning lists: (BLOCK_M, BLOCK_N, warps, stages) per head dim --------------------------------------------
# autotune configs
# BLOCK_N divides BLOCK_M (fwd, dq) and BLOCK_M divides BLOCK_N (dkdv): the causal diagonal is whole tiles.
GPU_FWD = {64: [(128, 64, 4, 3), (128, 64, 4, 4), (128, 128, 8, 3), (64, 64, 4, 4), (128, 32, 4, 4)],
           128: [(128, 64, 8, 3), (128, 64, 4, 3), (128, 128, 8, 2), (128, 32, 4, 3), (64, 64, 4, 3)]}
GPU_DKDV = {64: [(32, 128, 4, 3), (64, 128, 8, 3), (32, 64, 4, 4), (64, 64, 4, 3)],
            128: [(32, 128, 8, 3), (64, 128, 8, 2), (32, 64, 4, 3), (16, 64, 4, 3)]}
GPU_DQ = {64: [(128, 32, 4, 3), (128, 64, 8, 3), (64, 32, 4, 4), (64, 64, 4, 3)],
          128: [(128, 32, 8, 3), (128, 64, 8, 2), (64, 32, 4, 3), (64, 16, 4, 3)]}
CPU_TILE = {d: [(16, 16, 1, 1)] for d in (64, 128)}  # the interpreter: one small tile, nothing to tune


def tiles_for(table: dict, head_dim: int) -> list:
    """The tiles tuned for head dim 64 serve d 16 and 32 too."""
    cu.require_choice("head_dim", head_dim, HEAD_DIMS)
    _require_table(table)
    return table[128 if head_dim > 64 else 64]


def _require_table(table) -> dict:
    if not isinstance(table, dict) or not table or not all(
            isinstance(tiles, list) and all(isinstance(t, tuple) and len(t) == 4 for t in tiles)
            for tiles in table.values()):
        raise TypeError(f"table must be a dict of head dim -> [(BLOCK_M, BLOCK_N, warps, stages)], got {table!r:.80}")
    return table


def configs(table: dict) -> list[triton.Config]:
    _require_table(table)
    unique = dict.fromkeys(t for tiles in table.values() for t in tiles)
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_warps=w, num_stages=s) for bm, bn, w, s in unique]


def for_head_dim(table: dict):
    """An early prune: keep the configs listed for this head dim, no tile longer than N needs (one for short N)."""
    _require_table(table)
    def prune(configs, named_args, **kwargs):
        args = {**named_args, **kwargs}  # Triton 3.6 passes the arguments given by keyword apart
        wanted = set(tiles_for(table, args["HEAD_DIM"]))
        # the same tiles for every length that shares a key (the TMA kernel's key is N itself)
        cap = args["N_KEY"] if "N_KEY" in args else max(64, triton.next_power_of_2(args["N_CTX"]))
        kept = [c for c in configs if (c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) in wanted
                and max(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]) <= cap] or configs[:1]
        if cap <= SHORT:  # a short sequence is a launch or two: its smallest tile, nothing to time
            return [min(kept, key=lambda c: (c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"], c.num_warps))]
        return kept
    return prune


FWD_TILES = cu.pick_size(GPU_FWD, CPU_TILE)
DKDV_TILES = cu.pick_size(GPU_DKDV, CPU_TILE)
DQ_TILES = cu.pick_size(GPU_DQ, CPU_TILE)
# The key: a bucket of N, not N itself: every new length would tune (and compile) every config again. Up to 128
# (SHORT) one small tile serves; up to 1024 (LONG) N rounded up to a power of two; from LONG on one key, because
# tiles are at most 128 long: a longer sequence means more tiles, not other ones. The kernels also take N_CTX
# unspecialized (do_not_specialize), so a new length compiles nothing new either.
SHORT, LONG = 128, 1024
KEY = ["N_KEY", "HEAD_DIM", "CAUSAL", "FP64"]


def n_key(n: int) -> int:
    """The autotuning key of a sequence length: 128 up to 128, then N rounded up to a power of two, at most 1024."""
    return min(LONG, max(SHORT, triton.next_power_of_2(cu.require_number("n", n, integer=True, low=1))))


# course_utils.tuning.autotune is @triton.autotune(configs=..., key=...) that also runs in the CPU interpreter;
# every kernel writes its outputs without reading them, so timing a config several times is harmless.
attn_fwd = autotune(configs(FWD_TILES), key=KEY,
                    prune_configs_by={"early_config_prune": for_head_dim(FWD_TILES)})(attn_fwd_kernel)
attn_bwd_dkdv = autotune(configs(DKDV_TILES), key=KEY,
                         prune_configs_by={"early_config_prune": for_head_dim(DKDV_TILES)})(attn_bwd_dkdv_kernel)
attn_bwd_dq = autotune(configs(DQ_TILES), key=KEY,
                       prune_configs_by={"early_config_prune": for_head_dim(DQ_TILES)})(attn_bwd_dq_kernel)
# autotune configs:end


# ---- 5. Wrappers: validation, the interpreter's bf16 workaround, the autograd Function -----------------------
def validate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
             sm_scale: float | None = None) -> float:
    """Clear errors, naming the argument, before anything is launched; returns the softmax scale."""
    cu.require_tensors(q=q, k=k, v=v, dtypes=SUPPORTED, ndim=4, same_shape=True)  # one dtype, device, shape
    d = q.shape[-1]
    if d not in HEAD_DIMS:
        raise ValueError(f"q's head dim (last dim) must be one of {HEAD_DIMS}, got {d}")
    if q.shape[2] < 1 or q.shape[0] * q.shape[1] < 1:
        raise ValueError(f"q must hold at least one (batch, head) and one position, got shape {tuple(q.shape)}")
    _require_flag("causal", causal)
    if sm_scale is None:
        return 1 / math.sqrt(d)
    return cu.require_number("sm_scale", sm_scale, low=1e-6)


def kernel_dtype(t: torch.Tensor) -> torch.Tensor:
    """The CPU interpreter's tl.dot multiplies bf16 tiles as raw 16-bit integers (a Triton interpreter bug):
    there, and only there, the kernels get fp32 copies (exact for bf16). A GPU never widens."""
    cu.require_tensors(t=t, max_numel=None, max_span=None, device=t.device if isinstance(t, torch.Tensor) else None)
    return t.float() if cu.INTERPRET and t.dtype == torch.bfloat16 else t.contiguous()


def kernel_flags(t: torch.Tensor) -> dict:
    cu.require_tensors(t=t, dtypes=SUPPORTED, max_numel=None, max_span=None,
                       device=t.device if isinstance(t, torch.Tensor) else None)
    ieee = t.dtype in (torch.float32, torch.float64)  # fp32 in full precision, not TF32: the reference is exact
    return {"PRECISION": "ieee" if ieee else "tf32", "FP64": t.dtype == torch.float64}


def attention_forward(q, k, v, causal: bool, sm_scale: float,
                      tma: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, logsumexp) of validated inputs; the logsumexp is fp32 (fp64 for fp64), base 2, (B*H, N). tma=None
    picks the TMA kernel of section 6 on a Hopper GPU for fp16/bf16, the pointer kernel otherwise."""
    sm_scale = validate(q, k, v, causal, sm_scale)
    if uses_tma(q, tma):
        return _tma_forward(q, k, v, causal, sm_scale)
    B, H, N, D = q.shape
    q_, k_, v_ = (kernel_dtype(t) for t in (q, k, v))
    o = torch.empty_like(q_)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float64 if q.dtype == torch.float64 else torch.float32)
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)  # noqa: E731
    attn_fwd[grid](q_, k_, v_, o, lse, sm_scale, N, n_key(N), HEAD_DIM=D, CAUSAL=causal, **kernel_flags(q_))
    return o.to(q.dtype), lse


def attention_backward(do, q, k, v, o, lse, causal: bool, sm_scale: float):
    """(dQ, dK, dV): D = rowsum(dO * O), then dK/dV per key tile and dQ per query tile (two kernels)."""
    sm_scale = validate(q, k, v, causal, sm_scale)
    cu.require_tensors(q=q, o=o, do=do, dtypes=SUPPORTED, same_shape=True)
    B, H, N, _ = q.shape
    cu.require_tensors(lse=lse, dtypes=(torch.float64 if q.dtype == torch.float64 else torch.float32,), ndim=2)
    if lse.shape != (B * H, N) or lse.device != q.device:
        raise ValueError(f"lse must have shape (B*H, N) = {(B * H, N)} on {q.device} (what attention_forward "
                         f"returns), got {tuple(lse.shape)} on {lse.device}")
    B, H, N, D = q.shape
    q_, k_, v_, o_, do_ = (kernel_dtype(t) for t in (q, k, v, o, do))
    delta = torch.empty_like(lse)
    pre_block = 16 if cu.INTERPRET else 128
    attn_bwd_preprocess_kernel[(triton.cdiv(N, pre_block), B * H)](o_, do_, delta, N, HEAD_DIM=D, BLOCK_M=pre_block,
                                                                    FP64=q.dtype == torch.float64)
    dq, dk, dv = torch.empty_like(q_), torch.empty_like(k_), torch.empty_like(v_)
    flags = kernel_flags(q_)
    attn_bwd_dkdv[lambda meta: (triton.cdiv(N, meta["BLOCK_N"]), B * H)](
        q_, k_, v_, do_, lse, delta, dk, dv, sm_scale, N, n_key(N), HEAD_DIM=D, CAUSAL=causal, **flags)
    attn_bwd_dq[lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)](
        q_, k_, v_, do_, lse, delta, dq, sm_scale, N, n_key(N), HEAD_DIM=D, CAUSAL=causal, **flags)
    return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype)


class FlashAttention(torch.autograd.Function):
    """The forward saves O and the logsumexp (N numbers per head, not N x N); the backward recomputes P."""

    @staticmethod
    def forward(ctx, q, k, v, causal, sm_scale, tma):
        o, lse = attention_forward(q, k, v, causal, sm_scale, tma)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.causal, ctx.sm_scale = causal, sm_scale
        return o

    @staticmethod
    def backward(ctx, do):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = attention_backward(do, q, k, v, o, lse, ctx.causal, ctx.sm_scale)
        return dq, dk, dv, None, None, None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, *, tma: bool | None = None) -> torch.Tensor:
    """softmax(q k^T * sm_scale) v for (B, H, N, d) tensors (d in 16/32/64/128; fp16, bf16, fp32, fp64), with a
    backward; causal hides keys after each query. sm_scale defaults to 1/sqrt(d). The forward runs the TMA
    kernel (section 6) when tma=True, the pointer kernel when False; None: TMA on a Hopper GPU for fp16/bf16."""
    scale = validate(q, k, v, causal, sm_scale)
    uses_tma(q, tma)  # a bad tma fails here, before autograd records anything
    return FlashAttention.apply(q, k, v, causal, scale, tma)


# ---- 6. Hopper: tensor descriptors (TMA) and warp specialization --------------------------------------------
# rung tma
@triton.jit
def fwd_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, offs_m, lo, hi, N_CTX, qk_scale,
                  HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, MASK: tl.constexpr, CAUSAL: tl.constexpr,
                  WARP_SPECIALIZE: tl.constexpr):
    # As fwd_tiles, but the TMA engine copies each K/V tile (zeros past N); with WARP_SPECIALIZE a few warps
    # issue the copies while the others multiply. The scale is applied inside the exponent's argument:
    # s * scale - m is one fused multiply-add per score instead of a multiply and a subtraction.
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPECIALIZE):
        k = k_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        v = v_desc.load([bh, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        s = tl.dot(q, k.T)                                                     # raw scores
        if MASK:
            offs_n = start_n + tl.arange(0, BLOCK_N)
            keep = offs_n[None, :] < N_CTX
            if CAUSAL:
                keep = keep & (offs_m[:, None] >= offs_n[None, :])
            s = tl.where(keep, s, -float("inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)                      # log2 units, as before
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s * qk_scale - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit(launch_metadata=fwd_metadata)
def attn_fwd_tma_kernel(q_desc, k_desc, v_desc, o_desc, LSE, sm_scale, N_CTX, HEAD_DIM: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
                        WARP_SPECIALIZE: tl.constexpr):
    # The descriptors see q, k, v, o as (B*H, N, d): a tile never crosses into the next head. Causal: the last
    # query tiles (the most key tiles) start first, so the short ones fill the last wave instead of the long ones.
    start_m, bh = tl.program_id(0), tl.program_id(1)
    if CAUSAL:
        start_m = tl.num_programs(0) - 1 - start_m
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = q_desc.load([bh, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)
    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    qk_scale = sm_scale * 1.4426950408889634
    if CAUSAL:
        diag = start_m * BLOCK_M
        acc, l_i, m_i = fwd_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, offs_m, 0, diag, N_CTX, qk_scale,
                                      HEAD_DIM, BLOCK_N, False, CAUSAL, WARP_SPECIALIZE)
        acc, l_i, m_i = fwd_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, offs_m, diag,
                                      tl.minimum(diag + BLOCK_M, N_CTX), N_CTX, qk_scale,
                                      HEAD_DIM, BLOCK_N, True, CAUSAL, WARP_SPECIALIZE)
    else:
        full = (N_CTX // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = fwd_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, offs_m, 0, full, N_CTX, qk_scale,
                                      HEAD_DIM, BLOCK_N, False, CAUSAL, WARP_SPECIALIZE)
        acc, l_i, m_i = fwd_tiles_tma(acc, l_i, m_i, q, k_desc, v_desc, bh, offs_m, full, N_CTX, N_CTX, qk_scale,
                                      HEAD_DIM, BLOCK_N, True, CAUSAL, WARP_SPECIALIZE)
    tl.store(LSE + bh * N_CTX + offs_m, m_i + tl.log2(l_i), mask=offs_m < N_CTX)
    o = (acc / l_i[:, None]).to(o_desc.dtype).reshape(1, BLOCK_M, HEAD_DIM)
    o_desc.store([bh, start_m * BLOCK_M, 0], o)                     # rows past N are clipped by the TMA engine
# rung tma:end


def set_block_shapes(nargs: dict) -> None:
    """Config pre_hook: the descriptors' tile shapes follow the config being run."""
    d = nargs["HEAD_DIM"]
    nargs["q_desc"].block_shape = nargs["o_desc"].block_shape = [1, nargs["BLOCK_M"], d]
    nargs["k_desc"].block_shape = nargs["v_desc"].block_shape = [1, nargs["BLOCK_N"], d]


def tma_configs(table: dict) -> list[triton.Config]:
    return [triton.Config(c.kwargs, num_warps=c.num_warps, num_stages=c.num_stages, pre_hook=set_block_shapes)
            for c in configs(table)]


def tma_prune(configs, named_args, **kwargs):
    """The head dim's tiles; warp-specialized, 8 warps only (with 4, Triton's sm_90 pipeline fails to compile)."""
    kept = for_head_dim(FWD_TILES)(configs, named_args, **kwargs)
    if {**named_args, **kwargs}.get("WARP_SPECIALIZE") and not cu.INTERPRET:
        kept = [c for c in kept if c.num_warps == 8] or [triton.Config(kept[0].kwargs, num_warps=8, num_stages=2,
                                                                       pre_hook=set_block_shapes)]
    return kept


attn_fwd_tma = autotune(tma_configs(FWD_TILES), key=["N_CTX", "HEAD_DIM", "CAUSAL", "WARP_SPECIALIZE"],
                        prune_configs_by={"early_config_prune": tma_prune})(attn_fwd_tma_kernel)
HAS_TMA = cu.INTERPRET or (cu.HAS_CUDA and torch.cuda.get_device_capability()[0] >= 9)


TMA_DTYPES = (torch.float16, torch.bfloat16)


def uses_tma(q: torch.Tensor, tma: bool | None) -> bool:
    """Whether the forward runs the TMA kernel: tma=True asks for it (fp16/bf16, Hopper or the interpreter),
    False refuses it, None picks it where it is the faster kernel, fp16/bf16 on a Hopper GPU."""
    if tma is None:
        return cu.HAS_CUDA and HAS_TMA and q.is_cuda and q.dtype in TMA_DTYPES
    if _require_flag("tma", tma) and (not HAS_TMA or q.dtype not in TMA_DTYPES):
        raise ValueError(f"tma=True needs fp16 or bf16 inputs on a Hopper GPU (sm_90) or the interpreter, got "
                         f"{q.dtype} on {q.device}" + ("" if HAS_TMA else ", and this machine has no TMA"))
    return tma


def _tma_forward(q, k, v, causal: bool, sm_scale: float,
                warp_specialize: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(O, logsumexp) from the TMA kernel, the same two outputs as the pointer kernel's (the backward is shared)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    B, H, N, D = q.shape
    # a descriptor's base must be 16-byte aligned: a view that starts mid-allocation gets its own copy
    q_, k_, v_ = (t if t.data_ptr() % 16 == 0 else t.clone()
                  for t in (kernel_dtype(t).reshape(B * H, N, D) for t in (q, k, v)))
    o = torch.empty_like(q_)
    lse = torch.empty((B * H, N), device=q.device, dtype=torch.float32)
    descs = [TensorDescriptor.from_tensor(t, [1, 16, D]) for t in (q_, k_, v_, o)]  # pre_hook sets the tiles
    grid = lambda meta: (triton.cdiv(N, meta["BLOCK_M"]), B * H)  # noqa: E731
    attn_fwd_tma[grid](*descs, lse, sm_scale, N, HEAD_DIM=D, CAUSAL=causal, WARP_SPECIALIZE=warp_specialize)
    return o.reshape(B, H, N, D).to(q.dtype), lse


def flash_attention_tma(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        warp_specialize: bool = False) -> torch.Tensor:
    """The forward only (no autograd), K/V tiles fetched by TMA; fp16/bf16, d 16-128; Hopper (or the interpreter)."""
    scale = validate(q, k, v, causal)
    cu.require_tensors(q=q, k=k, v=v, dtypes=TMA_DTYPES, ndim=4, differentiable=False)
    _require_flag("warp_specialize", warp_specialize)
    if not HAS_TMA:
        raise RuntimeError("tensor descriptors (TMA) need a Hopper GPU (sm_90) or the interpreter")
    return _tma_forward(q, k, v, causal, scale, warp_specialize)[0]


# ---- 7. Measuring: FLOPs, the SDPA backends, Proton's profile read without hatchet --------------------------
def attention_flops(B: int, H: int, N: int, d: int, causal: bool, backward: bool = False) -> float:
    """Forward: 4 B H N^2 d (two matmuls of 2 N^2 d each), halved when causal; the backward is 2.5x the forward
    (five matmuls instead of two), so forward + backward is 3.5x."""
    B, H, N, d = (cu.require_number(name, n, integer=True, low=0) for name, n in zip("BHNd", (B, H, N, d)))
    _require_flag("causal", causal)
    _require_flag("backward", backward)
    forward = 4 * B * H * N * N * d * (0.5 if causal else 1.0)
    return forward * (3.5 if backward else 1.0)


def proton_kernels(path) -> "list[dict]":
    """The kernels of a Proton profile (.hatchet, JSON) with their scope path, calls, time and FLOP/s: what
    proton-viewer prints, without its llnl-hatchet dependency (which needs pandas < 3)."""
    import json

    rows = []

    def walk(node, scopes):
        name = node.get("frame", {}).get("name", "?")
        children = node.get("children", [])
        metrics = node.get("metrics", {})
        if not children and "time (ns)" in metrics:
            flops = sum(v for k, v in metrics.items() if k.startswith("flops"))
            ns = metrics["time (ns)"]
            rows.append({"scope": "/".join(scopes), "kernel": name, "calls": metrics.get("count", 0),
                         "time_ms": ns / 1e6, "tflops": flops / ns / 1e3 if flops and ns else None})
        for child in children:
            walk(child, scopes + ([name] if children and name != "ROOT" else []))

    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path to a Proton profile, got {type(path).__name__}")
    try:
        tree = json.loads(Path(path).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not a Proton profile (.hatchet JSON): {err}") from None
    if isinstance(tree, list):
        tree = tree[0] if tree else None
    if not isinstance(tree, dict) or not isinstance(tree.get("children", []), list):
        raise ValueError(f"{path} is not a Proton profile: it holds no tree of frames (a dict, or a list of one)")
    walk(tree, [])
    return rows


BACKENDS = ("FLASH_ATTENTION", "CUDNN_ATTENTION", "EFFICIENT_ATTENTION", "MATH")


def sdpa(backend: str | None = None):
    """F.scaled_dot_product_attention, pinned to one of its backends (`BACKENDS`), or PyTorch's own choice."""
    cu.require_choice("backend", backend, (None, *BACKENDS))
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def run(q, k, v, causal=False):
        if backend is None:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        with sdpa_kernel(getattr(SDPBackend, backend)):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return run


def step(fn, q, k, v, causal: bool, backward: bool):
    """A call of no arguments to time: fn's forward, or forward + backward with a fixed dO."""
    if not callable(fn):
        raise TypeError(f"fn must be callable (an attention function), got {type(fn).__name__}")
    cu.require_tensors(q=q, k=k, v=v, dtypes=SUPPORTED, ndim=4, max_numel=None, max_span=None,
                       device=q.device if isinstance(q, torch.Tensor) else None)
    _require_flag("causal", causal)
    _require_flag("backward", backward)
    if not backward:
        return lambda: fn(q, k, v, causal)
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    do = torch.randn_like(q)

    def run():
        q.grad = k.grad = v.grad = None
        fn(q, k, v, causal).backward(do)
    return run


def runs(call) -> bool:
    """Whether a backend accepts these inputs here (SDPA raises when a pinned backend cannot run them)."""
    if not callable(call):
        raise TypeError(f"call must be callable, got {type(call).__name__}")
    try:
        call()
        return True
    except (RuntimeError, NotImplementedError):
        return False


def naive_bytes(B: int, H: int, N: int, dtype: torch.dtype) -> int:
    """The naive version's N x N matrices: the scores in the input dtype and the softmax in fp32, at least."""
    B, H, N = (cu.require_number(name, n, integer=True, low=0) for name, n in zip("BHN", (B, H, N)))
    cu.require_choice("dtype", dtype, SUPPORTED)
    return B * H * N * N * (torch.finfo(dtype).bits // 8 + 4)


def peak_memory_gib(call) -> float:
    """GPU memory that one call allocates at its peak beyond what was allocated before, in GiB."""
    if not callable(call):
        raise TypeError(f"call must be callable, got {type(call).__name__}")
    if not torch.cuda.is_available():
        raise ValueError("peak_memory_gib needs a CUDA GPU (it reads the CUDA caching allocator)")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**30
