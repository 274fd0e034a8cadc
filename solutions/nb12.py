"""Solutions of notebook 12's exercises: the fused add-mul-tanh, the backward pass of the fused add-mul-activation,
and LoRA's gradient for B as a Triton matmul over the tokens."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter

ELEMENTWISE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _check_same(**tensors: torch.Tensor) -> None:
    first = next(iter(tensors.values()))
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a tensor, got {type(t).__name__}")
        if t.dtype != first.dtype or t.dtype not in ELEMENTWISE_DTYPES:
            raise TypeError(f"the tensors must share one dtype of {ELEMENTWISE_DTYPES}, got {t.dtype} for {name}")
        if t.shape != first.shape or t.device != first.device:
            raise ValueError(f"the tensors must have one shape and device, got {tuple(t.shape)} for {name}")
    if first.numel() >= 2**31:
        raise ValueError("2^31 elements or more: the kernels' offsets are 32-bit")


# ---- Exercise 1: tanh(base + scale * lora) -------------------------------------------------------------
@triton.jit
def add_mul_tanh_kernel(base_ptr, lora_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    y = tl.load(base_ptr + offs, mask=mask).to(tl.float32) + scale * tl.load(lora_ptr + offs, mask=mask).to(tl.float32)
    t = tl.exp(-2.0 * tl.abs(y))  # in (0, 1]: never overflows, unlike exp(2 y) for y > 44
    th = (1.0 - t) / (1.0 + t)
    tl.store(out_ptr + offs, tl.where(y < 0, -th, th).to(out_ptr.dtype.element_ty), mask=mask)


def add_mul_tanh(base: torch.Tensor, lora: torch.Tensor, scale: float) -> torch.Tensor:
    _check_same(base=base, lora=lora)
    base, lora = base.contiguous(), lora.contiguous()  # views: one copy each, then a flat index
    out = torch.empty_like(base)
    if out.numel():
        block = 4096 // base.element_size()
        add_mul_tanh_kernel[(triton.cdiv(out.numel(), block),)](base, lora, out, float(scale), out.numel(), BLOCK=block)
    return out


# ---- Exercise 2: the backward pass of act(base + scale * lora) ---------------------------------------------
@triton.jit
def activation_derivative(y, ACTIVATION: tl.constexpr):
    """d act(y) / dy on an fp32 tile, at the pre-activation y."""
    if ACTIVATION == "relu":
        d = tl.where(y > 0, 1.0, 0.0)
    elif ACTIVATION == "sigmoid":
        s = tl.sigmoid(y)
        d = s * (1.0 - s)
    elif ACTIVATION == "gelu":  # Phi(y) + y phi(y)
        d = 0.5 * (1.0 + tl.erf(y * 0.7071067811865476)) + y * tl.exp(-0.5 * y * y) * 0.3989422804014327
    else:  # silu: sigmoid(y) (1 + y (1 - sigmoid(y)))
        s = tl.sigmoid(y)
        d = s * (1.0 + y * (1.0 - s))
    return d


@triton.jit
def add_mul_act_backward_kernel(grad_ptr, base_ptr, lora_ptr, d_base_ptr, d_lora_ptr, scale, n,
                                BLOCK: tl.constexpr, ACTIVATION: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    grad = tl.load(grad_ptr + offs, mask=mask).to(tl.float32)
    y = tl.load(base_ptr + offs, mask=mask).to(tl.float32) + scale * tl.load(lora_ptr + offs, mask=mask).to(tl.float32)
    dy = grad * activation_derivative(y, ACTIVATION)  # recomputed y: nothing but the inputs is saved
    tl.store(d_base_ptr + offs, dy.to(d_base_ptr.dtype.element_ty), mask=mask)
    tl.store(d_lora_ptr + offs, (scale * dy).to(d_lora_ptr.dtype.element_ty), mask=mask)


def add_mul_act_backward(grad, base, lora, scale: float, activation: str):
    _check_same(grad=grad, base=base, lora=lora)
    if activation not in ("relu", "sigmoid", "gelu", "silu"):
        raise ValueError(f"activation must be 'relu', 'sigmoid', 'gelu' or 'silu', got {activation!r}")
    grad, base, lora = grad.contiguous(), base.contiguous(), lora.contiguous()
    d_base, d_lora = torch.empty_like(base), torch.empty_like(base)
    if base.numel():
        block = 4096 // base.element_size()
        add_mul_act_backward_kernel[(triton.cdiv(base.numel(), block),)](
            grad, base, lora, d_base, d_lora, float(scale), base.numel(), BLOCK=block, ACTIVATION=activation)
    return d_base, d_lora


# ---- Exercise 3: dB = scale * g^T (x A^T) ------------------------------------------------------------------
@triton.jit
def lora_grad_b_kernel(g_ptr, xa_ptr, out_ptr, T, N, R, scale, stride_gt, stride_gn, stride_xt, stride_xr,
                       BLOCK_N: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_R: tl.constexpr):
    offs_n = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)  # this program's rows of dB
    offs_r = tl.arange(0, BLOCK_R)                               # all of the rank, padded to >= 16
    offs_t = tl.arange(0, BLOCK_T)
    acc = tl.zeros((BLOCK_N, BLOCK_R), dtype=tl.float32)
    for t0 in range(0, T, BLOCK_T):  # the reduction runs over the tokens, the long dimension
        t = t0 + offs_t
        gt = tl.load(g_ptr + offs_n[:, None] * stride_gn + t[None, :] * stride_gt,  # a tile of g^T, via strides
                     mask=(offs_n[:, None] < N) & (t[None, :] < T), other=0.0)
        xa = tl.load(xa_ptr + t[:, None] * stride_xt + offs_r[None, :] * stride_xr,
                     mask=(t[:, None] < T) & (offs_r[None, :] < R), other=0.0)
        acc = tl.dot(gt, xa, acc)
    out = out_ptr + offs_n[:, None] * R + offs_r[None, :]
    tl.store(out, (acc * scale).to(out_ptr.dtype.element_ty), mask=(offs_n[:, None] < N) & (offs_r[None, :] < R))


def lora_grad_b(g: torch.Tensor, xa: torch.Tensor, scale: float) -> torch.Tensor:
    if not isinstance(g, torch.Tensor) or not isinstance(xa, torch.Tensor):
        raise TypeError("g and xa must be tensors")
    if g.dim() != 2 or xa.dim() != 2 or g.shape[0] != xa.shape[0]:
        raise ValueError(f"need g (tokens x d_out) and xa (tokens x r), got {tuple(g.shape)} and {tuple(xa.shape)}")
    if g.dtype != xa.dtype or g.dtype not in (torch.float16, torch.bfloat16):
        raise TypeError(f"g and xa must both be float16 or both bfloat16, got {g.dtype} and {xa.dtype}")
    (T, N), R = g.shape, xa.shape[1]
    out = torch.empty((N, R), dtype=g.dtype, device=g.device)
    if N == 0 or R == 0:
        return out
    if cu.INTERPRET and g.dtype == torch.bfloat16:  # the interpreter's bf16 tl.dot is wrong (triton-lang/triton#11584)
        g, xa = g.float(), xa.float()
    block_n, block_t = cu.pick_size((64, 64), (32, 32))
    lora_grad_b_kernel[(triton.cdiv(N, block_n),)](
        g, xa, out, T, N, R, float(scale), g.stride(0), g.stride(1), xa.stride(0), xa.stride(1),
        BLOCK_N=block_n, BLOCK_T=block_t, BLOCK_R=max(16, triton.next_power_of_2(R)))
    return out
