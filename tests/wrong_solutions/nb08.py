"""Wrong answers to notebook 08's exercises: the planted bugs left in, a round-down grid, a flip inside each
block only, output or input strides ignored, a transposed grid."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb08 as ex
from solutions import nb08 as sol


# ---- flip -------------------------------------------------------------------------------------------------
@triton.jit
def flip_kernel_buggy(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + (n - offs), mask=mask)          # the planted bug, not fixed
    tl.store(out_ptr + offs, x, mask=mask)


@triton.jit
def flip_in_block_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    src = tl.program_id(0) * BLOCK + (BLOCK - 1 - tl.arange(0, BLOCK))   # BUG: reverses each block in place
    x = tl.load(x_ptr + src, mask=src < n)
    tl.store(out_ptr + offs, x, mask=offs < n)


def _flip(kernel, round_down: bool = False):
    def flip(x, block=1024):
        out = torch.empty_like(x)
        grid = (max(1, x.numel() // block) if round_down else triton.cdiv(x.numel(), block),)  # BUG if round_down
        kernel[grid](x, out, x.numel(), BLOCK=block)
        return out
    return flip


# ---- double_2d_into -----------------------------------------------------------------------------------------
def into_out_strides_ignored(x, out, block=(16, 32)):
    grid = (triton.cdiv(x.shape[0], block[0]), triton.cdiv(x.shape[1], block[1]))
    sol.double_2d_into_kernel[grid](x, out, x.shape[0], x.shape[1], *x.stride(), x.shape[1], 1,   # BUG: out is
                                    BLOCK_R=block[0], BLOCK_C=block[1])                           # taken as contiguous
    return out


def into_x_strides_ignored(x, out, block=(16, 32)):
    grid = (triton.cdiv(x.shape[0], block[0]), triton.cdiv(x.shape[1], block[1]))
    sol.double_2d_into_kernel[grid](x, out, x.shape[0], x.shape[1], x.stride(0), 1, *out.stride(),  # BUG: x's
                                    BLOCK_R=block[0], BLOCK_C=block[1])                             # columns adjacent
    return out


def into_new_tensor(x, out, block=(16, 32)):
    return sol.double_2d_into(x, torch.empty_like(x), block)    # BUG: writes into a new tensor, not into out


# ---- transpose ----------------------------------------------------------------------------------------------
@triton.jit
def transpose_kernel_buggy(x_ptr, out_ptr, n_rows, n_cols, stride_xr, stride_xc, BLOCK: tl.constexpr):
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * stride_xr + cols[None, :] * stride_xc, mask=mask)
    tl.store(out_ptr + cols[None, :] * n_cols + rows[:, None], x, mask=mask)   # the planted bug, not fixed


def _transpose(kernel, grid_swapped: bool = False, contiguous_x: bool = False):
    def transpose(x, block=32):
        out = torch.empty((x.shape[1], x.shape[0]), dtype=x.dtype, device=x.device)
        r, c = triton.cdiv(x.shape[0], block), triton.cdiv(x.shape[1], block)
        strides = (x.shape[1], 1) if contiguous_x else x.stride()             # BUG if contiguous_x
        grid = (c, r) if grid_swapped else (r, c)                               # BUG if grid_swapped
        kernel[grid](x, out, x.shape[0], x.shape[1], *strides, BLOCK=block)
        return out
    return transpose


WRONG = [
    (ex.FLIP, "the planted bug left in", _flip(flip_kernel_buggy),
     ["read outside the input x", "1 active lane(s) past its end"]),
    (ex.FLIP, "round-down grid", _flip(sol.flip_kernel, round_down=True), ["got -7776", "never written"]),
    (ex.FLIP, "flips inside each block", _flip(flip_in_block_kernel), ["values wrong"]),
    (ex.DOUBLE_INTO, "out taken as contiguous", into_out_strides_ignored, ["out: ", "strides", "values wrong"]),
    (ex.DOUBLE_INTO, "x taken as contiguous", into_x_strides_ignored, ["x: ", "strides", "values wrong"]),
    (ex.DOUBLE_INTO, "writes a new tensor", into_new_tensor, ["values wrong"]),
    (ex.TRANSPOSE, "the planted bug left in", _transpose(transpose_kernel_buggy), ["wrote outside", "past its end"]),
    (ex.TRANSPOSE, "grid dimensions swapped", _transpose(sol.transpose_kernel, grid_swapped=True), ["never written"]),
    (ex.TRANSPOSE, "x's strides ignored", _transpose(sol.transpose_kernel, contiguous_x=True),
     ["strides", "values wrong"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
@triton.jit
def flip_into_x_kernel(x_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + (n - 1 - offs), mask=mask)
    tl.store(x_ptr + offs, x, mask=mask)                  # BUG: flipped in place, over values others still read


def flip_in_place(x, block=1024):
    flip_into_x_kernel[(triton.cdiv(x.numel(), block),)](x, x.numel(), BLOCK=block)
    return x


def flip_one_program(x, block=1024):
    out = torch.empty_like(x)
    sol.flip_kernel[(1,)](x, out, x.numel(), BLOCK=block)  # BUG: one program, whatever n
    return out


def into_rows_of_programs_only(x, out, block=(16, 32)):
    grid = (triton.cdiv(x.shape[0], block[0]), 1)          # BUG: no programs along the columns
    sol.double_2d_into_kernel[grid](x, out, x.shape[0], x.shape[1], *x.stride(), *out.stride(),
                                    BLOCK_R=block[0], BLOCK_C=block[1])
    return out


def into_returns_only(x, out, block=(16, 32)):
    return 2 * x                                           # BUG: the result is returned, out never written


def transpose_view(x, block=32):
    return x.t()                                           # BUG: a view of x, not a new contiguous tensor


def transpose_strided_result(x, block=32):
    copy = torch.empty_like(x)                             # BUG: x copied, then returned as a transposed view
    sol.double_2d_into_kernel[(triton.cdiv(x.shape[0], 16), triton.cdiv(x.shape[1], 32))](
        x, copy, x.shape[0], x.shape[1], *x.stride(), *copy.stride(), BLOCK_R=16, BLOCK_C=32)
    return (copy / 2).t()


WRONG += [
    (ex.FLIP, "flipped in place", flip_in_place, ["its input x"]),
    (ex.FLIP, "one program", flip_one_program, ["values wrong"]),
    (ex.DOUBLE_INTO, "programs along the rows only", into_rows_of_programs_only, ["values wrong"]),
    (ex.DOUBLE_INTO, "the result returned, out never written", into_returns_only, ["out was never written"]),
    (ex.TRANSPOSE, "a view of x", transpose_view, ["returned a view of its input x"]),
    (ex.TRANSPOSE, "a transposed view of a copy", transpose_strided_result, ["not contiguous as the task asks"]),
]
