"""Wrong answers to notebook 15's exercises: a missing mask, a round-down grid, a strided view read flat."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb15 as ex
from solutions import nb15 as sol


@triton.jit
def copy_no_mask_kernel(x_ptr, out_ptr, n_elements, NEGATE: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets)                                  # BUG: no mask
    y = -x if NEGATE else tl.where(x > 0, x, 0.0).to(x.dtype)
    tl.store(out_ptr + offsets, y)


def _no_mask(negate: bool):
    def run(x, block_size=1024):
        x = x.contiguous()
        out = torch.empty_like(x)
        copy_no_mask_kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), NEGATE=negate,
                                                                  BLOCK_SIZE=block_size)
        return out
    return run


def _round_down(kernel):
    def run(x, block_size=1024):
        x = x.contiguous()
        out = torch.empty_like(x)
        kernel[(max(1, x.numel() // block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)  # BUG: drops the tail
        return out
    return run


def _read_flat(kernel):
    def run(x, block_size=1024):
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)   # BUG: no .contiguous(): a view is read flat
        kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
        return out
    return run


WRONG = [
    (ex.NEGATE, "missing mask", _no_mask(True), ["wrote outside", "past its end"]),
    (ex.NEGATE, "round-down grid", _round_down(sol.negate_kernel), ["values wrong, the first at index"]),
    (ex.NEGATE, "strided view read flat", _read_flat(sol.negate_kernel), ["strides (2,)", "values wrong"]),
    (ex.RELU, "missing mask", _no_mask(False), ["wrote outside", "past its end"]),
    (ex.RELU, "round-down grid", _round_down(sol.relu_kernel), ["values wrong, the first at index"]),
    (ex.RELU, "strided view read flat", _read_flat(sol.relu_kernel), ["strides (2,)", "values wrong"]),
]
