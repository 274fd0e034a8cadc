"""Notebook 07's matmul, in the order the notebook builds it: a plain blocked kernel (row-major program
order), grouped program order (`tile_coords`), a fused epilogue (`apply_activation`) in the full
`matmul_kernel`, the autotuned wrapper `matmul_blocked` with its input validation, and, for Hopper, the TMA
kernel behind `matmul` (deep dive 07b). The notebooks show these with `course_utils.export.show`; later
notebooks import the kernels from here."""

from __future__ import annotations

import course_utils as cu  # first: on a machine without a GPU it switches Triton to its interpreter

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from course_utils.checks import Case, CheckReport, make_tensor
from course_utils.tuning import autotune


# ---- 1. The plain blocked kernel: one program per tile of C, programs in row-major order ----------------
@triton.jit
def blocked_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_N)  # row-major: programs 0, 1, 2, ... walk along a row of tiles
    pid_n = pid % tl.cdiv(N, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)  # my rows of A and C
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)  # my columns of B and C
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)  # tensor cores, fp32 accumulate
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


# ---- 2. Grouped program order -----------------------------------------------------------------------------
@triton.jit
def tile_coords(pid, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Program id -> (tile row, tile column): GROUP_M tile rows at a time, walked column by column."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pids_per_group = GROUP_M * num_pid_n
    first_m = (pid // pids_per_group) * GROUP_M
    group_rows = min(num_pid_m - first_m, GROUP_M)  # the last group may be shorter
    pid_m = first_m + (pid % pids_per_group) % group_rows
    pid_n = (pid % pids_per_group) // group_rows
    return pid_m, pid_n


@triton.jit
def tile_order_kernel(order_ptr, M, N, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    pid_m, pid_n = tile_coords(pid, M, N, 1, 1, GROUP_M)  # 1 x 1 "tiles": M, N count tiles here
    tl.store(order_ptr + pid_m * N + pid_n, pid)


@triton.jit
def tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """The fp32 tile (pid_m, pid_n) of A @ B: blocked_matmul_kernel's K loop, as a function."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        k_left = K - k * BLOCK_K
        a = tl.load(a_ptrs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(offs_k[:, None] < k_left) & (offs_n[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    return acc


@triton.jit
def store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Write the tile (pid_m, pid_n) of C in C's dtype, masked at the edges."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def grouped_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          GROUP_M: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)  # the one change
    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


# ---- 3. The fused epilogue: the full kernel ------------------------------------------------------------------
@triton.jit
def apply_activation(x, ACTIVATION: tl.constexpr):
    """The fused epilogue, on the fp32 tile. ACTIVATION is a compile-time string ('' = none)."""
    if ACTIVATION == "leaky_relu":
        x = tl.where(x >= 0, x, 0.01 * x)
    elif ACTIVATION == "gelu_tanh":  # 0.5 x (1 + tanh(u)) == x * sigmoid(2u)
        u = 0.7978845608028654 * (x + 0.044715 * x * x * x)
        x = x * tl.sigmoid(2.0 * tl.minimum(tl.maximum(u, -20.0), 20.0))  # clamp: exp() stays finite
    return x


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                  GROUP_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, pid_m, pid_n,
                       BLOCK_M, BLOCK_N, BLOCK_K)
    acc = apply_activation(acc, ACTIVATION)  # on the fp32 tile, still in registers: C is written once
    store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


# ---- Wrappers: validation, a fixed tile, the autotuned kernel ------------------------------------------------
ACTIVATIONS = ("", "leaky_relu", "gelu_tanh")


def validate(a: torch.Tensor, b: torch.Tensor, activation: str = "") -> None:
    """Clear errors, naming the argument, before anything is launched."""
    # one dtype, one device, no grad (no backward); any strides, within int32 offsets (the kernels use them)
    cu.require_tensors(a=a, b=b, ndim=2, dtypes=(torch.float16, torch.bfloat16), differentiable=False)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"inner dimensions differ: a is {a.shape[0]}x{a.shape[1]}, b is {b.shape[0]}x{b.shape[1]}")
    if a.shape[0] * b.shape[1] > cu.checks.INT32_MAX:  # C is row-major: its offsets reach M * N - 1
        raise ValueError(f"a @ b would have {a.shape[0]:,} x {b.shape[1]:,} elements; at most 2**31 - 1 "
                         "(offsets are int32)")
    cu.require_choice("activation", activation, ACTIVATIONS)


def interpreter_safe(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The CPU interpreter's tl.dot multiplies bfloat16 tiles as raw 16-bit integers (a Triton interpreter bug).
    There, and only there, hand the kernel fp32 copies (exact for bf16); C keeps its dtype. A GPU never widens."""
    cu.require_tensors(a=a, b=b, ndim=2, max_span=None)
    if cu.INTERPRET and a.dtype == torch.bfloat16:
        return a.float(), b.float()
    return a, b


#: The fixed tile of the plain and grouped kernels: the autotuner's usual choice on an H100 at 8192^3.
FIXED = cu.pick_size(dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, num_warps=8, num_stages=4),
                     dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=4, num_stages=1))


def matmul_rowmajor(a: torch.Tensor, b: torch.Tensor, group_m: int | None = None) -> torch.Tensor:
    """a @ b with the FIXED tile: blocked_matmul_kernel, or grouped_matmul_kernel when group_m is given."""
    validate(a, b)
    if group_m is not None:
        group_m = cu.require_number("group_m", group_m, integer=True, low=1, high=1024)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    a, b = interpreter_safe(a, b)
    grid = (triton.cdiv(M, FIXED["BLOCK_M"]) * triton.cdiv(N, FIXED["BLOCK_N"]),)
    args = (a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if group_m is None:
        blocked_matmul_kernel[grid](*args, **FIXED)
    else:
        grouped_matmul_kernel[grid](*args, **FIXED, GROUP_M=group_m)
    return c


# tuning list
def config(bm: int, bn: int, bk: int, stages: int, warps: int, group_m: int = 8, pre_hook=None) -> triton.Config:
    bm, bn, bk = (cu.require_block_size(n, v, at_least=16) for n, v in (("bm", bm), ("bn", bn), ("bk", bk)))
    stages = cu.require_number("stages", stages, integer=True, low=1, high=8)
    warps = cu.require_block_size("warps", warps, at_most=32)
    group_m = cu.require_number("group_m", group_m, integer=True, low=1, high=1024)
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group_m},
                         num_stages=stages, num_warps=warps, pre_hook=pre_hook)


# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps[, GROUP_M])
GPU_TILES = [(128, 256, 64, 3, 8), (128, 256, 64, 4, 8), (128, 256, 64, 3, 8, 16), (128, 256, 64, 4, 8, 16),
             (128, 256, 32, 4, 8), (256, 128, 64, 4, 8), (128, 128, 64, 4, 8), (64, 128, 64, 4, 4), (64, 64, 64, 4, 4)]
CPU_TILES = [(32, 32, 32, 1, 4), (64, 64, 32, 1, 4)]
TILES = cu.pick_size(GPU_TILES, CPU_TILES)


def prune_configs(configs, named_args, **kwargs):
    """Keep tiles no larger than the problem rounded up to a power of two (at least 64)."""
    if not configs:
        raise ValueError("configs must be a non-empty list of triton.Config")
    if "M" not in named_args or "N" not in named_args:
        raise ValueError(f"named_args must hold the kernel's M and N as ints, got {sorted(named_args)}")
    m_cap = max(64, triton.next_power_of_2(named_args["M"]))
    n_cap = max(64, triton.next_power_of_2(named_args["N"]))
    fits = [c for c in configs if c.kwargs["BLOCK_M"] <= m_cap and c.kwargs["BLOCK_N"] <= n_cap]
    return fits or configs[-1:]


# course_utils.tuning.autotune is @triton.autotune(configs=..., key=...) that also runs in the CPU interpreter
matmul_blocked_tuned = autotune([config(*t) for t in TILES], key=["M", "N", "K"],
                                prune_configs_by={"early_config_prune": prune_configs})(matmul_kernel)
# tuning list:end


def matmul_blocked(a: torch.Tensor, b: torch.Tensor, activation: str = "") -> torch.Tensor:
    """activation(a @ b) with the autotuned matmul_kernel; any strides, fp16 or bf16, fp32 accumulation."""
    validate(a, b, activation)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    a, b = interpreter_safe(a, b)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    matmul_blocked_tuned[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                               c.stride(0), c.stride(1), ACTIVATION=activation)
    return c


# ---- Correct first: awkward shapes, three layouts, both dtypes -------------------------------------------------
LAYOUTS = ("row-major", "A transposed", "B strided")
TOLERANCES = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}
SHAPES = [(1, 1, 1), (17, 33, 65), (40, 24, 72), (128, 96, 200)]  # (M, N, K): none a multiple of a block


