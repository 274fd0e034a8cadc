"""Solutions of notebook 07's exercises: the grouped order in Python, linear (a matmul with a bias and an
activation in its epilogue), split-K."""

from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

import course_utils as cu  # first: on a CPU it switches Triton to its interpreter
from lessons.nb07_matmul import apply_activation, tile_coords


# ---- Exercise 1: the grouped order in plain Python ------------------------------------------------------
def grouped_order(tiles_m: int, tiles_n: int, group_m: int) -> np.ndarray:
    order = np.empty((tiles_m, tiles_n), dtype=np.int64)
    for pid in range(tiles_m * tiles_n):
        group, within = divmod(pid, group_m * tiles_n)
        first = group * group_m
        rows = min(tiles_m - first, group_m)  # the last group may be shorter
        order[first + within % rows, within // rows] = pid
    return order


def _validate(a: torch.Tensor, b: torch.Tensor) -> None:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        raise TypeError("a and b must be tensors")
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need a (M x K) and b (K x N), got {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dtype != b.dtype or a.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"a and b must both be float16 or both bfloat16, got {a.dtype} and {b.dtype}")


def _interpreter_safe(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """The CPU interpreter's tl.dot multiplies bf16 tiles wrongly (triton-lang/triton#11584): widen there only."""
    return [t.float() if cu.INTERPRET and t.dtype == torch.bfloat16 else t for t in tensors]


# ---- Exercise 2: linear = activation(a @ b + bias), fused -------------------------------------------------
@triton.jit
def linear_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_bias,
                  stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    bias = tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)
    acc = apply_activation(acc + bias[None, :], ACTIVATION)  # the epilogue, on the fp32 tile in registers
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def linear(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor, activation: str = "") -> torch.Tensor:
    _validate(a, b)
    if not isinstance(bias, torch.Tensor) or bias.shape != (b.shape[1],) or bias.dtype != a.dtype:
        raise ValueError(f"bias must be a ({b.shape[1]},) tensor of {a.dtype}")
    if activation not in ("", "leaky_relu", "gelu_tanh"):
        raise ValueError(f"activation must be '', 'leaky_relu' or 'gelu_tanh', got {activation!r}")
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    a, b = _interpreter_safe(a, b)
    bm, bn, bk = cu.pick_size((128, 128, 64), (32, 32, 32))
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    linear_kernel[grid](a, b, bias, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), bias.stride(0),
                        c.stride(0), c.stride(1), BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                        ACTIVATION=activation, num_warps=cu.pick_size(8, 4), num_stages=cu.pick_size(3, 1))
    return c


# ---- Exercise 3: split-K -----------------------------------------------------------------------------------
@triton.jit
def split_k_kernel(a_ptr, b_ptr, part_ptr, M, N, K, k_per_split,
                   stride_am, stride_ak, stride_bk, stride_bn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_m = tl.program_id(0) // tl.cdiv(N, BLOCK_N)
    pid_n = tl.program_id(0) % tl.cdiv(N, BLOCK_N)
    split = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    k_end = tl.minimum(K, (split + 1) * k_per_split)  # this chunk is [split * k_per_split, k_end)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, k_per_split, BLOCK_K):
        offs_k = split * k_per_split + k0 + tl.arange(0, BLOCK_K)
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_end), other=0.0)
        b = tl.load(b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=(offs_k[:, None] < k_end) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
    part = part_ptr + split * M * N + offs_m[:, None] * N + offs_n[None, :]  # each split its own partial
    tl.store(part, acc, mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def matmul_split_k(a: torch.Tensor, b: torch.Tensor, splits: int) -> torch.Tensor:
    _validate(a, b)
    if not isinstance(splits, int) or splits < 1:
        raise ValueError(f"splits must be a positive int, got {splits!r}")
    (M, K), N = a.shape, b.shape[1]
    dtype = a.dtype
    bm, bn, bk = cu.pick_size((64, 64, 64), (32, 32, 32))
    k_per_split = triton.cdiv(triton.cdiv(K, splits), bk) * bk  # whole BLOCK_K steps, so chunks never overlap
    parts = torch.zeros((splits, M, N), device=a.device, dtype=torch.float32)
    if M == 0 or N == 0:
        return parts.sum(0).to(dtype)
    a, b = _interpreter_safe(a, b)
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), splits)
    split_k_kernel[grid](a, b, parts, M, N, K, k_per_split, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=4, num_stages=cu.pick_size(4, 1))
    return parts.sum(0).to(dtype)
