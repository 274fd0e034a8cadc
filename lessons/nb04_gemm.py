"""Notebook 04's GEMM ladder, the Python side of `lessons/nb04_gemm.cu`: its sections, the build, the
wrapper with its input checks, the labels of the shapes that rungs 9 and 11 come in, and the test cases.

The kernels themselves are CUDA C++ in ``nb04_gemm.cu`` (one section per rung, shown in the notebooks with
``course_utils.export.show``); the C++ twins of rungs 1 and 3, which run on a CPU, are ``nb04_gemm_twins.cpp``.
Notebook 04 and its deep dives (04b, 04c) and the Nsight Compute child script (``nb04_ncu_child.py``) all
build the same module from these files: the same sources give the same module name, so a second build in
any process only loads it from the cache.
"""

from __future__ import annotations

import contextlib
import math
import re
from pathlib import Path
from typing import Iterator

import pandas as pd
import torch

from course_utils.checks import Case, require_choice, require_number, require_tensors
from course_utils.cuda_build import build_extension, compile_cuda, compiler_log_path
from course_utils.device import require_device

CUDA_PATH = Path(__file__).with_name("nb04_gemm.cu")
TWINS_PATH = Path(__file__).with_name("nb04_gemm_twins.cpp")

#: The rungs, in order: rung n is RUNGS[n - 1].
RUNGS = ("naive", "coalesced", "shared memory", "1D register blocking", "2D register blocking", "vectorized",
         "warp tiling", "double buffering", "tuned tile shape", "vector stores", "shape per size")
RUNG_NAMES = dict(enumerate(RUNGS, start=1))

#: Rung 9's shapes, in the order of the host code's `case 9` (config 0, 1, 2).
TUNED_CONFIGS = [
    "128x128 tile, BK 8, 8x8 per thread, 256 threads",
    "128x128 tile, BK 8, 16x8 per thread, 128 threads",
    "128x256 tile, BK 8, 8x16 per thread, 256 threads",
]

#: What the build exposes: the C++ declarations load_inline binds.
DECLARATIONS = """
torch::Tensor gemm(torch::Tensor a, torch::Tensor b, int64_t rung, int64_t config);
std::vector<int64_t> kernel_info(int64_t rung, int64_t config);
"""


def cuda_source() -> str:
    """The whole of nb04_gemm.cu: every rung and the host code."""
    return CUDA_PATH.read_text(encoding="utf-8")


def section(name: str) -> str:
    """One section of nb04_gemm.cu: the lines between ``// name`` and ``// name:end``."""
    lines = cuda_source().splitlines()
    begin = next((i for i, line in enumerate(lines) if line.strip() == f"// {name}"), None)
    if begin is None:
        raise ValueError(f"name: nb04_gemm.cu has no section {name!r}")
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].strip() == f"// {name}:end")
    return "\n".join(lines[begin + 1:end]) + "\n"


def _size_configs() -> list[tuple]:
    # rung 11's candidates, read from the SHAPE(...) rows of the .cu file: (kernel, BM, BN, BK, TM, TN, WARP_ROWS, MINB)
    rows = re.findall(r"^\s*SHAPE\((\w+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)\)", section("rung 11"), re.M)
    return [(kernel, *map(int, numbers)) for kernel, *numbers in rows]


#: Rung 11's candidate shapes (config 0, 1, ...), as the .cu file lists them, and their labels.
SIZE_CONFIGS = _size_configs()
SIZE_LABELS = [f"{bm}x{bn} tile, BK {bk}, {tm}x{tn} per thread, {bm // tm * (bn // tn)} threads"
               + (", rung 9's kernel" if kernel == "gemm_tuned" else "")
               for kernel, bm, bn, bk, tm, tn, _, _ in SIZE_CONFIGS]
#: The rungs that come in several shapes, and their labels.
RUNG_CONFIGS = {9: TUNED_CONFIGS, 11: SIZE_LABELS}


