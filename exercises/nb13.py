"""Notebook 13 (the GIoU loss): plain IoU of box pairs in Triton, the mean DIoU loss of a padded batch, and the
gradient of the mean GIoU loss with respect to the target boxes."""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

from course_utils.device import pick_size
from course_utils.grading import Exercise, Inputs
from exercises import KINDS, case, describe, guarded_values, kind_sizes, pairwise, sizes, values

DTYPES = (torch.float32, torch.float16, torch.bfloat16)
EPS = 1e-7  # added to the denominators, as torchvision's box losses do
_BOX_WORDS = {"strided": "every 2nd element", "sliced": "the first 4 of 7 columns", "transposed": "coordinate-major"}


def random_box_pairs(shape: tuple, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(pred, target) boxes (x1, y1, x2, y2) of ``shape + (4,)`` on a grid of 1/32: exact in fp16 and bf16, with
    touching, identical, nested, zero-width and distant pairs (apart in x and in y)."""
    gen = torch.Generator().manual_seed(seed)
    corner = torch.randint(0, 29, (*shape, 2), generator=gen)
    target = torch.cat([corner, corner + torch.randint(0, 12, (*shape, 2), generator=gen)], dim=-1)
    jitter = torch.randint(-2, 3, (*shape, 4), generator=gen)  # often 0: shared edges, identical boxes
    corner = torch.randint(0, 29, (*shape, 2), generator=gen)
    stray = torch.cat([corner, corner + torch.randint(0, 12, (*shape, 2), generator=gen)], dim=-1)
    pred = torch.where(torch.rand((*shape, 1), generator=gen) < 0.25, stray, target + jitter)
    pred = torch.cat([pred[..., :2], torch.maximum(pred[..., 2:], pred[..., :2])], dim=-1)  # x1 <= x2, y1 <= y2
    return pred.double() / 32, target.double() / 32


def _iou_parts(p: torch.Tensor, t: torch.Tensor):
    px1, py1, px2, py2 = p.unbind(-1)
    tx1, ty1, tx2, ty2 = t.unbind(-1)
    iw = torch.minimum(px2, tx2) - torch.maximum(px1, tx1)
    ih = torch.minimum(py2, ty2) - torch.maximum(py1, ty1)
    inter = torch.where((iw > 0) & (ih > 0), iw * ih, 0.0)  # boxes apart in x AND y: iw, ih < 0, product > 0
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    cw = torch.maximum(px2, tx2) - torch.minimum(px1, tx1)  # the smallest enclosing box
    ch = torch.maximum(py2, ty2) - torch.minimum(py1, ty1)
    return inter, union, cw, ch


# ---- Exercise 1: IoU of box pairs ----------------------------------------------------------------------
# On a GPU each new specialization of a kernel is a compilation (exercises.pairwise): each dtype, and each
# size and stride equal to 1 or a multiple of 16. With the layouts of pred and target drawn independently,
# 150 cases made 40 compilations (box_iou) and 69 (the padded batches) on an H100 (15-30 s). A case draws
# one configuration instead: (pred, target) layouts, in which each tensor takes each layout; dtype; kind of
# sizes (exercises.KINDS). 12 configurations for box_iou, 9 for the padded batches.
IOU_CONFIGS = pairwise((("contiguous", "strided"), ("strided", "sliced"), ("sliced", "transposed"),
                        ("transposed", "contiguous")), DTYPES, KINDS)


@st.composite
def _iou_inputs(draw) -> Inputs:
    layouts, dtype, kind = draw(st.sampled_from(IOU_CONFIGS))
    n = draw(kind_sizes(kind, pick_size(1 << 18, 3000), block=512))
    pred, target = random_box_pairs((n,), seed=n)

    def make() -> tuple:
        return guarded_values(pred.to(dtype), layouts[0]), guarded_values(target.to(dtype), layouts[1])

    p, t = make()
    about = [describe(name, v) + (f" ({_BOX_WORDS[lay]}, strides {v.stride()})" if lay != "contiguous" else "")
             for name, v, lay in (("pred", p, layouts[0]), ("target", t, layouts[1]))]
    return Inputs(make, ", ".join(about))


_KINK_P = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 0.5, 2.0], [0.0, 0.0, 1.0, 1.0], [1.0, 1.0, 1.0, 1.0],
                        [0.0, 0.0, 2.0, 2.0]])
_KINK_T = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.5, 0.5, 1.5, 2.0], [1.0, 0.0, 2.0, 1.0], [1.0, 1.0, 1.0, 1.0],
                        [0.0, 0.0, 2.0, 1.0]])


def _box_iou(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    inter, union, _, _ = _iou_parts(pred.float(), target.float())
    return inter / (union + EPS)


BOX_IOU = Exercise(
    "13.1 box_iou", "box_iou(pred, target): the IoU of each pair of boxes (n x 4, x1 y1 x2 y2, any strides, "
    "fp32/fp16/bf16) as float32 (n,), intersection / (union + 1e-7), in one Triton kernel",
    _box_iou, _iou_inputs(), DTYPES, examples=(30, 150), block={"block": 64},
    families={"programs": lambda: [case("pred: float32 (200, 4), target: float32 (200, 4) (block=64)",
                                        *(values(v.float()) for v in random_box_pairs((200,), seed=7)))],
              # the layouts, dtype and kind of length of one of IOU_CONFIGS: a GPU grading compiles nothing new
              "kinks": lambda: [case("pred: float32 (5, 4), target: float32 (5, 4) (every 2nd element): identical "
                                     "boxes, zero-width boxes, touching boxes", values(_KINK_P),
                                     values(_KINK_T, "strided"))],
              "empty": lambda: [case("pred: float32 (0, 4), target: float32 (0, 4)", values(torch.zeros(0, 4)),
                                     values(torch.zeros(0, 4)))]})


# ---- padded batches: (pred, target, mask) with anything in the padding ---------------------------------
BATCH_CONFIGS = pairwise((("contiguous", "strided"), ("strided", "offset"), ("offset", "contiguous")), DTYPES,
                         ("ragged", "aligned", "one"))


def _padded_batch(draw):
    layouts, dtype, kind = draw(st.sampled_from(BATCH_CONFIGS))
    # ragged: an odd number of images of an odd number of slots; aligned: slots a multiple of 16; one: an
    # odd number (> 1) of images of one slot each
    batch = draw(sizes(pick_size(64, 6), block=4))
    batch = batch if kind == "aligned" or batch % 2 else batch - 1
    batch = max(3, batch) if kind == "one" else batch
    boxes = draw(kind_sizes(kind, pick_size(1024, 40), block=32))
    pad = draw(st.sampled_from((math.nan, 0.0)))
    fill = draw(st.sampled_from((0.0, 0.3, 0.7, 1.0)))  # the share of an image's slots that hold a box, at most
    pred, target = random_box_pairs((batch, boxes), seed=batch * 1000 + boxes)
    gen = torch.Generator().manual_seed(boxes)
    counts = (fill * boxes * torch.rand(batch, generator=gen)).round().long()
    mask = torch.arange(boxes)[None, :] < counts[:, None]
    pred, target = (torch.where(mask[..., None], v, pad) for v in (pred, target))

    def make() -> tuple:
        return (guarded_values(pred.to(dtype), layouts[0]), guarded_values(target.to(dtype), layouts[1]),
                guarded_values(mask))  # False around the mask

    p, t, _ = make()
    about = [describe(name, v) + (f" (strides {v.stride()})" if lay != "contiguous" else "")
             for name, v, lay in (("pred", p, layouts[0]), ("target", t, layouts[1]))]
    return make, f"{', '.join(about)}, valid boxes per image {counts.tolist()}, padding {pad}"


def _batch_case(batch: int, boxes: int, valid: int, layout: str, more: str = "", pad: float = math.nan):
    """A padded batch whose images hold ``valid`` boxes each (the rest ``pad``); ``layout`` of pred and target."""
    pred, target = random_box_pairs((batch, boxes), seed=batch + boxes)
    mask = torch.arange(boxes)[None, :].expand(batch, -1) < valid
    pred, target = (torch.where(mask[..., None], v, pad).float() for v in (pred, target))
    view = " (items with gaps between images)" if layout == "gaps" else ""
    return case(f"pred: float32 ({batch}, {boxes}, 4){view}, target: float32 ({batch}, {boxes}, 4){view}, mask: "
                f"{valid} valid boxes per image{more}", values(pred, layout), values(target, layout), values(mask))


def _masked_mean(per_box: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return torch.where(mask, per_box, 0.0).sum() / mask.sum().clamp_min(1)


def _valid(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor):
    keep = mask[..., None]  # padding may hold NaN: replace it before any arithmetic
    return torch.where(keep, pred.float(), 0.0), torch.where(keep, target.float(), 0.0)


# ---- Exercise 2: the mean DIoU loss of a padded batch ----------------------------------------------------
@st.composite
def _batch_inputs(draw) -> Inputs:
    make, about = _padded_batch(draw)
    return Inputs(make, about)


def _diou_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    p, t = _valid(pred, target, mask)
    inter, union, cw, ch = _iou_parts(p, t)
    dx = (p[..., 0] + p[..., 2] - t[..., 0] - t[..., 2]) / 2  # the centres' distance along x and along y
    dy = (p[..., 1] + p[..., 3] - t[..., 1] - t[..., 3]) / 2
    per_box = 1 - inter / (union + EPS) + (dx * dx + dy * dy) / (cw * cw + ch * ch + EPS)
    return _masked_mean(per_box, mask)


DIOU_LOSS = Exercise(
    "13.2 diou_loss", "diou_loss(pred, target, mask): the mean over the valid boxes of 1 - IoU + d^2 / (c^2 + 1e-7) "
    "(d: distance of the centres, c: diagonal of the enclosing box) as a 0-d float32 tensor, 0 if no box is valid; "
    "the padding may hold NaN",
    _diou_loss, _batch_inputs(), DTYPES, rtol=1e-5, atol=1e-6, examples=(30, 150), block={"block": 64},
    families={"programs": lambda: [_batch_case(3, 70, 60, "contiguous", " (block=64)")],
              "gaps": lambda: [_batch_case(3, 9, 6, "gaps")],
              "empty": lambda: [_batch_case(3, 5, 0, "contiguous", ": no valid box")],
              "nonfinite": lambda: [_batch_case(2, 7, 3, "contiguous", ", padding inf", pad=math.inf)]})


# ---- Exercise 3: the gradient of the mean GIoU loss with respect to the target ----------------------------
def _giou_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    p, t = _valid(pred, target, mask)
    inter, union, cw, ch = _iou_parts(p, t)
    area_c = cw * ch
    return _masked_mean(1 - (inter / (union + EPS) - (area_c - union) / (area_c + EPS)), mask)


def _giou_grad_target(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():
        t = target.detach().requires_grad_()
        return torch.autograd.grad(_giou_loss(pred, t, mask), t)[0]


GIOU_GRAD_TARGET = Exercise(
    "13.3 giou_grad_target", "giou_grad_target(pred, target, mask): d (mean GIoU loss of notebook 13) / d target, "
    "shape and dtype of target, zero in the padding; a tie in a min or max splits the gradient in half, as "
    "autograd does", _giou_grad_target, _batch_inputs(), DTYPES, examples=(30, 150), block={"block": 64},
    families={"programs": lambda: [_batch_case(3, 70, 60, "contiguous", " (block=64)")],
              "gaps": lambda: [_batch_case(3, 9, 6, "gaps")],
              "kinks": lambda: [case("pred: float32 (1, 5, 4), target: float32 (1, 5, 4): identical boxes and shared "
                                     "edges (ties in every min and max), mask: 5 valid", values(_KINK_P[None]),
                                     values(_KINK_T[None]), values(torch.ones(1, 5, dtype=torch.bool)))]})
