"""Solutions of notebook 11's exercises: counting a range's .item() calls, ReLU's backward in Triton."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter


# ---- Exercise 1: the .item() calls inside a range ---------------------------------------------------------
def item_calls_in_range(events, range_name: str) -> int:
    def inside(event) -> bool:
        parent = event.cpu_parent
        while parent is not None:       # every ancestor, not only the direct parent
            if parent.name == range_name:
                return True
            parent = parent.cpu_parent
        return False

    return sum(1 for e in events if e.name == "aten::item" and inside(e))


# ---- Exercise 2: ReLU's backward pass ---------------------------------------------------------------------
@triton.jit
def relu_backward_kernel(grad_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    grad = tl.load(grad_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(y > 0, grad, tl.zeros_like(grad)), mask=mask)


def relu_backward(grad: torch.Tensor, y: torch.Tensor, block: int = 1024) -> torch.Tensor:
    """Gradient of ReLU: grad where the ReLU's output y is positive, else 0."""
    if not isinstance(grad, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise TypeError("grad and y must be tensors")
    if grad.shape != y.shape or grad.dtype != y.dtype or grad.device != y.device:
        raise ValueError(f"grad and y must match in shape, dtype and device: {grad.shape}/{grad.dtype}/{grad.device} "
                         f"vs {y.shape}/{y.dtype}/{y.device}")
    if grad.numel() >= 2**31:
        raise ValueError("more than 2^31 - 1 elements: the kernel's offsets are 32-bit")
    grad, y = grad.contiguous(), y.contiguous()  # strided views: one copy each, then flat indexing
    out = torch.empty_like(grad)
    if out.numel():
        relu_backward_kernel[(triton.cdiv(out.numel(), block),)](grad, y, out, out.numel(), BLOCK=block)
    return out
