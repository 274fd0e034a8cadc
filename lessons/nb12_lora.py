"""Notebook 12's code, written here by hand: notebook 12 and deep dive 12b show it with
`course_utils.export.show` and import it.

1. The LoRA layer as peft runs it (`lora_eager`), its fp32 reference, the activations and input checks.
2. The adapter's elementwise tail in one kernel (deep dive 12b): `add_mul_act` (Triton), `add_mul_act_cuda`.
3. The whole LoRA linear in one matmul: `lora_persistent_kernel`, notebook 14's persistent TMA design (notebook
   07's grouped tiles) with the adapter, the bias and the activation in its epilogue, for Hopper; and
   `lora_blocked_kernel`, notebook 07's pointer `tile_product` with the same epilogue, for any GPU and any
   strides. `lora_linear` picks one; `x A^T` is computed first (a small cuBLAS matmul) or, the measured
   alternative, in the K loop.
4. Training: `LoRALinearFunction` runs dx = g W + s (g B) A on the same kernels, reading W through its own
   layout (no transposed copy, still TMA), and dA, dB from the small products; `lora_linear_trainable`.
"""

from __future__ import annotations

import course_utils as cu  # first: on a machine without a GPU it switches Triton to its interpreter

import functools

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course_utils.cuda_build import build_extension
from lessons.nb07_matmul import config as blocked_config
from lessons.nb07_matmul import TILES as BLOCKED_TILES
from lessons.nb07_matmul import interpreter_safe, prune_configs, store_tile, tile_coords, tile_product
from lessons.nb14_hopper_matmul import (CPU_TILES, HAS_TMA, SMS, describe, probe, scratch_for_descriptors,
                                        store_subtiled, tile_config)

# ---- 1. The layer, its reference, the checks -----------------------------------------------------------------
#: The activations every kernel of this notebook accepts ("none" is the identity).
ACTIVATIONS = ("none", "relu", "sigmoid", "gelu", "silu")
ACTIVATION_FNS = {"none": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "gelu": F.gelu, "silu": F.silu}
ELEMENTWISE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
LORA_DTYPES = (torch.float16, torch.bfloat16)  # x, W and the output: the tensor cores' 16-bit types
MAX_RANK = 128
#: |scale| outside this range (other than 0) is refused: the kernels also use 1 / scale in fp32.
SCALE_RANGE = (1e-30, 1e30)


def lora_eager(x, W, b, A, B, scale: float, activation: str = "none") -> torch.Tensor:
    """act(x W^T + b + scale (x A^T) B^T) as peft's LoRA layer computes it: three matmuls, a mul and an add."""
    if activation not in ACTIVATION_FNS:  # a dict lookup: torch.compile folds it, no graph break
        raise ValueError(f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}; got {activation!r}")
    result = F.linear(x, W, b)
    result = result + F.linear(F.linear(x, A), B) * scale
    return ACTIVATION_FNS[activation](result)


def lora_reference(x, W, b, A, B, scale: float, activation: str = "none") -> torch.Tensor:
    """The same in fp32, rounded once to x's dtype: what a fused kernel should return."""
    f = lambda t: None if t is None else t.float()  # noqa: E731
    return lora_eager(f(x), f(W), f(b), f(A), f(B), scale, activation).to(x.dtype)


def add_mul_act_eager(base: torch.Tensor, lora: torch.Tensor, scale: float, activation: str = "relu") -> torch.Tensor:
    """The adapter's elementwise tail, act(base + lora * scale), as eager PyTorch runs it: one kernel per op."""
    if activation not in ACTIVATION_FNS:
        raise ValueError(f"activation must be one of {', '.join(map(repr, ACTIVATIONS))}; got {activation!r}")
    return ACTIVATION_FNS[activation](base + lora * scale)


def add_mul_act_reference(base: torch.Tensor, lora: torch.Tensor, scale: float,
                          activation: str = "relu") -> torch.Tensor:
    """The same in fp32, rounded once to the inputs' dtype."""
    return add_mul_act_eager(base.float(), lora.float(), scale, activation).to(base.dtype)


def check_options(scale: float, activation: str) -> float:
    """scale as a float (0, or |scale| within SCALE_RANGE) and a known activation; errors name the argument."""
    scale = cu.require_number("scale", scale)
    if scale != 0 and not SCALE_RANGE[0] <= abs(scale) <= SCALE_RANGE[1]:
        raise ValueError(f"scale must be 0 or between {SCALE_RANGE[0]:g} and {SCALE_RANGE[1]:g} in size (the kernels "
                         f"compute in fp32 and also use 1 / scale), got {scale!r}")
    cu.require_choice("activation", activation, ACTIVATIONS)
    return scale


# ---- 2. The elementwise tail (deep dive 12b) ------------------------------------------------------------------
@triton.jit
def apply_activation(y, ACTIVATION: tl.constexpr):
    """On an fp32 tile. ACTIVATION is a constexpr: only the chosen branch is compiled."""
    if ACTIVATION == "relu":  # a plain tl.maximum(y, 0.0) turns NaN into 0 on a GPU (max.f32); torch.relu keeps it
        y = tl.maximum(y, 0.0, propagate_nan=tl.PropagateNan.ALL)
    elif ACTIVATION == "sigmoid":
        y = tl.sigmoid(y)
    elif ACTIVATION == "gelu":  # exact GELU, as F.gelu: y Phi(y) = 0.5 y (1 + erf(y / sqrt 2))
        y = 0.5 * y * (1.0 + tl.erf(y * 0.7071067811865476))
    elif ACTIVATION == "silu":
        y = y * tl.sigmoid(y)
    return y


