"""Wrong answers to notebook 06's exercises: padding that counts, no max subtraction, a wrong row stride,
a column stride ignored, a running sum never rescaled, -inf - -inf."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb06 as ex
from solutions import nb06 as sol


@triton.jit
def _log_softmax_variant(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr,
                         BUG: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    if BUG == "other=0":      # padding lanes read as 0: they add exp(0 - max) to the sum
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    else:
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf")).to(tl.float32)
    if BUG == "no max":       # exp of large logits overflows
        y = x - tl.log(tl.sum(tl.exp(x), axis=0))
    else:
        z = x - tl.max(x, axis=0)
        y = z - tl.log(tl.sum(tl.exp(z), axis=0))
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def _log_softmax(bug: str):
    def log_softmax(x):
        x = x if x.stride(1) == 1 or bug == "column stride" else x.contiguous()  # BUG: a strided row read flat
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        row_stride = x.shape[1] if bug == "row stride" else x.stride(0)   # BUG (row stride): rows assumed packed
        _log_softmax_variant[(x.shape[0],)](out, x, row_stride, out.stride(0), x.shape[1],
                                            BLOCK_SIZE=triton.next_power_of_2(x.shape[1]), BUG=bug)
        return out
    return log_softmax


@triton.jit
def _looped_variant(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr,
                    BUG: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        if BUG == "other=0":
            x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        else:
            x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        if BUG == "no rescale":       # the old sum was taken against an older, smaller max
            s = s + tl.exp(x - tl.where(m_new > -float("inf"), m_new, 0.0))
        elif BUG == "inf - inf":      # lanes that saw only padding: exp(-inf - (-inf)) = nan
            s = s * tl.exp(m - m_new) + tl.exp(x - m_new)
        else:
            shift = tl.where(m_new > -float("inf"), m_new, 0.0)
            s = s * tl.exp(m - shift) + tl.exp(x - shift)
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(out_ptr + row * out_row_stride + cols, (tl.exp(x - row_max) / row_sum).to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)


def _looped(bug: str):
    def softmax_looped(x, block=1024):
        x = x if x.stride(1) == 1 else x.contiguous()
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        _looped_variant[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1], BLOCK_SIZE=block, BUG=bug)
        return out
    return softmax_looped


WRONG = [
    (ex.LOG_SOFTMAX, "masked lanes read as 0", _log_softmax("other=0"), ["values wrong"]),
    (ex.LOG_SOFTMAX, "no max subtraction", _log_softmax("no max"), ["N(0, 100^2)", "values wrong"]),
    (ex.LOG_SOFTMAX, "row stride taken as the width", _log_softmax("row stride"),
     ["the first columns of a wider matrix"]),
    (ex.LOG_SOFTMAX, "column stride ignored", _log_softmax("column stride"), ["every 2nd element", "values wrong"]),
    (ex.SOFTMAX_LOOPED, "running sum not rescaled", _looped("no rescale"), ["values wrong"]),
    (ex.SOFTMAX_LOOPED, "masked lanes read as 0", _looped("other=0"), ["values wrong"]),
    (ex.SOFTMAX_LOOPED, "-inf - -inf on padding lanes", _looped("inf - inf"), ["got nan"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def log_softmax_in_place(x):
    x = x if x.stride(1) == 1 else x.contiguous()
    sol.log_softmax_kernel[(x.shape[0],)](x, x, x.stride(0), x.stride(0), x.shape[1],   # BUG: out is x
                                          BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return x


@triton.jit
def log_softmax_loop_dtype_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
    z = x - tl.max(x, axis=0)
    total = 0                                       # BUG: an int that the loop makes a float: the interpreter
    for i in range(0, 1):                           # runs it, Triton cannot compile it for a GPU
        total = total + tl.sum(tl.exp(z), axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, (z - tl.log(total)).to(out_ptr.dtype.element_ty),
             mask=cols < n_cols)


def log_softmax_loop_dtype(x):
    x = x if x.stride(1) == 1 else x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    log_softmax_loop_dtype_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1],
                                                 BLOCK_SIZE=triton.next_power_of_2(x.shape[1]))
    return out


@triton.jit
def softmax_unguarded_shift_kernel(out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    m = tl.full([BLOCK_SIZE], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK_SIZE], tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-1e30).to(tl.float32)
        m_new = tl.maximum(m, x)                    # padding is -1e30, finite: but a real -inf in the input
        s = s * tl.exp(m - m_new) + tl.exp(x - m_new)   # BUG: makes exp(-inf - -inf) = NaN
        m = m_new
    row_max = tl.max(m, axis=0)
    row_sum = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(in_ptr + row * in_row_stride + cols, mask=cols < n_cols, other=-1e30).to(tl.float32)
        tl.store(out_ptr + row * out_row_stride + cols, (tl.exp(x - row_max) / row_sum).to(out_ptr.dtype.element_ty),
                 mask=cols < n_cols)


def softmax_unguarded_shift(x, block=1024):
    x = x if x.stride(1) == 1 else x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    softmax_unguarded_shift_kernel[(x.shape[0],)](out, x, x.stride(0), out.stride(0), x.shape[1], BLOCK_SIZE=block)
    return out


def softmax_in_place(x, block=1024):
    x = x if x.stride(1) == 1 else x.contiguous()
    sol.softmax_looped_kernel[(x.shape[0],)](x, x, x.stride(0), x.stride(0), x.shape[1], BLOCK_SIZE=block)  # BUG
    return x


WRONG += [
    (ex.LOG_SOFTMAX, "the result written over x", log_softmax_in_place, ["changed its input x"]),
    (ex.LOG_SOFTMAX, "a loop variable that changes dtype", log_softmax_loop_dtype,
     ["Triton cannot compile log_softmax_loop_dtype_kernel", "sm_80"]),
    (ex.SOFTMAX_LOOPED, "exp(-inf - -inf) on -inf inputs", softmax_unguarded_shift, ["got nan"]),
    (ex.SOFTMAX_LOOPED, "the result written over x", softmax_in_place, ["changed its input x"]),
]
