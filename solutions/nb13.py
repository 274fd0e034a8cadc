"""Solutions of notebook 13's exercises: IoU of box pairs, the mean DIoU loss of a padded batch, and the gradient
of the mean GIoU loss with respect to the target boxes, each in Triton."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter

EPS = 1e-7
BOX_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def load_box(ptr, box_offset, stride_coord, valid):
    """The four coordinates of a tile of boxes, in fp32; 0 where not valid (the padding may hold NaN)."""
    x1 = tl.load(ptr + box_offset, mask=valid, other=0.0).to(tl.float32)
    y1 = tl.load(ptr + box_offset + stride_coord, mask=valid, other=0.0).to(tl.float32)
    x2 = tl.load(ptr + box_offset + 2 * stride_coord, mask=valid, other=0.0).to(tl.float32)
    y2 = tl.load(ptr + box_offset + 3 * stride_coord, mask=valid, other=0.0).to(tl.float32)
    return x1, y1, x2, y2


def _check_pairs(pred: torch.Tensor, target: torch.Tensor) -> None:
    for name, t in (("pred", pred), ("target", target)):
        if not isinstance(t, torch.Tensor) or t.dtype not in BOX_DTYPES:
            raise TypeError(f"{name} must be a float32, float16 or bfloat16 tensor")
        if t.shape[-1:] != (4,) or t.shape != pred.shape:
            raise ValueError(f"pred and target must have one shape (..., 4), got {tuple(pred.shape)} and "
                             f"{tuple(target.shape)}")


# ---- Exercise 1: IoU of box pairs --------------------------------------------------------------------------
@triton.jit
def box_iou_kernel(p_ptr, t_ptr, out_ptr, n, stride_pb, stride_pc, stride_tb, stride_tc, EPS: tl.constexpr,
                   BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    px1, py1, px2, py2 = load_box(p_ptr, i * stride_pb, stride_pc, inside)
    tx1, ty1, tx2, ty2 = load_box(t_ptr, i * stride_tb, stride_tc, inside)
    iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
    ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
    inter = tl.where((iw > 0) & (ih > 0), iw * ih, 0.0)  # apart in x and y: both negative, product positive
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    tl.store(out_ptr + i, inter / (union + EPS), mask=inside)


def box_iou(pred: torch.Tensor, target: torch.Tensor, block: int = 512) -> torch.Tensor:
    _check_pairs(pred, target)
    if pred.dim() != 2:
        raise ValueError(f"pred and target must be n x 4, got {tuple(pred.shape)}")
    out = torch.empty(pred.shape[0], dtype=torch.float32, device=pred.device)
    if out.numel():
        box_iou_kernel[(triton.cdiv(out.numel(), block),)](pred, target, out, out.numel(), *pred.stride(),
                                                           *target.stride(), EPS=EPS, BLOCK=block)
    return out


# ---- padded batches ----------------------------------------------------------------------------------------
def _check_batch(pred, target, mask) -> None:
    _check_pairs(pred, target)
    if (pred.dim() != 3 or not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool
            or mask.shape != pred.shape[:2]):
        raise ValueError("need pred, target (batch, boxes, 4) and a bool mask (batch, boxes)")
    if mask.numel() >= 2**31 // 4:
        raise ValueError("too many boxes for the kernels' 32-bit offsets")


@triton.jit
def batch_tile(p_ptr, t_ptr, mask_ptr, n, M, sp0, sp1, sp2, st0, st1, st2, BLOCK: tl.constexpr):
    """Box i of the flattened (batch x boxes) batch: its validity and both boxes, padding read as zeros."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    valid = inside & (tl.load(mask_ptr + i, mask=inside, other=0) != 0)
    b, m = i // M, i % M
    p = load_box(p_ptr, b * sp0 + m * sp1, sp2, valid)
    t = load_box(t_ptr, b * st0 + m * st1, st2, valid)
    return i, inside, valid, p, t


# ---- Exercise 2: the mean DIoU loss ------------------------------------------------------------------------
@triton.jit
def diou_partial_kernel(p_ptr, t_ptr, mask_ptr, sums_ptr, counts_ptr, n, M, sp0, sp1, sp2, st0, st1, st2,
                        EPS: tl.constexpr, BLOCK: tl.constexpr):
    i, inside, valid, p, t = batch_tile(p_ptr, t_ptr, mask_ptr, n, M, sp0, sp1, sp2, st0, st1, st2, BLOCK)
    px1, py1, px2, py2 = p
    tx1, ty1, tx2, ty2 = t
    iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
    ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
    inter = tl.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    cw = tl.maximum(px2, tx2) - tl.minimum(px1, tx1)
    ch = tl.maximum(py2, ty2) - tl.minimum(py1, ty1)
    dx = (px1 + px2 - tx1 - tx2) * 0.5  # the distance of the centres, along x and y
    dy = (py1 + py2 - ty1 - ty2) * 0.5
    loss = 1.0 - inter / (union + EPS) + (dx * dx + dy * dy) / (cw * cw + ch * ch + EPS)
    tl.store(sums_ptr + tl.program_id(0), tl.sum(tl.where(valid, loss, 0.0), axis=0))
    tl.store(counts_ptr + tl.program_id(0), tl.sum(valid.to(tl.int32), axis=0))


