"""The persistent softmax of deep dive 06b: a few programs per SM, each looping over many rows (Triton's
fused-softmax tutorial), with the loop's ``num_stages`` as a knob."""

import torch
import triton
import triton.language as tl

import course_utils as cu
from lessons.nb06_softmax import _validate_rows, softmax_num_warps


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


def number_of_sms() -> int:
    """The GPU's SM count; 4 in the interpreter, so that the persistent loop really iterates on a CPU."""
    return torch.cuda.get_device_properties(0).multi_processor_count if torch.cuda.is_available() else 4


def softmax_persistent(x: torch.Tensor, programs_per_sm: int = 8, num_stages: int = 1) -> torch.Tensor:
    x = _validate_rows(x)
    # at least one program (a grid of 0 would return the empty output unwritten), a loop of 1 to 8 stages
    programs_per_sm = cu.require_number("programs_per_sm", programs_per_sm, integer=True, low=1, high=1024)
    num_stages = cu.require_number("num_stages", num_stages, integer=True, low=1, high=8)
    n_rows, n_cols = x.shape
    out = torch.empty((n_rows, n_cols), dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    block = triton.next_power_of_2(n_cols)
    grid = (min(n_rows, programs_per_sm * number_of_sms()),)
    softmax_persistent_kernel[grid](out, x, x.stride(0), out.stride(0), n_rows, n_cols, BLOCK_SIZE=block,
                                    NUM_STAGES=num_stages, num_warps=softmax_num_warps(block))
    return out
