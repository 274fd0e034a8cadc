"""Notebook 17's pieces (shown by notebooks/17_multi_gpu_training.ipynb with course_utils.export.show): the
bus-bandwidth formula, a GPT-like model, data parallelism written from scratch three ways, the overlap read off a
profiler trace, and the launcher that runs the worker scripts (lessons/nb17_collectives.py, lessons/nb17_train.py)
under torchrun.

Everything here runs on a CPU with the gloo backend too; tests/test_nb17_multi_gpu_training.py checks the
formulas, the bucket assignment, the trace reader and, under torchrun with 2 processes, that the from-scratch
data parallelism gives the gradients of one process.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from course_utils.checks import require_choice, require_number
from course_utils.scripts import PROJECT_DIR, ScriptRun, run_python

#: NVLink multicast (NVLS) stays off in every process: on a shared multi-GPU host it can take GPUs out of service.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter")
#: Sequences per GPU that the notebooks train on GPUs: this eager model's host work per step (Python, hundreds of
#: launches) does not grow with the batch, its GPU work does; at 24 the host stays ahead, at 8 it barely keeps up.
GPU_BATCH = 24


# ---- the bus bandwidth ----------------------------------------------------------------------------------------
def bus_factor(op: str, world_size: int) -> float:
    """nccl-tests' factor from the algorithm bandwidth to the bus bandwidth: 2(n-1)/n for an all-reduce (a
    reduce-scatter then an all-gather), (n-1)/n for an all-gather or a reduce-scatter."""
    require_choice("op", op, COLLECTIVES)
    n = require_number("world_size", world_size, integer=True, low=1)
    return (2 if op == "all_reduce" else 1) * (n - 1) / n


def bus_bandwidth(op: str, nbytes: int, seconds: float, world_size: int) -> float:
    """Bus bandwidth in GB/s (1e9 bytes) of one collective that took ``seconds``. ``nbytes``: the larger of its
    buffers, as nccl-tests counts it (all_reduce: the tensor; all_gather: the output; reduce_scatter: the input)."""
    factor = bus_factor(op, world_size)
    nbytes = require_number("nbytes", nbytes, integer=True, low=0)
    seconds = require_number("seconds", seconds)
    if seconds <= 0:
        raise ValueError(f"seconds must be > 0, got {seconds!r}")
    return nbytes / seconds * factor / 1e9


# ---- the model: a GPT-like stack ------------------------------------------------------------------------------
@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 32768
    seq: int = 1024
    width: int = 768
    heads: int = 12
    layers: int = 14
    batch: int = 8  # sequences per GPU

    def __post_init__(self) -> None:
        for name in ("vocab", "seq", "width", "heads", "layers", "batch"):
            require_number(f"GPTConfig.{name}", getattr(self, name), integer=True, low=1)
        if self.width % self.heads:
            raise ValueError(f"GPTConfig.width ({self.width}) must be a multiple of heads ({self.heads})")

    def params(self) -> int:
        """Parameters of GPT(self): 12 width^2 + 13 width per block, embeddings, final LayerNorm, untied head."""
        d = self.width
        return self.layers * (12 * d * d + 13 * d) + (2 * self.vocab + self.seq + 2) * d


def _require_cfg(cfg) -> GPTConfig:
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig, got {type(cfg).__name__}")
    return cfg


class Block(nn.Module):
    """Pre-norm transformer block: causal attention (F.scaled_dot_product_attention), then a 4x MLP."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        d, self.heads = _require_cfg(cfg).width, cfg.heads
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc1, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, C)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    """Token and position embeddings, ``cfg.layers`` blocks, a final LayerNorm and an untied vocabulary head;
    ``model(idx, targets)`` returns the mean cross-entropy loss."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = _require_cfg(cfg)
        self.tok, self.pos = nn.Embedding(cfg.vocab, cfg.width), nn.Embedding(cfg.seq, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f, self.head = nn.LayerNorm(cfg.width), nn.Linear(cfg.width, cfg.vocab, bias=False)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        for name, t in (("idx", idx), ("targets", targets)):  # shapes and dtypes only: no GPU sync in a step
            if not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or t.dim() != 2:
                raise TypeError(f"{name} must be an int64 tensor of shape (batch, T), got "
                                f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
        if idx.shape != targets.shape or not 1 <= idx.shape[1] <= self.cfg.seq:
            raise ValueError(f"idx and targets must share a shape (batch, T) with T <= cfg.seq={self.cfg.seq}, got "
                             f"{tuple(idx.shape)} and {tuple(targets.shape)}")
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]).float(), targets.view(-1))


def make_batch(cfg: GPTConfig, device: str | torch.device = "cpu", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(idx, targets) of ``cfg.batch`` random sequences: each rank passes its own seed, so each sees other data."""
    _require_cfg(cfg)
    g = torch.Generator().manual_seed(require_number("seed", seed, integer=True, low=0))
    tokens = torch.randint(cfg.vocab, (cfg.batch, cfg.seq + 1), generator=g)
    return tokens[:, :-1].contiguous().to(device), tokens[:, 1:].contiguous().to(device)


