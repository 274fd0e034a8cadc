"""Row-wise element-wise kernels of deep dive 05b: one program per row, the row as one block of
``next_power_of_2(n_cols)`` lanes, or walked in chunks of a fixed 1024. Notebook 09 reads their PTX."""

import torch
import triton
import triton.language as tl

import course_utils as cu

SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


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
    block = cu.require_block_size("block", block)
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def _rows(x: torch.Tensor) -> torch.Tensor:
    # no grad (no backward). The kernels read a row with a unit step and reach row * row_stride + col in int32:
    # the span of x must fit, unless x is copied first (a row that is not contiguous: then the copy's offsets count)
    as_is = isinstance(x, torch.Tensor) and x.dim() == 2 and x.stride(1) == 1
    cu.require_tensors(x=x, dtypes=SUPPORTED, ndim=2, differentiable=False, max_span=2**31 - 1 if as_is else None)
    return x if as_is else x.contiguous()


def square_rowblock(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    if x.shape[1] > cu.checks.MAX_BLOCK:
        raise ValueError(f"x: rows of {x.shape[1]:,} elements do not fit in one block (at most "
                         f"{cu.checks.MAX_BLOCK:,}); use square_chunked")
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # row-major, whatever x's row stride
    if out.numel() == 0:
        return out
    block = triton.next_power_of_2(x.shape[1])
    square_rowblock_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1],
                                          BLOCK_SIZE=block, num_warps=rowblock_warps(block))
    return out


def square_chunked(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    x = _rows(x)
    block = cu.require_block_size("block", block)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)  # row-major, whatever x's row stride
    if out.numel() == 0:
        return out
    square_chunked_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1],
                                         BLOCK_SIZE=block, num_warps=4)
    return out


def useful_fraction(n_cols: int, block: int) -> float:
    """Share of the lanes of all the blocks a row needs that hold a real element."""
    n_cols = cu.require_number("n_cols", n_cols, integer=True, low=1)
    block = cu.require_block_size("block", block)
    return n_cols / (triton.cdiv(n_cols, block) * block)
