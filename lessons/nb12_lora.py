"""Exported from notebooks/12_lora_case_study.ipynb by `python -m course_utils.export`: edit the notebook, not this file."""

import math

import torch
import torch.nn.functional as F

import course_utils as cu  # before any kernel: without a GPU it switches Triton to its interpreter

#: The activations every kernel of this notebook accepts ("none" is the identity).
ACTIVATIONS = ("none", "relu", "sigmoid", "gelu", "silu")
ACTIVATION_FNS = {"none": lambda t: t, "relu": torch.relu, "sigmoid": torch.sigmoid, "gelu": F.gelu, "silu": F.silu}


def lora_eager(x, W, b, A, B, scale: float, activation: str = "none") -> torch.Tensor:
    """act(x W^T + b + scale (x A^T) B^T) as peft's LoRA layer computes it: three matmuls, a mul and an add."""
    result = F.linear(x, W, b)
    result = result + F.linear(F.linear(x, A), B) * scale
    return ACTIVATION_FNS[activation](result)


def lora_reference(x, W, b, A, B, scale: float, activation: str = "none") -> torch.Tensor:
    """The same in fp32, rounded once to x's dtype: what a fused kernel should return."""
    f = lambda t: None if t is None else t.float()
    return lora_eager(f(x), f(W), f(b), f(A), f(B), scale, activation).to(x.dtype)


def add_mul_act_eager(base: torch.Tensor, lora: torch.Tensor, scale: float, activation: str = "relu") -> torch.Tensor:
    """The adapter's elementwise tail, act(base + lora * scale), as eager PyTorch runs it: one kernel per op."""
    return ACTIVATION_FNS[activation](base + lora * scale)


def add_mul_act_reference(base: torch.Tensor, lora: torch.Tensor, scale: float,
                          activation: str = "relu") -> torch.Tensor:
    """The same in fp32, rounded once to the inputs' dtype."""
    return add_mul_act_eager(base.float(), lora.float(), scale, activation).to(base.dtype)


def check_tensors(tensors: dict, dtypes: tuple) -> None:
    """Tensors, all of one dtype out of ``dtypes``, all on one device of the course's device type."""
    for name, t in tensors.items():
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    found = {name: t.dtype for name, t in tensors.items()}
    if len(set(found.values())) > 1:
        raise TypeError("inputs must share one dtype, got " + ", ".join(f"{n}: {d}" for n, d in found.items()))
    if next(iter(found.values())) not in dtypes:
        raise TypeError(f"dtype must be one of {dtypes}, got {next(iter(found.values()))}")
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        raise ValueError("inputs must be on one device, got " + ", ".join(f"{n}: {d}" for n, d in devices.items()))
    if next(iter(devices.values())).type != cu.DEVICE.type:
        raise ValueError(f"inputs must be on the {cu.DEVICE.type} device, got {next(iter(devices.values()))}")


