"""Notebook 14's kernels and wrappers, written here by hand; notebooks 14, 14b and 14c show them with
`course_utils.export.show` and import them.

1. The persistent TMA matmul (notebook 14): `matmul_persistent_kernel`, its configs (pipelined and
   warp-specialized), the probe that keeps the configs this Triton and this GPU can run, and the wrapper
   `matmul_persistent`, which falls back to notebook 07's pointer kernel where TMA cannot read the inputs.
2. FP8 with scales (deep dive 14b): `matmul_fp8_kernel`, quantization, the dequantized reference, `matmul_fp8`.
3. Skinny GEMMs (deep dive 14c): `skinny_matmul_kernel` (swap AB, split-K summed by the last program),
   `skinny_matmul` and the roofline dispatcher `linear`.
Measuring: `timed_rounds` (rounds of `cu.benchmark_interleaved`), `speedups`, `ClockLog` (the SM clock).
"""

from __future__ import annotations

import course_utils as cu  # first: on a machine without a GPU it switches Triton to its interpreter

import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
import triton
import triton.language as tl

from course_utils.checks import INT32_MAX, Case, CheckReport, make_tensor
from course_utils.tuning import autotune
from lessons.nb07_matmul import interpreter_safe, matmul_blocked, tile_coords

SMS = torch.cuda.get_device_properties(0).multi_processor_count if cu.HAS_CUDA else 4  # CPU: pretend 4 SMs
HOPPER = cu.HAS_CUDA and torch.cuda.get_device_capability() >= (9, 0)
HAS_TMA = HOPPER or cu.INTERPRET  # the interpreter emulates tensor descriptors
HAS_FP8 = cu.INTERPRET or (cu.HAS_CUDA and torch.cuda.get_device_capability() >= (8, 9))  # fp8 tensor cores: sm_89+
ROUNDS = cu.pick_size(5, 1)
BASELINE = "cuBLAS" if cu.HAS_CUDA else "torch (CPU)"
SMEM_LIMIT = 232_448  # bytes of shared memory one block may use on an H100


def scratch_for_descriptors(size: int, alignment: int, stream) -> torch.Tensor:
    # global memory for the tensor descriptors a kernel builds with tl.make_tensor_descriptor
    size = cu.require_number("size", size, integer=True, low=0)
    alignment = cu.require_block_size("alignment", alignment)
    buf = torch.empty(size, dtype=torch.int8, device=cu.DEVICE)
    if buf.data_ptr() % alignment:  # not where the caching allocator puts it (512 bytes on a GPU): align by hand
        buf = torch.empty(size + alignment, dtype=torch.int8, device=cu.DEVICE)
        start = -buf.data_ptr() % alignment
        buf = buf[start:start + size]
    return buf


triton.set_allocator(scratch_for_descriptors)


# ---- Measuring: rounds, ratios, the SM clock ------------------------------------------------------------------
def timed_rounds(fns: dict, rounds: int = ROUNDS, **bench) -> dict[str, list[float]]:
    """Each function's median ms in each of `rounds` rounds; within a round the functions take turns
    (`cu.benchmark_interleaved` with one round, so the spread between rounds stays visible)."""
    rounds = cu.require_number("rounds", rounds, integer=True, low=1)
    per_round = [cu.benchmark_interleaved(fns, rounds=1, **bench) for _ in range(rounds)]
    return {name: [r[name] for r in per_round] for name in fns}


def _require_times(times, baseline) -> None:
    # times: name -> ms per round, every list as long as the baseline's (round i is compared with round i)
    if not isinstance(times, dict) or not times:
        raise TypeError("times must be the dict timed_rounds returns (name -> ms per round), "
                        f"got {type(times).__name__}")
    cu.require_choice("baseline", baseline, tuple(times))
    rounds = len(times[baseline]) if isinstance(times[baseline], (list, tuple, np.ndarray)) else 0
    for name, t in times.items():
        if not isinstance(t, (list, tuple, np.ndarray)) or len(t) == 0:
            raise TypeError(f"times[{name!r}] must be a non-empty list of ms per round, got {t!r:.80}")
        if len(t) != rounds:
            raise ValueError(f"times[{name!r}] has {len(t)} rounds but times[{baseline!r}] has {rounds}")
        for v in t:
            if cu.require_number(f"times[{name!r}]'s ms", v) <= 0:
                raise ValueError(f"times[{name!r}]'s ms must be > 0, got {v!r}")


def speedups(times: dict, baseline: str) -> dict[str, tuple[float, float, float]]:
    """name -> (ratio of medians, lowest and highest per-round ratio); above 1 is faster than the baseline."""
    _require_times(times, baseline)
    out = {}
    for name, t in times.items():
        per_round = [b / x for b, x in zip(times[baseline], t)]
        out[name] = (float(np.median(times[baseline]) / np.median(t)), min(per_round), max(per_round))
    return out


def ranges_overlap(a: tuple, b: tuple) -> bool:
    """Do the per-round ranges of two `speedups` entries overlap? If so, one run does not order the two."""
    for name, entry in (("a", a), ("b", b)):
        if not isinstance(entry, (tuple, list)) or len(entry) != 3:
            raise TypeError(f"{name} must be a speedups entry (ratio, lowest, highest), got {entry!r:.80}")
        low, high = (cu.require_number(f"{name}[{i}]", entry[i]) for i in (1, 2))
        if low > high:
            raise ValueError(f"{name} must be (ratio, lowest, highest) with lowest <= highest, got {tuple(entry)}")
    return not (a[1] > b[2] or b[1] > a[2])


def tflops(m: int, n: int, k: int, ms: float) -> float:
    m, n, k = (cu.require_number(name, v, integer=True, low=0) for name, v in (("m", m), ("n", n), ("k", k)))
    if cu.require_number("ms", ms) <= 0:
        raise ValueError(f"ms must be > 0, got {ms!r}")
    return 2 * m * n * k / (ms * 1e-3) / 1e12


