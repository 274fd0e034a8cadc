"""Exported from notebooks/05_triton_vector_add.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel_no_mask(x_ptr, y_ptr, out_ptr, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)                       # which block is mine
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)                      # no mask: every lane reads
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, x + y)


def add_no_mask(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    # Safe only when the length is an exact multiple of the block: refuse anything else.
    if x.shape != y.shape or x.dim() != 1:
        raise ValueError(f"x and y must be 1-D tensors of the same length, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.numel() % block_size != 0:
        raise ValueError(f"add_no_mask needs a length that is a multiple of {block_size}, got {x.numel()}: "
                         "the last block would read and write past the end")
    out = torch.empty_like(x)
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
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError(f"x and y must be tensors, got {type(x).__name__} and {type(y).__name__}")
    if x.shape != y.shape:
        raise ValueError(f"x and y must have the same shape, got {tuple(x.shape)} and {tuple(y.shape)}")
    if x.dtype != y.dtype or x.dtype not in SUPPORTED:
        raise TypeError(f"x and y must share one dtype of {SUPPORTED}, got {x.dtype} and {y.dtype}")
    if x.device != y.device or x.device.type != cu.DEVICE.type:
        raise ValueError(f"x and y must both be on {cu.DEVICE}, got {x.device} and {y.device}")
    if x.numel() >= 2**31:
        raise ValueError("this kernel computes offsets in int32: at most 2**31 - 1 elements")
    return x.contiguous(), y.contiguous()            # no copy when already contiguous


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    x, y = _validate(x, y)
    out = torch.empty_like(x)
    n = out.numel()
    grid = (triton.cdiv(n, block_size),)
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out


import triton
import triton.language as tl


@triton.jit
def square_rowblock_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)                            # one program per row, the row is one block
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask)
    tl.store(out_ptr + row * out_row_stride + cols, x * x, mask=mask)


@triton.jit
def square_chunked_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)                            # one program per row, in chunks of BLOCK_SIZE
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask)
        tl.store(out_ptr + row * out_row_stride + cols, x * x, mask=mask)


def rowblock_warps(block: int) -> int:             # the softmax tutorial's heuristic
    return 16 if block >= 4096 else 8 if block >= 2048 else 4
