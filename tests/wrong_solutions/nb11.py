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


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def items_root_first(events, range_name):
    root = events[0]                                                    # BUG: no events at all: IndexError
    return sol.item_calls_in_range(events, range_name) if root else 0


def items_three_levels(events, range_name):
    def inside(event):
        parent, depth = event.cpu_parent, 0
        while parent is not None and depth < 3:                         # BUG: ranges deeper than 3 levels missed
            if parent.name == range_name:
                return True
            parent, depth = parent.cpu_parent, depth + 1
        return False

    return sum(1 for e in events if e.name == "aten::item" and inside(e))


@triton.jit
def relu_backward_ge_kernel(grad_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    grad = tl.load(grad_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.where(y >= 0, grad, tl.zeros_like(grad)), mask=mask)   # BUG: y = 0 passes


def relu_backward_into_grad(grad, y, block=1024):
    grad, y = grad.contiguous(), y.contiguous()                         # BUG: the result overwrites grad
    sol.relu_backward_kernel[(triton.cdiv(grad.numel(), block),)](grad, y, grad, grad.numel(), BLOCK=block)
    return grad


WRONG += [
    (ex.ITEM_CALLS, "the first event read without a check", items_root_first, ["0 events", "IndexError"]),
    (ex.ITEM_CALLS, "ancestors up to 3 levels", items_three_levels, ["returned", "expected"]),
    (ex.RELU_BACKWARD, "y >= 0", lambda g, y: _launch(relu_backward_ge_kernel, g, y),
     ["[kinks]", "half of y exactly 0"]),
    (ex.RELU_BACKWARD, "the result written over grad", relu_backward_into_grad, ["its input grad"]),
]