class ClockLog:
    """Samples the SM clock (MHz) with nvidia-smi every 200 ms while the with-block runs."""

    def __init__(self):
        self.samples, self.proc = [], None

    def __enter__(self):
        self.samples, self.proc = [], None
        if cu.HAS_CUDA and shutil.which("nvidia-smi"):
            self.proc = subprocess.Popen(["nvidia-smi", "-i", "0", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits",
                                          "-lms", "200"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        return self

    def __exit__(self, *exc):
        if self.proc is not None:
            self.proc.terminate()
            out, _ = self.proc.communicate(timeout=10)
            self.samples = [float(v) for v in out.split() if v.replace(".", "", 1).isdigit()]
        return False

    def __str__(self):
        if not cu.HAS_CUDA:
            return "no GPU: interpreter timings on the CPU, not GPU figures"
        if not self.samples:
            return "SM clock: no nvidia-smi samples on this machine"
        s = np.array(self.samples)
        return f"SM clock: median {np.median(s):.0f} MHz (min {s.min():.0f}, max {s.max():.0f}, {len(s)} samples)"


# ---- 1. The persistent TMA matmul ----------------------------------------------------------------------------
@triton.jit
def store_subtiled(c_desc, acc, off_m, off_n, BLOCK_N: tl.constexpr, SUBTILES: tl.constexpr):
    # Epilogue: the fp32 tile goes out through the C descriptor whole, or as two halves of N.
    if SUBTILES == 2:
        halves = tl.permute(tl.reshape(acc, (acc.shape[0], 2, BLOCK_N // 2)), (0, 2, 1))
        left, right = tl.split(halves)
        c_desc.store([off_m, off_n], left.to(c_desc.dtype))
        c_desc.store([off_m, off_n + BLOCK_N // 2], right.to(c_desc.dtype))
    else:
        c_desc.store([off_m, off_n], acc.to(c_desc.dtype))


@triton.jit
def matmul_persistent_kernel(a_ptr, w_ptr, c_ptr, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                             GROUP_M: tl.constexpr, SUBTILES: tl.constexpr,
                             FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    # C = A @ W^T with A (M x K), W (N x K) and C (M x N) row-major; program p computes tiles p, p + P, ...
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // SUBTILES])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0),
                         flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)  # notebook 07's grouped order
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])  # zeros where the tile leaves A
            w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, w.T, acc)
        store_subtiled(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_N, SUBTILES)

# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, SUBTILES, warp-specialized)
GPU_TILES = [(128, 256, 64, 3, 8, 1, False), (128, 256, 64, 4, 8, 2, False), (128, 128, 64, 4, 8, 1, False),
             (128, 256, 64, 3, 4, 1, True), (128, 256, 64, 3, 4, 2, True), (128, 128, 64, 4, 4, 1, True)]
CPU_TILES = [(32, 32, 32, 1, 4, 2, False), (32, 32, 32, 1, 4, 1, True)]


#: The constexprs of a persistent (and fp8) config, and of a skinny one.
PERSISTENT_KEYS = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "SUBTILES", "FLATTEN", "WARP_SPECIALIZE")
SKINNY_KEYS = ("BLOCK_N", "BLOCK_K", "SPLIT_K")


def _tile(bm, bn, bk, subtiles) -> tuple[int, int, int, int]:
    # a TMA box holds 16 to 256 elements per dimension; tl.dot needs 16 or more
    bm, bn, bk = (cu.require_block_size(name, v, at_least=16, at_most=256)
                  for name, v in (("bm", bm), ("bn", bn), ("bk", bk)))
    subtiles = cu.require_number("subtiles", subtiles, integer=True)
    if subtiles not in (1, 2):
        raise ValueError(f"subtiles must be 1 or 2 (C stored whole or as two halves of BLOCK_N), got {subtiles!r}")
    return bm, bn, bk, subtiles


def _config(name: str, cfg, keys: tuple) -> triton.Config:
    """cfg, if it is a triton.Config that sets every one of keys (block sizes checked as tile_config does)."""
    if not isinstance(cfg, triton.Config):
        raise TypeError(f"{name} must be a triton.Config, got {type(cfg).__name__}")
    missing = [k for k in keys if k not in cfg.kwargs]
    if missing:
        raise ValueError(f"{name} must set {', '.join(keys)}; it lacks {', '.join(missing)} (got {dict(cfg.kwargs)})")
    box = 256 if "SUBTILES" in keys else cu.checks.MAX_BLOCK  # a TMA box: at most 256 per dimension
    for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K"):
        if k in keys:
            cu.require_block_size(f"{name}'s {k}", cfg.kwargs[k], at_least=16, at_most=box)
    if "SUBTILES" in keys:
        _tile(16, 16, 16, cfg.kwargs["SUBTILES"])
    if "SPLIT_K" in keys:
        cu.require_number(f"{name}'s SPLIT_K", cfg.kwargs["SPLIT_K"], integer=True, low=1)
    return cfg


def tile_config(bm, bn, bk, stages, warps, subtiles, ws, **extra) -> triton.Config:
    # On Hopper, Triton warp-specializes only a loop that is not flattened.
    bm, bn, bk, subtiles = _tile(bm, bn, bk, subtiles)
    stages = cu.require_number("stages", stages, integer=True, low=1, high=8)
    warps = cu.require_block_size("warps", warps, at_least=1, at_most=32)
    cu.require_choice("ws", ws, (True, False))
    return triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, "SUBTILES": subtiles,
                          "FLATTEN": not ws, "WARP_SPECIALIZE": ws, **extra}, num_stages=stages, num_warps=warps)


def describe(cfg: triton.Config) -> str:
    k = _config("cfg", cfg, PERSISTENT_KEYS).kwargs
    return (f"{k['BLOCK_M']}x{k['BLOCK_N']}x{k['BLOCK_K']}, {cfg.num_stages} stages, {cfg.num_warps} warps, "
            f"{k['SUBTILES']} subtile(s){', warp-specialized' if k['WARP_SPECIALIZE'] else ', flattened loop'}")


def check_operands(a, w, dtypes: tuple, max_span: int | None = None, name: str = "a") -> None:
    """a (M x K) and w (N x K, the layout of nn.Linear.weight): one dtype of `dtypes`, 2-D, on the course's device,
    neither requiring grad (the kernels have no backward). max_span: INT32_MAX for a kernel that indexes with int32
    offsets (the skinny kernel); None where TMA descriptors read them. name: what the caller calls a (x, say)."""
    dtypes = (dtypes,) if isinstance(dtypes, torch.dtype) else dtypes
    cu.require_tensors(**{name: a, "w": w}, dtypes=dtypes, ndim=2, max_numel=max_span, max_span=max_span,
                       differentiable=False)
    if a.shape[1] != w.shape[1]:
        raise ValueError(f"{name} is {a.shape[0]}x{a.shape[1]} but w is {w.shape[0]}x{w.shape[1]}: "
                         "w must be N x K, the layout of nn.Linear.weight")


def tma_ready(*tensors: torch.Tensor) -> bool:
    # A descriptor needs a contiguous, non-empty matrix whose rows start on 16-byte boundaries.
    if not tensors:
        raise TypeError("tma_ready needs the matrices to check, e.g. tma_ready(a, w, c)")
    for i, t in enumerate(tensors):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"tensors[{i}] must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() != 2:
            raise ValueError(f"tensors[{i}] must be 2-D (a matrix), got shape {tuple(t.shape)}")
    return HAS_TMA and all(t.numel() > 0 and t.is_contiguous() and (t.shape[1] * t.element_size()) % 16 == 0
                           and t.data_ptr() % 16 == 0 for t in tensors)


def _require_output(c, M: int, N: int, like: torch.Tensor, dtypes: tuple) -> None:
    # c: the M x N result the kernel writes through a descriptor
    cu.require_tensors(c=c, dtypes=dtypes, ndim=2, max_numel=None, max_span=None, device=like.device)
    if tuple(c.shape) != (M, N):
        raise ValueError(f"c must be {M} x {N} (M x N), got shape {tuple(c.shape)}")


def _require_tma(**tensors) -> None:
    for name, t in tensors.items():
        if not tma_ready(t):
            raise ValueError(f"{name} must be contiguous, with rows of a multiple of 16 bytes starting on 16-byte "
                             "boundaries (what a TMA descriptor reads), on a GPU with TMA; got shape "
                             f"{tuple(t.shape)}, strides {t.stride()}, {t.dtype}"
                             + ("" if HAS_TMA else " (no TMA on this GPU)"))


def launch_persistent(a, w, c, cfg: triton.Config, programs: int | None = None) -> torch.Tensor:
    """One config, no autotuning: programs = min(SMs, tiles) unless given (= tiles: one program per tile)."""
    check_operands(a, w, (torch.float16, torch.bfloat16))
    _config("cfg", cfg, PERSISTENT_KEYS)
    if programs is not None:
        programs = cu.require_number("programs", programs, integer=True, low=1)
    (M, K), N = a.shape, w.shape[0]
    _require_output(c, M, N, a, (torch.float16, torch.bfloat16, torch.float32))
    if M == 0 or N == 0 or K == 0:  # nothing to read: no descriptor of an empty matrix
        return c.zero_()
    _require_tma(a=a, w=w, c=c)
    return _launch_persistent(a, w, c, cfg, programs)


def _launch_persistent(a, w, c, cfg: triton.Config, programs: int | None = None) -> torch.Tensor:
    (M, K), N = a.shape, w.shape[0]
    tiles = triton.cdiv(M, cfg.kwargs["BLOCK_M"]) * triton.cdiv(N, cfg.kwargs["BLOCK_N"])
    a, w = interpreter_safe(a, w)
    matmul_persistent_kernel[(programs or min(SMS, tiles),)](a, w, c, M, N, K, **cfg.kwargs,
                                                             num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return c


@contextlib.contextmanager
def stderr_to_file():
    """Send this process's file descriptor 2 to a temporary file: a compiler failing inside Triton writes its
    report there (MLIR dumps with build paths), not into the notebook. Yields a function that reads it back."""
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield lambda: (log.seek(0), log.read().decode(errors="replace"))[1]
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)


def compiler_report(text: str) -> str:
    """One line about a compiler's stderr: its first line that names no file, and how many lines there were."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str (what stderr_to_file read back), got {type(text).__name__}")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = next((line for line in lines if "/" not in line and "\\" not in line), "")
    return f' (the compiler wrote {len(lines)} lines, the first: "{first[:80]}")' if lines else ""


def probe(configs: list, launch, make_inputs, reference, label: str) -> list:
    """GPU only: keep the configs that compile, fit and give the right answer on this GPU with this Triton;
    print one line for each config dropped, and one for the count kept."""
    if not isinstance(configs, (list, tuple)) or not all(isinstance(c, triton.Config) for c in configs):
        raise TypeError(f"configs must be a list of triton.Config, got {configs!r:.80}")
    for name, fn in (("launch", launch), ("make_inputs", make_inputs), ("reference", reference)):
        if not callable(fn):
            raise TypeError(f"{name} must be callable, got {type(fn).__name__}")
    if not isinstance(label, str):
        raise TypeError(f"label must be a str, got {type(label).__name__}")
    if not cu.HAS_CUDA:
        return list(configs)
    inputs, kept = make_inputs(), []
    expected = reference(*inputs).float()
    for cfg in configs:
        with stderr_to_file() as compiler_output:
            try:
                err = (launch(*inputs, cfg).float() - expected).abs().max().item()
                torch.cuda.synchronize()
                failure = None
            except Exception as exc:  # compiler failure or out of shared memory: say so in one line, go on
                failure = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:100]}"
            report = compiler_report(compiler_output())
        if failure is not None:
            print(f"{label}: dropped [{describe(cfg)}]: {failure}{report}")
            continue
        if not err <= 0.05 * expected.abs().max().item():
            print(f"{label}: dropped [{describe(cfg)}]: wrong result (max abs error {err:.3g})")
            continue
        kept.append(cfg)
    print(f"{label}: {len(kept)} of {len(configs)} configs usable with Triton {triton.__version__} on "
          f"{torch.cuda.get_device_name(0)}")
    return kept


def probe_inputs(dtype=torch.float16, m=384, n=640, k=320):
    cu.require_choice("dtype", dtype, (torch.float16, torch.bfloat16, torch.float32))
    m, n, k = (cu.require_number(name, v, integer=True, low=1) for name, v in (("m", m), ("n", n), ("k", k)))
    torch.manual_seed(0)
    return torch.randn(m, k, device=cu.DEVICE, dtype=dtype), torch.randn(n, k, device=cu.DEVICE, dtype=dtype)


def _persistent_probe_launch(a, w, cfg):
    return _launch_persistent(a, w, torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=a.dtype), cfg)


@functools.lru_cache(maxsize=1)
def persistent_families() -> dict[str, list]:
    """The probed configs, by family: 'pipelined', 'warp-specialized' and 'all' (probed once per process)."""
    configs = [tile_config(*t) for t in cu.pick_size(GPU_TILES, CPU_TILES)] if HAS_TMA else []
    configs = probe(configs, _persistent_probe_launch, probe_inputs, lambda a, w: a.float() @ w.float().t(),
                    "persistent fp16")
    families = {"pipelined": [c for c in configs if not c.kwargs["WARP_SPECIALIZE"]],
                "warp-specialized": [c for c in configs if c.kwargs["WARP_SPECIALIZE"]]}
    families["all"] = families["pipelined"] + families["warp-specialized"]
    return families


def persistent_tuned(family: str = "all"):
    """The autotuned persistent kernel of one family (None where no config of it is usable here): one autotuner per
    family, however it is named (`persistent_tuned()` and `persistent_tuned("all")` are the same object)."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {list(FAMILIES)}, got {family!r}")
    return _persistent_tuned(family)


