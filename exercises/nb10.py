"""Notebook 10 (the input pipeline): the busy share of a profiled window from kernel intervals, uint8 batches
normalized on the device in Triton, and the same with per-image flips into a channels_last output."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from course_utils.device import DEVICE, pick_size
from course_utils.grading import Exercise, Inputs, guard
from exercises import case, kind_sizes, pairwise, sizes

MEAN = (0.485, 0.456, 0.406)  # ImageNet's, as lessons.nb10_input_pipeline
STD = (0.229, 0.224, 0.225)


# ---- Exercise 1: the busy share of a window -----------------------------------------------------------
@st.composite
def _interval_inputs(draw) -> Inputs:
    w0 = draw(st.integers(0, 100)) / 2
    window = (w0, w0 + draw(st.integers(1, 600)) / 2)
    n = draw(st.integers(0, pick_size(60, 25)))
    starts = draw(st.lists(st.integers(-60, 700), min_size=n, max_size=n))
    lengths = draw(st.lists(st.integers(0, 160), min_size=n, max_size=n))
    intervals = [(s / 2, (s + d) / 2) for s, d in zip(starts, lengths)]  # half microseconds: sums are exact
    if draw(st.booleans()):  # two streams: a long kernel and short ones inside it, one reaching past its end
        intervals += [(window[0] + 1.0, window[0] + 9.0), (window[0] + 2.0, window[0] + 3.0),
                      (window[0] + 8.5, window[0] + 12.0)]
    listing = ", ".join(f"({s:g}, {e:g})" for s, e in intervals)
    return Inputs(lambda: (list(intervals), window),
                  f"window ({window[0]:g}, {window[1]:g}), kernels [{listing}]")


def _busy_share(intervals: list, window: tuple) -> float:
    start, end = window
    clipped = sorted((max(s, start), min(e, end)) for s, e in intervals if min(e, end) > max(s, start))
    busy, reach = 0.0, start
    for s, e in clipped:  # the union: count each stretch of time once, whatever number of kernels ran in it
        if e > reach:
            busy += e - max(s, reach)
            reach = e
    return 100.0 * busy / (end - start)


BUSY_SHARE = Exercise(
    "10.1 busy_share", "busy_share(intervals, window): the percentage of the window (start, end) in which at least "
    "one kernel ran, the kernels given as (start, end) intervals on any stream, in any order",
    _busy_share, _interval_inputs(), rtol=1e-9, atol=1e-9, examples=(150, 300),
    families={"empty": lambda: [case("window (0, 10), kernels []", [], (0.0, 10.0))],
              "edges": lambda: [case("window (0, 10), kernels [(0, 10), (0, 10)]", [(0.0, 10.0), (0.0, 10.0)],
                                     (0.0, 10.0)),
                                case("window (2, 4), kernels [(0, 1), (5, 9), (4, 6)]", [(0.0, 1.0), (5.0, 9.0),
                                                                                         (4.0, 6.0)], (2.0, 4.0))]})


# ---- uint8 batches: contiguous, channels_last, or a crop of larger images --------------------------------
PIXEL_LAYOUTS = ("contiguous", "channels_last", "crop")
_PIXEL_WORDS = {"channels_last": "channels_last (NHWC in memory)", "crop": "a crop of larger images",
                "gaps": "channels 1-3 of 5-channel images: a gap between images"}


def guarded_pixels(n: int, h: int, w: int, layout: str, seed: int = 0) -> torch.Tensor:
    """Random uint8 pixels N x 3 x H x W on `DEVICE` in ``layout``, in a buffer guarded by zeros."""
    gen = torch.Generator(DEVICE).manual_seed(seed)  # drawn where they are used, as in `guarded_tensor`
    pixels = lambda *shape: torch.randint(0, 256, shape, generator=gen, dtype=torch.uint8, device=DEVICE)  # noqa: E731
    if layout == "channels_last":
        base = guard(pixels(n, h, w, 3), 0)
        view = base.permute(0, 3, 1, 2)
    elif layout == "crop":  # 16 more rows, 32 more columns: odd strides for odd H and W, else multiples of 16
        base = guard(pixels(n, 3, h + 16, w + 32), 0)
        view = base[:, :, 1:h + 1, 2:w + 2]  # starts w + 34 bytes in: never 16-byte aligned
    elif layout == "gaps":  # stride(0) = 5 H W, not 3 H W: a batch stride that is not 3 stride(1)
        base = guard(pixels(n, 5, h, w), 0)
        view = base[:, 1:4]
    else:
        base = guard(pixels(n, 3, h, w), 0)
        view = base
    view._course_guard = base._course_guard
    return view


# The kernels take the sizes and strides as arguments: each one equal to 1 or a multiple of 16 is a new
# compilation on a GPU (exercises.pairwise); drawn freely, 150 cases made 29 of them. A case draws one of 9
# (layout, kind) instead: odd heights and widths and an odd number of images (ragged), heights and widths
# that are multiples of 16 (aligned), or images of one row of odd width.
PIXEL_CONFIGS = pairwise(PIXEL_LAYOUTS, ("ragged", "aligned", "one"))


def _pixels(draw, name: str = "x"):
    layout, kind = draw(st.sampled_from(PIXEL_CONFIGS))
    n = draw(sizes(pick_size(16, 5), block=4))  # on a GPU up to 16 x 3 x 160 x 160: about a million pixels
    n = n if kind == "aligned" or n % 2 else n - 1  # odd sizes, odd N: N x 3 x H x W elements, an odd number
    h = draw(kind_sizes(kind, pick_size(160, 40), block=32))
    w = draw(kind_sizes("ragged" if kind == "one" else kind, pick_size(160, 40), block=32))
    make = lambda: guarded_pixels(n, h, w, layout)  # noqa: E731
    view = "" if layout == "contiguous" else f" {_PIXEL_WORDS[layout]}, strides {make().stride()}"
    return make, f"{name}: uint8 ({n}, 3, {h}, {w}){view}", n


def _normalize(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(MEAN, device=x.device).view(1, 3, 1, 1)
    std = torch.tensor(STD, device=x.device).view(1, 3, 1, 1)
    return (x.float() / 255 - mean) / std  # ToDtype(float32, scale=True), then Normalize(MEAN, STD)


def _pixel_case(n: int, h: int, w: int, layout: str, flips: list | None = None):
    make = lambda: guarded_pixels(n, h, w, layout)  # noqa: E731
    view = "" if layout == "contiguous" else f" {_PIXEL_WORDS[layout]}, strides {make().stride()}"
    about = f"x: uint8 ({n}, 3, {h}, {w}){view}" + (" (block=64)" if layout != "gaps" else "")
    if flips is None:
        return case(about, make)
    return case(f"{about}, flips {['yes' if f else 'no' for f in flips]}", make,
                lambda: torch.tensor(flips, dtype=torch.bool, device=DEVICE))


# ---- Exercise 2: normalize a uint8 batch ---------------------------------------------------------------
@st.composite
def _normalize_inputs(draw) -> Inputs:
    x, about, _ = _pixels(draw)
    return Inputs(lambda: (x(),), about)


NORMALIZE = Exercise(
    "10.2 normalize_uint8", "normalize_uint8(x): (x / 255 - MEAN[c]) / STD[c] for a uint8 batch N x 3 x H x W of "
    "any strides, as a float32 N x 3 x H x W tensor, in one Triton kernel",
    _normalize, _normalize_inputs(), (torch.uint8,), examples=(30, 150), block={"block": 64},
    families={"gaps": lambda: [_pixel_case(3, 5, 7, "gaps")], "programs": lambda: [_pixel_case(2, 6, 9, "crop")],
              "empty": lambda: [_pixel_case(0, 4, 4, "contiguous")]})


# ---- Exercise 3: flip some images, normalize, write channels_last ----------------------------------------
@st.composite
def _flip_inputs(draw) -> Inputs:
    x, about, n = _pixels(draw)
    flips = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return Inputs(lambda: (x(), torch.tensor(flips, dtype=torch.bool, device=DEVICE)),
                  f"{about}, flips {['yes' if f else 'no' for f in flips]}")


def _flip_normalize(x: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    y = torch.where(flips.view(-1, 1, 1, 1), x.flip(-1), x)  # a horizontal flip mirrors the columns
    return _normalize(y).contiguous(memory_format=torch.channels_last)


def _with_layout(args: tuple, out) -> tuple:
    """What the grader compares: the values, then whether the tensor is laid out channels_last."""
    if not isinstance(out, torch.Tensor):
        return out, "a channels_last tensor"
    if out.dim() == 4 and out.is_contiguous(memory_format=torch.channels_last):
        return out, "a channels_last tensor"
    return out, f"a tensor of strides {tuple(out.stride())}, not channels_last"


FLIP_NORMALIZE = Exercise(
    "10.3 flip_normalize", "flip_normalize(x, flips): image i mirrored left-right where flips[i], normalized as in "
    "exercise 2, returned as a float32 N x 3 x H x W tensor in channels_last memory format, in one Triton kernel",
    _flip_normalize, _flip_inputs(), (torch.uint8,), examples=(30, 150), layout="channels_last", block={"block": 64},
    families={"gaps": lambda: [_pixel_case(3, 5, 7, "gaps", [True, False, True])],
              "programs": lambda: [_pixel_case(2, 6, 9, "crop", [False, True])]})
