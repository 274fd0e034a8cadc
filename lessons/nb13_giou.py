"""Notebook 13's GIoU loss: the eager reference and its data, the hand-derived gradient, the CUDA source
(deep dive 13b), the Triton kernels of the ladder with their autograd Function and registered operator, and
the small tools the notebooks measure them with (kernel counts, one call's closure, wall and graph timing).

Written here by hand and shown in the notebooks (`course_utils.export.show`); sections of the CUDA source are
marked `// cuda forward` ... `// cuda forward:end` for `show("lessons/nb13_giou.py", section=...)`.
"""

import math
import numbers
import os
import warnings

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from course_utils.checks import require_choice, require_number

#: Added to the denominators, as torchvision.ops.generalized_box_iou_loss does.
EPS = 1e-7
#: Box dtypes the loss accepts (float64 for gradcheck; the others are what models produce).
FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def check_boxes(pred, target, mask, *, device_type: str | None = None) -> None:
    """Raise a TypeError or ValueError that names the problem with a padded batch of boxes."""
    for name, value in (("pred", pred), ("target", target), ("mask", mask)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if pred.dim() != 3 or pred.shape[-1] != 4:
        raise ValueError("pred must have shape (batch, max_boxes, 4), boxes as (x1, y1, x2, y2); "
                         f"got {tuple(pred.shape)}")
    if target.shape != pred.shape:
        raise ValueError(f"target must have the shape of pred {tuple(pred.shape)}, got {tuple(target.shape)}")
    if mask.shape != pred.shape[:2]:
        raise ValueError(f"mask must have shape (batch, max_boxes) = {tuple(pred.shape[:2])}, "
                         f"got {tuple(mask.shape)}")
    for name, value in (("pred", pred), ("target", target)):
        if value.dtype not in FLOAT_DTYPES:
            raise TypeError(f"{name} must be float32, float16, bfloat16 or float64, got {value.dtype}")
    if mask.dtype != torch.bool:
        raise TypeError(f"mask must be a bool tensor (True = a real box), got {mask.dtype}")
    if not pred.device == target.device == mask.device:
        raise ValueError(f"pred, target and mask must be on one device, got pred on {pred.device}, "
                         f"target on {target.device}, mask on {mask.device}")
    if device_type is not None and pred.device.type != device_type:
        raise ValueError(f"this kernel runs on {device_type} tensors, got tensors on {pred.device}")


def giou_per_box(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """1 - GIoU of each pair of boxes (..., 4) -> (...), the formula of torchvision's loss."""
    _check_pair(pred, target)
    px1, py1, px2, py2 = pred.unbind(-1)
    tx1, ty1, tx2, ty2 = target.unbind(-1)
    iw = torch.minimum(px2, tx2) - torch.maximum(px1, tx1)       # intersection width (< 0: apart)
    ih = torch.minimum(py2, ty2) - torch.maximum(py1, ty1)
    inter = torch.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    iou = inter / (union + EPS)
    area_c = ((torch.maximum(px2, tx2) - torch.minimum(px1, tx1))   # smallest enclosing box
              * (torch.maximum(py2, ty2) - torch.minimum(py1, ty1)))
    return 1 - (iou - (area_c - union) / (area_c + EPS))


def _check_pair(pred, target) -> None:
    for name, value in (("pred", pred), ("target", target)):
        if not isinstance(value, torch.Tensor) or value.dtype not in FLOAT_DTYPES or value.dim() < 1 or value.shape[-1] != 4:
            raise ValueError(f"{name} must be a float tensor of boxes (..., 4), got "
                             + (f"{value.dtype} {tuple(value.shape)}" if isinstance(value, torch.Tensor) else repr(value)))
    if pred.shape != target.shape or pred.device != target.device:
        raise ValueError(f"pred and target must have one shape and device, got {tuple(pred.shape)} on {pred.device} "
                         f"and {tuple(target.shape)} on {target.device}")


def compute_dtype(pred: torch.Tensor, target: torch.Tensor) -> torch.dtype:
    """float64 if either input is float64, else float32: the loss is never computed in 16 bits."""
    for name, value in (("pred", pred), ("target", target)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return torch.float64 if torch.float64 in (pred.dtype, target.dtype) else torch.float32


def giou_loss_reference(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean GIoU loss over the valid boxes of a padded batch; 0 if there is none. Eager PyTorch."""
    check_boxes(pred, target, mask)
    dtype = compute_dtype(pred, target)
    keep = mask[..., None]
    p = torch.where(keep, pred.to(dtype), 0.0)   # padding may hold anything (even NaN): keep it out,
    t = torch.where(keep, target.to(dtype), 0.0)  # of the loss and of the gradient
    per_box = torch.where(mask, giou_per_box(p, t), 0.0)
    return per_box.sum() / mask.sum().clamp_min(1)


def random_boxes(batch: int, max_boxes: int, *, dtype: torch.dtype = torch.float32, device="cpu",
                 seed: int = 0, pad_value: float = 0.0, min_fill: float = 0.25):
    """A padded batch of (pred, target, mask) in normalized (x1, y1, x2, y2) coordinates.

    Image b has between ``min_fill * max_boxes`` and ``max_boxes`` valid boxes (mask True first); the
    padding holds ``pad_value``. Predictions are the targets plus noise; one in eight is a random box.
    """
    batch = require_number("batch", batch, integer=True, low=0)
    max_boxes = require_number("max_boxes", max_boxes, integer=True, low=0)
    min_fill = require_number("min_fill", min_fill, low=0, high=1)
    seed = require_number("seed", seed, integer=True, low=0)
    if isinstance(pad_value, bool) or not isinstance(pad_value, numbers.Real):
        raise TypeError(f"pad_value must be a number (NaN and infinities allowed), got {pad_value!r}")
    pad_value = float(pad_value)
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, max_boxes, 2)
    centre = 0.1 + 0.8 * torch.rand(shape, generator=gen)
    size = 0.02 + 0.25 * torch.rand(shape, generator=gen)
    target = torch.cat([centre - size / 2, centre + size / 2], dim=-1)
    noise = 0.15 * torch.randn(batch, max_boxes, 4, generator=gen) * size.repeat(1, 1, 2)
    stray_centre, stray_size = torch.rand(shape, generator=gen), 0.02 + 0.25 * torch.rand(shape, generator=gen)
    stray = torch.cat([stray_centre - stray_size / 2, stray_centre + stray_size / 2], dim=-1)
    pred = torch.where(torch.rand(batch, max_boxes, 1, generator=gen) < 0.125, stray, target + noise)
    counts = (max_boxes * (min_fill + (1 - min_fill) * torch.rand(batch, generator=gen))).round().long()
    mask = torch.arange(max_boxes)[None, :] < counts[:, None]
    pred = torch.where(mask[..., None], pred, pad_value)
    target = torch.where(mask[..., None], target, pad_value)
    return pred.to(device=device, dtype=dtype), target.to(device=device, dtype=dtype), mask.to(device)


#: Box pairs a detector's early predictions produce, name -> (pred box, target box).
DEGENERATE = {
    "identical": ((0.25, 0.25, 0.75, 0.5), (0.25, 0.25, 0.75, 0.5)),
    "zero width pred": ((0.5, 0.25, 0.5, 0.75), (0.25, 0.25, 0.75, 0.75)),
    "zero height pred": ((0.25, 0.5, 0.75, 0.5), (0.25, 0.25, 0.75, 0.75)),
    "both one point": ((0.5, 0.5, 0.5, 0.5), (0.5, 0.5, 0.5, 0.5)),
    "pred inside target": ((0.375, 0.375, 0.625, 0.625), (0.25, 0.25, 0.75, 0.75)),
    "target inside pred": ((0.125, 0.125, 0.875, 0.875), (0.25, 0.25, 0.75, 0.75)),
    "x1 > x2 as given": ((0.75, 0.25, 0.25, 0.75), (0.25, 0.25, 0.75, 0.75)),
    "touching edges": ((0.0, 0.0, 0.5, 0.5), (0.5, 0.0, 1.0, 0.5)),
    "far apart": ((0.0, 0.0, 0.125, 0.125), (0.75, 0.75, 1.0, 1.0)),
    "same left edge": ((0.25, 0.25, 0.5, 0.75), (0.25, 0.125, 0.75, 0.5)),
}


def degenerate_batch(dtype: torch.dtype = torch.float32, device=None):
    """(pred, target, mask): image 0 holds the pairs of `DEGENERATE`, image 1 no valid box and NaN padding; on
    ``device`` (default: where the Triton kernels run)."""
    device = KERNEL_DEVICE if device is None else device
    if dtype not in FLOAT_DTYPES:
        raise ValueError(f"dtype must be one of {FLOAT_DTYPES}, got {dtype!r}")
    n = len(DEGENERATE)
    pred = torch.full((2, n, 4), float("nan"))
    target = torch.full((2, n, 4), float("nan"))
    pred[0] = torch.tensor([pair[0] for pair in DEGENERATE.values()])
    target[0] = torch.tensor([pair[1] for pair in DEGENERATE.values()])
    mask = torch.zeros(2, n, dtype=torch.bool)
    mask[0] = True
    return pred.to(device, dtype), target.to(device, dtype), mask.to(device)


def loss_cases(dtypes=(torch.float32, torch.float16, torch.bfloat16), device=None) -> list:
    """The awkward cases every version of the loss is checked on (`cu.check`): one box, a prime number of boxes,
    more boxes than a block has threads, NaN padding, the degenerate pairs, no valid box, zero boxes per image."""
    from course_utils.checks import Case

    device = KERNEL_DEVICE if device is None else device
    if isinstance(dtypes, torch.dtype) or not dtypes or any(d not in FLOAT_DTYPES for d in dtypes):
        raise ValueError(f"dtypes must be a non-empty sequence of {FLOAT_DTYPES}, got {dtypes!r}")
    cases = []
    for batch, n_boxes in [(1, 1), (2, 7), (3, 64), (5, 257), (2, 1000)]:
        for dtype in dtypes:
            cases.append(Case(f"{batch}x{n_boxes} {str(dtype)[6:]}", lambda b=batch, n=n_boxes, d=dtype:
                              random_boxes(b, n, dtype=d, device=device, seed=b * 1000 + n)))
    for dtype in dtypes:
        cases.append(Case(f"NaN padding {str(dtype)[6:]}", lambda d=dtype: random_boxes(
            6, 40, dtype=d, device=device, seed=5, pad_value=float("nan"), min_fill=0.0)))
        cases.append(Case(f"degenerate {str(dtype)[6:]}", lambda d=dtype: degenerate_batch(d, device)))
    cases.append(Case("no valid box at all", lambda: (*random_boxes(3, 9, device=device)[:2],
                                                      torch.zeros(3, 9, dtype=torch.bool, device=device))))
    cases.append(Case("zero boxes per image", lambda: random_boxes(3, 0, device=device)))
    return cases


def gradient_of(loss_fn):
    """loss_fn -> a function (pred, target, mask) -> d loss / d pred, for `cu.check`."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable (pred, target, mask) -> loss, got {type(loss_fn).__name__}")

    def grad(pred, target, mask):
        pred = pred.detach().requires_grad_()
        return torch.autograd.grad(loss_fn(pred, target, mask), pred)[0]
    return grad


def giou_per_box_grad(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """d giou_per_box / d pred (..., 4), by hand. A tie in a min or max splits the gradient in half,
    as autograd does, so that identical and touching boxes get the same gradient as the reference."""
    _check_pair(pred, target)
    px1, py1, px2, py2 = pred.unbind(-1)
    tx1, ty1, tx2, ty2 = target.unbind(-1)
    # the forward pass again, keeping what the chain rule needs
    iw = torch.minimum(px2, tx2) - torch.maximum(px1, tx1)
    ih = torch.minimum(py2, ty2) - torch.maximum(py1, ty1)
    overlap = (iw > 0) & (ih > 0)
    inter = torch.where(overlap, iw * ih, 0.0)
    pw, ph = px2 - px1, py2 - py1
    union = pw * ph + (tx2 - tx1) * (ty2 - ty1) - inter
    cw = torch.maximum(px2, tx2) - torch.minimum(px1, tx1)
    ch = torch.maximum(py2, ty2) - torch.minimum(py1, ty1)
    u, c = union + EPS, cw * ch + EPS
    # loss = 1 - inter / u + (area_c - union) / c, with union = area_p + area_t - inter
    g_union = inter / (u * u) - 1 / c
    g_inter = torch.where(overlap, -1 / u - g_union, 0.0)
    g_area_c = u / (c * c)

    def share(a, b):  # d max(a, b) / d a: 1, or 1/2 at a tie; d min(a, b) / d a is 1 - share(a, b)
        return (a > b).to(a.dtype) + 0.5 * (a == b).to(a.dtype)

    sx1, sy1, sx2, sy2 = share(px1, tx1), share(py1, ty1), share(px2, tx2), share(py2, ty2)
    gx1 = -ph * g_union - sx1 * ih * g_inter - (1 - sx1) * ch * g_area_c
    gy1 = -pw * g_union - sy1 * iw * g_inter - (1 - sy1) * cw * g_area_c
    gx2 = ph * g_union + (1 - sx2) * ih * g_inter + sx2 * ch * g_area_c
    gy2 = pw * g_union + (1 - sy2) * iw * g_inter + sy2 * cw * g_area_c
    return torch.stack([gx1, gy1, gx2, gy2], dim=-1)


GIOU_DEVICE_SRC = r"""
constexpr float kEps = 1e-7f;

// 1 - GIoU of one pair of boxes (x1, y1, x2, y2), the formula of torchvision's loss.
__device__ __forceinline__ float giou_box_loss(float4 p, float4 t) {
    float iw = fminf(p.z, t.z) - fmaxf(p.x, t.x);
    float ih = fminf(p.w, t.w) - fmaxf(p.y, t.y);
    float inter = (iw > 0.f && ih > 0.f) ? iw * ih : 0.f;
    float uni = (p.z - p.x) * (p.w - p.y) + (t.z - t.x) * (t.w - t.y) - inter;
    float area_c = (fmaxf(p.z, t.z) - fminf(p.x, t.x)) * (fmaxf(p.w, t.w) - fminf(p.y, t.y));
    return 1.f - (inter / (uni + kEps) - (area_c - uni) / (area_c + kEps));
}

// share of max(a, b) owed to a, as autograd splits it: 1, 1/2 at a tie, 0
__device__ __forceinline__ float share(float a, float b) { return a > b ? 1.f : (a == b ? 0.5f : 0.f); }

// d (1 - GIoU) / d p for one pair of boxes.
__device__ __forceinline__ float4 giou_box_grad(float4 p, float4 t) {
    float iw = fminf(p.z, t.z) - fmaxf(p.x, t.x), ih = fminf(p.w, t.w) - fmaxf(p.y, t.y);
    bool overlap = iw > 0.f && ih > 0.f;
    float inter = overlap ? iw * ih : 0.f;
    float pw = p.z - p.x, ph = p.w - p.y;
    float u = pw * ph + (t.z - t.x) * (t.w - t.y) - inter + kEps;
    float cw = fmaxf(p.z, t.z) - fminf(p.x, t.x), ch = fmaxf(p.w, t.w) - fminf(p.y, t.y);
    float c = cw * ch + kEps;
    float g_union = inter / (u * u) - 1.f / c;
    float g_inter = overlap ? -1.f / u - g_union : 0.f;
    float g_area_c = u / (c * c);
    float sx1 = share(p.x, t.x), sy1 = share(p.y, t.y), sx2 = share(p.z, t.z), sy2 = share(p.w, t.w);
    return make_float4(-ph * g_union - sx1 * ih * g_inter - (1.f - sx1) * ch * g_area_c,
                       -pw * g_union - sy1 * iw * g_inter - (1.f - sy1) * cw * g_area_c,
                       ph * g_union + (1.f - sx2) * ih * g_inter + sx2 * ch * g_area_c,
                       pw * g_union + (1.f - sy2) * iw * g_inter + sy2 * cw * g_area_c);
}

// cuda forward
constexpr int kThreads = 256;

// One block per image: each thread walks the image's boxes with a stride of kThreads, then the
// block adds up its threads' partial sums in shared memory, halving the active threads each step.
__global__ void giou_per_image_kernel(const float4* __restrict__ pred, const float4* __restrict__ target,
                                      const bool* __restrict__ mask, int n_boxes,
                                      float* __restrict__ sums, int* __restrict__ counts) {
    __shared__ float s_sum[kThreads];
    __shared__ int s_count[kThreads];
    const long long first = (long long)blockIdx.x * n_boxes;
    float acc = 0.f;
    int count = 0;
    for (int i = threadIdx.x; i < n_boxes; i += kThreads) {
        if (mask[first + i]) {
            acc += giou_box_loss(pred[first + i], target[first + i]);
            count += 1;
        }
    }
    s_sum[threadIdx.x] = acc;
    s_count[threadIdx.x] = count;
    __syncthreads();
    for (int stride = kThreads / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) {
            s_sum[threadIdx.x] += s_sum[threadIdx.x + stride];
            s_count[threadIdx.x] += s_count[threadIdx.x + stride];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        sums[blockIdx.x] = s_sum[0];
        counts[blockIdx.x] = s_count[0];
    }
}
// cuda forward:end

// One thread per box: the gradient of the mean loss, grad_loss / max(count, 1) * d loss_i / d p_i.
__global__ void giou_backward_kernel(const float4* __restrict__ pred, const float4* __restrict__ target,
                                     const bool* __restrict__ mask, const float* __restrict__ grad_loss,
                                     const float* __restrict__ count, float4* __restrict__ grad, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float4 g = make_float4(0.f, 0.f, 0.f, 0.f);
    if (mask[i]) {
        float scale = grad_loss[0] / fmaxf(count[0], 1.f);
        float4 d = giou_box_grad(pred[i], target[i]);
        g = make_float4(d.x * scale, d.y * scale, d.z * scale, d.w * scale);
    }
    grad[i] = g;
}
"""

GIOU_HOST_SRC = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAException.h>

static void check_fp32_boxes(const torch::Tensor& boxes, const char* name) {
    TORCH_CHECK(boxes.is_cuda() && boxes.scalar_type() == torch::kFloat32 && boxes.is_contiguous(),
                name, " must be a contiguous float32 CUDA tensor");
    TORCH_CHECK(reinterpret_cast<uintptr_t>(boxes.data_ptr()) % 16 == 0, name, " must be 16-byte aligned (float4 loads)");
}

// Per image: (sum of the loss over its valid boxes, their number).
std::vector<torch::Tensor> giou_forward_cuda(torch::Tensor pred, torch::Tensor target, torch::Tensor mask) {
    check_fp32_boxes(pred, "pred");
    check_fp32_boxes(target, "target");
    TORCH_CHECK(mask.is_cuda() && mask.scalar_type() == torch::kBool && mask.is_contiguous(), "mask: contiguous bool");
    c10::cuda::CUDAGuard guard(pred.device());
    const int batch = pred.size(0), n_boxes = pred.size(1);
    auto sums = torch::empty({batch}, pred.options());
    auto counts = torch::empty({batch}, pred.options().dtype(torch::kInt32));
    if (batch > 0) {
        giou_per_image_kernel<<<batch, kThreads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            reinterpret_cast<const float4*>(pred.data_ptr<float>()), reinterpret_cast<const float4*>(target.data_ptr<float>()),
            mask.data_ptr<bool>(), n_boxes, sums.data_ptr<float>(), counts.data_ptr<int>());
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return {sums, counts};
}

torch::Tensor giou_backward_cuda(torch::Tensor grad_loss, torch::Tensor pred, torch::Tensor target,
                                 torch::Tensor mask, torch::Tensor count) {
    check_fp32_boxes(pred, "pred");
    check_fp32_boxes(target, "target");
    c10::cuda::CUDAGuard guard(pred.device());
    auto grad = torch::empty_like(pred);
    const long long n = mask.numel();
    if (n > 0) {
        const int threads = 256;
        const long long blocks = (n + threads - 1) / threads;
        giou_backward_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
            reinterpret_cast<const float4*>(pred.data_ptr<float>()), reinterpret_cast<const float4*>(target.data_ptr<float>()),
            mask.data_ptr<bool>(), grad_loss.data_ptr<float>(), count.data_ptr<float>(),
            reinterpret_cast<float4*>(grad.data_ptr<float>()), n);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    return grad;
}
"""
GIOU_CPP_DECLS = r"""
std::vector<torch::Tensor> giou_forward_cuda(torch::Tensor pred, torch::Tensor target, torch::Tensor mask);
torch::Tensor giou_backward_cuda(torch::Tensor grad_loss, torch::Tensor pred, torch::Tensor target,
                                 torch::Tensor mask, torch::Tensor count);
"""


def per_image_twin(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, threads: int = 256):
    """giou_per_image_kernel on the CPU: blocks in a loop, a block's threads as one vector of lanes, the same
    strided loop and the same tree of additions in the same order. Returns [sums, counts] per image."""
    check_boxes(pred, target, mask)
    threads = require_number("threads", threads, integer=True, low=1)
    if threads & (threads - 1):
        raise ValueError(f"threads must be a power of two (the tree halves it), got {threads}")
    batch, n_boxes = mask.shape
    sums, counts = torch.empty(batch), torch.empty(batch, dtype=torch.int32)
    lane = torch.arange(threads)
    for block in range(batch):                                   # blockIdx.x
        acc, count = torch.zeros(threads), torch.zeros(threads, dtype=torch.int32)
        for start in range(0, n_boxes, threads):                 # i = threadIdx.x; i < n; i += 256
            i = (start + lane).clamp(max=n_boxes - 1)
            take = (start + lane < n_boxes) & mask[block, i]
            acc += torch.where(take, giou_per_box(pred[block, i].float(), target[block, i].float()), 0.0)
            count += take
        stride = threads // 2
        while stride > 0:                                        # the shared-memory tree
            acc[:stride] += acc[stride:2 * stride]
            count[:stride] += count[stride:2 * stride]
            stride //= 2
        sums[block], counts[block] = acc[0], count[0]
    return [sums, counts]


def backward_twin(grad_loss: torch.Tensor, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                  count: torch.Tensor) -> torch.Tensor:
    """giou_backward_kernel on the CPU: every box at once, grad_loss / max(count, 1) * d loss_i / d p_i."""
    check_boxes(pred, target, mask)
    for name, value in (("grad_loss", grad_loss), ("count", count)):
        if not isinstance(value, torch.Tensor) or value.numel() != 1:
            raise ValueError(f"{name} must be a one-element tensor, got {value!r}")
    grad = giou_per_box_grad(pred, target) * (grad_loss / count.clamp_min(1))
    return torch.where(mask[..., None], grad, 0.0)


class _CudaGIoULoss(torch.autograd.Function):
    """Forward: the per-image kernel, then the mean in PyTorch. Backward: one thread per box."""

    @staticmethod
    def forward(ctx, forward_fn, backward_fn, pred, target, mask):
        sums, counts = forward_fn(pred, target, mask)
        count = counts.sum().float()
        ctx.backward_fn = backward_fn
        ctx.save_for_backward(pred, target, mask, count)
        return sums.sum() / count.clamp_min(1)

    @staticmethod
    def backward(ctx, grad_loss):
        pred, target, mask, count = ctx.saved_tensors
        return None, None, ctx.backward_fn(grad_loss.contiguous(), pred, target, mask, count), None, None


def make_cuda_loss(forward_fn, backward_fn):
    """The CUDA version as a differentiable loss. ``forward_fn`` and ``backward_fn`` are the extension's
    giou_forward_cuda and giou_backward_cuda on a GPU, per_image_twin and backward_twin elsewhere. The kernels
    take fp32 only, so bf16 and fp16 boxes are converted first (autograd converts the gradient back)."""
    for name, fn in (("forward_fn", forward_fn), ("backward_fn", backward_fn)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable (the extension's function or its CPU twin), got {fn!r}")

    def giou_loss_cuda(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        check_boxes(pred, target, mask, device_type=KERNEL_DEVICE)
        return _CudaGIoULoss.apply(forward_fn, backward_fn, pred.float().contiguous(), target.float().contiguous(),
                                   mask.contiguous())
    return giou_loss_cuda


#: Where the Triton kernels run: the GPU, or the CPU when Triton runs in its interpreter.
KERNEL_DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"


def check_kernel_inputs(pred, target, mask) -> None:
    """check_boxes, on the kernels' device; and no input may require grad: these launches have no backward
    of their own (giou_loss_triton is the differentiable loss)."""
    check_boxes(pred, target, mask, device_type=KERNEL_DEVICE)
    for name, value in (("pred", pred), ("target", target)):
        if torch.is_grad_enabled() and value.requires_grad:
            raise ValueError(f"{name} requires grad, but these kernels give no gradient: use "
                             f"giou_loss_triton, or pass {name}.detach()")


@triton.jit
def giou_per_image_kernel(pred_ptr, target_ptr, mask_ptr, sums_ptr, counts_ptr, n_boxes,
                          EPS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr):
    """Program b adds up the loss of image b's valid boxes, BLOCK boxes at a time (the CUDA port)."""
    image = tl.program_id(0)
    first = image.to(tl.int64) * n_boxes                    # this image's first box
    acc = tl.zeros([BLOCK], dtype=tl.float64 if FP64 else tl.float32)
    cnt = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, n_boxes, BLOCK):
        i = start + tl.arange(0, BLOCK)
        valid = (i < n_boxes) & (tl.load(mask_ptr + first + i, mask=i < n_boxes, other=0) != 0)
        box = (first + i) * 4                               # (x1, y1, x2, y2), 4 values per box
        px1 = tl.load(pred_ptr + box, mask=valid, other=0.0).to(acc.dtype)
        py1 = tl.load(pred_ptr + box + 1, mask=valid, other=0.0).to(acc.dtype)
        px2 = tl.load(pred_ptr + box + 2, mask=valid, other=0.0).to(acc.dtype)
        py2 = tl.load(pred_ptr + box + 3, mask=valid, other=0.0).to(acc.dtype)
        tx1 = tl.load(target_ptr + box, mask=valid, other=0.0).to(acc.dtype)
        ty1 = tl.load(target_ptr + box + 1, mask=valid, other=0.0).to(acc.dtype)
        tx2 = tl.load(target_ptr + box + 2, mask=valid, other=0.0).to(acc.dtype)
        ty2 = tl.load(target_ptr + box + 3, mask=valid, other=0.0).to(acc.dtype)
        iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
        ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
        inter = tl.where((iw > 0) & (ih > 0), iw * ih, 0.0)
        union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
        area_c = ((tl.maximum(px2, tx2) - tl.minimum(px1, tx1))
                  * (tl.maximum(py2, ty2) - tl.minimum(py1, ty1)))
        loss = 1.0 - (inter / (union + EPS) - (area_c - union) / (area_c + EPS))
        acc += tl.where(valid, loss, 0.0)
        cnt += valid.to(tl.int32)
    tl.store(sums_ptr + image, tl.sum(acc, axis=0))
    tl.store(counts_ptr + image, tl.sum(cnt, axis=0))


def giou_sums_per_image(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor):
    """(sum of the loss, number of valid boxes) per image, from one program per image."""
    check_kernel_inputs(pred, target, mask)
    return _sums_per_image(pred, target, mask)


def _sums_per_image(pred, target, mask):
    batch, n_boxes = mask.shape
    dtype = torch.float64 if torch.float64 in (pred.dtype, target.dtype) else torch.float32
    sums = torch.empty(batch, dtype=dtype, device=pred.device)
    counts = torch.empty(batch, dtype=torch.int32, device=pred.device)
    if batch == 0:
        return sums, counts
    block = min(1024, max(16, triton.next_power_of_2(n_boxes)))
    giou_per_image_kernel[(batch,)](pred.contiguous(), target.contiguous(), mask.contiguous(),
                                    sums, counts, n_boxes, EPS=EPS, BLOCK=block,
                                    FP64=dtype == torch.float64, num_warps=4)
    return sums, counts


#: Boxes per program of the tiled kernels, and partial sums per step of the finishing kernel.
TILE = 512
FINISH_BLOCK = 1024


@triton.jit
def giou_tile_kernel(pred_ptr, target_ptr, mask_ptr, sums_ptr, counts_ptr, n_boxes,
                     EPS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr, ATOMIC: tl.constexpr):
    """Program p handles boxes [p * BLOCK, (p + 1) * BLOCK) of the flattened batch, in their own dtype.

    ATOMIC=False: it writes its partial sum and count to slot p (a second kernel adds them up).
    ATOMIC=True: it adds them to slot 0 with atomics (the order of the additions is not fixed).
    """
    pid = tl.program_id(0)
    i = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n_boxes
    valid = inside & (tl.load(mask_ptr + i, mask=inside, other=0) != 0)
    ct = tl.float64 if FP64 else tl.float32                 # compute type: never 16 bits
    box = i * 4
    px1 = tl.load(pred_ptr + box, mask=valid, other=0.0).to(ct)
    py1 = tl.load(pred_ptr + box + 1, mask=valid, other=0.0).to(ct)
    px2 = tl.load(pred_ptr + box + 2, mask=valid, other=0.0).to(ct)
    py2 = tl.load(pred_ptr + box + 3, mask=valid, other=0.0).to(ct)
    tx1 = tl.load(target_ptr + box, mask=valid, other=0.0).to(ct)
    ty1 = tl.load(target_ptr + box + 1, mask=valid, other=0.0).to(ct)
    tx2 = tl.load(target_ptr + box + 2, mask=valid, other=0.0).to(ct)
    ty2 = tl.load(target_ptr + box + 3, mask=valid, other=0.0).to(ct)
    iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
    ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
    inter = tl.where((iw > 0) & (ih > 0), iw * ih, 0.0)
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - inter
    area_c = (tl.maximum(px2, tx2) - tl.minimum(px1, tx1)) * (tl.maximum(py2, ty2) - tl.minimum(py1, ty1))
    loss = 1.0 - (inter / (union + EPS) - (area_c - union) / (area_c + EPS))
    total = tl.sum(tl.where(valid, loss, 0.0), axis=0)
    count = tl.sum(valid.to(tl.int32), axis=0)
    if ATOMIC:
        tl.atomic_add(sums_ptr, total)
        tl.atomic_add(counts_ptr, count)
    else:
        tl.store(sums_ptr + pid, total)
        tl.store(counts_ptr + pid, count)


@triton.jit
def giou_finish_kernel(sums_ptr, counts_ptr, n_partials, loss_ptr, count_ptr, BLOCK: tl.constexpr):
    """One program: add up the partial sums and counts in a fixed order, write mean and count."""
    acc = tl.zeros([BLOCK], dtype=sums_ptr.dtype.element_ty)
    cnt = tl.zeros([BLOCK], dtype=tl.int32)
    for start in range(0, n_partials, BLOCK):
        j = start + tl.arange(0, BLOCK)
        acc += tl.load(sums_ptr + j, mask=j < n_partials, other=0.0)
        cnt += tl.load(counts_ptr + j, mask=j < n_partials, other=0)
    total = tl.sum(acc, axis=0)
    count = tl.sum(cnt, axis=0)
    tl.store(loss_ptr, total / tl.maximum(count, 1).to(total.dtype))   # no valid box: 0 / 1
    tl.store(count_ptr, count.to(tl.float32))


def _no_wrap(kernel):
    return kernel


def giou_forward(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, *, atomic: bool = False,
                 wrap=_no_wrap):
    """(mean loss over valid boxes, number of valid boxes as float32): two launches, or one with atomics.

    ``wrap`` is applied to each kernel before launching it (`torch.library.wrap_triton` inside a
    `triton_op`); inputs are read in their own dtype. The autograd Function and the operator call the
    unchecked `_forward`, after checking their inputs once.
    """
    check_kernel_inputs(pred, target, mask)
    require_choice("atomic", atomic, (False, True))
    if not callable(wrap):
        raise TypeError(f"wrap must be callable (kernel -> launchable kernel), got {type(wrap).__name__}")
    return _forward(pred, target, mask, atomic=atomic, wrap=wrap)


def _forward(pred, target, mask, *, atomic=False, wrap=_no_wrap):
    n_boxes = mask.numel()
    dtype = torch.float64 if torch.float64 in (pred.dtype, target.dtype) else torch.float32
    n_tiles = max(1, triton.cdiv(n_boxes, TILE))
    flags = dict(EPS=EPS, BLOCK=TILE, FP64=dtype == torch.float64, ATOMIC=atomic)
    args = (pred.contiguous(), target.contiguous(), mask.contiguous())
    if atomic:
        sums = torch.zeros(1, dtype=dtype, device=pred.device)
        counts = torch.zeros(1, dtype=torch.int32, device=pred.device)
        wrap(giou_tile_kernel)[(n_tiles,)](*args, sums, counts, n_boxes, **flags, num_warps=4)
        return sums[0] / counts[0].clamp_min(1), counts[0].float()
    sums = torch.empty(n_tiles, dtype=dtype, device=pred.device)
    counts = torch.empty(n_tiles, dtype=torch.int32, device=pred.device)
    wrap(giou_tile_kernel)[(n_tiles,)](*args, sums, counts, n_boxes, **flags, num_warps=4)
    loss = torch.empty((), dtype=dtype, device=pred.device)
    count = torch.empty((), dtype=torch.float32, device=pred.device)
    wrap(giou_finish_kernel)[(1,)](sums, counts, n_tiles, loss, count, BLOCK=FINISH_BLOCK, num_warps=4)
    return loss, count


@triton.jit
def giou_backward_kernel(pred_ptr, target_ptr, mask_ptr, grad_loss_ptr, count_ptr, grad_ptr, n_boxes,
                         EPS: tl.constexpr, BLOCK: tl.constexpr, FP64: tl.constexpr):
    """d mean-loss / d pred for BLOCK boxes: recompute the forward, apply the chain rule, scale."""
    pid = tl.program_id(0)
    i = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    inside = i < n_boxes
    valid = inside & (tl.load(mask_ptr + i, mask=inside, other=0) != 0)
    ct = tl.float64 if FP64 else tl.float32
    scale = tl.load(grad_loss_ptr).to(ct) / tl.maximum(tl.load(count_ptr), 1.0).to(ct)
    box = i * 4
    px1 = tl.load(pred_ptr + box, mask=valid, other=0.0).to(ct)
    py1 = tl.load(pred_ptr + box + 1, mask=valid, other=0.0).to(ct)
    px2 = tl.load(pred_ptr + box + 2, mask=valid, other=0.0).to(ct)
    py2 = tl.load(pred_ptr + box + 3, mask=valid, other=0.0).to(ct)
    tx1 = tl.load(target_ptr + box, mask=valid, other=0.0).to(ct)
    ty1 = tl.load(target_ptr + box + 1, mask=valid, other=0.0).to(ct)
    tx2 = tl.load(target_ptr + box + 2, mask=valid, other=0.0).to(ct)
    ty2 = tl.load(target_ptr + box + 3, mask=valid, other=0.0).to(ct)
    iw = tl.minimum(px2, tx2) - tl.maximum(px1, tx1)
    ih = tl.minimum(py2, ty2) - tl.maximum(py1, ty1)
    overlap = (iw > 0) & (ih > 0)
    inter = tl.where(overlap, iw * ih, 0.0)
    pw = px2 - px1
    ph = py2 - py1
    union = pw * ph + (tx2 - tx1) * (ty2 - ty1) - inter
    cw = tl.maximum(px2, tx2) - tl.minimum(px1, tx1)
    ch = tl.maximum(py2, ty2) - tl.minimum(py1, ty1)
    u = union + EPS
    c = cw * ch + EPS
    g_union = inter / (u * u) - 1.0 / c
    g_inter = tl.where(overlap, -1.0 / u - g_union, 0.0)
    g_area_c = u / (c * c)
    # share of a max owed to the pred coordinate: 1 if it is the larger, 1/2 at a tie, else 0
    sx1 = tl.where(px1 > tx1, 1.0, tl.where(px1 == tx1, 0.5, 0.0))
    sy1 = tl.where(py1 > ty1, 1.0, tl.where(py1 == ty1, 0.5, 0.0))
    sx2 = tl.where(px2 > tx2, 1.0, tl.where(px2 == tx2, 0.5, 0.0))
    sy2 = tl.where(py2 > ty2, 1.0, tl.where(py2 == ty2, 0.5, 0.0))
    gx1 = -ph * g_union - sx1 * ih * g_inter - (1.0 - sx1) * ch * g_area_c
    gy1 = -pw * g_union - sy1 * iw * g_inter - (1.0 - sy1) * cw * g_area_c
    gx2 = ph * g_union + (1.0 - sx2) * ih * g_inter + sx2 * ch * g_area_c
    gy2 = pw * g_union + (1.0 - sy2) * iw * g_inter + sy2 * cw * g_area_c
    s = tl.where(valid, scale, 0.0)
    out = grad_ptr.dtype.element_ty
    tl.store(grad_ptr + box, (gx1 * s).to(out), mask=inside)
    tl.store(grad_ptr + box + 1, (gy1 * s).to(out), mask=inside)
    tl.store(grad_ptr + box + 2, (gx2 * s).to(out), mask=inside)
    tl.store(grad_ptr + box + 3, (gy2 * s).to(out), mask=inside)


def giou_backward(grad_loss: torch.Tensor, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                  count: torch.Tensor, *, wrap=_no_wrap) -> torch.Tensor:
    """The gradient of the mean loss with respect to pred, in pred's dtype and shape."""
    check_kernel_inputs(pred, target, mask)
    for name, value in (("grad_loss", grad_loss), ("count", count)):
        if not isinstance(value, torch.Tensor) or value.numel() != 1 or not value.is_floating_point():
            raise ValueError(f"{name} must be a one-element float tensor (from giou_forward), got {value!r}")
        if value.device != pred.device:
            raise ValueError(f"{name} must be on pred's device {pred.device} (the kernel reads it), got {value.device}")
    if not callable(wrap):
        raise TypeError(f"wrap must be callable (kernel -> launchable kernel), got {type(wrap).__name__}")
    return _backward(grad_loss, pred, target, mask, count, wrap=wrap)


def _backward(grad_loss, pred, target, mask, count, *, wrap=_no_wrap):
    n_boxes = mask.numel()
    grad = torch.empty(pred.shape, dtype=pred.dtype, device=pred.device)
    if n_boxes == 0:
        return grad
    fp64 = torch.float64 in (pred.dtype, target.dtype)
    wrap(giou_backward_kernel)[(triton.cdiv(n_boxes, TILE),)](
        pred.contiguous(), target.contiguous(), mask.contiguous(), grad_loss.contiguous(),
        count, grad, n_boxes, EPS=EPS, BLOCK=TILE, FP64=fp64, num_warps=4)
    return grad


class TritonGIoULoss(torch.autograd.Function):
    """Forward: the tiled kernels (or one program per image). Backward: giou_backward_kernel."""

    @staticmethod
    def forward(ctx, pred, target, mask, per_image=False):
        if per_image:
            sums, counts = _sums_per_image(pred, target, mask)
            count = counts.sum()
            loss, count = sums.sum() / count.clamp_min(1), count.float()
        else:
            loss, count = _forward(pred, target, mask)
        ctx.save_for_backward(pred, target, mask, count)
        return loss

    @staticmethod
    def backward(ctx, grad_loss):
        pred, target, mask, count = ctx.saved_tensors
        grad = _backward(grad_loss, pred, target, mask, count) if ctx.needs_input_grad[0] else None
        return grad, None, None, None


def giou_loss_triton(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, *,
                     per_image: bool = False) -> torch.Tensor:
    """Mean GIoU loss over the valid boxes, differentiable with respect to pred (Triton kernels)."""
    check_boxes(pred, target, mask, device_type=KERNEL_DEVICE)
    require_choice("per_image", per_image, (False, True))
    if target.requires_grad and torch.is_grad_enabled():
        raise ValueError("target must not require grad: this loss gives gradients for pred only "
                         "(pass target.detach())")
    return TritonGIoULoss.apply(pred, target, mask, per_image)


#: The operators' namespace: torch.ops.gpu_course_nb13.giou_forward / .giou_backward.
NAMESPACE = "gpu_course_nb13"
_INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"


def _forward_impl(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _forward(pred, target, mask, wrap=wrap_triton)


def _backward_impl(grad_loss: torch.Tensor, pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor,
                   count: torch.Tensor) -> torch.Tensor:
    return _backward(grad_loss, pred, target, mask, count, wrap=wrap_triton)


def _define(name, impl, fake):
    """A triton_op (torch.compile sees the kernels) on a GPU; in the interpreter, where the kernels
    cannot be traced, an opaque custom_op with a fake (shape-only) implementation."""
    if _INTERPRETED:
        op = torch.library.custom_op(f"{NAMESPACE}::{name}", impl, mutates_args=())
        op.register_fake(fake)
        return op
    return torch.library.triton_op(f"{NAMESPACE}::{name}", impl, mutates_args=())


def _forward_fake(pred, target, mask):
    dtype = torch.float64 if torch.float64 in (pred.dtype, target.dtype) else torch.float32
    return pred.new_empty((), dtype=dtype), pred.new_empty((), dtype=torch.float32)


def _backward_fake(grad_loss, pred, target, mask, count):
    return torch.empty(pred.shape, dtype=pred.dtype, device=pred.device)


def _setup_context(ctx, inputs, output):
    pred, target, mask = inputs
    ctx.save_for_backward(pred, target, mask, output[1])


def _autograd_backward(ctx, grad_loss, grad_count):
    pred, target, mask, count = ctx.saved_tensors
    return torch.ops.gpu_course_nb13.giou_backward(grad_loss, pred, target, mask, count), None, None


if not hasattr(getattr(torch.ops, NAMESPACE), "giou_forward"):   # define once per process
    _define("giou_backward", _backward_impl, _backward_fake)
    _define("giou_forward", _forward_impl, _forward_fake).register_autograd(
        _autograd_backward, setup_context=_setup_context)


def giou_loss_op(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """giou_loss_triton as a registered operator: the same kernels, traceable by torch.compile."""
    check_boxes(pred, target, mask, device_type=KERNEL_DEVICE)
    if target.requires_grad and torch.is_grad_enabled():
        raise ValueError("target must not require grad: this loss gives gradients for pred only "
                         "(pass target.detach())")
    return torch.ops.gpu_course_nb13.giou_forward(pred, target, mask)[0]


# ---------------------------------------------------------------------------------------------- measuring
#: What one timed call does: the loss alone, or the loss and its gradient with respect to pred.
PHASES = ("forward", "forward+backward")


def count_launches(fn) -> int:
    """GPU: the kernels one call of ``fn`` launches, counted by torch.profiler. CPU: the ATen operators it runs
    (not those nested in another) and the C++ kernels torch.compile generated, each of which would be a kernel
    on a GPU. ``fn`` is called once before, so that compilation and caches stay out of the count."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    if not callable(fn):
        raise TypeError(f"fn must be callable (a function of no arguments), got {type(fn).__name__}")
    cuda = torch.cuda.is_available()
    fn()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the profiler's notes about its own cycles, not about fn
        with profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])) as prof:
            fn()
            if cuda:
                torch.cuda.synchronize()
        events = prof.events()
    if cuda:
        return sum(e.device_type == DeviceType.CUDA for e in events)
    top_level_ops = sum(e.name.startswith("aten::") and not (e.cpu_parent and e.cpu_parent.name.startswith("aten::"))
                        for e in events)
    return top_level_ops + sum("cpp_fused" in e.name for e in events)


def loss_call(loss_fn, batch: int, max_boxes: int, *, phase: str = "forward+backward",
              dtype: torch.dtype = torch.bfloat16, device=None, seed: int | None = None):
    """One call of ``loss_fn`` on a padded batch of `random_boxes`, as a function of no arguments for the timers:
    the loss (``phase="forward"``), or the loss and its gradient with respect to pred (``torch.autograd.grad``).
    The call runs once here, so compilation and first-call work stay out of any timing."""
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable (pred, target, mask) -> loss, got {type(loss_fn).__name__}")
    require_choice("phase", phase, PHASES)
    batch = require_number("batch", batch, integer=True, low=0)
    max_boxes = require_number("max_boxes", max_boxes, integer=True, low=0)
    seed = batch * 10_000 + max_boxes if seed is None else seed
    p, t, m = random_boxes(batch, max_boxes, dtype=dtype, device=KERNEL_DEVICE if device is None else device,
                           seed=seed)
    if phase == "forward":
        def call():
            return loss_fn(p, t, m)
    else:
        p.requires_grad_()

        def call():
            return torch.autograd.grad(loss_fn(p, t, m), p)
    call()
    return call


#: The cu.benchmark modes the notebooks time a loss call in, and what each one measures.
MODE_NAMES = {"wall": "wall time per call", "graph": "GPU time (graph replay)"}


def time_modes(fn, modes=("wall", "graph"), **benchmark_kwargs) -> dict[str, float]:
    """Median ms per call of ``fn`` in each ``cu.benchmark`` mode: "wall" (calls back to back, host work included:
    what a training loop pays) and "graph" (the call replayed from a CUDA graph: the GPU's work alone). Where a
    call cannot be captured in a graph, "graph" is NaN and one line says why. Warnings are silenced."""
    from course_utils.timing import MODES, benchmark

    if not callable(fn):
        raise TypeError(f"fn must be callable (a function of no arguments), got {type(fn).__name__}")
    if isinstance(modes, str) or not modes or any(mode not in MODES for mode in modes):
        raise ValueError(f"modes must be a non-empty sequence of {MODES}, got {modes!r}")
    out = {}
    for mode in modes:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out[mode] = benchmark(fn, mode=mode, **benchmark_kwargs).median_ms
            except RuntimeError as err:  # a capture that syncs with the host, or reads a CPU value
                if mode != "graph" or not torch.cuda.is_available():
                    raise
                print(f"  no CUDA graph of this call ({type(err).__name__}: {str(err).splitlines()[0][:100]})")
                out[mode] = math.nan
    return out
