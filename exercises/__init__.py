"""The exercises at the end of notebooks 03-14, as specifications that `course_utils.grading.grade` checks.

One module per notebook (``exercises.nb05`` ...), one `Exercise` per exercise: what the learner writes,
the reference it must match (plain PyTorch or Python, not the solution), the inputs hypothesis draws and
the tolerances. This module holds the vocabulary of those inputs: `sizes` (1, primes, around a block),
`guarded_tensor` (random values in a view with NaN around it: contiguous, strided, transposed, sliced,
misaligned), `guarded_values` (given values in such a view) and `tensor_arg`; and what keeps a GPU grading
short, `pairwise` (a few configurations that cover the factors pairwise) and `kind_sizes` (lengths that a
Triton kernel specializes alike). The reference solutions are in ``solutions/`` (try first);
tests/test_exercises.py checks that they pass, that plausible wrong answers (tests/wrong_solutions/) fail,
and that a GPU grading compiles few kernels.
"""

from __future__ import annotations

import itertools
import math
from typing import Sequence

import torch
from hypothesis import strategies as st

from course_utils.device import DEVICE
from course_utils.grading import FAMILIES, Inputs, guard  # noqa: F401 - FAMILIES: the names families take

LAYOUTS = ("contiguous", "strided", "transposed", "sliced", "offset")
_WORDS = {"strided": "every 2nd element", "transposed": "a transposed view",
          "sliced": "the first columns of a wider matrix", "offset": "not 16-byte aligned",
          "gaps": "items with gaps between them: the first of a longer dim 1"}
_EDGES = (1, 2, 3, 7, 13, 31, 127, 128, 129, 1000, 1009, 4099)  # primes, around powers of two


def sizes(cap: int, block: int = 1024) -> st.SearchStrategy[int]:
    """Lengths up to ``cap``: 1, primes, non-powers of two, block - 1, block, block + 1, 2 block + 1, or any."""
    edges = sorted({n for n in (*_EDGES, block - 1, block, block + 1, 2 * block + 1) if 1 <= n <= cap})
    return st.one_of(st.sampled_from(edges), st.integers(1, cap))


def pairwise(*factors: Sequence) -> list[tuple]:
    """Few combinations of the factors' values in which any two values of any two factors meet at least once.

    Why: on a GPU every new specialization of a Triton kernel is a compilation (0.1-1 s): each constexpr
    value, pointer dtype and 16-byte alignment, and integer argument equal to 1 or a multiple of 16. Drawn
    independently, the dtypes, layouts, constexprs and sizes of a few hundred cases make dozens of them, more
    time than the cases. A case draws one of these combinations instead (and sizes of one `kind_sizes`), so
    that a kernel that specializes on nothing else compiles once per combination; a bug that needs two
    factors to meet (a dtype and a layout, a layout and a size) still shows up, and shrinking a failure
    stays among them. Up to 4 factors of up to 3 values: the rows of the orthogonal array L9 (9 or fewer);
    else built greedily: about the product of the two largest factors' sizes (12 for 4 x 3 values).
    """
    sizes_ = [len(f) for f in factors]
    rows: list[tuple] = []
    if len(factors) <= 4 and max(sizes_) <= 3:  # L9: columns i, j, i + j, i + 2 j (mod 3)
        columns = lambda i, j: (i, j, (i + j) % 3, (i + 2 * j) % 3)  # noqa: E731
        rows = list(dict.fromkeys(tuple(c % n for c, n in zip(columns(i, j), sizes_))
                                  for i in range(3) for j in range(3)))
    pairs = lambda row: {(a, row[a], b, row[b]) for a, b in itertools.combinations(range(len(row)), 2)}  # noqa: E731
    todo = set().union(*(pairs(r) for r in itertools.product(*map(range, sizes_))))
    greedy = []
    while todo:  # the row that meets the most pairs not met yet; the first such row: deterministic
        best = max(itertools.product(*map(range, sizes_)), key=lambda r: len(pairs(r) & todo))
        greedy.append(best)
        todo -= pairs(best)
    rows = rows if rows and len(rows) <= len(greedy) else greedy
    return [tuple(f[i] for f, i in zip(factors, row)) for row in rows]


#: Kinds of lengths for `kind_sizes`: Triton specializes every length of one kind the same way.
KINDS = ("ragged", "aligned", "one")


