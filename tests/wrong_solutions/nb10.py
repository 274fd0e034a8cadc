"""Wrong answers to notebook 10's exercises: overlapping kernels counted twice, no clipping to the window, an
unsorted merge, a nested kernel that shortens the union; the channel without its modulo, a channels_last
batch read as NCHW, a missing mask, the 255 forgotten; an NCHW output, a flip one column off, flipped rows,
every image flipped."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter
from exercises import nb10 as ex
from solutions import nb10 as sol


# ---- busy_share ----------------------------------------------------------------------------------------
def busy_sum_of_durations(intervals, window):
    start, end = window
    busy = sum(max(0.0, min(e, end) - max(s, start)) for s, e in intervals)  # BUG: overlaps counted twice
    return 100.0 * busy / (end - start)


def busy_not_clipped(intervals, window):
    busy, reach = 0.0, float("-inf")
    for s, e in sorted(intervals):                                      # BUG: time outside the window counted
        s = max(s, reach)
        if e > s:
            busy, reach = busy + e - s, e
    return 100.0 * busy / (window[1] - window[0])


def busy_unsorted(intervals, window):
    start, end = window
    busy, reach = 0.0, start
    for s, e in intervals:                                              # BUG: merged in the order given
        s, e = max(s, start, reach), min(e, end)
        if e > s:
            busy, reach = busy + e - s, e
    return 100.0 * busy / (end - start)


def busy_nested_shortens(intervals, window):
    start, end = window
    merged = []
    for s, e in sorted((max(s, start), min(e, end)) for s, e in intervals if min(e, end) > max(s, start)):
        if merged and s <= merged[-1][1]:
            merged[-1] = (merged[-1][0], e)                             # BUG: max(e, merged end): a kernel
        else:                                                           # inside another cuts the union short
            merged.append((s, e))
    return 100.0 * sum(e - s for s, e in merged) / (end - start)


# ---- normalize_uint8 -------------------------------------------------------------------------------------
@triton.jit
def normalize_no_modulo_kernel(x_ptr, out_ptr, total, H, W, stride_n, stride_c, stride_h, stride_w,
                               BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    w, h = offs % W, (offs // W) % H
    c = offs // (H * W)                                                 # BUG: no % 3: image 1 has channels 3-5
    n = offs // (3 * H * W)
    x = tl.load(x_ptr + n * stride_n + (c % 3) * stride_c + h * stride_h + w * stride_w, mask=mask, other=0)
    mean, std = sol.channel_stats(c)
    tl.store(out_ptr + offs, (x.to(tl.float32) - mean) / std, mask=mask)


@triton.jit
def normalize_no_mask_kernel(x_ptr, out_ptr, total, H, W, stride_n, stride_c, stride_h, stride_w,
                             BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)              # BUG: no mask on the last block
    w, h, c, n = offs % W, (offs // W) % H, (offs // (H * W)) % 3, offs // (3 * H * W)
    x = tl.load(x_ptr + n * stride_n + c * stride_c + h * stride_h + w * stride_w)
    mean, std = sol.channel_stats(c)
    tl.store(out_ptr + offs, (x.to(tl.float32) - mean) / std)


@triton.jit
def normalize_no_255_kernel(x_ptr, out_ptr, total, H, W, stride_n, stride_c, stride_h, stride_w,
                            BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    w, h, c, n = offs % W, (offs // W) % H, (offs // (H * W)) % 3, offs // (3 * H * W)
    x = tl.load(x_ptr + n * stride_n + c * stride_c + h * stride_h + w * stride_w, mask=mask, other=0)
    mean = tl.where(c == 0, 0.485, tl.where(c == 1, 0.456, 0.406))  # BUG: the statistics of pixels in 0..1
    std = tl.where(c == 0, 0.229, tl.where(c == 1, 0.224, 0.225))    # applied to pixels in 0..255
    tl.store(out_ptr + offs, (x.to(tl.float32) - mean) / std, mask=mask)


def _normalize_with(kernel, contiguous_strides=False):
    def normalize_uint8(x, block=1024):
        n, _, h, w = x.shape
        out = torch.empty((n, 3, h, w), dtype=torch.float32, device=x.device)
        strides = (3 * h * w, h * w, w, 1) if contiguous_strides else x.stride()  # BUG if True: strides assumed
        kernel[(triton.cdiv(out.numel(), block),)](x, out, out.numel(), h, w, *strides, BLOCK=block)
        return out
    return normalize_uint8


# ---- flip_normalize --------------------------------------------------------------------------------------
def flip_normalize_nchw(x, flips, block=1024):
    y = torch.where(flips.view(-1, 1, 1, 1), x.flip(-1), x)
    return sol.normalize_uint8(y.contiguous(), block)                   # BUG: right values, NCHW layout


@triton.jit
def flip_normalize_variant_kernel(x_ptr, flips_ptr, out_ptr, total, H, W, stride_n, stride_c, stride_h, stride_w,
                                  BLOCK: tl.constexpr, BUG: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < total
    c, w, h, n = offs % 3, (offs // 3) % W, (offs // (3 * W)) % H, offs // (3 * H * W)
    flip = tl.load(flips_ptr + n, mask=mask, other=0) != 0
    if BUG == "off by one":
        src_h, src_w = h, tl.where(flip, W - w, w)                      # BUG: W - w, one column off
    elif BUG == "rows":
        src_h, src_w = tl.where(flip, H - 1 - h, h), w                  # BUG: upside down, not mirrored
    else:
        src_h, src_w = h, W - 1 - w                                     # BUG: every image flipped
    x = tl.load(x_ptr + n * stride_n + c * stride_c + src_h * stride_h + src_w * stride_w, mask=mask, other=0)
    mean, std = sol.channel_stats(c)
    tl.store(out_ptr + offs, (x.to(tl.float32) - mean) / std, mask=mask)


def _flip_with(bug):
    def flip_normalize(x, flips, block=1024):
        n, _, h, w = x.shape
        out = torch.empty((n, 3, h, w), dtype=torch.float32, device=x.device, memory_format=torch.channels_last)
        flip_normalize_variant_kernel[(triton.cdiv(out.numel(), block),)](
            x, flips, out, out.numel(), h, w, *x.stride(), BLOCK=block, BUG=bug)
        return out
    return flip_normalize


WRONG = [
    (ex.BUSY_SHARE, "overlaps counted twice", busy_sum_of_durations, ["returned", "expected", "kernels [("]),
    (ex.BUSY_SHARE, "not clipped to the window", busy_not_clipped, ["returned", "expected", "window ("]),
    (ex.BUSY_SHARE, "merged without sorting", busy_unsorted, ["returned", "expected"]),
    (ex.BUSY_SHARE, "a nested kernel shortens the union", busy_nested_shortens, ["returned", "expected"]),
    (ex.NORMALIZE, "channel without % 3", _normalize_with(normalize_no_modulo_kernel),
     ["values wrong", "uint8 ("]),
    (ex.NORMALIZE, "strides assumed NCHW", _normalize_with(sol.normalize_kernel, contiguous_strides=True),
     ["values wrong", "strides"]),
    (ex.NORMALIZE, "missing mask", _normalize_with(normalize_no_mask_kernel), ["wrote outside", "past its end"]),
    (ex.NORMALIZE, "255 forgotten", _normalize_with(normalize_no_255_kernel), ["values wrong", "expected"]),
    (ex.FLIP_NORMALIZE, "NCHW output", flip_normalize_nchw, ["returned a float32 tensor", "not channels_last"]),
    (ex.FLIP_NORMALIZE, "flip one column off", _flip_with("off by one"), ["read outside the input x", "flips"]),
    (ex.FLIP_NORMALIZE, "rows flipped", _flip_with("rows"), ["values wrong"]),
    (ex.FLIP_NORMALIZE, "every image flipped", _flip_with("all"), ["values wrong", "'no'"]),
]


# ---- drawn from the grader's input families and invariants ------------------------------------------------
def busy_first_interval(intervals, window):
    reach = min(intervals[0][0], window[0])                            # BUG: no kernel at all: IndexError
    return sol.busy_share(intervals, (max(reach, window[0]), window[1]))


def busy_sorts_in_place(intervals, window):
    intervals.sort()                                                    # BUG: sorts the caller's list
    return sol.busy_share(intervals, window)


def _batch_stride_3c(kernel, grid_per_image=False):
    def normalize(x, *flips, block=1024):
        n, _, h, w = x.shape
        fmt = torch.channels_last if flips else torch.contiguous_format
        out = torch.empty((n, 3, h, w), dtype=torch.float32, device=x.device, memory_format=fmt)
        if out.numel() == 0:
            return out
        strides = list(x.stride())
        if not grid_per_image:
            strides[0] = 3 * h * w                                     # BUG: images taken as packed, 3 H W apart
        grid = (n,) if grid_per_image else (triton.cdiv(out.numel(), block),)   # BUG if per image: one block
        kernel[grid](x, *flips, out, out.numel(), h, w, *strides, BLOCK=block)  # of each image only
        return out
    return normalize


WRONG += [
    (ex.BUSY_SHARE, "the first kernel read without a check", busy_first_interval, ["kernels []", "IndexError"]),
    (ex.BUSY_SHARE, "the caller's list sorted", busy_sorts_in_place, ["changed its input intervals"]),
    (ex.NORMALIZE, "a batch stride of 3 H W", _batch_stride_3c(sol.normalize_kernel),
     ["values wrong"]),
    (ex.NORMALIZE, "one block per image", _batch_stride_3c(sol.normalize_kernel, grid_per_image=True),
     ["values wrong"]),
    (ex.FLIP_NORMALIZE, "a batch stride of 3 H W", _batch_stride_3c(sol.flip_normalize_kernel),
     ["values wrong"]),
    (ex.FLIP_NORMALIZE, "one block per image", _batch_stride_3c(sol.flip_normalize_kernel, grid_per_image=True),
     ["values wrong"]),
]
