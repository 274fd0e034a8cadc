"""Wrong answers to notebook 13's exercises: no overlap test (boxes apart in x and y "overlap"), boxes read as
rows of 4, fp16 arithmetic, a missing mask; the padding masked by a multiplication (NaN * 0), the mean over
every slot, the diagonal of the intersection, 0 / 0 for a batch without boxes; the gradient for pred instead
of target, ties given wholly to one side, the padding masked by a multiplication, the mean over every slot."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb13 as ex
from solutions import nb13 as sol


# ---- box_iou -------------------------------------------------------------------------------------------
@triton.jit
def iou_variant_kernel(p_ptr, t_ptr, out_ptr, n, stride_pb, stride_pc, stride_tb, stride_tc, EPS: tl.constexpr,
                       BLOCK: tl.constexpr, BUG: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    if BUG == "input dtype":                                            # BUG: fp16 boxes, fp16 arithmetic
        px1 = tl.load(p_ptr + i * stride_pb, mask=inside, other=0.0)
        py1 = tl.load(p_ptr + i * stride_pb + stride_pc, mask=inside, other=0.0)
        px2 = tl.load(p_ptr + i * stride_pb + 2 * stride_pc, mask=inside, other=0.0)
        py2 = tl.load(p_ptr + i * stride_pb + 3 * stride_pc, mask=inside, other=0.0)
        tx1 = tl.load(t_ptr + i * stride_tb, mask=inside, other=0.0)
        ty1 = tl.load(t_ptr + i * stride_tb + stride_tc, mask=inside, other=0.0)
        tx2 = tl.load(t_ptr + i * stride_tb + 2 * stride_tc, mask=inside, other=0.0)
        ty2 = tl.load(t_ptr + i * stride_tb + 3 * stride_tc, mask=inside, other=0.0)
    else:
        px1, py1, px2, py2 = sol.load_box(p_ptr, i * stride_pb, stride_pc, inside)
        tx1, ty1, tx2, ty2 = sol.load_box(t_ptr, i * stride_tb, stride_tc, inside)
    iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
    ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
    if BUG == "no overlap test":
        inter = tl.maximum(iw * ih, 0.0)                                # BUG: iw < 0 and ih < 0 give inter > 0
    else:
        inter = tl.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    iou = (inter / (union + EPS)).to(tl.float32)
    if BUG == "no mask":
        tl.store(out_ptr + i, iou)                                      # BUG: the last block writes past the end
    else:
        tl.store(out_ptr + i, iou, mask=inside)


def _iou_with(bug, flat=False):
    def box_iou(pred, target, block=512):
        out = torch.empty(pred.shape[0], dtype=torch.float32, device=pred.device)
        sp, st = ((4, 1), (4, 1)) if flat else (pred.stride(), target.stride())  # BUG if flat: rows of 4 assumed
        iou_variant_kernel[(triton.cdiv(out.numel(), block),)](pred, target, out, out.numel(), *sp, *st,
                                                               EPS=sol.EPS, BLOCK=block, BUG=bug)
        return out
    return box_iou


# ---- diou_loss -----------------------------------------------------------------------------------------
@triton.jit
def diou_variant_kernel(p_ptr, t_ptr, mask_ptr, sums_ptr, counts_ptr, n, M, sp0, sp1, sp2, st0, st1, st2,
                        EPS: tl.constexpr, BLOCK: tl.constexpr, BUG: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    valid = inside & (tl.load(mask_ptr + i, mask=inside, other=0) != 0)
    b, m = i // M, i % M
    load_where = inside if BUG == "mask by multiplying" else valid      # BUG: the padding's NaN is loaded
    px1, py1, px2, py2 = sol.load_box(p_ptr, b * sp0 + m * sp1, sp2, load_where)
    tx1, ty1, tx2, ty2 = sol.load_box(t_ptr, b * st0 + m * st1, st2, load_where)
    iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
    ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
    inter = tl.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    if BUG == "diagonal of the intersection":
        cw, ch = iw, ih                                                 # BUG: the enclosing box is meant
    else:
        cw = tl.maximum(px2, tx2) - tl.minimum(px1, tx1)
        ch = tl.maximum(py2, ty2) - tl.minimum(py1, ty1)
    dx = (px1 + px2 - tx1 - tx2) * 0.5
    dy = (py1 + py2 - ty1 - ty2) * 0.5
    loss = 1.0 - inter / (union + EPS) + (dx * dx + dy * dy) / (cw * cw + ch * ch + EPS)
    if BUG == "mask by multiplying":
        loss = loss * valid.to(tl.float32)                             # NaN * 0 is NaN
    else:
        loss = tl.where(valid, loss, 0.0)
    slot = 0 if BUG == "one slot" else tl.program_id(0)                # BUG (one slot): every program adds
    if BUG == "one slot":                                               # into slot 0 with a load and a store
        tl.store(sums_ptr, tl.load(sums_ptr) + tl.sum(loss, axis=0))
        tl.store(counts_ptr, tl.load(counts_ptr) + tl.sum(valid.to(tl.int32), axis=0))
    else:
        tl.store(sums_ptr + slot, tl.sum(loss, axis=0))
        tl.store(counts_ptr + slot, tl.sum(valid.to(tl.int32), axis=0))


def _diou_with(bug, divide=None):
    def diou_loss(pred, target, mask, block=512):
        n, tiles = mask.numel(), max(1, triton.cdiv(mask.numel(), block))
        sums = torch.zeros(tiles, dtype=torch.float32, device=pred.device)
        counts = torch.zeros(tiles, dtype=torch.int32, device=pred.device)
        if n:
            sp, st = list(pred.stride()), list(target.stride())
            if bug == "packed images":                                  # BUG: images taken as M boxes apart
                sp[0], st[0] = mask.shape[1] * sp[1], mask.shape[1] * st[1]
            diou_variant_kernel[(tiles,)](pred, target, mask.contiguous(), sums, counts, n, mask.shape[1],
                                          *sp, *st, EPS=sol.EPS, BLOCK=block, BUG=bug)
        if divide == "slots":
            return sums.sum() / max(n, 1)                               # BUG: the padding counted in the mean
        if divide == "count":
            return sums.sum() / counts.sum()                            # BUG: no valid box gives 0 / 0
        return sums.sum() / counts.sum().clamp_min(1)
    return diou_loss


# ---- giou_grad_target ----------------------------------------------------------------------------------
@triton.jit
def grad_variant_kernel(p_ptr, t_ptr, mask_ptr, count_ptr, grad_ptr, n, M, sp0, sp1, sp2, st0, st1, st2,
                        EPS: tl.constexpr, BLOCK: tl.constexpr, BUG: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n
    valid = inside & (tl.load(mask_ptr + i, mask=inside, other=0) != 0)
    b, m = i // M, i % M
    load_where = inside if BUG == "mask by multiplying" else valid
    p = sol.load_box(p_ptr, b * sp0 + m * sp1, sp2, load_where)
    t = sol.load_box(t_ptr, b * st0 + m * st1, st2, load_where)
    if BUG == "pred's gradient":
        ax1, ay1, ax2, ay2 = p                                          # BUG: d loss / d pred, notebook 13's
        ox1, oy1, ox2, oy2 = t
    else:
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
    if BUG == "ties to one side":
        sx1 = tl.where(ax1 >= ox1, 1.0, 0.0)                            # BUG: a tie is not split in half
        sy1 = tl.where(ay1 >= oy1, 1.0, 0.0)
        sx2 = tl.where(ax2 >= ox2, 1.0, 0.0)
        sy2 = tl.where(ay2 >= oy2, 1.0, 0.0)
    else:
        sx1, sy1, sx2, sy2 = sol.share(ax1, ox1), sol.share(ay1, oy1), sol.share(ax2, ox2), sol.share(ay2, oy2)
    if BUG == "mean over every slot":
        scale = 1.0 / n                                                 # BUG: the padding counted in the mean
    else:
        scale = 1.0 / tl.maximum(tl.load(count_ptr), 1).to(tl.float32)
    if BUG == "mask by multiplying":
        scale = scale * valid.to(tl.float32)                            # NaN * 0 is NaN
    else:
        scale = tl.where(valid, scale, 0.0)
    out = grad_ptr.dtype.element_ty
    tl.store(grad_ptr + 4 * i, ((-ah * g_union - sx1 * ih * g_inter - (1.0 - sx1) * ch * g_area_c) * scale).to(out),
             mask=inside)
    tl.store(grad_ptr + 4 * i + 1, ((-aw * g_union - sy1 * iw * g_inter - (1.0 - sy1) * cw * g_area_c) * scale
                                    ).to(out), mask=inside)
    tl.store(grad_ptr + 4 * i + 2, ((ah * g_union + (1.0 - sx2) * ih * g_inter + sx2 * ch * g_area_c) * scale
                                    ).to(out), mask=inside)
    tl.store(grad_ptr + 4 * i + 3, ((aw * g_union + (1.0 - sy2) * iw * g_inter + sy2 * cw * g_area_c) * scale
                                    ).to(out), mask=inside)


def _grad_with(bug):
    def giou_grad_target(pred, target, mask, block=512):
        grad = torch.empty(target.shape, dtype=target.dtype, device=target.device)
        n = mask.numel()
        if n:
            count = mask.sum(dtype=torch.int32).reshape(1)
            sp, st = list(pred.stride()), list(target.stride())
            if bug == "packed images":                                  # BUG: images taken as M boxes apart
                sp[0], st[0] = mask.shape[1] * sp[1], mask.shape[1] * st[1]
            grid = (1,) if bug == "one program" else (triton.cdiv(n, block),)   # BUG (one program): n <= block?
            grad_variant_kernel[grid](pred, target, mask.contiguous(), count, grad, n, mask.shape[1], *sp, *st,
                                                          EPS=sol.EPS, BLOCK=block, BUG=bug)
        return grad
    return giou_grad_target


WRONG = [
    (ex.BOX_IOU, "no overlap test", _iou_with("no overlap test"), ["values wrong", "got"]),
    (ex.BOX_IOU, "boxes read as rows of 4", _iou_with("", flat=True), ["values wrong", "strides"]),
    (ex.BOX_IOU, "fp16 arithmetic", _iou_with("input dtype"), ["float16", "values wrong"]),
    (ex.BOX_IOU, "missing mask", _iou_with("no mask"), ["wrote outside", "past its end"]),
    (ex.DIOU_LOSS, "padding masked by multiplying", _diou_with("mask by multiplying"),
     ["got nan", "padding nan"]),
    (ex.DIOU_LOSS, "mean over every slot", _diou_with("", divide="slots"), ["valid boxes per image", "expected"]),
    (ex.DIOU_LOSS, "diagonal of the intersection", _diou_with("diagonal of the intersection"), ["got", "expected"]),
    (ex.DIOU_LOSS, "0 / 0 without boxes", _diou_with("", divide="count"),
     ["valid boxes per image [0", "got nan, expected 0"]),
    (ex.GIOU_GRAD_TARGET, "pred's gradient", _grad_with("pred's gradient"), ["values wrong"]),
    (ex.GIOU_GRAD_TARGET, "ties to one side", _grad_with("ties to one side"), ["values wrong"]),
    (ex.GIOU_GRAD_TARGET, "padding masked by multiplying", _grad_with("mask by multiplying"),
     ["got nan", "padding nan"]),
    (ex.GIOU_GRAD_TARGET, "mean over every slot", _grad_with("mean over every slot"), ["values wrong"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def iou_input_dtype(pred, target, block=512):
    out = torch.empty(pred.shape[0], dtype=pred.dtype, device=pred.device)   # BUG: float32 is asked for
    if out.numel():
        sol.box_iou_kernel[(triton.cdiv(out.numel(), block),)](pred, target, out, out.numel(), *pred.stride(),
                                                               *target.stride(), EPS=sol.EPS, BLOCK=block)
    return out


def iou_one_program(pred, target, block=512):
    out = torch.empty(pred.shape[0], dtype=torch.float32, device=pred.device)
    if out.numel():                                                      # BUG: one program, whatever n
        sol.box_iou_kernel[(1,)](pred, target, out, out.numel(), *pred.stride(), *target.stride(), EPS=sol.EPS,
                                 BLOCK=block)
    return out


WRONG += [
    (ex.BOX_IOU, "the input's dtype for the result", iou_input_dtype, ["float16", "float32"]),
    (ex.BOX_IOU, "one program", iou_one_program, ["values wrong"]),
    (ex.DIOU_LOSS, "every program adds into one slot", _diou_with("one slot"),
     ["a race in diou_variant_kernel", "tl.atomic_add"]),
    (ex.DIOU_LOSS, "images taken as packed", _diou_with("packed images"), ["[gaps]", "expected"]),
    (ex.GIOU_GRAD_TARGET, "images taken as packed", _grad_with("packed images"), ["[gaps]", "values wrong"]),
    (ex.GIOU_GRAD_TARGET, "one program", _grad_with("one program"), ["[programs]", "never written"]),
]
