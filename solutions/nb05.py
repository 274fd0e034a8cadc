"""Solutions of notebook 05's exercises: axpy, add_bias (strides and broadcasting), vector_sum (atomics)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter

SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


def _check(*tensors: torch.Tensor) -> None:
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"expected tensors, got {type(t).__name__}")
        if t.dtype != tensors[0].dtype or t.dtype not in SUPPORTED:
            raise TypeError(f"the tensors must share one dtype of {SUPPORTED}, got {[x.dtype for x in tensors]}")
        if t.device != tensors[0].device:
            raise ValueError("the tensors must be on one device")


# ---- Exercise 1: axpy ---------------------------------------------------------------------------------
@triton.jit
def axpy_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty), mask=mask)


def axpy(alpha: float, x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    _check(x, y)
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(f"x and y must be 1-D of one length, got {tuple(x.shape)} and {tuple(y.shape)}")
    x, y = x.contiguous(), y.contiguous()  # the kernel reads a flat array: copy a strided view first
    out = torch.empty_like(x)
    axpy_kernel[(triton.cdiv(out.numel(), block_size),)](x, y, out, float(alpha), out.numel(), BLOCK_SIZE=block_size)
    return out


# ---- Exercise 2: add_bias, any strides, bias broadcast over the rows ------------------------------------
@triton.jit
def add_bias_kernel(x_ptr, b_ptr, out_ptr, n_rows, n_cols, stride_xr, stride_xc, stride_b,
                    BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # flat index into the output
    mask = offsets < n_rows * n_cols
    row, col = offsets // n_cols, offsets % n_cols
    x = tl.load(x_ptr + row * stride_xr + col * stride_xc, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + col * stride_b, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x + b).to(out_ptr.dtype.element_ty), mask=mask)


def add_bias(x: torch.Tensor, bias: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    _check(x, bias)
    if x.dim() != 2 or bias.dim() != 1 or bias.shape[0] != x.shape[1]:
        raise ValueError(f"need x (rows x cols) and bias (cols,), got {tuple(x.shape)} and {tuple(bias.shape)}")
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # contiguous, whatever x's strides
    if out.numel() == 0:
        return out
    add_bias_kernel[(triton.cdiv(out.numel(), block_size),)](
        x, bias, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), bias.stride(0), BLOCK_SIZE=block_size)
    return out


# ---- Exercise 3: vector_sum, one atomic add per program -------------------------------------------------
@triton.jit
def vector_sum_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)  # sum in fp32
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))  # programs run concurrently: a plain store would race


def vector_sum(x: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    _check(x)
    if x.dim() != 1:
        raise ValueError(f"x must be 1-D, got shape {tuple(x.shape)}")
    x = x.contiguous()
    out = torch.zeros((), dtype=torch.float32, device=x.device)  # the atomics add into it: start at 0
    vector_sum_kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
    return out
