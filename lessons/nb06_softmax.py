"""Exported from notebooks/06_triton_softmax.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import triton
import triton.language as tl

import course_utils as cu


@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)                                   # one program per row
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)                                # stable: every exponent <= 0
    numerator = tl.exp(x)
    y = numerator / tl.sum(numerator, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax_num_warps(block_size: int) -> int:
    block_size = cu.require_block_size("block_size", block_size)
    return 4 if block_size <= 4096 else 8 if block_size <= 8192 else 16


import torch
import triton

import course_utils as cu

MAX_FUSED_COLS = 32768
SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


def _validate_rows(x: torch.Tensor, max_cols: int | None = MAX_FUSED_COLS) -> torch.Tensor:
    # a tensor, of a supported dtype, 2-D (softmax over the last dim), on the course's device, < 2**31 elements,
    # not requiring grad (the kernel has no backward). The kernel reaches row * row_stride + col in int32: the
    # span of x must fit, unless x is copied first (a row that is not contiguous: then the copy's offsets count)
    as_is = isinstance(x, torch.Tensor) and x.dim() == 2 and x.stride(1) == 1
    cu.require_tensors(x=x, dtypes=SUPPORTED, ndim=2, differentiable=False, max_span=2**31 - 1 if as_is else None)
    if max_cols is not None and x.shape[1] > max_cols:
        raise ValueError(f"rows of {x.shape[1]} elements do not fit in one block (at most {max_cols}); "
                         "use a looping softmax (exercise 2) for longer rows")
    return x if as_is else x.contiguous()


def softmax(x: torch.Tensor) -> torch.Tensor:
    x = _validate_rows(x)
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    block = triton.next_power_of_2(n_cols)
    softmax_kernel[(n_rows,)](out, x, x.stride(0), out.stride(0), n_cols,
                              BLOCK_SIZE=block, num_warps=softmax_num_warps(block))
    return out
