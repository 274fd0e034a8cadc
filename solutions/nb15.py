"""Solutions of notebook 15's exercises (try first)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter


@triton.jit
def negate_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, -tl.load(x_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(x > 0, x, 0.0).to(x.dtype), mask=mask)


def _launch(kernel, x: torch.Tensor, block_size: int = 1024) -> torch.Tensor:
    x = x.contiguous()  # the kernels read a flat array: copy a strided view first
    out = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block_size),)](x, out, x.numel(), BLOCK_SIZE=block_size)
    return out


def negate(x: torch.Tensor) -> torch.Tensor:
    return _launch(negate_kernel, x)


def relu(x: torch.Tensor) -> torch.Tensor:
    return _launch(relu_kernel, x)