def kind_sizes(kind: str, cap: int, block: int = 1024) -> st.SearchStrategy[int]:
    """Lengths up to ``cap`` of one kind, as `sizes` draws them: "ragged": odd, > 1 and not 13 mod 16 (so that
    length + 3, the row stride of a "sliced" view, is no multiple of 16 either); "aligned": multiples of 16
    (at least 16); "one": 1. A kernel compiles once per kind, not once per 1 / multiple of 16 / other."""
    if kind == "one":
        return st.just(1)
    if kind == "aligned":
        return sizes(max(1, cap // 16), max(1, block // 16)).map(lambda x: 16 * x)
    if kind != "ragged":
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    top = max(3, (cap - 1) | 1)

    def ragged(x: int) -> int:
        x = min(max(x | 1, 3), top)
        return x - 2 if x % 16 == 13 else x

    return sizes(cap, block).map(ragged)


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
    # drawn where they are used, so that on a GPU no case waits for the CPU to draw and copy millions of values
    gen = torch.Generator(DEVICE).manual_seed(seed)
    pad = 4096 + 64 * (max(shape) if len(shape) > 1 else 0)  # a block, or 64 rows of a tile, in any layout
    values = torch.randn(base_shape, generator=gen, device=DEVICE)
    base = guard((values if scale == 1.0 else scale * values).to(dtype=dtype), pad=pad)  # 1.0 * x is x: no pass
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
    if (layout not in LAYOUTS + ("gaps",) or (layout in ("transposed", "sliced") and len(shape) != 2) or not shape
            or (layout == "gaps" and len(shape) < 2)):
        raise ValueError(f"layout must be one of {LAYOUTS} ('transposed', 'sliced': 2-D only) or 'gaps' (2-D or "
                         f"more: the items of dim 0 apart), got {layout!r}")
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
    elif layout == "gaps":  # 3 more items along dim 1: values of other items, between two items of dim 0
        base = torch.cat([v, v.flip(0).narrow(1, 0, 1).expand(-1, 3, *v.shape[2:])], dim=1)
    else:
        base = v.contiguous()
    base = base.view(values.dtype) if raw else base
    fill = math.nan if values.dtype.is_floating_point else 0
    pad = 4096 + 64 * (max(shape) if len(shape) > 1 else 0)
    base = guard(base.to(DEVICE), fill, pad=pad)
    view = (base.t() if layout == "transposed" else base[..., ::2] if layout == "strided" else base[:, :shape[1]]
            if layout in ("sliced", "gaps") else base[1:].view(shape) if layout == "offset" else base)
    view._course_guard = base._course_guard
    return view


# ---- input families (course_utils.grading.FAMILIES): the cases an exercise runs before the drawn ones --------
def case(about: str, *args) -> Inputs:
    """A family case: ``args`` are values, or zero-argument functions called for fresh arguments at each call
    (``values(t)``: a guarded copy of tensor ``t``)."""
    return Inputs(lambda: tuple(a() if callable(a) else a for a in args), about)


def values(t: torch.Tensor, layout: str = "contiguous"):
    """A function making `guarded_values` (``t``, ``layout``): an argument of `case`."""
    return lambda: guarded_values(t, layout)


def randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    """Reproducible normal values (CPU), for family cases."""
    return (scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))).to(dtype)


def kinks(t: torch.Tensor) -> torch.Tensor:
    """A copy of ``t`` with exact zeros at half of its elements (flat positions 0, 1 mod 4: a ReLU's output is
    about half zeros) and a tie in each other pair (position 3 mod 4 takes the value at 2 mod 4)."""
    flat = t.detach().clone().reshape(-1)
    flat[0::4], flat[1::4] = 0, 0
    n = flat[3::4].numel()
    flat[3::4] = flat[2::4][:n]
    return flat.reshape(t.shape)


def described(name: str, t: torch.Tensor, layout: str = "contiguous") -> str:
    """`describe` for a family case's tensor, before it is guarded."""
    view = ("" if layout == "contiguous" else
            f" ({_WORDS.get(layout, layout)}, strides {guarded_values(t, layout).stride()})")
    return f"{name}: {str(t.dtype).replace('torch.', '')} {tuple(t.shape)}{view}"


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