@triton.jit
def add_mul_act_kernel(base_ptr, lora_ptr, out_ptr, scale, n, BLOCK: tl.constexpr, ACTIVATION: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    base = tl.load(base_ptr + offs, mask=mask).to(tl.float32)
    lora = tl.load(lora_ptr + offs, mask=mask).to(tl.float32)
    y = apply_activation(base + scale * lora, ACTIVATION)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def check_elementwise(base, lora, scale, activation) -> float:
    """What both fused elementwise wrappers accept (views are copied, so their span does not matter)."""
    cu.require_tensors(base=base, lora=lora, dtypes=ELEMENTWISE_DTYPES, same_shape=True, max_span=None)
    return check_options(scale, activation)


def add_mul_act(base: torch.Tensor, lora: torch.Tensor, scale: float = 1.0, activation: str = "relu") -> torch.Tensor:
    """act(base + scale * lora) in one pass: two reads and one write per element, fp32 math."""
    scale = check_elementwise(base, lora, scale, activation)
    base, lora = base.contiguous(), lora.contiguous()  # views are copied; matmul outputs are contiguous anyway
    out = torch.empty_like(base)
    if out.numel() == 0:
        return out
    block = 4096 // base.element_size()  # 32 bytes of each input per thread (4 warps = 128 threads)
    add_mul_act_kernel[(triton.cdiv(out.numel(), block),)](base, lora, out, scale, out.numel(), BLOCK=block,
                                                           ACTIVATION=activation, num_warps=4)
    return out



# ---- 2b. The same tail in CUDA C++ (deep dive 12b) ------------------------------------------------------------
#: The kernel and its launcher: plain CUDA (no torch headers), so nvcc compiles it alone in a second.
ADD_MUL_ACT_CU = r"""
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cstdint>

enum Activation { kNone = 0, kRelu = 1, kSigmoid = 2, kGelu = 3, kSilu = 4 };
enum DType { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
    return __float2bfloat16_rn(v);
}

template <int ACT>
__device__ __forceinline__ float activate(float y) {
    if constexpr (ACT == kRelu) return y != y ? y : fmaxf(y, 0.0f);  // NaN stays NaN, as in torch.relu
    else if constexpr (ACT == kSigmoid) return 1.0f / (1.0f + expf(-y));
    else if constexpr (ACT == kGelu) return 0.5f * y * (1.0f + erff(y * 0.70710678118654752f));
    else if constexpr (ACT == kSilu) return y / (1.0f + expf(-y));
    else return y;
}

// Each thread owns VEC consecutive elements: one 16-byte load per input and one 16-byte store when
// VEC * sizeof(T) == 16 (the wrapper checks the alignment that needs), one element otherwise.
template <typename T, int ACT, int VEC>
__global__ void add_mul_act_kernel(const T* __restrict__ base, const T* __restrict__ lora,
                                   T* __restrict__ out, float scale, int64_t n) {
    struct alignas(sizeof(T) * VEC) Pack { T v[VEC]; };
    const int64_t first = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * VEC;
    if (first + VEC <= n) {
        const Pack b = *reinterpret_cast<const Pack*>(base + first);
        const Pack l = *reinterpret_cast<const Pack*>(lora + first);
        Pack o;
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            o.v[k] = from_float<T>(activate<ACT>(to_float(b.v[k]) + scale * to_float(l.v[k])));
        *reinterpret_cast<Pack*>(out + first) = o;
    } else {  // the ragged end of the tensor, element by element
        for (int64_t i = first; i < n; ++i)
            out[i] = from_float<T>(activate<ACT>(to_float(base[i]) + scale * to_float(lora[i])));
    }
}

template <typename T, int ACT>
cudaError_t launch_typed(const void* base, const void* lora, void* out, float scale, int64_t n, bool vectorize,
                         cudaStream_t stream) {
    constexpr int kThreads = 256, kVec = 16 / sizeof(T);
    const int vec = vectorize ? kVec : 1;
    const int64_t blocks = (n + static_cast<int64_t>(kThreads) * vec - 1) / (static_cast<int64_t>(kThreads) * vec);
    auto b = static_cast<const T*>(base), l = static_cast<const T*>(lora);
    auto o = static_cast<T*>(out);
    if (vectorize) add_mul_act_kernel<T, ACT, kVec><<<blocks, kThreads, 0, stream>>>(b, l, o, scale, n);
    else add_mul_act_kernel<T, ACT, 1><<<blocks, kThreads, 0, stream>>>(b, l, o, scale, n);
    return cudaGetLastError();
}

template <typename T>
cudaError_t launch_act(int act, const void* b, const void* l, void* o, float s, int64_t n, bool v, cudaStream_t st) {
    switch (act) {
        case kNone: return launch_typed<T, kNone>(b, l, o, s, n, v, st);
        case kRelu: return launch_typed<T, kRelu>(b, l, o, s, n, v, st);
        case kSigmoid: return launch_typed<T, kSigmoid>(b, l, o, s, n, v, st);
        case kGelu: return launch_typed<T, kGelu>(b, l, o, s, n, v, st);
        case kSilu: return launch_typed<T, kSilu>(b, l, o, s, n, v, st);
        default: return cudaErrorInvalidValue;
    }
}

// Called by the C++ wrapper: returns "" or the CUDA error of the launch.
const char* launch_add_mul_act(int dtype, int act, const void* base, const void* lora, void* out, float scale,
                               int64_t n, bool vectorize, void* stream) {
    auto st = static_cast<cudaStream_t>(stream);
    cudaError_t err = cudaErrorInvalidValue;
    if (dtype == kFloat32) err = launch_act<float>(act, base, lora, out, scale, n, vectorize, st);
    else if (dtype == kFloat16) err = launch_act<__half>(act, base, lora, out, scale, n, vectorize, st);
    else if (dtype == kBFloat16) err = launch_act<__nv_bfloat16>(act, base, lora, out, scale, n, vectorize, st);
    return err == cudaSuccess ? "" : cudaGetErrorString(err);
}
"""

#: The PyTorch-facing wrapper (main.cpp): checks, output allocation, device guard, current stream.
ADD_MUL_ACT_CPP = r"""
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

const char* launch_add_mul_act(int dtype, int act, const void* base, const void* lora, void* out, float scale,
                               int64_t n, bool vectorize, void* stream);

torch::Tensor add_mul_act_cuda(torch::Tensor base, torch::Tensor lora, double scale, int64_t act) {
    TORCH_CHECK_VALUE(base.is_cuda() && lora.device() == base.device(),
                      "add_mul_act_cuda: base and lora must be on one CUDA device, got ", base.device(), " and ",
                      lora.device());
    TORCH_CHECK_TYPE(base.scalar_type() == lora.scalar_type(), "add_mul_act_cuda: dtypes differ: ",
                     base.scalar_type(), " and ", lora.scalar_type());
    TORCH_CHECK_VALUE(base.sizes() == lora.sizes(), "add_mul_act_cuda: shapes differ: ", base.sizes(), " and ",
                      lora.sizes());
    TORCH_CHECK_VALUE(act >= 0 && act <= 4, "add_mul_act_cuda: activation code must be 0..4, got ", act);
    int dtype = -1;
    switch (base.scalar_type()) {
        case torch::kFloat32: dtype = 0; break;
        case torch::kFloat16: dtype = 1; break;
        case torch::kBFloat16: dtype = 2; break;
        default:
            TORCH_CHECK_TYPE(false, "add_mul_act_cuda: float32, float16 or bfloat16 only, got ", base.scalar_type());
    }
    auto b = base.contiguous(), l = lora.contiguous();
    auto out = torch::empty_like(b);
    if (out.numel() == 0) return out;
    const bool vectorize = reinterpret_cast<uintptr_t>(b.data_ptr()) % 16 == 0 &&
                           reinterpret_cast<uintptr_t>(l.data_ptr()) % 16 == 0;  // out is fresh: aligned
    c10::cuda::CUDAGuard guard(b.device());
    const char* err = launch_add_mul_act(dtype, static_cast<int>(act), b.data_ptr(), l.data_ptr(), out.data_ptr(),
                                         static_cast<float>(scale), b.numel(), vectorize,
                                         c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(err[0] == '\0', "add_mul_act_cuda: kernel launch failed: ", err);
    return out;
}
"""

_cuda_ext = None


def add_mul_act_cuda(base: torch.Tensor, lora: torch.Tensor, scale: float = 1.0,
                     activation: str = "relu") -> torch.Tensor:
    """The CUDA kernel (built on first use; needs a GPU): act(base + scale * lora)."""
    global _cuda_ext
    scale = check_elementwise(base, lora, scale, activation)
    if _cuda_ext is None:
        _cuda_ext = build_extension("nb12_add_mul_act", ADD_MUL_ACT_CPP, ADD_MUL_ACT_CU, ["add_mul_act_cuda"])
    return _cuda_ext.add_mul_act_cuda(base, lora, scale, ACTIVATIONS.index(activation))


# ---- 3. The whole LoRA linear in one matmul -------------------------------------------------------------------
#: The CPU interpreter multiplies bfloat16 tiles as raw 16-bit integers in tl.dot (triton-lang/triton#11584).
#: There, and only there, the kernels widen their tiles to fp32 before each dot, which is exact.
WIDEN = tl.constexpr(cu.INTERPRET)


@triton.jit
def lora_epilogue(acc, xa, up_ptr, bias_ptr, pre_ptr, offs_m, offs_n, M, N, R, scale, inv_scale,
                  stride_upr, stride_upn, stride_bias, BLOCK_R: tl.constexpr, HAS_ADAPTER: tl.constexpr,
                  HAS_BIAS: tl.constexpr, STORE_PRE: tl.constexpr, ACTIVATION: tl.constexpr):
    """acc (the fp32 tile of x W^T) + scale (x A^T) B^T + b, then the activation: all on the tile in registers."""
    if HAS_ADAPTER:
        offs_r = tl.arange(0, BLOCK_R)  # the rank, padded with zeros to a power of two >= 16 (tl.dot's minimum)
        up = tl.load(up_ptr + offs_r[:, None] * stride_upr + offs_n[None, :] * stride_upn,
                     mask=(offs_r[:, None] < R) & (offs_n[None, :] < N), other=0.0)  # B^T: BLOCK_R x BLOCK_N
        down = xa.to(up.dtype)  # x A^T rounded to 16 bits, as eager PyTorch stores it
        if WIDEN:
            down, up = down.to(tl.float32), up.to(tl.float32)
        # acc + s (x A^T) B^T, computed as (acc / s + (x A^T) B^T) s: one more dot (K = BLOCK_R), and the scale
        # stays in fp32 (s x A^T rounded to fp16 would overflow beyond 65504 for a large s)
        acc = tl.dot(down, up, acc * inv_scale) * scale
    if HAS_BIAS:  # b through its stride: b[::2] is a view like any other
        acc += tl.load(bias_ptr + offs_n * stride_bias, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    if STORE_PRE:  # the pre-activation, for the backward pass
        tl.store(pre_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(pre_ptr.dtype.element_ty),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    return apply_activation(acc, ACTIVATION)


@triton.jit
def rank_updates(acc, xa_ptr, up_ptr, offs_m, offs_n, M, N, R, scale, stride_xam, stride_upr, stride_upn):
    """acc + s (x A^T) B^T as R rank-1 updates on the CUDA cores: column r of x A^T times row r of B^T, both read
    from memory (the lines they share stay in L1). No second tensor-core product in the tile loop."""
    for r in range(R):  # a loop, not unrolled: two short vectors live at a time, next to the tile's accumulator
        col = tl.load(xa_ptr + offs_m * stride_xam + r, mask=offs_m < M, other=0.0).to(tl.float32)
        row = tl.load(up_ptr + r * stride_upr + offs_n * stride_upn, mask=offs_n < N, other=0.0).to(tl.float32)
        acc += (col * scale)[:, None] * row[None, :]  # one multiply-add per output element and rank
    return acc


@triton.jit
def lora_persistent_kernel(x_ptr, w_ptr, a_ptr, xa_ptr, up_ptr, bias_ptr, out_ptr, pre_ptr, M, N, K, R,
                           scale, inv_scale, stride_xm, stride_w, stride_a, stride_xam, stride_upr, stride_upn,
                           stride_bias, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           BLOCK_R: tl.constexpr, GROUP_M: tl.constexpr, SUBTILES: tl.constexpr,
                           FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr, W_KN: tl.constexpr,
                           XA_IN_LOOP: tl.constexpr, STORE_XA: tl.constexpr, RANK_FMA: tl.constexpr,
                           HAS_ADAPTER: tl.constexpr, HAS_BIAS: tl.constexpr, STORE_PRE: tl.constexpr,
                           ACTIVATION: tl.constexpr):
    # out = act(x @ W_op + s (x A^T) B^T + b), x: M x K, W_op: K x N stored as W (N x K rows, W_KN=False) or as
    # K x N rows (W_KN=True, the backward's dx); program p computes tiles p, p + P, ... (notebook 14's design)
    x_desc = tl.make_tensor_descriptor(x_ptr, shape=[M, K], strides=[stride_xm, 1], block_shape=[BLOCK_M, BLOCK_K])
    if W_KN:
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[K, N], strides=[stride_w, 1], block_shape=[BLOCK_K, BLOCK_N])
    else:
        w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[stride_w, 1], block_shape=[BLOCK_N, BLOCK_K])
    out_desc = tl.make_tensor_descriptor(out_ptr, shape=[M, N], strides=[N, 1],
                                         block_shape=[BLOCK_M, BLOCK_N // SUBTILES])
    if XA_IN_LOOP:  # A's rows past R arrive as zeros: TMA pads the rank
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[R, K], strides=[stride_a, 1], block_shape=[BLOCK_R, BLOCK_K])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0),
                         flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)  # notebook 07's grouped order
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        xa = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            x = x_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # zeros where the tile leaves x
            if W_KN:
                w = w_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
            else:
                w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K]).T  # rows of W; the dot reads them transposed
            if WIDEN:
                x, w = x.to(tl.float32), w.to(tl.float32)
            acc = tl.dot(x, w, acc)
            if XA_IN_LOOP:  # the same x tile, a second dot: this tile's rows of x A^T
                a = a_desc.load([0, k * BLOCK_K])
                if WIDEN:
                    a = a.to(tl.float32)
                xa = tl.dot(x, a.T, xa)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        offs_r = tl.arange(0, BLOCK_R)
        xa_at = xa_ptr + offs_m[:, None] * stride_xam + offs_r[None, :]
        xa_mask = (offs_m[:, None] < M) & (offs_r[None, :] < R)
        if XA_IN_LOOP:
            if STORE_XA:  # kept for the backward pass; the first column of tiles writes it
                tl.store(xa_at, xa.to(xa_ptr.dtype.element_ty), mask=xa_mask & (pid_n == 0))
        elif HAS_ADAPTER and RANK_FMA:  # x A^T computed before the launch, added as rank-1 updates
            acc = rank_updates(acc, xa_ptr, up_ptr, offs_m, offs_n, M, N, R, scale, stride_xam, stride_upr,
                               stride_upn)
        elif HAS_ADAPTER:  # x A^T computed before the launch, added by a second dot in the epilogue
            xa = tl.load(xa_at, mask=xa_mask, other=0.0).to(tl.float32)
        acc = lora_epilogue(acc, xa, up_ptr, bias_ptr, pre_ptr, offs_m, offs_n, M, N, R, scale, inv_scale,
                            stride_upr, stride_upn, stride_bias, BLOCK_R,
                            HAS_ADAPTER and (XA_IN_LOOP or not RANK_FMA), HAS_BIAS, STORE_PRE, ACTIVATION)
        store_subtiled(out_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_N, SUBTILES)  # notebook 14's epilogue


