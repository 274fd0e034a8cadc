"""Exported from notebooks/05_triton_vector_add.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import torch
import triton
import triton.language as tl

import course_utils as cu


@triton.jit
def add_kernel_no_mask(x_ptr, y_ptr, out_ptr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)                       # which block is mine
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)                      # no mask: every lane reads
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, x + y)


def add_no_mask(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    # Safe only when the length is an exact multiple of the block: refuse anything else.
    cu.require_tensors(x=x, y=y, ndim=1, same_shape=True, dtypes=(torch.float32, torch.float16, torch.bfloat16),
                       differentiable=False, max_span=None)  # no span limit: the kernel reads the copies below
    block_size = cu.require_block_size("block_size", block_size)
    if x.numel() % block_size != 0:
        raise ValueError(f"add_no_mask needs a length that is a multiple of {block_size}, got {x.numel()}: "
                         "the last block would read and write past the end")
    x, y = x.contiguous(), y.contiguous()             # the kernel reads x[i] at x_ptr + i: no strides
    out = torch.empty_like(x)
    if out.numel() == 0:
        return out
    grid = (x.numel() // block_size,)                 # one program per block
    add_kernel_no_mask[grid](x, y, out, BLOCK_SIZE=block_size)
    return out


import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements                       # False for the lanes past the end
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x + y).to(out_ptr.dtype.element_ty), mask=mask)


import torch
import triton

import course_utils as cu

SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


def _validate(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # tensors of one supported dtype, one shape, on the course's device, at most 2**31 - 1 elements, no grad
    # (the kernel has no backward); any strides: the kernel reads contiguous copies, whose offsets are 0..n-1
    cu.require_tensors(x=x, y=y, dtypes=SUPPORTED, same_shape=True, differentiable=False, max_span=None)
    return x.contiguous(), y.contiguous()            # no copy when already contiguous


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    x, y = _validate(x, y)
    block_size = cu.require_block_size("block_size", block_size)  # a power of two, as tl.arange needs
    out = torch.empty_like(x)
    n = out.numel()
    if n == 0:
        return out
    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out


# The row-wise kernels of deep dive 05b live in their own module; notebook 09 reads them from here too.
from lessons.nb05_row_kernels import rowblock_warps, square_chunked_kernel, square_rowblock_kernel  # noqa: E402,F401
