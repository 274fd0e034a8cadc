"""The exercises at the end of notebooks 03-14, as specifications that `course_utils.grading.grade` checks.

One module per notebook (``exercises.nb05`` ...), one `Exercise` per exercise: what the learner writes,
the reference it must match (plain PyTorch or Python, not the solution), the inputs hypothesis draws and
the tolerances. This module holds the vocabulary of those inputs: `sizes` (1, primes, around a block),
`guarded_tensor` (random values in a view with NaN around it: contiguous, strided, transposed, sliced,
misaligned), `guarded_values` (given values in such a view) and `tensor_arg`. The reference solutions are
in ``solutions/`` (try first); tests/test_exercises.py checks that they pass and that plausible wrong
answers (tests/wrong_solutions/) fail.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
from hypothesis import strategies as st

from course_utils.device import DEVICE
from course_utils.grading import guard

LAYOUTS = ("contiguous", "strided", "transposed", "sliced", "offset")
_WORDS = {"strided": "every 2nd element", "transposed": "a transposed view",
          "sliced": "the first columns of a wider matrix", "offset": "not 16-byte aligned"}
_EDGES = (1, 2, 3, 7, 13, 31, 127, 128, 129, 1000, 1009, 4099)  # primes, around powers of two


def sizes(cap: int, block: int = 1024) -> st.SearchStrategy[int]:
    """Lengths up to ``cap``: 1, primes, non-powers of two, block - 1, block, block + 1, 2 block + 1, or any."""
    edges = sorted({n for n in (*_EDGES, block - 1, block, block + 1, 2 * block + 1) if 1 <= n <= cap})
    return st.one_of(st.sampled_from(edges), st.integers(1, cap))


def guarded_tensor(shape: Sequence[int], dtype: torch.dtype = torch.float32, layout: str = "contiguous", *,
                   seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    """Random normal values (times ``scale``) on `DEVICE`, in a view with NaN before and after it.

    ``layout``: "contiguous"; "strided" (every 2nd element of the last dim); "transposed" (2-D: ``.t()``
    of a contiguous matrix); "sliced" (2-D: the first columns of a wider matrix, so the row stride is not
    the width); "offset" (contiguous, starting one element into its buffer: not 16-byte aligned).
    """
    shape = tuple(int(s) for s in shape)
    if layout not in LAYOUTS or (layout in ("transposed", "sliced") and len(shape) != 2):
        raise ValueError(f"layout must be one of {LAYOUTS} ('transposed', 'sliced': 2-D only), got {layout!r}")
    base_shape = (shape[::-1] if layout == "transposed" else (*shape[:-1], 2 * shape[-1]) if layout == "strided"
                  else (shape[0], shape[1] + 3) if layout == "sliced" else (math.prod(shape) + 1,) if layout == "offset"
                  else shape)
    gen = torch.Generator().manual_seed(seed)
    pad = 4096 + 64 * (max(shape) if len(shape) > 1 else 0)  # a block, or 64 rows of a tile, in any layout
    base = guard((scale * torch.randn(base_shape, generator=gen)).to(dtype=dtype, device=DEVICE), pad=pad)
    view = (base.t() if layout == "transposed" else base[..., ::2] if layout == "strided" else base[:, :shape[1]]
            if layout == "sliced" else base[1:].view(shape) if layout == "offset" else base)
    view._course_guard = base._course_guard  # the grader checks the guards after the learner's call
    return view


def guarded_values(values: torch.Tensor, layout: str = "contiguous") -> torch.Tensor:
    """``values`` (any dtype, on any device) in a view of ``layout`` on `DEVICE`, guarded as in `guarded_tensor`.

    For inputs whose values matter (boxes, pixels, rows of zeros): the same layouts as `guarded_tensor`.
    The elements of the buffer that the view skips ("strided": every other one; "sliced": 3 more columns
    per row) hold other values of ``values``, so that a read that ignores the strides gets wrong numbers,
    not NaN. Floating-point buffers have NaN around them; integer ones (uint8 pixels) 0, as they have no NaN.
    """
    shape = tuple(values.shape)
    if layout not in LAYOUTS or (layout in ("transposed", "sliced") and len(shape) != 2) or not shape:
        raise ValueError(f"layout must be one of {LAYOUTS} ('transposed', 'sliced': 2-D only), got {layout!r}")
    v = values.detach().to("cpu")
    raw = v.dtype.is_floating_point and v.element_size() == 1  # fp8: flip, stack and cat work on its bytes
    v = v.view(torch.uint8) if raw else v
    if layout == "strided":
        base = torch.stack([v, v.flip(-1)], dim=-1).flatten(-2)  # v[..., i] at 2 i; the gaps hold v reversed
    elif layout == "transposed":
        base = v.t().contiguous()
    elif layout == "sliced":
        base = torch.cat([v, v.flip(0).repeat(1, 3)[:, :3]], dim=1)  # 3 more columns: values of other rows
    elif layout == "offset":
        base = torch.cat([v.flatten()[-1:], v.flatten()])
    else:
        base = v.contiguous()
    base = base.view(values.dtype) if raw else base
    fill = math.nan if values.dtype.is_floating_point else 0
    pad = 4096 + 64 * (max(shape) if len(shape) > 1 else 0)
    base = guard(base.to(DEVICE), fill, pad=pad)
    view = (base.t() if layout == "transposed" else base[..., ::2] if layout == "strided" else base[:, :shape[1]]
            if layout == "sliced" else base[1:].view(shape) if layout == "offset" else base)
    view._course_guard = base._course_guard
    return view


def describe(name: str, t: torch.Tensor, layout: str = "contiguous") -> str:
    """'x: float16 (3, 1025)', plus the layout and strides of a view."""
    view = "" if layout == "contiguous" else f" ({_WORDS[layout]}, strides {t.stride()})"
    return f"{name}: {str(t.dtype).replace('torch.', '')} {tuple(t.shape)}{view}"


def tensor_arg(draw, name: str, shape: Sequence[int], dtype: torch.dtype, layouts: Sequence[str] = ("contiguous",),
               scale: float = 1.0, seed: int = 0):
    """Draw a layout; return (make, about) for one guarded tensor argument."""
    layout = draw(st.sampled_from(layouts))
    make = lambda: guarded_tensor(shape, dtype, layout, seed=seed, scale=scale)  # noqa: E731
    return make, describe(name, make(), layout)