@functools.lru_cache(maxsize=None)
def _persistent_tuned(family: str):
    configs = persistent_families()[family]
    return autotune(configs, key=["M", "N", "K"])(matmul_persistent_kernel) if configs else None


FAMILIES = ("pipelined", "warp-specialized", "all")


def matmul_persistent(a: torch.Tensor, w: torch.Tensor, family: str = "all",
                      config: triton.Config | None = None) -> torch.Tensor:
    """a @ w.T (fp16 or bf16, fp32 accumulation): the persistent TMA kernel where TMA can read the inputs,
    autotuned over a family of configs or with one given config; elsewhere notebook 07's pointer kernel."""
    check_operands(a, w, (torch.float16, torch.bfloat16))
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {list(FAMILIES)}, got {family!r}")
    if config is not None:
        _config("config", config, PERSISTENT_KEYS)
    (M, K), N = a.shape, w.shape[0]
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    if M == 0 or N == 0 or K == 0:  # K = 0: a sum of nothing, and no descriptor of an empty matrix
        return c.zero_()
    tuned = persistent_tuned(family)
    if tuned is None or not tma_ready(a, w, c):
        return matmul_blocked(a, w.t())  # notebook 07's pointer kernel reads W^T through its strides
    if config is not None:
        return _launch_persistent(a, w, c, config)
    aa, ww = interpreter_safe(a, w)
    grid = lambda meta: (min(SMS, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)  # noqa: E731
    tuned[grid](aa, ww, c, M, N, K)
    return c


# Correct first: awkward shapes, both dtypes. (M, N, K); the last two take the fallback (K*2 bytes not a multiple of 16)
SHAPES = [(1, 8, 8), (17, 40, 24), (70, 56, 40), (130, 264, 200), (17, 33, 65), (5, 7, 3)]
TOLERANCES = {torch.float16: dict(rtol=1e-2, atol=1e-2), torch.bfloat16: dict(rtol=3e-2, atol=3e-2)}


def _shapes(shapes) -> list[tuple[int, int, int]]:
    if not isinstance(shapes, (list, tuple)) or not shapes or not all(
            isinstance(s, (list, tuple)) and len(s) == 3 for s in shapes):
        raise ValueError(f"shapes must be a non-empty list of (M, N, K), got {shapes!r:.80}")
    return [tuple(cu.require_number("shapes[i]", v, integer=True, low=0) for v in s) for s in shapes]


def operand_cases(shapes, dtype: torch.dtype, seed: int = 0) -> list[Case]:
    shapes = _shapes(shapes)
    cu.require_choice("dtype", dtype, tuple(TOLERANCES))
    seed = cu.require_number("seed", seed, integer=True, low=0)

    def make(m, n, k):
        gen = torch.Generator().manual_seed(seed)
        return (make_tensor((m, k), dtype, device=cu.DEVICE, generator=gen),
                make_tensor((n, k), dtype, device=cu.DEVICE, generator=gen))
    return [Case(f"{m}x{n}x{k} {str(dtype)[6:]}", lambda m=m, n=n, k=k: make(m, n, k)) for m, n, k in shapes]


def reference(a: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """a @ w.T in fp32, rounded once to a's dtype: what the kernels compute (on any device)."""
    cu.require_tensors(a=a, w=w, dtypes=(torch.float16, torch.bfloat16, torch.float32), ndim=2, max_numel=None,
                       max_span=None, device=a.device if isinstance(a, torch.Tensor) else None)
    if a.shape[1] != w.shape[1]:
        raise ValueError(f"a is {a.shape[0]}x{a.shape[1]} but w is {w.shape[0]}x{w.shape[1]}: "
                         "w must be N x K, the layout of nn.Linear.weight")
    return (a.float() @ w.float().t()).to(a.dtype)


def check_linear(fn, shapes=SHAPES) -> CheckReport:
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(a, w) -> a @ w.T; got {type(fn).__name__}")
    results = []
    for dtype, tol in TOLERANCES.items():
        results += cu.check(fn, reference, operand_cases(shapes, dtype), **tol).results
    return CheckReport(results)


# ---- 2. FP8 with scales (deep dive 14b) -----------------------------------------------------------------------
@triton.jit
def matmul_fp8_kernel(a_ptr, w_ptr, c_ptr, a_scale_ptr, w_scale_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                      GROUP_M: tl.constexpr, SUBTILES: tl.constexpr, ROWWISE: tl.constexpr,
                      FLATTEN: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    # C (bf16) = (A @ W^T) * scales with A (M x K) and W (N x K) in fp8 e4m3; ROWWISE: one scale per row
    # of A and per row of W (a column of C), else one scale each.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    w_desc = tl.make_tensor_descriptor(w_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BLOCK_M, BLOCK_N // SUBTILES])
    num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
    for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0),
                         flatten=FLATTEN, warp_specialize=WARP_SPECIALIZE):
        pid_m, pid_n = tile_coords(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(tl.cdiv(K, BLOCK_K)):
            a = a_desc.load([pid_m * BLOCK_M, k * BLOCK_K])
            w = w_desc.load([pid_n * BLOCK_N, k * BLOCK_K])
            acc = tl.dot(a, w.T, acc)  # fp8 x fp8 -> fp32 accumulator
        if ROWWISE:
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            acc = acc * tl.load(a_scale_ptr + rows, mask=rows < M, other=0.0)[:, None]
            acc = acc * tl.load(w_scale_ptr + cols, mask=cols < N, other=0.0)[None, :]
        else:
            acc = acc * (tl.load(a_scale_ptr) * tl.load(w_scale_ptr))
        store_subtiled(c_desc, acc, pid_m * BLOCK_M, pid_n * BLOCK_N, BLOCK_N, SUBTILES)

FP8 = torch.float8_e4m3fn
FP8_MAX = torch.finfo(FP8).max  # 448


def _require_quantizable(x, rowwise) -> None:
    # x: a 2-D float tensor with K >= 1 and no NaN or infinity (an inf would make its scale inf, every other
    # element 0); rowwise: True or False
    cu.require_tensors(x=x, dtypes=(torch.float16, torch.bfloat16, torch.float32, torch.float64), ndim=2,
                       max_numel=None, max_span=None, device=x.device if isinstance(x, torch.Tensor) else None)
    cu.require_choice("rowwise", rowwise, (True, False))
    if x.shape[1] == 0 or (not rowwise and x.shape[0] == 0):
        raise ValueError("x must hold elements to scale by (K >= 1, and M >= 1 for one scale), "
                         f"got shape {tuple(x.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x holds NaN or infinity: its scale (the largest |x|) would not be finite")


def quantize_fp8(x: torch.Tensor, rowwise: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x (2-D) -> (q in e4m3, fp32 scales) with x ~ q * scale: one scale per row, or one for the tensor."""
    _require_quantizable(x, rowwise)
    amax = x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax().reshape(1, 1)
    scale = (amax.float() / FP8_MAX).clamp(min=1e-12)
    q = (x.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale.reshape(-1)


def dequantized_reference(a_q, w_q, a_scale, w_scale) -> torch.Tensor:
    """What the kernel must compute: both operands back in fp32, one fp32 matmul, rounded to bf16 once."""
    _fp8_operands(a_q, w_q, a_scale, w_scale, kernel=False)
    a = a_q.float() * a_scale.reshape(-1, 1)
    w = w_q.float() * w_scale.reshape(-1, 1)
    return (a @ w.t()).to(torch.bfloat16)


def scaled_mm(a_q, w_q, a_scale, w_scale, fast_accum: bool = True) -> torch.Tensor:
    """The same product with torch._scaled_mm: W^T as a column-major view, per-row scales as (M, 1) and (1, N)."""
    rowwise = check_fp8_operands(a_q, w_q, a_scale, w_scale)
    cu.require_choice("fast_accum", fast_accum, (True, False))
    a_q, w_q = a_q.contiguous(), w_q.contiguous()  # _scaled_mm: A row-major, W^T column-major
    sa = a_scale.reshape(-1, 1) if rowwise else a_scale.reshape(())
    sw = w_scale.reshape(1, -1) if rowwise else w_scale.reshape(())
    return torch._scaled_mm(a_q, w_q.t(), scale_a=sa, scale_b=sw, out_dtype=torch.bfloat16, use_fast_accum=fast_accum)


def relative_error(x: torch.Tensor, ref: torch.Tensor) -> float:
    """Relative error of x against ref in the Frobenius norm."""
    cu.require_tensors(x=x, ref=ref, same_shape=True, max_numel=None, max_span=None,
                       device=x.device if isinstance(x, torch.Tensor) else None)
    norm = ref.float().norm().item()
    if norm == 0 or not np.isfinite(norm):
        raise ValueError(f"ref must have a finite, non-zero norm (the denominator), got {norm}")
    return ((x.float() - ref.float()).norm() / norm).item()


# (BLOCK_M, BLOCK_N, BLOCK_K, stages, warps, SUBTILES, warp-specialized): K-steps of 128 fp8 = 128 bytes, as fp16's 64
GPU_FP8_TILES = [(128, 256, 128, 3, 8, 2, False), (128, 256, 128, 4, 8, 2, False),
                 (128, 256, 128, 3, 4, 1, True), (128, 256, 128, 3, 4, 2, True)]
CPU_FP8_TILES = [(32, 32, 32, 1, 4, 2, False)]


def _fp8_operands(a_q, w_q, a_scale, w_scale, kernel: bool) -> bool:
    # fp8 M x K and N x K, fp32 scales: 1 and 1 (per tensor) or M and N (per row); returns ROWWISE. kernel: on the
    # course's device, no grad (no backward), K and N multiples of 16; else any one device (the reference).
    device = None if kernel or not isinstance(a_q, torch.Tensor) else a_q.device
    cu.require_tensors(a_q=a_q, w_q=w_q, dtypes=(FP8,), ndim=2, max_numel=None, max_span=None, device=device,
                       differentiable=not kernel)
    cu.require_tensors(a_scale=a_scale, w_scale=w_scale, dtypes=(torch.float32,), ndim=(0, 1, 2), device=device,
                       differentiable=not kernel)
    if a_q.shape[1] != w_q.shape[1]:
        raise ValueError(f"a_q must be M x K and w_q N x K, got {tuple(a_q.shape)} and {tuple(w_q.shape)}")
    (M, K), N = a_q.shape, w_q.shape[0]
    if kernel and (K % 16 or N % 16):
        raise ValueError(f"K and N must be multiples of 16 (16-byte rows for TMA), got K={K}, N={N}")
    modes = {(1, 1): False, (M, N): True}
    if (a_scale.numel(), w_scale.numel()) not in modes:
        raise ValueError(f"scales must have 1 and 1 elements (per tensor) or {M} and {N} (per row), "
                         f"got {a_scale.numel()} and {w_scale.numel()}")
    if a_scale.device != a_q.device:
        raise ValueError(f"a_scale must be on {a_q.device}, got {a_scale.device}")
    return modes[(a_scale.numel(), w_scale.numel())]


def check_fp8_operands(a_q, w_q, a_scale, w_scale) -> bool:
    """Validates the four tensors and returns ROWWISE (one scale per row, else one per tensor)."""
    return _fp8_operands(a_q, w_q, a_scale, w_scale, kernel=True)


def launch_fp8(a_q, w_q, a_scale, w_scale, c, cfg: triton.Config, rowwise: bool) -> torch.Tensor:
    """One config, no autotuning: c (M x N) = (a_q * a_scale) @ (w_q * w_scale)^T; rowwise must match the scales."""
    found = check_fp8_operands(a_q, w_q, a_scale, w_scale)
    cu.require_choice("rowwise", rowwise, (True, False))
    if rowwise != found:
        raise ValueError(f"rowwise={rowwise}, but the scales have {a_scale.numel()} and {w_scale.numel()} elements "
                         f"({'per row' if found else 'per tensor'}): rowwise must be {found}")
    _config("cfg", cfg, PERSISTENT_KEYS)
    (M, K), N = a_q.shape, w_q.shape[0]
    _require_output(c, M, N, a_q, (torch.bfloat16, torch.float16, torch.float32))
    if M == 0 or N == 0 or K == 0:
        return c.zero_()
    _require_tma(a_q=a_q, w_q=w_q, c=c)
    if not (a_scale.is_contiguous() and w_scale.is_contiguous()):
        raise ValueError("a_scale and w_scale must be contiguous (the kernel reads element i at offset i)")
    return _launch_fp8(a_q, w_q, a_scale, w_scale, c, cfg, rowwise)


def _launch_fp8(a_q, w_q, a_scale, w_scale, c, cfg: triton.Config, rowwise: bool) -> torch.Tensor:
    (M, K), N = a_q.shape, w_q.shape[0]
    tiles = triton.cdiv(M, cfg.kwargs["BLOCK_M"]) * triton.cdiv(N, cfg.kwargs["BLOCK_N"])
    matmul_fp8_kernel[(min(SMS, tiles),)](a_q, w_q, c, a_scale, w_scale, M, N, K, **cfg.kwargs, ROWWISE=rowwise,
                                          num_warps=cfg.num_warps, num_stages=cfg.num_stages)
    return c


def _fp8_probe_inputs():
    a, w = probe_inputs(torch.float32)
    (a_q, a_scale), (w_q, w_scale) = quantize_fp8(a, True), quantize_fp8(w, True)
    return a_q, w_q, a_scale, w_scale


def _fp8_probe_launch(a, w, sa, sw, cfg):
    return _launch_fp8(a, w, sa, sw, torch.empty(a.shape[0], w.shape[0], device=a.device, dtype=torch.bfloat16), cfg, True)


@functools.lru_cache(maxsize=1)
def fp8_configs() -> list:
    """The fp8 configs that compile, fit and pass on this GPU with this Triton (probed once per process)."""
    configs = [tile_config(*t) for t in cu.pick_size(GPU_FP8_TILES, CPU_FP8_TILES)] if HAS_TMA and HAS_FP8 else []
    return probe(configs, _fp8_probe_launch, _fp8_probe_inputs, dequantized_reference, "persistent fp8, per-row scales")


@functools.lru_cache(maxsize=1)
def fp8_tuned():
    configs = fp8_configs()
    return autotune(configs, key=["M", "N", "K", "ROWWISE"])(matmul_fp8_kernel) if configs else None


def matmul_fp8(a_q, w_q, a_scale, w_scale, config: triton.Config | None = None) -> torch.Tensor:
    """bf16 (a_q * a_scale) @ (w_q * w_scale)^T with fp32 accumulation; scales per tensor (1 element) or per row."""
    rowwise = check_fp8_operands(a_q, w_q, a_scale, w_scale)
    if config is not None:
        _config("config", config, PERSISTENT_KEYS)
    tuned = fp8_tuned()
    if tuned is None:
        raise RuntimeError("the fp8 kernel needs tensor descriptors and fp8 tensor cores (an H100 here)")
    (M, K), N = a_q.shape, w_q.shape[0]
    c = torch.empty((M, N), device=a_q.device, dtype=torch.bfloat16)
    if M == 0 or N == 0 or K == 0:  # K = 0: a sum of nothing, and no descriptor of an empty matrix
        return c.zero_()
    # contiguous, and copied where a view starts off a 16-byte boundary (K and N are multiples of 16)
    args = tuple(t if tma_ready(t) else t.clone(memory_format=torch.contiguous_format) for t in (a_q, w_q))
    args += (a_scale.contiguous(), w_scale.contiguous())
    if config is not None:
        return _launch_fp8(*args, c, config, rowwise)
    grid = lambda meta: (min(SMS, triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"])),)  # noqa: E731
    tuned[grid](args[0], args[1], c, args[2], args[3], M, N, K, ROWWISE=rowwise)
    return c


FP8_SHAPES = [(1, 16, 16), (17, 48, 32), (70, 80, 208), (33, 64, 48)]  # (M, N, K); K=16 < BLOCK_K everywhere


def fp8_cases(rowwise: bool, seed: int = 0) -> list[Case]:
    """Inputs scaled by K^-1/4 each, so that every output is of order 1 whatever K is."""
    cu.require_choice("rowwise", rowwise, (True, False))
    seed = cu.require_number("seed", seed, integer=True, low=0)

    def make(m, n, k):
        gen = torch.Generator().manual_seed(seed)
        a = make_tensor((m, k), torch.float32, device=cu.DEVICE, generator=gen) / k**0.25
        w = make_tensor((n, k), torch.float32, device=cu.DEVICE, generator=gen) / k**0.25
        (a_q, sa), (w_q, sw) = quantize_fp8(a, rowwise), quantize_fp8(w, rowwise)
        return a_q, w_q, sa, sw
    return [Case(f"{m}x{n}x{k} {'per-row' if rowwise else 'per-tensor'}", lambda m=m, n=n, k=k: make(m, n, k))
            for m, n, k in FP8_SHAPES]


def check_fp8(fn) -> CheckReport:
    if not callable(fn):
        raise TypeError(f"fn must be callable, fn(a_q, w_q, a_scale, w_scale) -> bf16 product; got {type(fn).__name__}")
    results = []
    for rowwise in (False, True):
        results += cu.check(fn, dequantized_reference, fp8_cases(rowwise), rtol=1e-2, atol=1e-2).results
    return CheckReport(results)


# ---- 3. Skinny GEMMs (deep dive 14c) --------------------------------------------------------------------------
@triton.jit
def skinny_matmul_kernel(x_ptr, w_ptr, c_ptr, part_ptr, count_ptr, M, N, K, stride_xm, stride_wn, stride_cm,
                         BLOCK_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_K: tl.constexpr,
                         SPLIT_K: tl.constexpr):
    # C = X @ W^T for few rows of X, computed as C^T = W @ X^T; program (m, n, s) sums the s-th slice of K
    pid_m, pid_n, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    k_steps = tl.cdiv(tl.cdiv(K, BLOCK_K), SPLIT_K)
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    for i in range(k_steps):
        offs_k = (split * k_steps + i) * BLOCK_K + tl.arange(0, BLOCK_K)
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0.0)
        xt = tl.load(x_ptr + offs_m[None, :] * stride_xm + offs_k[:, None],
                     mask=(offs_m[None, :] < M) & (offs_k[:, None] < K), other=0.0)
        acc = tl.dot(w, xt, acc)  # (BLOCK_N x BLOCK_K) @ (BLOCK_K x BLOCK_M)
    c_ptrs = c_ptr + offs_m[None, :] * stride_cm + offs_n[:, None]  # C^T tile -> C
    c_mask = (offs_n[:, None] < N) & (offs_m[None, :] < M)
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=c_mask)
    else:
        tile = pid_n * tl.num_programs(0) + pid_m
        part = part_ptr + tile * SPLIT_K * BLOCK_N * BLOCK_M + tl.arange(0, BLOCK_N)[:, None] * BLOCK_M \
            + tl.arange(0, BLOCK_M)[None, :]
        tl.store(part + split * BLOCK_N * BLOCK_M, acc)
        tl.debug_barrier()  # all partial stores of this program before the counter moves
        if tl.atomic_add(count_ptr + tile, 1, sem="acq_rel") == SPLIT_K - 1:  # last one in adds up
            total = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
            for s in range(SPLIT_K):  # fixed order: the same bits whoever finishes last
                total += tl.load(part + s * BLOCK_N * BLOCK_M, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptr.dtype.element_ty), mask=c_mask)
            tl.atomic_xchg(count_ptr + tile, 0)  # ready for the next call

# (BLOCK_N, BLOCK_K, warps, stages) x SPLIT_K
GPU_SKINNY = [(bn, bk, w, s, split) for bn, bk, w, s in [(64, 256, 4, 4), (64, 128, 4, 4), (128, 128, 4, 4)]
              for split in (1, 2, 4, 8)]
CPU_SKINNY = [(32, 32, 4, 1, 1), (32, 32, 4, 1, 3)]
WAVES = (0.9, 4)  # programs per SM a skinny launch may have: about one wave at least, four at most


def _sizes(**sizes) -> list[int]:
    return [cu.require_number(name, v, integer=True, low=0) for name, v in sizes.items()]


def skinny_block_m(m: int) -> int:
    m, = _sizes(m=m)
    return min(64, max(16, triton.next_power_of_2(m)))


def skinny_programs(cfg: triton.Config, M: int, N: int) -> int:
    _config("cfg", cfg, SKINNY_KEYS)
    M, N = _sizes(M=M, N=N)
    return triton.cdiv(M, skinny_block_m(M)) * triton.cdiv(N, cfg.kwargs["BLOCK_N"]) * cfg.kwargs["SPLIT_K"]


def skinny_runs(cfg: triton.Config, M: int, K: int) -> bool:
    """Its stages fit in shared memory, and it has no more splits than BLOCK_K steps along K."""
    _config("cfg", cfg, SKINNY_KEYS)
    M, K = _sizes(M=M, K=K)
    bn, bk, bm = cfg.kwargs["BLOCK_N"], cfg.kwargs["BLOCK_K"], skinny_block_m(M)
    return cfg.num_stages * (bn + bm) * bk * 2 <= 200 * 1024 and cfg.kwargs["SPLIT_K"] <= triton.cdiv(K, bk)


def skinny_candidates(M: int, N: int, K: int) -> list:
    """What the autotuner may time for this shape: the configs that launch WAVES[0] to WAVES[1] programs per SM,
    or, where none does (shapes too small to fill the GPU), those that come closest to one wave."""
    M, N, K = _sizes(M=M, N=N, K=K)
    runs = [c for c in SKINNY_CONFIGS if skinny_runs(c, M, K)] or SKINNY_CONFIGS[:1]
    filling = [c for c in runs if WAVES[0] * SMS <= skinny_programs(c, M, N) <= WAVES[1] * SMS]
    if filling:
        return filling
    off = [max(skinny_programs(c, M, N) / SMS, SMS / skinny_programs(c, M, N)) for c in runs]
    return [c for c, o in zip(runs, off) if o == min(off)]


SKINNY_CONFIGS = [triton.Config({"BLOCK_N": bn, "BLOCK_K": bk, "SPLIT_K": s}, num_warps=w, num_stages=st)
                  for bn, bk, w, st, s in cu.pick_size(GPU_SKINNY, CPU_SKINNY)]
SKINNY_TUNED = autotune(SKINNY_CONFIGS, key=["M", "N", "K"], prune_configs_by={
    "early_config_prune": lambda configs, nargs, **kw: skinny_candidates(nargs["M"], nargs["N"], nargs["K"])})(skinny_matmul_kernel)
_scratch: dict[str, torch.Tensor] = {}
_zeroed: set[str] = set()  # the names whose buffer was handed out zeroed


def scratch(name: str, numel: int, dtype: torch.dtype, zeroed: bool = False) -> torch.Tensor:
    """A growing buffer per name (at least numel elements of dtype); the counters are zeroed once and the kernel
    leaves them at zero."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    numel = cu.require_number("numel", numel, integer=True, low=0)
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch.dtype, got {dtype!r}")
    cu.require_choice("zeroed", zeroed, (True, False))
    buf = _scratch.get(name)
    if buf is None or buf.numel() < numel or buf.dtype != dtype:
        buf = (torch.zeros if zeroed else torch.empty)(max(numel, 1), dtype=dtype, device=cu.DEVICE)
        _scratch[name] = buf
        (_zeroed.add if zeroed else _zeroed.discard)(name)
    elif zeroed and name not in _zeroed:  # handed out before as it came: zero it once now
        buf.zero_()
        _zeroed.add(name)
    return buf


def skinny_plan(M: int, N: int, K: int, config: triton.Config | None) -> tuple[int, int, int]:
    """(BLOCK_M, fp32 workspace elements, counters) for the candidate configs of this shape; cached per shape."""
    M, N, K = _sizes(M=M, N=N, K=K)
    if config is not None:
        _config("config", config, SKINNY_KEYS)
    return _skinny_plan(M, N, K, config)


@functools.lru_cache(maxsize=None)
def _skinny_plan(M: int, N: int, K: int, config: triton.Config | None) -> tuple[int, int, int]:
    bm = skinny_block_m(M)
    candidates = [config] if config else skinny_candidates(M, N, K)
    tiles = max(triton.cdiv(M, bm) * triton.cdiv(N, c.kwargs["BLOCK_N"]) for c in candidates)
    return bm, max(tiles * c.kwargs["SPLIT_K"] * c.kwargs["BLOCK_N"] * bm for c in candidates), tiles


def skinny_matmul(x: torch.Tensor, w: torch.Tensor, config: triton.Config | None = None) -> torch.Tensor:
    """x @ w.T for few rows of x: the swap-AB split-K kernel (autotuned, or with the given config)."""
    check_operands(x, w, (torch.float16, torch.bfloat16), max_span=INT32_MAX, name="x")  # int32 offsets
    if config is not None:
        _config("config", config, SKINNY_KEYS)
    (M, K), N = x.shape, w.shape[0]
    if M * N > INT32_MAX:
        raise ValueError(f"x @ w.T would have {M:,} x {N:,} elements; at most 2**31 - 1 (offsets are int32)")
    c = torch.empty((M, N), device=x.device, dtype=x.dtype)
    if M == 0 or N == 0 or K == 0:  # K = 0: a sum of nothing
        return c.zero_()
    x, w = interpreter_safe(x if x.stride(1) == 1 else x.contiguous(), w if w.stride(1) == 1 else w.contiguous())
    bm, part_numel, tiles = _skinny_plan(M, N, K, config)
    if part_numel > INT32_MAX:
        raise ValueError(f"the split-K workspace of {M} x {N} would hold {part_numel:,} elements; at most 2**31 - 1")
    part = scratch("partials", part_numel, torch.float32)
    counts = scratch("counters", tiles, torch.int32, zeroed=True)
    args = (x, w, c, part, counts, M, N, K, x.stride(0), w.stride(0), c.stride(0))
    if config is not None:
        grid = (triton.cdiv(M, bm), triton.cdiv(N, config.kwargs["BLOCK_N"]), config.kwargs["SPLIT_K"])
        skinny_matmul_kernel[grid](*args, BLOCK_M=bm, **config.kwargs, num_warps=config.num_warps,
                                   num_stages=config.num_stages)
    else:
        grid = lambda meta: (triton.cdiv(M, bm), triton.cdiv(N, meta["BLOCK_N"]), meta["SPLIT_K"])  # noqa: E731
        SKINNY_TUNED[grid](*args, BLOCK_M=bm)
    return c


PEAKS = cu.device_peaks() or cu.lookup_peaks("NVIDIA H100 80GB HBM3")  # on a CPU, decide as an H100 would
RIDGE = PEAKS.fp16_tflops * 1e12 / (PEAKS.bandwidth_gbps * 1e9)


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x @ w.T: the skinny kernel below the roofline's ridge, the persistent kernel above it."""
    check_operands(x, w, (torch.float16, torch.bfloat16), name="x")
    (M, K), N = x.shape, w.shape[0]
    nbytes = x.element_size() * (M * K + N * K + M * N)
    intensity = 2 * M * N * K / nbytes if nbytes else 0.0  # nothing to read: the skinny kernel returns at once
    return skinny_matmul(x, w) if intensity < RIDGE else matmul_persistent(x, w)


# ---- Nsight Compute: the script that notebook 14 and deep dive 14c profile --------------------------------------
def profile_once(mode: str, size: int, config: dict) -> None:
    """One Triton launch and the same product in cuBLAS, between torch.cuda.profiler.start() and stop(), after
    three warm-up calls of each (``ncu --profile-from-start off``, what `run_ncu` passes, sees only those).

    mode "square": the persistent kernel on size^3 fp16; "skinny": the skinny kernel, size x 4096 against a
    4096 x 4096 weight. config: the autotuner's pick, {"kwargs", "num_warps", "num_stages"} and "programs"
    (square) or "BLOCK_M" (skinny). Run as ``python lessons/nb14_hopper_matmul.py MODE SIZE CONFIG_JSON``.
    """
    if mode not in ("square", "skinny"):
        raise ValueError(f"mode must be 'square' or 'skinny', got {mode!r}")
    size = cu.require_number("size", size, integer=True, low=1)
    if not isinstance(config, dict):
        raise TypeError(f"config must be the dict of json.loads(profile_config(...)), got {type(config).__name__}")
    wanted = ["kwargs", "num_warps", "num_stages", "programs" if mode == "square" else "BLOCK_M"]
    missing = [k for k in wanted if k not in config]
    if missing:
        raise ValueError(f"config must hold {', '.join(wanted)} for mode {mode!r}; it lacks {', '.join(missing)}")
    keys = PERSISTENT_KEYS if mode == "square" else SKINNY_KEYS
    if not isinstance(config["kwargs"], dict) or any(k not in config["kwargs"] for k in keys):
        raise ValueError(f"config['kwargs'] must set {', '.join(keys)} for mode {mode!r}, "
                         f"got {config['kwargs']!r:.120}")
    if not cu.HAS_CUDA:
        raise RuntimeError("profile_once launches CUDA kernels: it needs a CUDA GPU")
    kw, warps, stages = config["kwargs"], config["num_warps"], config["num_stages"]
    torch.manual_seed(0)
    k, n = (size, size) if mode == "square" else (4096, 4096)
    a = torch.randn(size, k, device="cuda", dtype=torch.float16)
    w = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.empty(size, n, device="cuda", dtype=torch.float16)
    if mode == "square":
        def triton_call():
            matmul_persistent_kernel[(config["programs"],)](a, w, c, size, n, k, **kw, num_warps=warps, num_stages=stages)
    else:
        bm = config["BLOCK_M"]
        grid = (triton.cdiv(size, bm), triton.cdiv(n, kw["BLOCK_N"]), kw["SPLIT_K"])
        part = torch.empty(grid[0] * grid[1] * kw["SPLIT_K"] * kw["BLOCK_N"] * bm, device="cuda", dtype=torch.float32)
        counts = torch.zeros(grid[0] * grid[1], device="cuda", dtype=torch.int32)  # the kernel leaves them at zero

        def triton_call():
            skinny_matmul_kernel[grid](a, w, c, part, counts, size, n, k, a.stride(0), w.stride(0), c.stride(0),
                                       BLOCK_M=bm, **kw, num_warps=warps, num_stages=stages)
    for _ in range(3):  # compile, load and warm up outside the profiled window
        triton_call()
        torch.nn.functional.linear(a, w)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    triton_call()
    torch.nn.functional.linear(a, w)  # cuBLAS (it may run more than one kernel for one call)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()


def profile_config(cfg: triton.Config, **extra) -> str:
    """A config as the JSON argument of `profile_once`."""
    _config("cfg", cfg, ())
    for key, value in extra.items():
        value = value.item() if isinstance(value, np.generic) else value
        if not isinstance(value, (int, float, str, bool)):
            raise TypeError(f"{key} must be a number or a str (a JSON value), got {value!r:.80}")
        extra[key] = value
    return json.dumps({"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages, **extra})


if __name__ == "__main__":
    profile_once(sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]))