# ---- data parallelism from scratch ----------------------------------------------------------------------------
def _require_distributed() -> None:
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError("this needs torch.distributed initialized: run it in a torchrun worker (init_distributed)")


def _grads(model: nn.Module) -> list[torch.Tensor]:
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    _require_distributed()
    return [p.grad for p in model.parameters() if p.grad is not None]


# ways (a) and (b)
def allreduce_each(model: nn.Module, group=None) -> None:
    """(a) After backward: one all-reduce per gradient, then the average. Nothing overlaps the backward."""
    grads = _grads(model)
    for g in grads:
        dist.all_reduce(g, group=group)            # one collective launch per parameter, small ones latency-bound
    torch._foreach_div_(grads, dist.get_world_size(group))


def allreduce_flat(model: nn.Module, group=None) -> None:
    """(b) After backward: copy every gradient into one flat buffer, one all-reduce, copy back."""
    grads = _grads(model)
    flat = torch.cat([g.reshape(-1) for g in grads])  # a copy in ...
    dist.all_reduce(flat, group=group)               # ... one large collective at full bandwidth ...
    flat.div_(dist.get_world_size(group))
    torch._foreach_copy_(grads, [v.view_as(g) for v, g in zip(flat.split([g.numel() for g in grads]), grads)])
# ways (a) and (b):end


def assign_buckets(sizes: list[int], cap_bytes: int) -> list[list[int]]:
    """Indices of the parameters in each bucket. Walk the parameters from the last to the first (backward makes
    their gradients roughly in that order); add each to the open bucket, and close it once it holds ``cap_bytes``
    or more. ``sizes``: each parameter's gradient bytes, in the order model.parameters() lists them."""
    if not isinstance(sizes, (list, tuple)):
        raise TypeError(f"sizes must be a list of byte counts, got {type(sizes).__name__}")
    sizes = [require_number(f"sizes[{i}]", s, integer=True, low=0) for i, s in enumerate(sizes)]
    cap = require_number("cap_bytes", cap_bytes, integer=True, low=1)
    buckets, open_bucket, held = [], [], 0
    for i in reversed(range(len(sizes))):
        open_bucket.append(i)
        held += sizes[i]
        if held >= cap:
            buckets.append(open_bucket)
            open_bucket, held = [], 0
    return buckets + ([open_bucket] if open_bucket else [])


