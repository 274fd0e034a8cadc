"""Solutions of notebook 06's exercises: a fused log_softmax and the looped (online) softmax."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter

SUPPORTED = (torch.float32, torch.float16, torch.bfloat16)


def _rows(x: torch.Tensor) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or x.dtype not in SUPPORTED:
        raise TypeError(f"x must be a tensor of one of {SUPPORTED}")
    if x.dim() != 2:
        raise ValueError(f"x must be 2-D, got shape {tuple(x.shape)}")
    return x if x.stride(1) == 1 else x.contiguous()  # any row stride; columns must be adjacent


# ---- Exercise 1: log_softmax ----------------------------------------------------------------------------
@triton.jit
def log_softmax_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)                               # padding: exp(-inf) = 0 adds nothing below
    y = z - tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def log_softmax(x: torch.Tensor) -> torch.Tensor:
    x = _rows(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    block = triton.next_power_of_2(x.shape[1])
    warps = 4 if block <= 4096 else 8 if block <= 8192 else 16
    log_softmax_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1], BLOCK_SIZE=block, num_warps=warps)
    return out


# ---- Exercise 2: the looped (online) softmax --------------------------------------------------------------
@triton.jit
def softmax_looped_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    row_in = in_ptr + row * in_row_stride
    row_out = out_ptr + row * out_row_stride
    # pass 1: a running max and a running sum per lane, combined at the end
    m = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_in + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # a lane that has only seen padding keeps m = -inf; shift it by 0 to avoid -inf - (-inf) = nan
        shift = tl.where(m_new > -float("inf"), m_new, 0.0)
        s = s * tl.exp(m - shift) + tl.exp(x - shift)       # rescale the old sum to the new max
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)     # padding-only lanes: s = 0, exp(-inf) = 0
    # pass 2: normalise
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(row_in + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(row_out + cols, (tl.exp(x - row_max) / row_sum).to(out_ptr.dtype.element_ty), mask=cols < n_cols)


def softmax_looped(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    x = _rows(x)
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    softmax_looped_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1], BLOCK_SIZE=block, num_warps=4)
    return out


def looped_bytes(n_rows: int, n_cols: int, elem: int) -> int:
    """Bytes softmax_looped moves: each row read twice and written once (the fused kernel: read once)."""
    return 3 * n_rows * n_cols * elem
