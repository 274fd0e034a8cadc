"""Notebook 16 (where GPU memory goes in training): predict what one transformer block keeps for backward, and a
saved-tensor hook that moves what autograd saves to the CPU (pinned memory where a GPU exists)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import DEVICE
from course_utils.grading import Exercise, Inputs


# ---- Exercise 1: what one block keeps for backward -----------------------------------------------------------
@st.composite
def _block_inputs(draw) -> Inputs:
    heads = draw(st.sampled_from([1, 2, 4, 8, 12, 16, 32]))
    width = heads * draw(st.integers(1, 256))
    batch, seq, ratio = draw(st.integers(1, 64)), draw(st.integers(1, 8192)), draw(st.integers(1, 8))
    return Inputs(lambda: (batch, seq, width, heads, ratio),
                  f"batch={batch}, seq={seq}, width={width}, heads={heads}, mlp_ratio={ratio}")


def _block_saved_bytes(batch: int, seq: int, width: int, heads: int, mlp_ratio: int) -> int:
    tokens = batch * seq
    # x, ln1(x), the copies of q, k, v and y that the matmuls save; x1 and ln2(x1); fc1's output and GELU's
    # output, mlp_ratio * width each; the softmax's output; each LayerNorm's mean and 1/std per token. fp32.
    return 4 * ((8 + 2 * mlp_ratio) * tokens * width + batch * heads * seq * seq + 4 * tokens)


BLOCK_SAVED = Exercise(
    "16.1 block_saved_bytes", "block_saved_bytes(batch, seq, width, heads, mlp_ratio): the bytes that one fp32 block "
    "of the notebook's model keeps for backward, when its MLP is mlp_ratio * width wide (the notebook's: 4)",
    _block_saved_bytes, _block_inputs(), rtol=0.0, atol=0.0, examples=(100, 200))


# ---- Exercise 2: a saved-tensor hook that offloads to the CPU -------------------------------------------------
_DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int64)


@st.composite
def _tensor_inputs(draw) -> Inputs:
    rows, cols = draw(st.integers(1, 40)), draw(st.integers(1, 40))
    dtype, view = draw(st.sampled_from(_DTYPES)), draw(st.sampled_from(["contiguous", "transposed", "strided"]))
    seed = draw(st.integers(0, 2**16))

    def make() -> tuple:
        g = torch.Generator().manual_seed(seed)
        t = (torch.randn(rows, 2 * cols, generator=g) * 100).to(dtype).to(DEVICE)
        t = {"contiguous": t[:, :cols], "transposed": t[:, :cols].t(), "strided": t[:, ::2]}[view]
        return (t.requires_grad_() if t.is_floating_point() else t,)
    return Inputs(make, f"a {str(dtype).replace('torch.', '')} tensor of shape ({rows}, {cols}) on {DEVICE}, {view}")


def _pack_to_cpu(t: torch.Tensor) -> tuple:
    stored = torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available())
    stored.copy_(t.detach(), non_blocking=True)
    return stored, t.device


def _stored(args: tuple, packed) -> tuple:
    """What is compared: the values kept, where they live, whether pinned, whether they share t's memory, and
    the device they go back to."""
    from course_utils.grading import _what

    if not (isinstance(packed, tuple) and len(packed) == 2 and isinstance(packed[0], torch.Tensor)):
        return (f"{_what(packed)}, not a (copy, device) pair",) + (None,) * 5
    stored, t = packed[0], args[0]
    shares = stored.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    return ("a (copy, device) pair", stored.detach().cpu(), f"stored on {stored.device.type}",
            f"pinned: {stored.is_pinned() if stored.device.type == 'cpu' else False}",
            f"shares memory with t: {shares}", f"goes back to {packed[1]}")


OFFLOAD_PACK = Exercise(
    "16.2 pack_to_cpu", "pack_to_cpu(t): the pack hook of torch.autograd.graph.saved_tensors_hooks that keeps a copy "
    "of t in CPU memory (pinned when CUDA is available, so that the copy back can be asynchronous) and returns "
    "(copy, t.device), for an unpack hook `lambda p: p[0].to(p[1], non_blocking=True)`",
    _pack_to_cpu, _tensor_inputs(), output=_stored, returns=("what you returned", "the values kept", "where", "pinned", "shared", "device"),
    examples=(40, 100))

#: exercise -> its reference solution's name in solutions.nb16 (tests/test_exercises.py reads it)
SOLUTIONS = {"BLOCK_SAVED": "block_saved_bytes", "OFFLOAD_PACK": "pack_to_cpu"}