# way (c)
class BucketedDDP:
    """(c) Every gradient is a view into a flat bucket; a hook on each parameter, run once its gradient has been
    accumulated, launches its bucket's all-reduce (``async_op=True``) as soon as the bucket's last gradient is in,
    while backward goes on computing the gradients of earlier layers. ``finish()`` after backward waits for them
    all; ``zero_grad()`` zeroes the buckets (the views must stay: never ``zero_grad(set_to_none=True)``)."""

    def __init__(self, model: nn.Module, cap_mb: float = 25.0, group=None):
        params = [p for p in model.parameters() if p.requires_grad] if isinstance(model, nn.Module) else None
        if not params:
            raise TypeError(f"model must be an nn.Module with trainable parameters, got {type(model).__name__}")
        if len({(p.dtype, p.device) for p in params}) != 1:
            raise ValueError("the parameters must share one dtype and device (one bucket type)")
        cap = int(require_number("cap_mb", cap_mb, low=1e-6) * 2**20)
        _require_distributed()
        self.group, self.world = group, dist.get_world_size(group)
        self.buckets, self.bucket_of, self.works = [], {}, []
        for ids in assign_buckets([p.numel() * p.element_size() for p in params], max(cap, 1)):
            flat = torch.zeros(sum(params[i].numel() for i in ids), dtype=params[0].dtype, device=params[0].device)
            offset = 0
            for i in ids:
                params[i].grad = flat[offset:offset + params[i].numel()].view_as(params[i])  # accumulates in place
                offset += params[i].numel()
                self.bucket_of[params[i]] = len(self.buckets)
                params[i].register_post_accumulate_grad_hook(self._ready)
            self.buckets.append(flat)
        self.sizes = [0] * len(self.buckets)
        for p in params:
            self.sizes[self.bucket_of[p]] += 1
        self.missing = list(self.sizes)

    def _ready(self, param: torch.Tensor) -> None:
        b = self.bucket_of[param]
        self.missing[b] -= 1
        if self.missing[b] == 0:                     # the bucket's last gradient: send it, backward goes on
            self.buckets[b].div_(self.world)
            self.works.append(dist.all_reduce(self.buckets[b], group=self.group, async_op=True))

    def finish(self) -> None:
        if len(self.works) != len(self.buckets):
            raise RuntimeError(f"{len(self.buckets) - len(self.works)} buckets never sent: some parameter got no "
                               "gradient in this backward")
        for work in self.works:
            work.wait()                              # on a GPU: the compute stream waits for NCCL's, not the CPU
        self.works.clear()
        self.missing = list(self.sizes)

    def zero_grad(self) -> None:
        torch._foreach_zero_(self.buckets)
# way (c):end


# ---- the overlap, from a profiler trace -----------------------------------------------------------------------
DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