def matmul_cases(shapes, dtype: torch.dtype, seed: int = 0) -> list[Case]:
    cu.require_choice("dtype", dtype, tuple(TOLERANCES))
    shapes = [tuple(cu.require_number("shapes[i]", v, integer=True, low=0) for v in s) for s in shapes]
    if not shapes or any(len(s) != 3 for s in shapes):
        raise ValueError(f"shapes must be a non-empty list of (M, N, K), got {shapes!r}")
    cases = []
    for m, n, k in shapes:
        for layout in LAYOUTS:
            def make(m=m, n=n, k=k, layout=layout):
                gen = torch.Generator().manual_seed(seed)
                if layout == "A transposed":  # a .t() view: A's K dimension is the strided one
                    a = make_tensor((k, m), dtype, device=cu.DEVICE, generator=gen).t()
                else:
                    a = make_tensor((m, k), dtype, device=cu.DEVICE, generator=gen)
                b = make_tensor((k, n), dtype, contiguous=layout != "B strided", device=cu.DEVICE, generator=gen)
                return a, b
            cases.append(Case(f"{m}x{n}x{k} {str(dtype)[6:]} {layout}", make))
    return cases


def reference(a: torch.Tensor, b: torch.Tensor, activation: str = "") -> torch.Tensor:
    """fp32 product, the activation, one rounding: what the kernels compute."""
    cu.require_choice("activation", activation, ACTIVATIONS)
    c = a.float() @ b.float()
    c = {"": c, "leaky_relu": F.leaky_relu(c, 0.01), "gelu_tanh": F.gelu(c, approximate="tanh")}[activation]
    return c.to(a.dtype)


def check_matmul(fn, shapes=SHAPES, activation: str = "") -> CheckReport:
    """fn(a, b[, activation]) against `reference` on every shape, layout and dtype."""
    call = (lambda a, b: fn(a, b, activation)) if activation else fn
    results = []
    for dtype, tol in TOLERANCES.items():
        report = cu.check(call, lambda a, b: reference(a, b, activation), matmul_cases(shapes, dtype), **tol)
        results += report.results
    return CheckReport(results)


# ---- Hopper: the Tensor Memory Accelerator fetches the tiles (deep dive 07b) ------------------------------------
@triton.jit
def matmul_tma_kernel(a_desc, b_desc, c_desc, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, ACTIVATION: tl.constexpr):
    pid_m, pid_n = tile_coords(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # out-of-bounds parts arrive as zeros
        b = b_desc.load([k * BLOCK_K, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc)
    acc = apply_activation(acc, ACTIVATION)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))  # clipped at the edges


def set_block_shapes(nargs: dict) -> None:
    """Config pre_hook: the descriptors' tile shapes follow the config being run."""
    missing = [k for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "a_desc", "b_desc", "c_desc") if k not in nargs]
    if missing:
        raise ValueError(f"nargs must hold the launch's arguments; missing {missing}")
    bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn]


# Descriptors have no .dtype for the autotuner's key, so fp16 and bf16 share a tuning result per shape
# (the tensor cores run both at the same rate).
matmul_tma_tuned = autotune([config(*t[:5], group_m=t[5] if len(t) > 5 else 8, pre_hook=set_block_shapes)
                             for t in TILES], key=["M", "N", "K"],
                            prune_configs_by={"early_config_prune": prune_configs})(matmul_tma_kernel)

HAS_TMA = cu.INTERPRET or (cu.HAS_CUDA and torch.cuda.get_device_capability()[0] >= 9)


def uses_tma(a: torch.Tensor, b: torch.Tensor) -> bool:
    """TMA needs row-major rows starting on 16-byte boundaries (C is allocated row-major)."""
    cu.require_tensors(a=a, b=b, ndim=2)
    def aligned(t: torch.Tensor, cols: int) -> bool:
        return t.stride(1) == 1 and (t.stride(0) * t.element_size()) % 16 == 0 and t.data_ptr() % 16 == 0 \
            and (cols * t.element_size()) % 16 == 0
    return HAS_TMA and a.shape[1] > 0 and aligned(a, a.shape[1]) and aligned(b, b.shape[1])


def matmul(a: torch.Tensor, b: torch.Tensor, activation: str = "") -> torch.Tensor:
    """activation(a @ b): the TMA kernel where the inputs allow it, else the blocked kernel."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    validate(a, b, activation)
    if not uses_tma(a, b):
        return matmul_blocked(a, b, activation)
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0:
        return c
    descs = [TensorDescriptor.from_tensor(t, [1, 1]) for t in (*interpreter_safe(a, b), c)]  # pre_hook: tile shape
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)  # noqa: E731
    matmul_tma_tuned[grid](*descs, M, N, K, ACTIVATION=activation)
    return c


@triton.jit
def empty_kernel(x_ptr):
    """Does nothing: timing its launch measures what a Triton call costs on the host."""
    pass