def rung_label(rung: int, config: int = 0) -> str:
    """'rung 9 tuned tile shape [128x128 tile, ...]'."""
    rung, config = _rung_and_config(rung, config)
    return f"rung {rung} {RUNG_NAMES[rung]}" + (f" [{RUNG_CONFIGS[rung][config]}]" if rung in RUNG_CONFIGS else "")


def _rung_and_config(rung, config) -> tuple[int, int]:
    """``rung`` and ``config`` as ints, or a clear error: a rung of the ladder, a shape that rung comes in."""
    rung = require_choice("rung", require_number("rung", rung, integer=True), tuple(RUNG_NAMES))
    shapes = len(RUNG_CONFIGS.get(rung, [None]))
    config = require_number("config", config, integer=True, low=0, high=shapes - 1)
    return rung, config


def build():
    """The ladder's extension (a GPU is needed): every rung of nb04_gemm.cu, functions gemm and kernel_info."""
    return build_extension("gemm_ladder", DECLARATIONS, cuda_source(), ["gemm", "kernel_info"])


def build_twins():
    """The C++ twins of rungs 1 and 3 (gemm_naive_cpu, gemm_tiled_cpu), built C++-only: any machine."""
    return build_extension("gemm_twins", TWINS_PATH.read_text(encoding="utf-8"), None,
                           ["gemm_naive_cpu", "gemm_tiled_cpu"])


def config_for(size_config: dict[int, int], m: int, n: int, k: int) -> int:
    """Rung 11's shape for an m x n x k product: the winner at the measured size nearest in log scale
    (``size_config``: size -> config, filled by a measurement); shape 0 while nothing was measured."""
    m, n, k = (require_number(name, v, integer=True, low=0) for name, v in (("m", m), ("n", n), ("k", k)))
    if not isinstance(size_config, dict):
        raise TypeError(f"size_config must be a dict of size -> config, got {type(size_config).__name__}")
    for size in size_config:
        require_number("a size of size_config", size, low=1)
    if not size_config:
        return 0
    size = max(m * n * k, 1) ** (1 / 3)
    return size_config[min(size_config, key=lambda s: abs(math.log(s / size)))]


def matmul(ext, a: torch.Tensor, b: torch.Tensor, rung: int = 9, config: int | None = None, *,
           tuned: int = 0, size_config: dict[int, int] | None = None) -> torch.Tensor:
    """C = a @ b with one rung of the ladder (FP32, CUDA), from the module `build` returns.

    ``config`` picks rung 9's or rung 11's shape; None takes ``tuned`` for rung 9 and, for rung 11, the
    shape ``size_config`` chose for the nearest size. A strided input (a transpose) is copied first: the
    kernels read row-major memory.
    """
    rung, _ = _rung_and_config(rung, 0)
    # FP32, 2-D, no grad (no backward); any strides (copied below), at most 2**31 - 1 elements (int offsets)
    require_tensors(a=a, b=b, dtypes=(torch.float32,), ndim=2, differentiable=False, max_span=None)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a and b: need a (M x K) and b (K x N), got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.shape[0] * b.shape[1] > 2**31 - 1:
        raise ValueError(f"a @ b would have {a.shape[0]:,} x {b.shape[1]:,} elements; at most 2**31 - 1 (int offsets)")
    if config is None:
        tuned = require_number("tuned", tuned, integer=True, low=0, high=len(TUNED_CONFIGS) - 1)
        config = tuned if rung == 9 else config_for(size_config or {}, a.shape[0], b.shape[1], a.shape[1]) \
            if rung == 11 else 0
    rung, config = _rung_and_config(rung, config)
    if a.device.type != "cuda" or ext is None:
        raise ValueError(f"a and b: the CUDA kernels need CUDA tensors and a GPU, got {a.device}")
    if a.numel() == 0 or b.numel() == 0:  # nothing to launch: an empty C, or K == 0 (a sum of nothing: zeros)
        return torch.zeros(a.shape[0], b.shape[1], device=a.device)
    return ext.gemm(a.contiguous(), b.contiguous(), rung, config)


