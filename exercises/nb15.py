"""Notebook 15: the backward's D preprocessing and a sliding-window forward, as Triton kernels."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import kind_sizes, pairwise, tensor_arg

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
HALF = (torch.float16, torch.bfloat16)


# On a GPU every new specialization of a kernel is a compilation (a dtype, a head dim, an int argument that is 1 or a
# multiple of 16): drawn freely, 150 cases made 60. A case draws one of these few configurations instead, with sequence
# lengths of one kind (exercises.kind_sizes), so that the reference compiles about once per configuration.
DELTA_CONFIGS = pairwise(DTYPES, ("contiguous", "strided"), (16, 64), ("ragged", "aligned"))
WINDOW_CONFIGS = pairwise(HALF, (16, 32), ("ragged", "aligned"), ("one", "ragged"))


@st.composite
def _o_and_do(draw) -> Inputs:
    dtype, layout, d, kind = draw(st.sampled_from(DELTA_CONFIGS))
    b, h = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    n = draw(kind_sizes(kind, pick_size(2048, 100), block=64))
    o, about_o = tensor_arg(draw, "o", (b, h, n, d), dtype, (layout,), seed=1)
    do, about_do = tensor_arg(draw, "do", (b, h, n, d), dtype, ("contiguous",), seed=2, scale=4.0)
    return Inputs(lambda: (o(), do()), f"{about_o}, {about_do}")


def _delta(o: torch.Tensor, do: torch.Tensor) -> torch.Tensor:
    return (o.float() * do.float()).sum(-1)


@st.composite
def _qkv_window(draw) -> Inputs:
    dtype, d, kind, window_kind = draw(st.sampled_from(WINDOW_CONFIGS))
    b, h = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    n = draw(kind_sizes(kind, pick_size(1024, 48), block=32))
    window = 1 if window_kind == "one" else draw(kind_sizes("ragged", n + 4, block=32))
    made = [tensor_arg(draw, name, (b, h, n, d), dtype, seed=i) for i, name in enumerate("qkv")]
    about = ", ".join(a for _, a in made) + f", window={window}"
    return Inputs(lambda: (*(m() for m, _ in made), window), about)


def _sliding_window(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int) -> torch.Tensor:
    if window < 1:
        raise ValueError(f"window must be >= 1, got {window}")
    n = q.shape[-2]
    i, j = torch.arange(n, device=q.device)[:, None], torch.arange(n, device=q.device)[None, :]
    visible = (j <= i) & (j > i - window)
    s = (q.float() @ k.float().transpose(-2, -1)) / q.shape[-1] ** 0.5
    return (torch.softmax(s.masked_fill(~visible, float("-inf")), -1) @ v.float()).to(q.dtype)


DELTA = Exercise("15.1 attention_delta",
                 "attention_delta(o, do): D = rowsum(do * o) over the head dim, (B, H, N) in float32, for (B, H, N, d) "
                 "o and do of any dtype (fp32/fp16/bf16), o possibly strided, as a Triton kernel",
                 _delta, _o_and_do(), DTYPES, rtol=1e-4, atol=1e-4, examples=(25, 150))
SLIDING_WINDOW = Exercise("15.2 sliding_window_attention",
                          "sliding_window_attention(q, k, v, window): causal attention where query i sees keys "
                          "i - window + 1 .. i, for fp16/bf16 (B, H, N, d) inputs, as a Triton kernel that skips "
                          "the key tiles outside the window",
                          _sliding_window, _qkv_window(), HALF, rtol=2e-2, atol=2e-2, examples=(15, 100))

#: exercise -> its reference solution's name in solutions.nb15 (tests/test_exercises.py reads it)
SOLUTIONS = {"DELTA": "attention_delta", "SLIDING_WINDOW": "sliding_window_attention"}
