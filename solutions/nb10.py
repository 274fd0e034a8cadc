"""Solutions of notebook 10's exercises: the busy share of a window, a uint8 batch normalized in Triton, and
the same with per-image flips written channels_last."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter


# ---- Exercise 1: the busy share of a window --------------------------------------------------------------
def busy_share(intervals, window) -> float:
    start, end = window
    clipped = sorted((max(s, start), min(e, end)) for s, e in intervals)  # cut to the window, then by start
    busy, reach = 0.0, start  # reach: where the time counted so far ends
    for s, e in clipped:
        s = max(s, reach)  # the part of this kernel that no earlier kernel covered (none, if e <= s)
        if e > s:
            busy += e - s
            reach = e
    return 100.0 * busy / (end - start)


# ---- Exercise 2: normalize a uint8 batch -------------------------------------------------------------------
@triton.jit
def channel_stats(c):
    """(255 MEAN[c], 255 STD[c]) for a tile of channel indices, so that (x - m) / s is the normalization."""
    mean = tl.where(c == 0, 0.485 * 255, tl.where(c == 1, 0.456 * 255, 0.406 * 255))
    std = tl.where(c == 0, 0.229 * 255, tl.where(c == 1, 0.224 * 255, 0.225 * 255))
    return mean, std


@triton.jit
def normalize_kernel(x_ptr, out_ptr, total, H, W, stride_n, stride_c, stride_h, stride_w, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into the NCHW output
    mask = offs < total
    w = offs % W
    h = (offs // W) % H
    c = (offs // (H * W)) % 3
    n = offs // (3 * H * W)
    x = tl.load(x_ptr + n * stride_n + c * stride_c + h * stride_h + w * stride_w, mask=mask, other=0)
    mean, std = channel_stats(c)
    tl.store(out_ptr + offs, (x.to(tl.float32) - mean) / std, mask=mask)


def _check_pixels(x: torch.Tensor) -> None:
    if not isinstance(x, torch.Tensor) or x.dtype != torch.uint8:
        raise TypeError(f"x must be a uint8 tensor, got {getattr(x, 'dtype', type(x).__name__)}")
    if x.dim() != 4 or x.shape[1] != 3:
        raise ValueError(f"x must be N x 3 x H x W, got shape {tuple(x.shape)}")
    if x.numel() >= 2**31:
        raise ValueError("2^31 elements or more: the kernels' offsets are 32-bit")


def normalize_uint8(x: torch.Tensor, block: int = 1024) -> torch.Tensor:
    _check_pixels(x)
    n, _, h, w = x.shape
    out = torch.empty((n, 3, h, w), dtype=torch.float32, device=x.device)
    if out.numel():
        normalize_kernel[(triton.cdiv(out.numel(), block),)](x, out, out.numel(), h, w, *x.stride(), BLOCK=block)
    return out


# ---- Exercise 3: flip, normalize, channels_last ------------------------------------------------------------
@triton.jit
def flip_normalize_kernel(x_ptr, flips_ptr, out_ptr, total, H, W, stride_n, stride_c, stride_h, stride_w,
                          BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index in the output's memory: N, H, W, C
    mask = offs < total
    c = offs % 3
    w = (offs // 3) % W
    h = (offs // (3 * W)) % H
    n = offs // (3 * H * W)
    flip = tl.load(flips_ptr + n, mask=mask, other=0) != 0
    src_w = tl.where(flip, W - 1 - w, w)  # column w of a flipped image is column W - 1 - w of the original
    x = tl.load(x_ptr + n * stride_n + c * stride_c + h * stride_h + src_w * stride_w, mask=mask, other=0)
    mean, std = channel_stats(c)
    tl.store(out_ptr + offs, (x.to(tl.float32) - mean) / std, mask=mask)


def flip_normalize(x: torch.Tensor, flips: torch.Tensor, block: int = 1024) -> torch.Tensor:
    _check_pixels(x)
    if not isinstance(flips, torch.Tensor) or flips.shape != (x.shape[0],) or flips.dtype != torch.bool:
        raise ValueError(f"flips must be a bool tensor of {x.shape[0]} elements, one per image")
    n, _, h, w = x.shape
    out = torch.empty((n, 3, h, w), dtype=torch.float32, device=x.device, memory_format=torch.channels_last)
    if out.numel():
        flip_normalize_kernel[(triton.cdiv(out.numel(), block),)](x, flips, out, out.numel(), h, w, *x.stride(),
                                                                  BLOCK=block)
    return out