def kernels_from_trace(trace: dict) -> list[dict]:
    """The device activities of a Chrome trace that torch.profiler exported: name, start and duration (us) and
    stream of each kernel, copy and memset."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise TypeError("trace must be the dict of a Chrome trace (json.load of prof.export_chrome_trace's file)")
    return [{"name": e.get("name", ""), "start": float(e["ts"]), "dur": float(e["dur"]), "stream": e.get("tid")}
            for e in trace["traceEvents"]
            if isinstance(e, dict) and e.get("cat") in DEVICE_CATEGORIES and e.get("ph") == "X" and "dur" in e]


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, j = 0.0, 0
    for start, end in a:
        while j < len(b) and b[j][1] <= start:
            j += 1
        k = j
        while k < len(b) and b[k][0] < end:
            total += min(end, b[k][1]) - max(start, b[k][0])
            k += 1
    return total


def overlap(kernels: list[dict], steps: int = 1) -> dict[str, float]:
    """Per step, in ms: the NCCL kernels' time, the compute (every other device activity), the time when NCCL runs
    with no compute beside it (exposed), the share of NCCL's time hidden under compute, and the time between the
    first activity and the last when the device runs nothing at all (idle: it waits for the host to launch work)."""
    if not isinstance(kernels, list) or not all(isinstance(k, dict) and {"name", "start", "dur"} <= set(k)
                                                for k in kernels):
        raise TypeError("kernels must be the list kernels_from_trace returns")
    steps = require_number("steps", steps, integer=True, low=1)
    comm = [k for k in kernels if "nccl" in k["name"].lower()]
    compute = [k for k in kernels if "nccl" not in k["name"].lower()]
    comm_union = _union([(k["start"], k["start"] + k["dur"]) for k in comm])
    busy = sum(e - s for s, e in comm_union)
    hidden = _overlap(comm_union, _union([(k["start"], k["start"] + k["dur"]) for k in compute]))
    active = _union([(k["start"], k["start"] + k["dur"]) for k in kernels])
    idle = active[-1][1] - active[0][0] - sum(e - s for s, e in active) if active else 0.0
    return {"nccl ms": sum(k["dur"] for k in comm) / steps / 1e3,
            "compute ms": sum(k["dur"] for k in compute) / steps / 1e3,
            "exposed nccl ms": (busy - hidden) / steps / 1e3,
            "hidden share": hidden / busy if busy else float("nan"),
            "idle ms": idle / steps / 1e3}


# ---- launching the workers ------------------------------------------------------------------------------------
def init_distributed() -> tuple[int, int, torch.device]:
    """In a worker that torchrun started: (rank, world size, device). NCCL on GPUs (one per process, by
    LOCAL_RANK), gloo on a CPU. A collective that hangs raises after 2 minutes instead of waiting forever."""
    for key, value in MULTICAST_OFF.items():
        os.environ.setdefault(key, value)
    if "LOCAL_RANK" not in os.environ:
        raise RuntimeError("run this under torchrun: it sets RANK, LOCAL_RANK, WORLD_SIZE and MASTER_ADDR/PORT")
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device, timeout=timedelta(minutes=2))
    else:
        device = torch.device("cpu")
        dist.init_process_group("gloo", timeout=timedelta(minutes=2))
    return dist.get_rank(), dist.get_world_size(), device


def torchrun_command(module: str, *args: str, nproc: int) -> list[str]:
    """``torchrun --standalone --nproc-per-node N -m module args`` (torchrun is ``python -m torch.distributed.run``)."""
    if not isinstance(module, str) or not module.startswith("lessons.nb17_"):
        raise ValueError(f"module must be one of the chapter's scripts, lessons.nb17_..., got {module!r}")
    nproc = require_number("nproc", nproc, integer=True, low=1)
    if not all(isinstance(a, str) for a in args):
        raise TypeError("args must be strings")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", module, *args]


def torchrun(module: str, *args: str, nproc: int, out: str | Path, timeout: float = 300, cpu: bool = False) -> dict:
    """Run ``module`` under torchrun (multicast off, the project on PYTHONPATH; ``cpu``: hide the GPUs, gloo), then
    read the JSON file ``out`` it writes. A rank that fails, or a run that outlasts ``timeout`` seconds (its
    processes are killed), raises RuntimeError with the ranks' last lines."""
    if not isinstance(cpu, bool):
        raise TypeError(f"cpu must be True or False, got {cpu!r}")
    out = Path(out)
    command = torchrun_command(module, *args, "--out", str(out), nproc=nproc)
    out.unlink(missing_ok=True)
    script = PROJECT_DIR / (module.replace(".", "/") + ".py")  # run_python runs files: torchrun --no-python
    env = {**MULTICAST_OFF, "OMP_NUM_THREADS": "1", **({"CUDA_VISIBLE_DEVICES": ""} if cpu else {})}
    run: ScriptRun = run_python(script, *command[7:], env=env, timeout=timeout, prefix=[*command[:5], "--no-python"])
    if not run.ok or not out.is_file():
        raise RuntimeError(f"torchrun {module} " + _failure(run))
    return json.loads(out.read_text())


def _failure(run: ScriptRun) -> str:
    """What went wrong, from torchrun's output: the root-cause rank and each rank's exception line."""
    how = "timed out: its processes were killed" if run.returncode is None else f"failed (exit code {run.returncode})"
    lines = [line for line in (run.stdout + run.stderr).splitlines() if line.strip() and not line.startswith("USDT")]
    last = {}
    for line in lines:  # a worker's traceback comes as "[rankN]: ..." lines; keep each rank's exception
        found = re.match(r"\[rank(\d+)\]: (\w*(?:Error|Exception|Interrupt|Exit)\b.*)", line)
        if found:
            last[int(found.group(1))] = found.group(2)[:400]
    root = next((lines[i + 1:i + 6] for i, line in enumerate(lines) if line.startswith("Root Cause")), [])
    cause = [f"root cause: rank{line.split(':', 1)[1]}" for line in root if line.strip().startswith("rank")]
    usage = [line for line in lines if ": error: " in line][:4]  # argparse's complaint
    detail = cause + usage + [f"[rank{r}]: {e}" for r, e in sorted(last.items())]
    launcher = [line for line in lines if not line.startswith((" ", "Traceback"))]  # not torchrun's own traceback
    return how + ":\n" + "\n".join(detail if last or usage else launcher[-12:])
