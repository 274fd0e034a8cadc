"""Exported from notebooks/06_triton_softmax.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import triton
import triton.language as tl


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
    return 4 if block_size <= 4096 else 8 if block_size <= 8192 else 16


import triton
import triton.language as tl


@triton.jit
def softmax_persistent_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_rows, n_cols,
                              BLOCK_SIZE: tl.constexpr, NUM_STAGES: tl.constexpr):
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=NUM_STAGES):
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
        x = x - tl.max(x, axis=0)
        numerator = tl.exp(x)
        y = numerator / tl.sum(numerator, axis=0)
        tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# Solution (try it yourself first, then compare)
import triton
import triton.language as tl


@triton.jit
def log_softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    y = z - tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


# Solution (try it yourself first, then compare)
import triton
import triton.language as tl


@triton.jit
def softmax_looped_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_in = in_ptr + row * in_row_stride
    row_out = out_ptr + row * out_row_stride
    # pass 1: running max and running sum, one slot per lane (combined at the end)
    m = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_in + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a lane that has only seen padding keeps m = -inf; shift it by 0 to avoid -inf - (-inf) = nan
        shift = tl.where(m_new > -float("inf"), m_new, 0.0)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)     # padding-only lanes: s = 0, exp(-inf) = 0
    # pass 2: normalise
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_in + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        y = tl.exp(x - row_max) / row_sum
        tl.store(row_out + cols, y.to(out_ptr.dtype.element_ty), mask=cols < n_cols)
