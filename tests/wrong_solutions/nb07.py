"""Wrong answers to notebook 07's exercises: a grouped order that forgets the short last group or walks
rows first, a bias indexed by rows, a missing K mask, the activation before the bias, a missing store
mask, split-K chunks that overlap or drop the tail, and splits racing on one output."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb07 as ex
from solutions import nb07 as sol
from lessons.nb07_matmul import apply_activation, tile_coords


# ---- grouped_order ----------------------------------------------------------------------------------------
def order_full_groups(tiles_m, tiles_n, group_m):
    order = np.full((tiles_m, tiles_n), -1, dtype=np.int64)
    for pid in range(tiles_m * tiles_n):
        group, within = divmod(pid, group_m * tiles_n)
        row, col = group * group_m + within % group_m, within // group_m   # BUG: the last group may be shorter
        if row < tiles_m and col < tiles_n:
            order[row, col] = pid
    return order


def order_rows_first(tiles_m, tiles_n, group_m):
    order = np.empty((tiles_m, tiles_n), dtype=np.int64)
    for pid in range(tiles_m * tiles_n):
        group, within = divmod(pid, group_m * tiles_n)
        first = group * group_m
        rows = min(tiles_m - first, group_m)
        order[first + within // tiles_n, within % tiles_n] = pid           # BUG: row by row inside the group
    return order


def order_row_major(tiles_m, tiles_n, group_m):
    return np.arange(tiles_m * tiles_n).reshape(tiles_m, tiles_n)          # BUG: ignores group_m


# ---- linear -----------------------------------------------------------------------------------------------
@triton.jit
def _linear_variant(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_bias,
                    stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                    ACTIVATION: tl.constexpr, BUG: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, 8)
    if BUG == "one column of tiles":  # the grid covers the rows of tiles only: pid_n is always 0
        pid_m, pid_n = tl.program_id(0), 0
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16 if BUG == "fp16 acc" else tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        kk = k * BLOCK_K + offs_k
        if BUG == "no k mask":   # the ragged last K step reads past the rows of a and b
            a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak, mask=offs_m[:, None] < M,
                        other=0.0)
            b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn, mask=offs_n[None, :] < N,
                        other=0.0)
        else:
            a = tl.load(a_ptr + offs_m[:, None] * stride_am + kk[None, :] * stride_ak,
                        mask=(offs_m[:, None] < M) & (kk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + kk[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                        mask=(kk[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        if BUG == "fp16 acc":    # each step's products in fp32, but summed into an fp16 accumulator
            acc += tl.dot(a, b).to(tl.float16)
        else:
            acc = tl.dot(a, b, acc)
    acc = acc.to(tl.float32)
    if BUG == "bias by row":
        bias = tl.load(bias_ptr + offs_m * stride_bias, mask=offs_m < M, other=0.0).to(tl.float32)
        acc = apply_activation(acc + bias[:, None], ACTIVATION)
    elif BUG == "activation first":
        bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = apply_activation(acc, ACTIVATION) + bias[None, :]
    else:
        bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
        acc = apply_activation(acc + bias[None, :], ACTIVATION)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    if BUG == "no store mask":   # the edge tiles write past the last column/row of c
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty))
    else:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _linear(bug: str):
    def linear(a, b, bias, activation=""):
        (M, K), N = a.shape, b.shape[1]
        c = torch.empty((M, N), device=a.device, dtype=a.dtype)
        bm, bn, bk = cu.pick_size((128, 128, 64), (32, 32, 32))
        tiles = triton.cdiv(M, bm) * (1 if bug == "one column of tiles" else triton.cdiv(N, bn))
        _linear_variant[(tiles,)](
            a, b, bias, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), bias.stride(0),
            c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, ACTIVATION=activation, BUG=bug)
        return c
    return linear


# ---- split-K ----------------------------------------------------------------------------------------------
@triton.jit
def _split_k_variant(a_ptr, b_ptr, out_ptr, M, N, K, k_per_split, stride_am, stride_ak, stride_bk, stride_bn,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BUG: tl.constexpr):
    pid_m = tl.program_id(0) // tl.cdiv(N, BLOCK_N)
    pid_n = tl.program_id(0) % tl.cdiv(N, BLOCK_N)
    split = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    if BUG == "chunks overlap":   # each chunk's last step runs on into the next chunk (masked by K only)
        k_end = K
    else:
        k_end = tl.minimum(K, (split + 1) * k_per_split)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_per_split, BLOCK_K):
        offs_k = split * k_per_split + k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_end), other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < k_end) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    if BUG == "race":             # every split stores its partial into the same output: the last one wins
        out = out_ptr + offs_m[:, None] * N + offs_n[None, :]
    elif BUG == "read add write":  # every split adds into one output with a load and a store: lost updates
        out = out_ptr + offs_m[:, None] * N + offs_n[None, :]
        acc += tl.load(out, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N), other=0.0)
    else:
        out = out_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :]
    tl.store(out, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def _split_k(bug: str):
    def matmul_split_k(a, b, splits):
        (M, K), N = a.shape, b.shape[1]
        bm, bn, bk = cu.pick_size((64, 64, 64), (32, 32, 32))
        if bug == "tail dropped":  # BUG: K // splits rounds down, the last K % splits columns are never summed
            k_per_split = max(bk, (K // splits) // bk * bk)
            K = min(K, splits * k_per_split)
        elif bug == "chunks overlap":  # BUG: chunks of cdiv(K, splits), not whole BLOCK_K steps
            k_per_split = triton.cdiv(K, splits)
        else:
            k_per_split = triton.cdiv(triton.cdiv(K, splits), bk) * bk
        parts = torch.zeros((1 if bug in ("race", "read add write") else splits, M, N), device=a.device,
                            dtype=a.dtype if bug == "fp16 partials" else torch.float32)  # BUG: fp16 partials
        _split_k_variant[(triton.cdiv(M, bm) * triton.cdiv(N, bn), splits)](
            a, b, parts, M, N, K, k_per_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
            BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, BUG=bug)
        return parts.sum(0).to(a.dtype)
    return matmul_split_k


WRONG = [
    (ex.GROUPED_ORDER, "the last group taken as full", order_full_groups, ["values wrong", "got -1"]),
    (ex.GROUPED_ORDER, "rows first inside a group", order_rows_first, ["values wrong"]),
    (ex.GROUPED_ORDER, "group_m ignored", order_row_major, ["group_m=", "values wrong"]),
    (ex.LINEAR, "bias indexed by rows", _linear("bias by row"), ["values wrong"]),
    (ex.LINEAR, "no mask on the K steps", _linear("no k mask"), ["read outside the input a"]),
    (ex.LINEAR, "activation before the bias", _linear("activation first"), ["activation='", "values wrong"]),
    (ex.LINEAR, "no mask on the store", _linear("no store mask"), ["wrote outside", "past its end"]),
    (ex.SPLIT_K, "splits race on one output", _split_k("race"), ["splits=", "a race in _split_k_variant"]),
    (ex.SPLIT_K, "chunks overlap", _split_k("chunks overlap"), ["values wrong"]),
    (ex.SPLIT_K, "the K tail dropped", _split_k("tail dropped"), ["values wrong"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def order_float_array(tiles_m, tiles_n, group_m):
    order = np.zeros((tiles_m, tiles_n))                                    # BUG: float64, not integers
    order[...] = sol.grouped_order(tiles_m, tiles_n, group_m)
    return order


def order_one_row_flat(tiles_m, tiles_n, group_m):
    if tiles_m == 1:
        return np.arange(tiles_n)                                           # BUG: 1-D for a single row of tiles
    return sol.grouped_order(tiles_m, tiles_n, group_m)


WRONG += [
    (ex.GROUPED_ORDER, "a float array", order_float_array, ["float64"]),
    (ex.GROUPED_ORDER, "a 1-D array for one row of tiles", order_one_row_flat, ["tiles_m=1", "shape"]),
    (ex.LINEAR, "an fp16 accumulator", _linear("fp16 acc"), ["[limits]", "got nan"]),
    (ex.LINEAR, "one column of tiles", _linear("one column of tiles"), ["values wrong"]),
    (ex.SPLIT_K, "fp16 partials", _split_k("fp16 partials"), ["[limits]", "got nan"]),
    (ex.SPLIT_K, "splits add into one output without atomics", _split_k("read add write"),
     ["a race in _split_k_variant", "tl.atomic_add"]),
]