@triton.jit
def lora_blocked_kernel(x_ptr, w_ptr, xa_ptr, up_ptr, bias_ptr, out_ptr, pre_ptr, M, N, K, R, scale, inv_scale,
                        stride_xm, stride_xk, stride_wk, stride_wn, stride_xam, stride_upr, stride_upn, stride_bias,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr,
                        GROUP_M: tl.constexpr, HAS_ADAPTER: tl.constexpr, HAS_BIAS: tl.constexpr,
                        STORE_PRE: tl.constexpr, ACTIVATION: tl.constexpr):
    # The same layer for any GPU and any strides: notebook 07's pointer matmul (W_op read through its strides),
    # then the same epilogue. x A^T always comes computed.
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tile_product(x_ptr, w_ptr, M, N, K, stride_xm, stride_xk, stride_wk, stride_wn, pid_m, pid_n,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_r = tl.arange(0, BLOCK_R)
    xa = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    if HAS_ADAPTER:
        xa = tl.load(xa_ptr + offs_m[:, None] * stride_xam + offs_r[None, :],
                     mask=(offs_m[:, None] < M) & (offs_r[None, :] < R), other=0.0).to(tl.float32)
    acc = lora_epilogue(acc, xa, up_ptr, bias_ptr, pre_ptr, offs_m, offs_n, M, N, R, scale, inv_scale,
                        stride_upr, stride_upn, stride_bias, BLOCK_R, HAS_ADAPTER, HAS_BIAS, STORE_PRE, ACTIVATION)
    store_tile(out_ptr, acc, M, N, N, 1, pid_m, pid_n, BLOCK_M, BLOCK_N)  # notebook 07's masked store


# Tuning. Persistent: notebook 14's tiles that the probe keeps on this GPU. Blocked: notebook 07's tiles and pruning.
# On a CPU one small tile each, so that the interpreter runs little.
# The 128x256 and 256x128 tiles of notebook 14's pipelined configs, and 128x256 with two epilogue subtiles on 3
# stages. Its 128x128 tiles are left out: at the LLM shapes of section 3 they lost to these in every variant.
# One warp-specialized tile: a producer warp issues the TMA loads while two consumer warp groups (8 warps) run the
# dots and the epilogue, so one tile's epilogue overlaps the loads of the next. Triton 3.6 specializes such a loop
# only with one dot in it (not with x A^T in the loop) and, at 4 warps, not with the epilogue's dot either.
LORA_TILES = cu.pick_size([(128, 256, 64, 3, 8, 1, False), (128, 256, 64, 3, 8, 2, False),
                           (128, 256, 64, 4, 8, 2, False), (256, 128, 64, 3, 8, 2, False),
                           (128, 256, 64, 3, 8, 1, True)],
                          [t for t in CPU_TILES if not t[6]])
#: (tile, RANK_FMA): how the epilogue adds s (x A^T) B^T, by a second tensor-core dot (False) or by rank-1 updates
#: on the CUDA cores (True). The GPU's autotuner times both with each pipelined tile, but the 4-stage tile only with
#: the updates (the dot's operands need shared memory that its four stages leave no room for) and the
#: warp-specialized tile only with the dot (its epilogue is hidden behind the next tile's loads). The CPU's
#: interpreter runs the dot (the tests run both).
LORA_CONFIGS = cu.pick_size([(t, fma) for t in LORA_TILES for fma in (False, True)
                             if (fma and not t[6]) or (not fma and t[3] < 4)],
                            [(t, False) for t in LORA_TILES])
_KEY = ["M", "N", "K", "BLOCK_R", "HAS_ADAPTER", "HAS_BIAS", "STORE_PRE", "ACTIVATION"]


def _probe_inputs():
    gen = torch.Generator().manual_seed(0)
    rnd = lambda *shape, std: (torch.randn(*shape, generator=gen) * std).to(cu.DEVICE, torch.float16)  # noqa: E731
    return rnd(384, 320, std=1.0), rnd(640, 320, std=320**-0.5), rnd(640, std=0.1), rnd(16, 320, std=320**-0.5), \
        rnd(640, 16, std=0.25)


def _probe_launch(x, W, b, A, B, cfg):
    return _launch_persistent(cfg, False, x, W.t(), b, A, B.t(), 0.5, "none", x @ A.t(), False, False, None)[0]


@functools.lru_cache(maxsize=1)
def persistent_configs() -> list:
    """The persistent configs that compile, fit and give the right answer on this GPU (probed once per process)."""
    configs = [tile_config(*t, RANK_FMA=fma) for t, fma in LORA_CONFIGS] if HAS_TMA else []
    return probe(configs, _probe_launch, _probe_inputs, lambda *t: lora_reference(*t, 0.5), "fused LoRA, persistent")


@functools.lru_cache(maxsize=1)
def persistent_tuned():
    """The autotuned persistent kernel (None where no config is usable: no TMA)."""
    configs = persistent_configs()
    key = _KEY + ["W_KN", "XA_IN_LOOP", "STORE_XA"]
    return _autotune(configs, key, lora_persistent_kernel,
                     prune_configs_by={"early_config_prune": prune_epilogues}) if configs else None


#: Outputs below which the autotuner gets one config: fewer than 64 tiles of 128 x 256 run in one partial wave
#: on an H100 (132 SMs) whatever the config (the correctness checks' shapes; an LLM layer has hundreds of tiles).
SMALL_OUTPUT = 64 * 128 * 256


def prune_epilogues(configs, named_args, **kwargs):
    """Rank-1 updates only where they apply: an adapter whose x A^T comes from memory (not computed in the K loop).
    Elsewhere the two epilogues are one kernel: time it once. No warp-specialized config with x A^T in the K loop
    (two dots in the loop: Triton 3.6's warp specializer fails to compile it). An output of fewer than SMALL_OUTPUT
    elements (M x N, from named_args) takes the one config left that needs the least shared memory, untimed: each new
    shape would otherwise compile and time every config for a kernel that runs one partial wave; and with one config
    there is no autotuner to pass over one that needs more shared memory than the GPU has."""
    if not configs or not all(isinstance(c, triton.Config) for c in configs):
        raise ValueError("configs must be a non-empty list of triton.Config")
    if not isinstance(named_args, dict):
        raise TypeError(f"named_args must be the kernel's arguments by name (a dict), got {type(named_args).__name__}")
    fma_applies = kwargs.get("HAS_ADAPTER", True) and not kwargs.get("XA_IN_LOOP", False)
    kept = [c for c in configs if (fma_applies or not c.kwargs.get("RANK_FMA", False))
            and not (kwargs.get("XA_IN_LOOP", False) and c.kwargs.get("WARP_SPECIALIZE", False))] or configs[:1]
    size = {**named_args, **kwargs}
    if isinstance(size.get("M"), int) and isinstance(size.get("N"), int) and size["M"] * size["N"] < SMALL_OUTPUT:
        # the one that needs the least shared memory: a rank of up to 128 must fit with no autotuner to fall back on
        return [min(kept, key=lambda c: shared_elements(c, size.get("BLOCK_R", 16), size.get("XA_IN_LOOP", False),
                                                        size.get("HAS_ADAPTER", True)))]
    return kept


def shared_elements(config: triton.Config, block_r: int, xa_in_loop: bool, has_adapter: bool = True) -> int:
    """Shared-memory elements a persistent config holds, roughly: its stages of x and W tiles (and A tiles with
    x A^T in the loop), the output tile (or subtile) the TMA store reads, and the epilogue dot's operands."""
    if not isinstance(config, triton.Config) or not {"BLOCK_M", "BLOCK_N", "BLOCK_K"} <= set(config.kwargs):
        raise TypeError(f"config must be a triton.Config with BLOCK_M, BLOCK_N and BLOCK_K, got {config!r:.80}")
    block_r = cu.require_block_size("block_r", block_r, at_least=16, at_most=MAX_RANK)
    k = config.kwargs
    bm, bn, bk = k["BLOCK_M"], k["BLOCK_N"], k["BLOCK_K"]
    loop = config.num_stages * (bm + bn + (block_r if xa_in_loop else 0)) * bk
    dot_operands = (bm + bn) * block_r if has_adapter and (xa_in_loop or not k.get("RANK_FMA", False)) else 0
    return loop + bm * bn // k.get("SUBTILES", 1) + dot_operands


def _autotune(configs, key, kernel, **kwargs):
    from course_utils.tuning import autotune  # @triton.autotune that also runs in the CPU interpreter
    return autotune(configs, key=key, **kwargs)(kernel)


blocked_tuned = _autotune([blocked_config(*t) for t in cu.pick_size(BLOCKED_TILES, BLOCKED_TILES[:1])], _KEY,
                                lora_blocked_kernel, prune_configs_by={"early_config_prune": prune_configs})


def _tma_rows(t: torch.Tensor) -> bool:
    """Row-major with rows on 16-byte boundaries: what a TMA descriptor reads."""
    return t.stride(-1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0


def tma_layout(x2: torch.Tensor, w_op: torch.Tensor, n_out: int) -> bool | None:
    """How the persistent kernel can read x2 (M x K) @ w_op (K x N): None where TMA cannot (the blocked kernel
    runs), else W_KN: True if w_op itself is row-major (dx reads W so), False if w_op.t() is (W in a forward)."""
    cu.require_tensors(x2=x2, w_op=w_op, ndim=2, max_numel=None, max_span=None)
    if not HAS_TMA or persistent_tuned() is None or min(x2.shape) == 0 or n_out == 0:
        return None
    if (n_out * x2.element_size()) % 16 or not _tma_rows(x2):  # the output's rows too: M x N, row-major
        return None
    if w_op.shape[1] > 1 and _tma_rows(w_op):
        return True
    if w_op.shape[0] > 1 and _tma_rows(w_op.t()):
        return False
    return None


def _adapter_args(scale, xa, up, b, dummy):
    """Scale and 1 / scale, and the epilogue's pointers and strides (`dummy` stands in for what is absent)."""
    inv = 1.0 / scale if scale != 0 else 0.0
    return (scale, inv, xa if xa is not None else dummy, up, b if b is not None else dummy,
            xa.stride(0) if xa is not None else 0, up.stride(0), up.stride(1), b.stride(0) if b is not None else 0)


def _launch_persistent(cfg, w_kn, x2, w_op, b, down, up, scale, activation, xa, xa_in_loop, store_xa, pre):
    """One launch of lora_persistent_kernel: with `cfg` (a probe) or autotuned (cfg None)."""
    (M, K), N, R = x2.shape, w_op.shape[1], down.shape[0]
    # Triton keeps its allocator per thread, and autograd runs backward on a thread of its own: set it here
    triton.set_allocator(scratch_for_descriptors)
    out = torch.empty((M, N), device=x2.device, dtype=x2.dtype)
    w = w_op if w_kn else w_op.t()
    s, inv, xa_p, up_p, b_p, s_xa, s_upr, s_upn, s_b = _adapter_args(scale, xa, up, b, out)
    args = (x2, w, down, xa_p, up_p, b_p, out, pre if pre is not None else out, M, N, K, R, s, inv,
            x2.stride(0), w.stride(0), down.stride(0), s_xa, s_upr, s_upn, s_b)
    meta = dict(BLOCK_R=max(16, triton.next_power_of_2(R)), W_KN=w_kn, XA_IN_LOOP=xa_in_loop,
                STORE_XA=store_xa and xa_in_loop, HAS_ADAPTER=scale != 0, HAS_BIAS=b is not None,
                STORE_PRE=pre is not None, ACTIVATION=activation)
    if cfg is not None:
        tiles = triton.cdiv(M, cfg.kwargs["BLOCK_M"]) * triton.cdiv(N, cfg.kwargs["BLOCK_N"])
        lora_persistent_kernel[(min(SMS, tiles),)](*args, **meta, **cfg.kwargs, num_warps=cfg.num_warps,
                                                   num_stages=cfg.num_stages)
    else:
        grid = lambda m: (min(SMS, triton.cdiv(M, m["BLOCK_M"]) * triton.cdiv(N, m["BLOCK_N"])),)  # noqa: E731
        persistent_tuned()[grid](*args, **meta)
    return out, xa, pre


def lora_forward(x2, w_op, b, down, up, scale: float, activation: str, *, xa=None, xa_in_loop: bool = False,
                 store_xa: bool = False, store_pre: bool = False):
    """The launch behind `lora_linear`, on checked inputs of one dtype: act(x2 @ w_op + scale (x2 down^T) up + b)
    with x2 M x K, w_op K x N (W.t() in a forward, W for dx), down R x K (A; B.t() for dx), up R x N (B.t(); A).
    ``xa``: x2 down^T if already known (dx has g B). Returns (out, x2 down^T or None, pre-activation or None)."""
    w_kn = tma_layout(x2, w_op, w_op.shape[1] if isinstance(w_op, torch.Tensor) else 0)  # checks x2 and w_op
    if not isinstance(down, torch.Tensor) or not isinstance(up, torch.Tensor):
        raise TypeError(f"down and up must be torch.Tensors, got {type(down).__name__} and {type(up).__name__}")
    M, N = x2.shape[0], w_op.shape[1]
    if xa_in_loop and (w_kn is None or not _tma_rows(down)):
        raise ValueError("xa_in_loop=True needs the persistent TMA kernel: a GPU with TMA (sm_90), x, W and A "
                         "row-major with 16-byte aligned rows, and d_out * itemsize a multiple of 16 bytes")
    if xa is None and not xa_in_loop:
        xa = x2 @ down.t()  # x A^T: a small cuBLAS matmul before the launch (T x r)
    elif xa_in_loop:
        xa = torch.empty((M, down.shape[0]), device=x2.device, dtype=x2.dtype) if store_xa else None
    pre = torch.empty((M, N), device=x2.device, dtype=x2.dtype) if store_pre else None
    if w_kn is not None:
        return _launch_persistent(None, w_kn, x2, w_op, b, down, up, scale, activation, xa, xa_in_loop, store_xa, pre)
    out = torch.empty((M, N), device=x2.device, dtype=x2.dtype)
    if M == 0 or N == 0:
        return out, xa, pre
    xs, ws = interpreter_safe(x2, w_op)  # CPU interpreter: fp32 copies for tl.dot (exact); a GPU never widens
    s, inv, xa_p, up_p, b_p, s_xa, s_upr, s_upn, s_b = _adapter_args(scale, xa, up, b, out)
    grid = lambda m: (triton.cdiv(M, m["BLOCK_M"]) * triton.cdiv(N, m["BLOCK_N"]),)  # noqa: E731
    blocked_tuned[grid](xs, ws, xa_p, up_p, b_p, out, pre if pre is not None else out, M, N, x2.shape[1],
                        down.shape[0], s, inv, xs.stride(0), xs.stride(1), ws.stride(0), ws.stride(1), s_xa,
                        s_upr, s_upn, s_b, BLOCK_R=max(16, triton.next_power_of_2(down.shape[0])),
                        HAS_ADAPTER=scale != 0, HAS_BIAS=b is not None, STORE_PRE=store_pre, ACTIVATION=activation)
    return out, xa, pre


def check_lora(x, W, b, A, B, scale, activation, dtypes=LORA_DTYPES) -> float:
    """What `lora_linear` accepts (errors name the argument); returns scale as a float."""
    tensors = {"x": x, "W": W, "A": A, "B": B, **({} if b is None else {"b": b})}
    cu.require_tensors(**tensors)  # tensors, one device, no offset beyond int32 (a view's span, not its size)
    cu.require_tensors(x=x, W=W, dtypes=dtypes)
    cu.require_tensors(A=A, B=B, dtypes=tuple(dict.fromkeys((x.dtype, torch.float32))), ndim=2)  # peft: fp32
    if x.dim() < 2 or W.dim() != 2:
        raise ValueError(f"x must be (..., d_in) and W 2-D, got x {tuple(x.shape)} and W {tuple(W.shape)}")
    (d_out, d_in), r = W.shape, A.shape[0]
    if x.shape[-1] != d_in:
        raise ValueError(f"x has {x.shape[-1]} features, but W is {d_out} x {d_in} (d_out x d_in)")
    if A.shape[1] != d_in:
        raise ValueError(f"A must be r x d_in = r x {d_in}, got {tuple(A.shape)}")
    if B.shape[0] != d_out:
        raise ValueError(f"B must be d_out x r = {d_out} x r, got {tuple(B.shape)}")
    if B.shape[1] != r:
        raise ValueError(f"ranks differ: A is {r} x {d_in} (rank {r}), B is {d_out} x {B.shape[1]} (rank {B.shape[1]})")
    if not 1 <= r <= MAX_RANK:
        raise ValueError(f"rank must be between 1 and {MAX_RANK}, got {r}")
    if b is not None:
        cu.require_tensors(b=b, dtypes=tuple(dict.fromkeys((x.dtype, torch.float32))), ndim=1)
        if b.shape[0] != d_out:
            raise ValueError(f"b must have shape ({d_out},), got {tuple(b.shape)}")
    if x.numel() // max(d_in, 1) * d_out > cu.checks.INT32_MAX:
        raise ValueError(f"the output would have {x.numel() // max(d_in, 1):,} x {d_out:,} elements; at most "
                         "2**31 - 1 (offsets are int32)")
    return check_options(scale, activation)


def lora_linear(x, W, b, A, B, scale: float = 1.0, activation: str = "none", *, xa_in_loop: bool = False):
    """act(x W^T + b + scale (x A^T) B^T) in one Triton matmul; x, W fp16/bf16 (fp32 accumulation), A and B in
    x's dtype or fp32 (peft's default: rounded to x's dtype here), b in x's dtype or fp32, or None.

    Default: x A^T with cuBLAS first, added in the epilogue. ``xa_in_loop=True``: one launch, x A^T in the K loop
    (the measured alternative; it needs the persistent TMA kernel)."""
    scale = check_lora(x, W, b, A, B, scale, activation)
    xa_in_loop = cu.require_choice("xa_in_loop", xa_in_loop, (False, True))
    x2 = x.reshape(-1, x.shape[-1])
    out, _, _ = lora_forward(x2, W.t(), b, A.to(x.dtype), B.to(x.dtype).t(), scale, activation, xa_in_loop=xa_in_loop)
    return out.reshape(*x.shape[:-1], W.shape[0])


def config_text(config: triton.Config) -> str:
    """An autotuner's choice in one line: the tile (BLOCK_M x BLOCK_N x BLOCK_K), warps and pipeline stages."""
    if not isinstance(config, triton.Config):
        raise TypeError(f"config must be a triton.Config, got {type(config).__name__}")
    if "SUBTILES" in config.kwargs:  # notebook 14's persistent configs, and how this epilogue adds the adapter
        return describe(config) + (", adapter as rank-1 updates" if config.kwargs.get("RANK_FMA") else "")
    kw, stages = config.kwargs, config.num_stages
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}, {config.num_warps} warps, "
            f"{stages} stage{'' if stages == 1 else 's'}")


