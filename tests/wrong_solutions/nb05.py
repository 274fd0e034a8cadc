"""Wrong answers to notebook 05's exercises: missing masks, a round-down grid, ignored strides, a race,
fp16 accumulation."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb05 as ex
from solutions import nb05 as sol


# ---- axpy ----------------------------------------------------------------------------------------------
@triton.jit
def axpy_no_mask_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets).to(tl.float32)                  # BUG: no mask
    y = tl.load(y_ptr + offsets).to(tl.float32)
    tl.store(out_ptr + offsets, (alpha * x + y).to(out_ptr.dtype.element_ty))


def axpy_no_mask(alpha, x, y, block_size=1024):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), block_size),)
    axpy_no_mask_kernel[grid](x, y, out, float(alpha), x.numel(), BLOCK_SIZE=block_size)
    return out


def axpy_round_down_grid(alpha, x, y, block_size=1024):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    grid = (max(1, x.numel() // block_size),)                     # BUG: rounds down, the tail is never computed
    sol.axpy_kernel[grid](x, y, out, float(alpha), x.numel(), BLOCK_SIZE=block_size)
    return out


def axpy_ignores_strides(alpha, x, y, block_size=1024):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)   # BUG: no .contiguous(): a strided view is read flat
    sol.axpy_kernel[(triton.cdiv(x.numel(), block_size),)](x, y, out, float(alpha), x.numel(), BLOCK_SIZE=block_size)
    return out


# ---- add_bias ------------------------------------------------------------------------------------------
def add_bias_row_stride_is_width(x, bias, block_size=1024):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    sol.add_bias_kernel[(triton.cdiv(out.numel(), block_size),)](    # BUG: assumes rows are x.shape[1] apart
        x, bias, out, x.shape[0], x.shape[1], x.shape[1], x.stride(1), bias.stride(0), BLOCK_SIZE=block_size)
    return out


@triton.jit
def add_bias_flat_bias_kernel(x_ptr, b_ptr, out_ptr, n_rows, n_cols, stride_xr, stride_xc, stride_b,
                              BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_rows * n_cols
    row, col = offsets // n_cols, offsets % n_cols
    x = tl.load(x_ptr + row * stride_xr + col * stride_xc, mask=mask).to(tl.float32)
    b = tl.load(b_ptr + offsets * stride_b, mask=mask).to(tl.float32)   # BUG: the flat index, not the column
    tl.store(out_ptr + offsets, (x + b).to(out_ptr.dtype.element_ty), mask=mask)


def add_bias_flat_bias(x, bias, block_size=1024):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    add_bias_flat_bias_kernel[(triton.cdiv(out.numel(), block_size),)](
        x, bias, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), bias.stride(0), BLOCK_SIZE=block_size)
    return out


@triton.jit
def add_bias_no_mask_kernel(x_ptr, b_ptr, out_ptr, n_rows, n_cols, stride_xr, stride_xc, stride_b,
                            BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    row, col = offsets // n_cols, offsets % n_cols                      # BUG: no mask on the last block
    x = tl.load(x_ptr + row * stride_xr + col * stride_xc).to(tl.float32)
    b = tl.load(b_ptr + col * stride_b).to(tl.float32)
    tl.store(out_ptr + offsets, (x + b).to(out_ptr.dtype.element_ty))


def add_bias_no_mask(x, bias, block_size=1024):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    add_bias_no_mask_kernel[(triton.cdiv(out.numel(), block_size),)](
        x, bias, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), bias.stride(0), BLOCK_SIZE=block_size)
    return out


# ---- vector_sum ----------------------------------------------------------------------------------------
@triton.jit
def sum_store_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
    tl.store(out_ptr, tl.sum(x, axis=0))                                 # BUG: a race, the last program wins


@triton.jit
def sum_fp16_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0)  # BUG: sums in the input's dtype
    tl.atomic_add(out_ptr, tl.sum(x, axis=0).to(tl.float32))


@triton.jit
def sum_no_mask_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets).to(tl.float32)                         # BUG: the last block reads past the end
    tl.atomic_add(out_ptr, tl.sum(x, axis=0))


def _sum_with(kernel):
    def vector_sum(x, block_size=1024):
        x = x.contiguous()
        out = torch.zeros((), dtype=torch.float32, device=x.device)
        kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
        return out
    return vector_sum


WRONG = [
    (ex.AXPY, "missing mask", axpy_no_mask, ["wrote outside", "past its end"]),
    (ex.AXPY, "round-down grid", axpy_round_down_grid, ["values wrong, the first at index"]),
    (ex.AXPY, "strided view read flat", axpy_ignores_strides, ["strides (2,)", "values wrong"]),
    (ex.ADD_BIAS, "row stride taken as the width", add_bias_row_stride_is_width, ["strides", "values wrong"]),
    (ex.ADD_BIAS, "bias indexed by the flat offset", add_bias_flat_bias, ["read outside the input bias"]),
    (ex.ADD_BIAS, "missing mask", add_bias_no_mask, ["wrote outside", "past its end"]),
    (ex.VECTOR_SUM, "plain store: a race", _sum_with(sum_store_kernel), ["x: float", "a race in sum_store_kernel"]),
    (ex.VECTOR_SUM, "fp16 accumulation", _sum_with(sum_fp16_kernel), ["float16", "expected"]),
    (ex.VECTOR_SUM, "missing mask", _sum_with(sum_no_mask_kernel),
     ["read outside the input x", "a load outside an input"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def axpy_one_program(alpha, x, y, block_size=1024):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    sol.axpy_kernel[(1,)](x, y, out, float(alpha), x.numel(), BLOCK_SIZE=block_size)   # BUG: one program in all
    return out


@triton.jit
def axpy_input_dtype_kernel(x_ptr, y_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    ax = (alpha * x.to(tl.float32)).to(x.dtype)                  # BUG: the product rounded to fp16: inf for
    tl.store(out_ptr + offsets, (ax.to(tl.float32) + y.to(tl.float32)).to(x.dtype), mask=mask)  # 2.5 * 30000


def axpy_input_dtype(alpha, x, y, block_size=1024):
    x, y = x.contiguous(), y.contiguous()
    out = torch.empty_like(x)
    axpy_input_dtype_kernel[(triton.cdiv(x.numel(), block_size),)](x, y, out, float(alpha), x.numel(),
                                                                    BLOCK_SIZE=block_size)
    return out


def axpy_into_y(alpha, x, y, block_size=1024):
    x, y = x.contiguous(), y.contiguous()                                 # BUG: writes into y (when contiguous)
    sol.axpy_kernel[(triton.cdiv(x.numel(), block_size),)](x, y, y, float(alpha), x.numel(), BLOCK_SIZE=block_size)
    return y


def add_bias_one_row_of_programs(x, bias, block_size=1024):
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    sol.add_bias_kernel[(triton.cdiv(x.shape[1], block_size),)](          # BUG: enough programs for one row
        x, bias, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), bias.stride(0), BLOCK_SIZE=block_size)
    return out


def add_bias_reuses_x(x, bias, block_size=1024):
    out = x if x.is_contiguous() else torch.empty(x.shape, dtype=x.dtype, device=x.device)  # BUG: x's memory
    if out.numel():
        sol.add_bias_kernel[(triton.cdiv(out.numel(), block_size),)](
            x, bias, out, x.shape[0], x.shape[1], x.stride(0), x.stride(1), bias.stride(0), BLOCK_SIZE=block_size)
    return out


@triton.jit
def sum_load_add_store_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
    total = tl.load(out_ptr)
    tl.store(out_ptr, total + tl.sum(x, axis=0))                          # BUG: read-add-write: lost updates


def vector_sum_into_empty(x, block_size=1024):
    x = x.contiguous()
    out = torch.empty((), dtype=torch.float32, device=x.device)            # BUG: the atomics add to garbage
    sol.vector_sum_kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
    return out


WRONG += [
    (ex.AXPY, "one program in all", axpy_one_program, ["values wrong", "never written"]),
    (ex.AXPY, "the product rounded to the input dtype", axpy_input_dtype, ["values wrong"]),
    (ex.AXPY, "result written into y", axpy_into_y, ["changed its input y"]),
    (ex.ADD_BIAS, "programs for one row only", add_bias_one_row_of_programs, ["values wrong"]),
    (ex.ADD_BIAS, "the result written over x", add_bias_reuses_x, ["changed its input x"]),
    (ex.VECTOR_SUM, "load, add, store: no atomics", _sum_with(sum_load_add_store_kernel),
     ["a race in sum_load_add_store_kernel", "tl.atomic_add"]),
    (ex.VECTOR_SUM, "atomics into torch.empty", vector_sum_into_empty, ["-7776", "torch.zeros"]),
]