def diou_loss(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, block: int = 512) -> torch.Tensor:
    _check_batch(pred, target, mask)
    n, tiles = mask.numel(), max(1, triton.cdiv(mask.numel(), block))
    sums = torch.zeros(tiles, dtype=torch.float32, device=pred.device)
    counts = torch.zeros(tiles, dtype=torch.int32, device=pred.device)
    if n:
        diou_partial_kernel[(tiles,)](pred, target, mask.contiguous(), sums, counts, n, mask.shape[1],
                                      *pred.stride(), *target.stride(), EPS=EPS, BLOCK=block)
    return sums.sum() / counts.sum().clamp_min(1)  # no valid box: 0 / 1, never 0 / 0


# ---- Exercise 3: d (mean GIoU loss) / d target -------------------------------------------------------------
@triton.jit
def share(a, b):
    """d max(a, b) / d a: 1 where a is the larger, 1/2 at a tie, else 0 (d min(a, b) / d a is 1 - share)."""
    return tl.where(a > b, 1.0, tl.where(a == b, 0.5, 0.0))


@triton.jit
def giou_grad_target_kernel(p_ptr, t_ptr, mask_ptr, count_ptr, grad_ptr, n, M, sp0, sp1, sp2, st0, st1, st2,
                            EPS: tl.constexpr, BLOCK: tl.constexpr):
    i, inside, valid, p, t = batch_tile(p_ptr, t_ptr, mask_ptr, n, M, sp0, sp1, sp2, st0, st1, st2, BLOCK)
    # GIoU is symmetric in its two boxes: d loss / d target is notebook 13's d loss / d pred with the roles
    # swapped. Here "a" is the target (differentiated), "o" the other box, the prediction.
    ax1, ay1, ax2, ay2 = t
    ox1, oy1, ox2, oy2 = p
    iw = tl.minimum(ax2, ox2) - tl.maximum(ax1, ox1)
    ih = tl.minimum(ay2, oy2) - tl.maximum(ay1, oy1)
    overlap = (iw > 0) & (ih > 0)
    inter = tl.where(overlap, iw * ih, 0.0)
    aw = ax2 - ax1
    ah = ay2 - ay1
    u = aw * ah + (ox2 - ox1) * (oy2 - oy1) - inter + EPS
    cw = tl.maximum(ax2, ox2) - tl.minimum(ax1, ox1)
    ch = tl.maximum(ay2, oy2) - tl.minimum(ay1, oy1)
    c = cw * ch + EPS
    g_union = inter / (u * u) - 1.0 / c
    g_inter = tl.where(overlap, -1.0 / u - g_union, 0.0)
    g_area_c = u / (c * c)
    sx1, sy1, sx2, sy2 = share(ax1, ox1), share(ay1, oy1), share(ax2, ox2), share(ay2, oy2)
    scale = tl.where(valid, 1.0 / tl.maximum(tl.load(count_ptr), 1).to(tl.float32), 0.0)  # the mean's 1 / count
    gx1 = (-ah * g_union - sx1 * ih * g_inter - (1.0 - sx1) * ch * g_area_c) * scale
    gy1 = (-aw * g_union - sy1 * iw * g_inter - (1.0 - sy1) * cw * g_area_c) * scale
    gx2 = (ah * g_union + (1.0 - sx2) * ih * g_inter + sx2 * ch * g_area_c) * scale
    gy2 = (aw * g_union + (1.0 - sy2) * iw * g_inter + sy2 * cw * g_area_c) * scale
    out = grad_ptr.dtype.element_ty
    tl.store(grad_ptr + 4 * i, gx1.to(out), mask=inside)  # the gradient is a fresh contiguous tensor
    tl.store(grad_ptr + 4 * i + 1, gy1.to(out), mask=inside)
    tl.store(grad_ptr + 4 * i + 2, gx2.to(out), mask=inside)
    tl.store(grad_ptr + 4 * i + 3, gy2.to(out), mask=inside)


def giou_grad_target(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, block: int = 512) -> torch.Tensor:
    _check_batch(pred, target, mask)
    grad = torch.empty(target.shape, dtype=target.dtype, device=target.device)
    n = mask.numel()
    if n:
        count = mask.sum(dtype=torch.int32).reshape(1)  # stays on the device: no sync
        giou_grad_target_kernel[(triton.cdiv(n, block),)](pred, target, mask.contiguous(), count, grad, n,
                                                          mask.shape[1], *pred.stride(), *target.stride(),
                                                          EPS=EPS, BLOCK=block)
    return grad