def lora_linear_config(x, W, b, A, B, scale: float = 1.0, activation: str = "none", *,
                       xa_in_loop: bool = False) -> str:
    """Runs `lora_linear` once: which kernel it launched, with the config its autotuner chose (`best_config`)."""
    out = lora_linear(x, W, b, A, B, scale, activation, xa_in_loop=xa_in_loop)
    x2 = x.reshape(-1, x.shape[-1])
    if out.numel() == 0:
        return "no launch (empty output)"
    if tma_layout(x2, W.t(), W.shape[0]) is None:
        return f"pointer kernel, {config_text(blocked_tuned.best_config)}"
    return f"TMA persistent kernel, {config_text(persistent_tuned().best_config)}"


# ---- 4. Training ------------------------------------------------------------------------------------------------
def lora_forward_reference(x2, w_op, b, down, up, scale, activation, *, xa=None, xa_in_loop=False, store_xa=False,
                           store_pre=False):
    """`lora_forward` written with torch ops, in the inputs' dtype (float64 too): for gradcheck."""
    cu.require_tensors(x2=x2, w_op=w_op, down=down, up=up, ndim=2, max_span=None)
    xa = x2 @ down.t() if xa is None else xa
    pre = x2 @ w_op + scale * (xa @ up)
    pre = pre if b is None else pre + b
    return ACTIVATION_FNS[activation](pre), xa, pre