@contextlib.contextmanager
def fp32_matmul() -> Iterator[None]:
    """cuBLAS in true FP32 (TF32 off) while inside; the previous setting comes back afterwards."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


#: M x N x K: one element, sizes that are multiples of no tile, a multiple of the tile, float4-path shapes, thin ones.
GEMM_SHAPES = ((1, 1, 1), (17, 33, 65), (127, 255, 129), (128, 128, 128), (300, 200, 64),
               (64, 1000, 36), (257, 129, 1025), (1000, 3, 7), (3, 1000, 12))
#: On a GPU also long, ragged K and N (the tails of the 16-deep K step and the 64-wide tiles), and a float4
#: shape whose last K step (12) passes the middle of the step, where rung 10 stores half of its next tile.
GPU_SHAPES = GEMM_SHAPES + ((1000, 129, 127), (129, 1000, 1000), (127, 1, 1000), (136, 200, 44))


def gemm_cases(device: str | torch.device, shapes=GEMM_SHAPES) -> list[Case]:
    """`cu.check` cases: each shape, a transposed (non-contiguous) A and an A 4 bytes past a 16-byte boundary."""
    device = require_device(device)
    cases = []
    for m, n, k in shapes:
        def make(m=m, n=n, k=k):
            g = torch.Generator().manual_seed(0)
            return torch.randn(m, k, generator=g).to(device), torch.randn(k, n, generator=g).to(device)
        cases.append(Case(f"{m}x{n}x{k}", make))

    def transposed():
        g = torch.Generator().manual_seed(1)
        return torch.randn(65, 130, generator=g).to(device).t(), torch.randn(65, 70, generator=g).to(device)

    def misaligned():
        g = torch.Generator().manual_seed(2)
        flat = torch.randn(96 * 64 + 1, generator=g).to(device)
        return flat[1:].view(96, 64), torch.randn(64, 80, generator=g).to(device)
    return cases + [Case("130x70x65 transposed A", transposed), Case("96x80x64 misaligned A", misaligned)]


def smem_wavefronts(words) -> int:
    """Cycles ("wavefronts") shared memory needs for one warp-wide access touching these 4-byte words: the
    largest number of *distinct* words any one of the 32 banks must deliver."""
    words = [require_number("words[i]", w, integer=True, low=0) for w in words]
    if not words:
        raise ValueError("words must hold the word addresses of one warp's access; got none")
    per_bank: dict[int, set] = {}
    for w in set(int(w) for w in words):
        per_bank.setdefault(w % 32, set()).add(w)
    return max(len(ws) for ws in per_bank.values())


def resource_usage(arch: str = "sm_90") -> pd.DataFrame | None:
    """nvcc's report (registers per thread, bytes spilled) for rung 11's candidates, float4 and scalar paths.

    Compiles rungs 9 to 11 of nb04_gemm.cu to machine code (a cubin) for ``arch``; needs nvcc, not a GPU.
    """
    source = "".join(section(name) for name in ("common helpers", "rung 9", "rung 10", "rung 11"))
    log = compiler_log_path(compile_cuda(source, arch=arch, output="cubin")).read_text(encoding="utf-8")
    found = re.findall(r"Function properties for (\w+)\n.*?(\d+) bytes spill stores, (\d+) bytes spill loads\n"
                       r".*?Used (\d+) registers", log)
    rows = []
    for name, stores, loads, regs in found:
        length = re.match(r"_Z(\d+)", name)  # mangled: _Z<length><kernel>I<template arguments>E...
        kernel = name[length.end():length.end() + int(length.group(1))]
        args = tuple(int(v) for v in re.findall(r"L[ib](\d+)E", name))
        rows.append({"shape": SIZE_LABELS[SIZE_CONFIGS.index((kernel, *args[:7]))],
                     "path": "float4" if args[7] else "scalar", "registers/thread": int(regs),
                     "spill stores (B)": int(stores), "spill loads (B)": int(loads)})
    return pd.DataFrame(rows).sort_values(["shape", "path"]) if rows else None
