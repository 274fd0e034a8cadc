"""Solutions of notebook 08's exercises: flip (the planted bug fixed), double_2d_into (output strides),
transpose (the planted bug fixed)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter


# ---- Exercise 1: flip -------------------------------------------------------------------------------------
# Lane 0 of the buggy kernel reads x_ptr + n, one element past the end (a guard zone shows x[n] read and
# x[0] never used): the index must be n - 1 - offs.
@triton.jit
def flip_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + (n - 1 - offs), mask=mask)
    tl.store(out_ptr + offs, x, mask=mask)


def flip(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 1 or not x.is_contiguous():
        raise ValueError("flip needs a contiguous 1-D tensor")
    out = torch.empty_like(x)
    flip_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
    return out


# ---- Exercise 2: double_2d_into, strides on both sides -------------------------------------------------------
@triton.jit
def double_2d_into_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_xr, stride_xc, stride_or, stride_oc,
                          BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask)
    tl.store(out_ptr + rows[:, None] * stride_or + cols[None, :] * stride_oc, 2 * x, mask=mask)


def double_2d_into(x: torch.Tensor, out: torch.Tensor, block=(16, 32)) -> torch.Tensor:
    if x.dim() != 2 or out.shape != x.shape or out.dtype != x.dtype or out.device != x.device:
        raise ValueError("x must be 2-D and out must have x's shape, dtype and device")
    grid = (triton.cdiv(x.shape[0], block[0]), triton.cdiv(x.shape[1], block[1]))
    double_2d_into_kernel[grid](x, out, x.shape[0], x.shape[1], *x.stride(), *out.stride(),
                                BLOCK_R=block[0], BLOCK_C=block[1])
    return out


# ---- Exercise 3: transpose ------------------------------------------------------------------------------------
# The buggy kernel stores element (r, c) at c * n_cols + r: out is n_cols x n_rows, so its rows are n_rows
# long. Square matrices hide it; a breakpoint on a 2 x 3 input shows offsets up to 3 * 2 + 1 = 7 in a
# 6-element output.
@triton.jit
def transpose_kernel(x_ptr, out_ptr, n_rows, n_cols, stride_xr, stride_xc, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask)
    tl.store(out_ptr + cols[None, :] * n_rows + rows[:, None], x, mask=mask)


def transpose(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dim() != 2:
        raise ValueError("transpose needs a 2-D tensor")
    out = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(x.shape[0], block), triton.cdiv(x.shape[1], block))
    transpose_kernel[grid](x, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), BLOCK=block)
    return out