def activation_grad(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """d act(y) / dy at the pre-activation y, in fp32 (float64 stays float64)."""
    cu.require_tensors(pre=pre, dtypes=(torch.float64, *ELEMENTWISE_DTYPES), max_numel=None, max_span=None)
    cu.require_choice("activation", activation, ACTIVATIONS)
    y = pre if pre.dtype == torch.float64 else pre.float()
    if activation == "relu":
        return (y > 0).to(y.dtype)
    if activation == "sigmoid":
        return torch.sigmoid(y) * (1 - torch.sigmoid(y))
    if activation == "silu":
        return torch.sigmoid(y) * (1 + y * (1 - torch.sigmoid(y)))
    if activation == "gelu":  # Phi(y) + y phi(y)
        return 0.5 * (1 + torch.erf(y * 0.7071067811865476)) + y * torch.exp(-0.5 * y * y) * 0.3989422804014327
    return torch.ones_like(y)


class LoRALinearFunction(torch.autograd.Function):
    """out = act(x W^T + b + s (x A^T) B^T) with gradients for x, A and B; W and b are frozen.

    dx = g W + s (g B) A is the forward's launch with W read as stored (K x N rows: a TMA descriptor, no
    transposed copy), g B in the role of x A^T and A in the role of B^T; dA = s (g B)^T x, dB = s g^T (x A^T)
    are skinny cuBLAS matmuls on the products the two launches already have."""

    @staticmethod
    def forward(ctx, x2, W, b, A, B, scale: float = 1.0, activation: str = "none", xa_in_loop: bool = False,
                reference: bool = False, checked: bool = False):
        if not checked:  # called directly: the checks of lora_linear_trainable (which calls with checked=True)
            check_lora(x2, W, b, A, B, scale, activation, dtypes=(torch.float64, torch.float32, *LORA_DTYPES)
                       if reference else LORA_DTYPES)
            if x2.dim() != 2:
                raise ValueError(f"x2 must be 2-D (tokens x d_in), got shape {tuple(x2.shape)}")
        fwd = lora_forward_reference if reference else lora_forward
        A_, B_ = A.to(x2.dtype), B.to(x2.dtype)  # peft's fp32 adapters: rounded to x's dtype for the tensor cores
        out, xa, pre = fwd(x2, W.t(), b, A_, B_.t(), scale, activation, xa_in_loop=xa_in_loop, store_xa=True,
                           store_pre=activation != "none")
        ctx.save_for_backward(x2, W, A_, B_, xa, pre)
        ctx.scale, ctx.activation, ctx.fwd, ctx.dtypes = scale, activation, fwd, (A.dtype, B.dtype)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x2, W, A_, B_, xa, pre = ctx.saved_tensors
        s, g = ctx.scale, grad_out.contiguous()
        if ctx.activation != "none":
            g = (g * activation_grad(pre, ctx.activation)).to(grad_out.dtype)
        need_x, need_A, need_B = ctx.needs_input_grad[0], ctx.needs_input_grad[3], ctx.needs_input_grad[4]
        gB = g @ B_ if need_x or need_A else None  # T x r: dx's "x A^T", and what dA needs
        dx = ctx.fwd(g, W, None, B_.t(), A_, s, "none", xa=gB)[0] if need_x else None
        # one cuBLAS call each: fp32 accumulation, alpha = s applied in fp32 before the one rounding to x's dtype
        # (beta = 0: the first argument is never read), then the adapters' own dtype
        unread = torch.empty((), device=x2.device, dtype=x2.dtype)
        dA = torch.addmm(unread, gB.t(), x2, beta=0, alpha=s).to(ctx.dtypes[0]) if need_A else None  # r x d_in
        dB = torch.addmm(unread, g.t(), xa, beta=0, alpha=s).to(ctx.dtypes[1]) if need_B else None  # d_out x r
        return dx, None, None, dA, dB, None, None, None, None, None


def lora_linear_trainable(x, W, b, A, B, scale: float = 1.0, activation: str = "none", *, xa_in_loop: bool = False,
                          reference: bool = False):
    """`lora_linear` with autograd: gradients for x, A and B; W and b are frozen (they must not require grad).

    ``reference=True`` runs the same Function with torch ops in place of the kernels, in any float dtype."""
    scale = check_lora(x, W, b, A, B, scale, activation,
                       dtypes=(torch.float64, torch.float32, *LORA_DTYPES) if reference else LORA_DTYPES)
    xa_in_loop = cu.require_choice("xa_in_loop", xa_in_loop, (False, True))
    reference = cu.require_choice("reference", reference, (False, True))
    trainable = [name for name, t in (("W", W), ("b", b)) if t is not None and t.requires_grad]
    if trainable:
        raise ValueError(f"LoRA trains A and B only: {' and '.join(trainable)} must not require grad "
                         "(call .requires_grad_(False) on it)")
    if reference and A.dtype != x.dtype:
        A, B = A.to(x.dtype), B.to(x.dtype)
    if not reference and not (torch.is_grad_enabled() and (x.requires_grad or A.requires_grad or B.requires_grad)):
        out = lora_forward(x.reshape(-1, x.shape[-1]), W.t(), b, A.to(x.dtype), B.to(x.dtype).t(), scale, activation,
                           xa_in_loop=xa_in_loop)[0]  # nothing to differentiate: no autograd node, nothing saved
        return out.reshape(*x.shape[:-1], W.shape[0])
    out = LoRALinearFunction.apply(x.reshape(-1, x.shape[-1]), W, b, A, B, scale, activation, xa_in_loop, reference,
                                   True)
    return out.reshape(*x.shape[:-1], W.shape[0])
