"""Solutions of notebook 16's exercises (try first)."""

from __future__ import annotations

import torch


def block_saved_bytes(batch, seq, width, heads, mlp_ratio):
    tokens = batch * seq
    attention = 6 * tokens * width + batch * heads * seq * seq   # x, ln1(x), q, k, v copies, y; softmax output
    mlp = 2 * tokens * width + 2 * mlp_ratio * tokens * width   # x1, ln2(x1); fc1 output and GELU output
    layer_norm_stats = 2 * 2 * tokens                            # mean and 1/std per token, two LayerNorms
    return 4 * (attention + mlp + layer_norm_stats)


def pack_to_cpu(t):
    stored = torch.empty(t.shape, dtype=t.dtype, pin_memory=torch.cuda.is_available())
    stored.copy_(t.detach(), non_blocking=True)  # pinned: the GPU copies while the host goes on
    return stored, t.device