def check_options(scale: float, activation: str) -> None:
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not math.isfinite(scale):
        raise TypeError(f"scale must be a finite Python number, got {scale!r}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


import torch
import triton
import triton.language as tl

ELEMENTWISE_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


@triton.jit
def apply_activation(y, ACTIVATION: tl.constexpr):
    """On an fp32 tile. ACTIVATION is a constexpr: only the chosen branch is compiled."""
    if ACTIVATION == "relu":
        y = tl.maximum(y, 0.0)
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


def check_elementwise(base, lora, scale, activation) -> None:
    """What both fused elementwise wrappers accept; raises TypeError/ValueError naming the problem."""
    check_tensors({"base": base, "lora": lora}, ELEMENTWISE_DTYPES)
    if base.shape != lora.shape:
        raise ValueError(f"base and lora must have the same shape, got {tuple(base.shape)} and {tuple(lora.shape)}")
    check_options(scale, activation)
    if base.numel() >= 2**31:
        raise ValueError(f"at most 2**31 - 1 elements (int32 offsets), got {base.numel():,}")


def add_mul_act(base: torch.Tensor, lora: torch.Tensor, scale: float = 1.0, activation: str = "relu") -> torch.Tensor:
    """act(base + scale * lora) in one pass: two reads and one write per element, fp32 math."""
    check_elementwise(base, lora, scale, activation)
    base, lora = base.contiguous(), lora.contiguous()  # views are copied; matmul outputs are contiguous anyway
    out = torch.empty_like(base)
    if out.numel() == 0:
        return out
    block = 4096 // base.element_size()  # 32 bytes of each input per thread (4 warps = 128 threads)
    add_mul_act_kernel[(triton.cdiv(out.numel(), block),)](base, lora, out, float(scale), out.numel(), BLOCK=block,
                                                           ACTIVATION=activation, num_warps=4)
    return out


import torch

from course_utils.cuda_build import build_extension

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
    if constexpr (ACT == kRelu) return fmaxf(y, 0.0f);
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
    check_elementwise(base, lora, scale, activation)
    if _cuda_ext is None:
        _cuda_ext = build_extension("nb12_add_mul_act", ADD_MUL_ACT_CPP, ADD_MUL_ACT_CU, ["add_mul_act_cuda"])
    return _cuda_ext.add_mul_act_cuda(base, lora, float(scale), ACTIVATIONS.index(activation))


import triton
import triton.language as tl

import course_utils as cu

#: The CPU interpreter multiplies bfloat16 tiles as raw 16-bit integers in tl.dot (triton-lang/triton#11584).
#: There, and only there, the kernels widen their tiles to fp32 before each dot, which is exact.
WIDEN = tl.constexpr(cu.INTERPRET)


@triton.jit
def tile_coords(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Program id -> (tile row, tile column) in notebook 07's grouped order: GROUP_M tile rows at a time."""
    per_group = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = (pid // per_group) * GROUP_M
    rows = min(tl.cdiv(M, BLOCK_M) - first_m, GROUP_M)  # the last group may be shorter
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


@triton.jit
def lora_linear_kernel(x_ptr, w_ptr, a_ptr, b_ptr, bias_ptr, out_ptr, xa_ptr, pre_ptr, M, N, K, R, scale,
                       stride_xm, stride_xk, stride_wn, stride_wk, stride_ar, stride_ak, stride_bn, stride_br,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_R: tl.constexpr,
                       GROUP_M: tl.constexpr, XA_IN_LOOP: tl.constexpr, HAS_BIAS: tl.constexpr,
                       STORE_XA: tl.constexpr, STORE_PRE: tl.constexpr, ACTIVATION: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_r = tl.arange(0, BLOCK_R)  # the rank, padded with zeros to a power of two >= 16
    x_ptrs = x_ptr + offs_m[:, None] * stride_xm + offs_k[None, :] * stride_xk
    w_ptrs = w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :] * stride_wn  # a tile of W^T
    a_ptrs = a_ptr + offs_k[:, None] * stride_ak + offs_r[None, :] * stride_ar  # a tile of A^T
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    xa = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        x = tl.load(x_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        w = tl.load(w_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        if WIDEN:
            x, w = x.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(x, w, acc)  # x W^T
        if XA_IN_LOOP:  # the same x tile, a second dot: this program's rows of x A^T
            a = tl.load(a_ptrs, mask=(offs_k[:, None] < k_left) & (offs_r[None, :] < R), other=0.0)
            if WIDEN:
                a = a.to(tl.float32)
            xa = tl.dot(x, a, xa)
            a_ptrs += BLOCK_K * stride_ak
        x_ptrs += BLOCK_K * stride_xk
        w_ptrs += BLOCK_K * stride_wk
    xa_mask = (offs_m[:, None] < M) & (offs_r[None, :] < R)
    if not XA_IN_LOOP:  # x A^T was computed before the launch
        xa = tl.load(xa_ptr + offs_m[:, None] * R + offs_r[None, :], mask=xa_mask, other=0.0).to(tl.float32)
    elif STORE_XA:  # kept for the backward pass; the first column of programs writes it
        tl.store(xa_ptr + offs_m[:, None] * R + offs_r[None, :], xa.to(xa_ptr.dtype.element_ty),
                 mask=xa_mask & (pid_n == 0))
    # Epilogue: the low-rank term is one more dot, K = BLOCK_R, added to the tile while it is in registers.
    bt = tl.load(b_ptr + offs_r[:, None] * stride_br + offs_n[None, :] * stride_bn,
                 mask=(offs_r[:, None] < R) & (offs_n[None, :] < N), other=0.0)  # a tile of B^T
    xs = (xa * scale).to(bt.dtype)  # the tensor cores take fp16/bf16: round s (x A^T) once
    if WIDEN:
        xs, bt = xs.to(tl.float32), bt.to(tl.float32)
    acc = tl.dot(xs, bt, acc)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    out_offs = offs_m[:, None] * N + offs_n[None, :]
    out_mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    if STORE_PRE:  # the pre-activation, for the backward pass
        tl.store(pre_ptr + out_offs, acc.to(pre_ptr.dtype.element_ty), mask=out_mask)
    acc = apply_activation(acc, ACTIVATION)
    tl.store(out_ptr + out_offs, acc.to(out_ptr.dtype.element_ty), mask=out_mask)


import triton
import triton.language as tl


@triton.jit
def lora_linear_tma_kernel(x_desc, w_desc, a_desc, b_desc, bias_ptr, out_desc, xa_ptr, pre_ptr, M, N, K, R, scale,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                           BLOCK_R: tl.constexpr, GROUP_M: tl.constexpr, XA_IN_LOOP: tl.constexpr,
                           HAS_BIAS: tl.constexpr, STORE_XA: tl.constexpr, STORE_PRE: tl.constexpr,
                           ACTIVATION: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    xa = tl.zeros((BLOCK_M, BLOCK_R), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        x = x_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # TMA: what lies outside the matrix arrives as zeros
        w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K])  # rows of W; the dot reads them transposed
        if WIDEN:
            x, w = x.to(tl.float32), w.to(tl.float32)
        acc = tl.dot(x, w.T, acc)
        if XA_IN_LOOP:
            a = a_desc.load([0, k * BLOCK_K])  # all of A's rows; the padding rows arrive as zeros
            if WIDEN:
                a = a.to(tl.float32)
            xa = tl.dot(x, a.T, xa)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_r = tl.arange(0, BLOCK_R)
    xa_mask = (offs_m[:, None] < M) & (offs_r[None, :] < R)
    if not XA_IN_LOOP:
        xa = tl.load(xa_ptr + offs_m[:, None] * R + offs_r[None, :], mask=xa_mask, other=0.0).to(tl.float32)
    elif STORE_XA:
        tl.store(xa_ptr + offs_m[:, None] * R + offs_r[None, :], xa.to(xa_ptr.dtype.element_ty),
                 mask=xa_mask & (pid_n == 0))
    b = b_desc.load([pid_n * BLOCK_N, 0])  # BLOCK_N rows of B, BLOCK_R wide
    xs = (xa * scale).to(b.dtype)
    if WIDEN:
        xs, b = xs.to(tl.float32), b.to(tl.float32)
    acc = tl.dot(xs, b.T, acc)
    if HAS_BIAS:
        acc += tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0).to(tl.float32)[None, :]
    if STORE_PRE:
        tl.store(pre_ptr + offs_m[:, None] * N + offs_n[None, :], acc.to(pre_ptr.dtype.element_ty),
                 mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    acc = apply_activation(acc, ACTIVATION)
    out_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(out_desc.dtype))  # clipped at the matrix's edges


import torch
import triton
from triton.tools.tensor_descriptor import TensorDescriptor

import course_utils as cu
from course_utils.tuning import autotune

LORA_DTYPES = (torch.float16, torch.bfloat16)
MAX_RANK = 128


def _config(bm, bn, bk, stages, warps, pre_hook=None) -> triton.Config:
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
                         num_stages=stages, num_warps=warps, pre_hook=pre_hook)


# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps): notebook 07's best H100 tiles, and a small one for small problems.
LORA_TILES = cu.pick_size([(128, 256, 64, 3, 8), (128, 256, 64, 4, 8), (128, 128, 64, 4, 8), (64, 64, 64, 4, 4)],
                          [(32, 32, 32, 1, 4)])


def _prune(configs, named_args, **kwargs):
    """Tiles no larger than the problem (rounded up to a power of two, at least 64); big problems get big tiles only."""
    M, N = named_args["M"], named_args["N"]
    fits = [c for c in configs if c.kwargs["BLOCK_M"] <= max(64, triton.next_power_of_2(M))
            and c.kwargs["BLOCK_N"] <= max(64, triton.next_power_of_2(N))]
    if M * N >= 2**24:
        fits = [c for c in fits if c.kwargs["BLOCK_M"] * c.kwargs["BLOCK_N"] >= 128 * 128]
    return fits or configs[-1:]


def _set_block_shapes(nargs) -> None:
    """pre_hook of the TMA configs: each descriptor's tile follows the config being run."""
    bm, bn, bk, br = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"], nargs["BLOCK_R"]
    shapes = {"x_desc": [bm, bk], "w_desc": [bn, bk], "a_desc": [br, bk], "b_desc": [bn, br], "out_desc": [bm, bn]}
    for name, shape in shapes.items():
        nargs[name].block_shape = shape


_TUNING = dict(key=["M", "N", "K", "BLOCK_R", "XA_IN_LOOP"], prune_configs_by={"early_config_prune": _prune})
lora_linear_tuned = autotune([_config(*t) for t in LORA_TILES], **_TUNING)(lora_linear_kernel)
lora_linear_tma_tuned = autotune([_config(*t, pre_hook=_set_block_shapes) for t in LORA_TILES], **_TUNING)(
    lora_linear_tma_kernel)
HAS_TMA = cu.INTERPRET or (cu.HAS_CUDA and torch.cuda.get_device_capability()[0] >= 9)


def check_lora(x, W, b, A, B, scale, activation, dtypes=LORA_DTYPES) -> None:
    """What `lora_linear` accepts; raises TypeError/ValueError naming the problem."""
    check_tensors({"x": x, "W": W, **({} if b is None else {"b": b}), "A": A, "B": B}, dtypes)
    if x.dim() < 2 or W.dim() != 2 or A.dim() != 2 or B.dim() != 2:
        raise ValueError(f"x must be (..., d_in) and W, A, B 2-D, got x {tuple(x.shape)}, W {tuple(W.shape)}, "
                         f"A {tuple(A.shape)}, B {tuple(B.shape)}")
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
    if b is not None and tuple(b.shape) != (d_out,):
        raise ValueError(f"b must have shape ({d_out},), got {tuple(b.shape)}")
    check_options(scale, activation)


def uses_tma(*tensors: torch.Tensor) -> bool:
    """TMA descriptors need row-major matrices whose rows start on 16-byte boundaries."""
    return HAS_TMA and all(t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0
                           and t.data_ptr() % 16 == 0 for t in tensors)


def lora_kernel(x2, W, A, B, out):
    """The autotuned kernel `lora_forward` launches for these operands: TMA where every one qualifies."""
    return lora_linear_tma_tuned if x2.shape[1] > 0 and uses_tma(x2, W, A, B, out) else lora_linear_tuned


def lora_forward(x2, W, b, A, B, scale, activation, *, xa_in_loop=False, store_xa=False, store_pre=False):
    """The launch behind `lora_linear`, on checked 2-D inputs: (out, x A^T or None, pre-activation or None)."""
    (M, K), N, R = x2.shape, W.shape[0], A.shape[0]
    out = torch.empty((M, N), device=x2.device, dtype=x2.dtype)
    pre = torch.empty_like(out) if store_pre else None
    if xa_in_loop:
        xa = torch.empty((M, R), device=x2.device, dtype=x2.dtype) if store_xa else None
    else:
        xa = (x2 @ A.t()).contiguous()  # a small cuBLAS matmul before the launch
    if M == 0 or N == 0:
        return out, xa, pre
    meta = dict(BLOCK_R=max(16, triton.next_power_of_2(R)), XA_IN_LOOP=xa_in_loop, HAS_BIAS=b is not None,
                STORE_XA=store_xa and xa_in_loop, STORE_PRE=store_pre, ACTIVATION=activation)
    grid = lambda m: (triton.cdiv(M, m["BLOCK_M"]) * triton.cdiv(N, m["BLOCK_N"]),)
    if lora_kernel(x2, W, A, B, out) is lora_linear_tma_tuned:
        descs = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (x2, W, A, B, out)]  # pre_hook sets the tiles
        lora_linear_tma_tuned[grid](*descs[:4], b, descs[4], xa, pre, M, N, K, R, float(scale), **meta)
    else:
        lora_linear_tuned[grid](x2, W, A, B, b, out, xa, pre, M, N, K, R, float(scale), x2.stride(0), x2.stride(1),
                                W.stride(0), W.stride(1), A.stride(0), A.stride(1), B.stride(0), B.stride(1), **meta)
    return out, xa, pre


def lora_linear(x, W, b, A, B, scale: float = 1.0, activation: str = "none", *, xa_in_loop: bool = False):
    """act(x W^T + b + scale (x A^T) B^T): x A^T with cuBLAS first, then one Triton matmul that adds its product
    with B in the epilogue; fp16/bf16 in, fp32 accumulation; b may be None.

    ``xa_in_loop=True``: one launch, x A^T computed in the matmul's K loop (the measured alternative).
    """
    check_lora(x, W, b, A, B, scale, activation)
    out, _, _ = lora_forward(x.reshape(-1, x.shape[-1]), W, b, A, B, scale, activation, xa_in_loop=xa_in_loop)
    return out.reshape(*x.shape[:-1], W.shape[0])


def config_text(config: triton.Config) -> str:
    """An autotuner's choice in one line: the tile (BLOCK_M x BLOCK_N x BLOCK_K), warps and pipeline stages."""
    kw, stages = config.kwargs, config.num_stages
    return (f"{kw['BLOCK_M']}x{kw['BLOCK_N']}x{kw['BLOCK_K']}, {config.num_warps} warps, "
            f"{stages} stage{'' if stages == 1 else 's'}")


def lora_linear_config(x, W, b, A, B, scale: float = 1.0, activation: str = "none", *,
                       xa_in_loop: bool = False) -> str:
    """Runs `lora_linear` once: which kernel it launched, with the config its autotuner chose (`best_config`)."""
    out = lora_linear(x, W, b, A, B, scale, activation, xa_in_loop=xa_in_loop)
    x2, out2 = x.reshape(-1, x.shape[-1]), out.reshape(-1, W.shape[0])
    if out2.numel() == 0:
        return "no launch (empty output)"
    kernel = lora_kernel(x2, W, A, B, out2)
    return f"{'TMA' if kernel is lora_linear_tma_tuned else 'pointer'} kernel, {config_text(kernel.best_config)}"


import torch


def lora_forward_reference(x2, W, b, A, B, scale, activation, *, xa_in_loop=False, store_xa=False, store_pre=False):
    """`lora_forward` written with torch ops, in the inputs' dtype (float64 too): for gradcheck."""
    xa = x2 @ A.t()
    pre = (x2 @ W.t() if b is None else torch.addmm(b, x2, W.t())) + scale * (xa @ B.t())
    return ACTIVATION_FNS[activation](pre), xa, pre


def activation_grad(pre: torch.Tensor, activation: str) -> torch.Tensor:
    """d act(y) / dy at the pre-activation y, in fp32 (float64 stays float64)."""
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
    """out = act(x W^T + b + s (x A^T) B^T) with gradients for x, A and B; W and b are frozen."""

    @staticmethod
    def forward(ctx, x2, W, b, A, B, scale, activation, forward_fn):
        out, xa, pre = forward_fn(x2, W, b, A, B, scale, activation, store_xa=True, store_pre=activation != "none")
        ctx.save_for_backward(x2, W, A, B, xa, pre)
        ctx.scale, ctx.activation, ctx.forward_fn = scale, activation, forward_fn
        return out

    @staticmethod
    def backward(ctx, grad_out):
        x2, W, A, B, xa, pre = ctx.saved_tensors
        s, g = ctx.scale, grad_out.contiguous()
        if ctx.activation != "none":
            g = (g * activation_grad(pre, ctx.activation)).to(grad_out.dtype)
        dx = None
        if ctx.needs_input_grad[0]:
            # dx = g W + s (g B) A: the forward kernel again, with W^T, B^T, A^T in the roles of W, A, B.
            # Its "x A^T" is then g B, which dA needs too.
            dx, gB, _ = ctx.forward_fn(g, W.t(), None, B.t(), A.t(), s, "none", store_xa=True)
        else:
            gB = g @ B
        dA = (gB.t() @ x2).mul_(s) if ctx.needs_input_grad[3] else None  # s (g B)^T x: r x d_in
        dB = (g.t() @ xa).mul_(s) if ctx.needs_input_grad[4] else None   # s g^T (x A^T): d_out x r
        return dx, None, None, dA, dB, None, None, None


def lora_linear_trainable(x, W, b, A, B, scale: float = 1.0, activation: str = "none", *, reference: bool = False):
    """`lora_linear` with autograd: gradients for x, A and B; W and b are frozen (they must not require grad).

    ``reference=True`` runs the same Function with torch ops in place of the kernel, in any float dtype.
    """
    check_lora(x, W, b, A, B, scale, activation,
               dtypes=(torch.float64, torch.float32, *LORA_DTYPES) if reference else LORA_DTYPES)
    trainable = [name for name, t in (("W", W), ("b", b)) if t is not None and t.requires_grad]
    if trainable:
        raise ValueError(f"LoRA trains A and B only: {' and '.join(trainable)} must not require grad "
                         "(call .requires_grad_(False) on it)")
    fn = lora_forward_reference if reference else lora_forward
    out = LoRALinearFunction.apply(x.reshape(-1, x.shape[-1]), W, b, A, B, float(scale), activation, fn)
    return out.reshape(*x.shape[:-1], W.shape[0])
