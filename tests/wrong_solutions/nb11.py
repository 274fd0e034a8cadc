"""Wrong answers to notebook 11's exercises: the direct parent only, every .item() call, the sync op counted
too; a missing mask, the mask taken from the gradient, a strided view read flat."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb11 as ex
from solutions import nb11 as sol


# ---- item_calls_in_range ------------------------------------------------------------------------------
def items_direct_parent_only(events, range_name):
    return sum(1 for e in events if e.name == "aten::item" and e.cpu_parent is not None
               and e.cpu_parent.name == range_name)                     # BUG: a nested range hides the call


def items_everywhere(events, range_name):
    return sum(1 for e in events if e.name == "aten::item")             # BUG: the optimizer's calls counted too


def items_and_syncs(events, range_name):
    def inside(event):
        parent = event.cpu_parent
        while parent is not None and parent.name != range_name:
            parent = parent.cpu_parent
        return parent is not None

    syncs = ("aten::item", "aten::_local_scalar_dense")                  # BUG: item's sync op is not a second call
    return sum(1 for e in events if e.name in syncs and inside(e))


# ---- relu_backward ------------------------------------------------------------------------------------
@triton.jit
def relu_backward_no_mask_kernel(grad_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    grad = tl.load(grad_ptr + offsets)                                   # BUG: no mask
    y = tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, tl.where(y > 0, grad, tl.zeros_like(grad)))


@triton.jit
def relu_backward_grad_sign_kernel(grad_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    grad = tl.load(grad_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(grad > 0, grad, tl.zeros_like(grad)), mask=mask)  # BUG: y's sign decides


def _launch(kernel, grad, y, contiguous=True, block=1024):
    if contiguous:
        grad, y = grad.contiguous(), y.contiguous()
    out = torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)
    kernel[(triton.cdiv(out.numel(), block),)](grad, y, out, out.numel(), BLOCK=block)
    return out


WRONG = [
    (ex.ITEM_CALLS, "direct parent only", items_direct_parent_only, ["returned", "expected", "tokenize >"]),
    (ex.ITEM_CALLS, "every .item() call", items_everywhere, ["returned", "expected"]),
    (ex.ITEM_CALLS, "the sync op counted too", items_and_syncs, ["returned", "expected", "_local_scalar_dense"]),
    (ex.RELU_BACKWARD, "missing mask", lambda g, y: _launch(relu_backward_no_mask_kernel, g, y),
     ["wrote outside", "past its end"]),
    (ex.RELU_BACKWARD, "mask from the gradient", lambda g, y: _launch(relu_backward_grad_sign_kernel, g, y),
     ["values wrong", "got 0"]),
    (ex.RELU_BACKWARD, "strided view read flat", lambda g, y: _launch(sol.relu_backward_kernel, g, y, False),
     ["strides (2,)", "values wrong"]),
]
