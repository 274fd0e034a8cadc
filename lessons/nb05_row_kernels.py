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
    return 16 if block >= 4096 else 8 if block >= 2048 else 4


def _rows(x: torch.Tensor) -> torch.Tensor:
    cu.require_tensors(x=x, dtypes=SUPPORTED, ndim=2)
    return x if x.stride(1) == 1 else x.contiguous()


def square_rowblock(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    out = torch.empty_like(x)
    block = triton.next_power_of_2(x.shape[1])
    square_rowblock_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1],
                                          BLOCK_SIZE=block, num_warps=rowblock_warps(block))
    return out


def square_chunked(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    x = _rows(x)
    out = torch.empty_like(x)
    square_chunked_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1],
                                         BLOCK_SIZE=block, num_warps=4)
    return out


def useful_fraction(n_cols: int, block: int) -> float:
    """Share of the lanes of all the blocks a row needs that hold a real element."""
    return n_cols / (triton.cdiv(n_cols, block) * block)
