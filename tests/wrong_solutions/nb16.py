"""Wrong answers to notebook 16's exercises: the softmax's T^2 output forgotten, the MLP's two wide tensors counted
once, the LayerNorm statistics forgotten; the tensor itself kept (no copy), the device dropped, a lossy bf16 copy."""

from __future__ import annotations

import torch

from exercises import nb16 as ex


def saved_no_softmax(batch, seq, width, heads, mlp_ratio):
    tokens = batch * seq
    return 4 * ((8 + 2 * mlp_ratio) * tokens * width + 4 * tokens)          # BUG: no (B, heads, T, T) term


def saved_mlp_once(batch, seq, width, heads, mlp_ratio):
    tokens = batch * seq
    return 4 * ((8 + mlp_ratio) * tokens * width + batch * heads * seq * seq + 4 * tokens)  # BUG: GELU out forgotten


def saved_no_stats(batch, seq, width, heads, mlp_ratio):
    tokens = batch * seq
    return 4 * ((8 + 2 * mlp_ratio) * tokens * width + batch * heads * seq * seq)  # BUG: LayerNorm stats


def pack_same_tensor(t):
    return t, t.device                                                       # BUG: nothing moves, no copy


def pack_no_device(t):
    return (torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available()).copy_(t.detach()),)  # BUG


def pack_bf16(t):
    stored = torch.empty(t.shape, dtype=torch.bfloat16, pin_memory=torch.cuda.is_available())  # BUG: lossy, wrong dtype
    return stored.copy_(t.detach()), t.device


WRONG = [
    (ex.BLOCK_SAVED, "softmax output forgotten", saved_no_softmax, ["returned", "expected"]),
    (ex.BLOCK_SAVED, "MLP's wide tensors counted once", saved_mlp_once, ["returned", "expected"]),
    (ex.BLOCK_SAVED, "LayerNorm statistics forgotten", saved_no_stats, ["returned", "expected"]),
    (ex.OFFLOAD_PACK, "the tensor itself kept", pack_same_tensor, ["a view of its input t", "share memory"]),
    (ex.OFFLOAD_PACK, "device dropped", pack_no_device, ["a tuple of 1, not a (copy, device) pair"]),
    (ex.OFFLOAD_PACK, "lossy bf16 copy", pack_bf16, ["the values kept"]),
]
