"""Notebook 16's model, memory formulas, saved-tensor accounting, snapshot reader and plot, and the search for the
largest model that trains in a memory budget (shown by notebooks/16_gpu_memory.ipynb with course_utils.export.show).

Everything here runs on a CPU except what needs the CUDA caching allocator (`record_snapshot`, `gpu_peak`): the
formulas, the hooks, the live-storage count, the snapshot reader and the plot are tested on a CPU
(tests/test_nb16_gpu_memory.py, with a small snapshot written in torch's format).
"""

from __future__ import annotations

import functools
import gc
import json
import pickle
import types
import weakref
from collections import defaultdict
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.checkpoint import CheckpointPolicy, checkpoint, create_selective_checkpoint_contexts

from course_utils.checks import require_choice, require_number, require_tensors
from course_utils.device import require_device

FP32 = 4  # bytes


# ---- the model: a GPT-like stack of transformer blocks ----------------------------------------------------
@dataclass(frozen=True)
class GPTConfig:
    vocab: int = 8192
    seq: int = 1024
    width: int = 1024
    heads: int = 16
    layers: int = 8
    batch: int = 8

    def __post_init__(self) -> None:
        for name in ("vocab", "seq", "width", "heads", "layers", "batch"):
            require_number(f"GPTConfig.{name}", getattr(self, name), integer=True, low=1)
        if self.width % self.heads:
            raise ValueError(f"GPTConfig.width ({self.width}) must be a multiple of heads ({self.heads})")


def _require_cfg(cfg) -> GPTConfig:
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig, got {type(cfg).__name__}")
    return cfg


def _require_callable(name: str, fn) -> None:
    if not callable(fn):
        raise TypeError(f"{name} must be callable, got {type(fn).__name__}")


def _require_flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _require_cuda(what: str) -> None:
    if not torch.cuda.is_available():
        raise ValueError(f"{what} needs a CUDA GPU (it reads the CUDA caching allocator)")


AUTOCAST = (None, torch.float16, torch.bfloat16)


class Block(nn.Module):
    """Pre-norm transformer block: attention written out (scores, softmax, weighted sum), then a 4x MLP."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        _require_cfg(cfg)
        d, self.heads = cfg.width, cfg.heads
        self.ln1, self.qkv, self.proj = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.ln2, self.fc1, self.act, self.fc2 = nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d)
        self.register_buffer("causal", torch.full((cfg.seq, cfg.seq), float("-inf")).triu(1), persistent=False)

    def attention(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (C // self.heads) ** -0.5 + self.causal[:T, :T]
        y = scores.softmax(dim=-1) @ v                                   # (B, heads, T, T) @ (B, heads, T, C/heads)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[2] != self.ln1.normalized_shape[0] \
                or x.shape[1] > self.causal.shape[0]:
            raise ValueError(f"x must be a (batch, T, width={self.ln1.normalized_shape[0]}) tensor with T <= seq="
                             f"{self.causal.shape[0]}, got {tuple(x.shape) if isinstance(x, torch.Tensor) else x!r:.80}")
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, ``cfg.layers`` blocks, a final LayerNorm and the vocabulary head; returns the
    cross-entropy loss. ``checkpointing``: None, "full" (every block), "every 2" (every 2nd block; any k) or
    "selective" (inside every block: keep the outputs of the linear layers, recompute the rest)."""

    def __init__(self, cfg: GPTConfig, checkpointing: str | None = None):
        super().__init__()
        self.cfg = _require_cfg(cfg)
        self.tok, self.pos = nn.Embedding(cfg.vocab, cfg.width), nn.Embedding(cfg.seq, cfg.width)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln_f, self.head = nn.LayerNorm(cfg.width), nn.Linear(cfg.width, cfg.vocab, bias=False)
        self.checkpointing = checkpointing

    @property
    def checkpointing(self) -> str | None:
        return self._checkpointing

    @checkpointing.setter
    def checkpointing(self, how: str | None) -> None:
        if how is not None and not (how in ("full", "selective") or
                                    (isinstance(how, str) and how.startswith("every ") and how[6:].isdigit()
                                     and int(how[6:]) >= 1)):
            raise ValueError(f"checkpointing must be None, 'full', 'every k' (k >= 1) or 'selective', got {how!r}")
        self._checkpointing = how

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        _require_tokens(self.cfg, idx, targets)
        x = self.tok(idx) + self.pos.weight[: idx.shape[1]]
        how = self.checkpointing
        every = 1 if how == "full" else int(how[6:]) if how and how.startswith("every ") else 0
        for i, block in enumerate(self.blocks):
            if every and i % every == 0:
                x = checkpoint(block, x, use_reentrant=False)            # keep x only; recompute the block
            elif how == "selective":
                x = checkpoint(block, x, use_reentrant=False, context_fn=save_linear_outputs)
            else:
                x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))


def _require_tokens(cfg: GPTConfig, idx, targets) -> None:
    """idx and targets: int64 (batch, T) on one device, T <= cfg.seq, ids in [0, cfg.vocab)."""
    require_tensors(idx=idx, targets=targets, dtypes=(torch.int64,), ndim=2, same_shape=True, max_numel=None,
                    max_span=None, device=idx.device if isinstance(idx, torch.Tensor) else None)
    if not 1 <= idx.shape[1] <= cfg.seq or idx.shape[0] < 1:
        raise ValueError(f"idx must be (batch >= 1, T) with 1 <= T <= cfg.seq={cfg.seq}, got {tuple(idx.shape)}")
    for name, t in (("idx", idx), ("targets", targets)):
        low, high = torch.aminmax(t)
        if low < 0 or high >= cfg.vocab:
            raise ValueError(f"{name} must hold token ids in [0, cfg.vocab={cfg.vocab}), got {int(low)}..{int(high)}")


_MATMULS = {torch.ops.aten.mm.default, torch.ops.aten.addmm.default}


def keep_matmul_outputs(ctx, op, *args, **kwargs) -> CheckpointPolicy:
    """Selective checkpointing's policy: keep what the linear layers computed (their matmuls are the FLOPs),
    recompute everything else (attention's scores and softmax: T^2 memory but few FLOPs; LayerNorm, GELU)."""
    return CheckpointPolicy.MUST_SAVE if op in _MATMULS else CheckpointPolicy.PREFER_RECOMPUTE


save_linear_outputs = functools.partial(create_selective_checkpoint_contexts, keep_matmul_outputs)


def make_batch(cfg: GPTConfig, device: str | torch.device = "cpu", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    _require_cfg(cfg)
    device = require_device(device)
    g = torch.Generator().manual_seed(require_number("seed", seed, integer=True, low=0))
    idx = torch.randint(cfg.vocab, (cfg.batch, cfg.seq + 1), generator=g)
    return idx[:, :-1].contiguous().to(device), idx[:, 1:].contiguous().to(device)


def train_step(model: nn.Module, opt: torch.optim.Optimizer, idx: torch.Tensor, targets: torch.Tensor, *,
               accumulation: int = 1, autocast: torch.dtype | None = None, set_to_none: bool = True,
               mark: Callable[[str], None] | None = None) -> float:
    """One optimizer step over ``accumulation`` micro-batches that split the batch (same tokens, same update);
    ``autocast``: a dtype to run the forward in (torch.autocast); ``mark(phase)`` is called as each phase starts."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    if not isinstance(opt, torch.optim.Optimizer):
        raise TypeError(f"opt must be a torch.optim.Optimizer, got {type(opt).__name__}")
    require_tensors(idx=idx, targets=targets, dtypes=(torch.int64,), ndim=2, same_shape=True, max_numel=None,
                    max_span=None, device=idx.device if isinstance(idx, torch.Tensor) else None)
    accumulation = require_number("accumulation", accumulation, integer=True, low=1, high=idx.shape[0])
    require_choice("autocast", autocast, AUTOCAST)
    if mark is not None:
        _require_callable("mark", mark)
    mark = mark or (lambda phase: None)
    total = 0.0
    for i_chunk, t_chunk in zip(idx.chunk(accumulation), targets.chunk(accumulation)):
        mark("forward")
        with torch.autocast(idx.device.type, dtype=autocast or torch.float32, enabled=autocast is not None):
            loss = model(i_chunk, t_chunk) / accumulation
        mark("backward")
        loss.backward()
        total += loss.item()
    mark("optimizer")
    opt.step()
    opt.zero_grad(set_to_none=set_to_none)
    return total


# ---- the formulas ------------------------------------------------------------------------------------------
def param_count(cfg: GPTConfig) -> int:
    _require_cfg(cfg)
    d = cfg.width
    per_block = 12 * d * d + 13 * d  # qkv 3d^2+3d, proj d^2+d, fc1 4d^2+4d, fc2 4d^2+d, two LayerNorms 4d
    return cfg.layers * per_block + 2 * cfg.vocab * d + cfg.seq * d + 2 * d


def block_saved_bytes(batch: int, seq: int, width: int, heads: int) -> int:
    """Bytes one fp32 block keeps for backward: 16 (B, T, d) tensors, the (B, heads, T, T) softmax output,
    and each LayerNorm's mean and 1/std per token."""
    batch, seq, width, heads = (require_number(name, n, integer=True, low=1) for name, n in
                                zip(("batch", "seq", "width", "heads"), (batch, seq, width, heads)))
    tokens = batch * seq
    bt_d = 16 * tokens * width  # x, ln1(x), copies of q, k, v, y for the matmuls; x1, ln2(x1), fc1 out, GELU out (4d each)
    return FP32 * (bt_d + batch * heads * seq * seq + 2 * 2 * tokens)


def saved_bytes_formula(cfg: GPTConfig) -> dict[str, int]:
    """What backward keeps, by part (fp32, no checkpointing)."""
    _require_cfg(cfg)
    tokens = cfg.batch * cfg.seq
    return {"token ids (embedding)": 8 * tokens,
            "blocks": cfg.layers * block_saved_bytes(cfg.batch, cfg.seq, cfg.width, cfg.heads),
            "ln_f and head inputs": FP32 * (2 * tokens * cfg.width + 2 * tokens),
            "log-softmax output": FP32 * tokens * cfg.vocab,
            "targets (loss)": 8 * tokens + FP32}


def predict_budget(cfg: GPTConfig) -> dict[str, int]:
    """The parts of a steady training step's memory (fp32, AdamW, no checkpointing) and the predicted peak:
    parameters, AdamW's two moments and the activations are all alive when backward starts; gradients arrive
    as activations leave; on top sits the largest pair of backward temporaries (the gradient of an op's output
    and of its input: the log-softmax's (tokens x vocab) or the softmax's (B x heads x T x T))."""
    _require_cfg(cfg)
    p = FP32 * param_count(cfg)
    activations = sum(saved_bytes_formula(cfg).values())
    temporaries = 2 * FP32 * max(cfg.batch * cfg.seq * cfg.vocab, cfg.batch * cfg.heads * cfg.seq * cfg.seq)
    return {"parameters": p, "gradients": p, "AdamW moments": 2 * p, "activations": activations,
            "backward temporaries": temporaries, "predicted peak": 3 * p + activations + temporaries}


# ---- what backward keeps: saved-tensor hooks, by module ------------------------------------------------------
def saved_bytes_by_module(model: nn.Module, *args) -> dict[str, int]:
    """Run ``model(*args)`` with a hook on every tensor autograd saves; bytes by the innermost module running when
    it was saved. Each storage counts once (views of one tensor share it), parameters not at all."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen, by_module, stack = set(), defaultdict(int), []
    names = {m: n or "(model)" for n, m in model.named_modules()}
    handles = [m.register_forward_pre_hook(lambda m, a: stack.append(names[m])) for m in model.modules()]
    handles += [m.register_forward_hook(lambda m, a, o: [stack.pop(), None][1]) for m in model.modules()]

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params and storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            by_module[stack[-1] if stack else "(outside)"] += storage.nbytes()
        return t.detach()  # not t: a saved output would hold its own graph node, a cycle gc cannot see

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = model(*args)
    finally:
        for h in handles:
            h.remove()
    del out
    return dict(by_module)


class LiveStorages(TorchDispatchMode):
    """Counts the bytes of the storages that the ops run under it created and that are still alive: the CPU twin
    of ``torch.cuda.memory_allocated()`` for what a piece of code leaves behind (a GPU uses the allocator)."""

    def __init__(self):
        super().__init__()
        self._made: dict[int, tuple[int, list]] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = {t.untyped_storage().data_ptr() for t in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(t, torch.Tensor)}
        for t in torch.utils._pytree.tree_leaves(out):
            if not isinstance(t, torch.Tensor) or t.device.type == "meta" or not t.untyped_storage().nbytes():
                continue
            ptr, nbytes = t.untyped_storage().data_ptr(), t.untyped_storage().nbytes()
            made = self._made.get(ptr)
            if made is not None and any(r() is not None for r in made[1]):
                made[1].append(weakref.ref(t))                          # a view of a storage made here
            elif ptr not in inputs:                                     # new memory (a view of an input is not)
                self._made[ptr] = (nbytes, [weakref.ref(t)])
        return out

    def live_bytes(self) -> int:
        return sum(n for n, refs in self._made.values() if any(r() is not None for r in refs))


def forward_kept_bytes(model: nn.Module, idx: torch.Tensor, targets: torch.Tensor,
                       autocast: torch.dtype | None = None) -> int:
    """Bytes a forward leaves alive for backward (its activation memory): the allocator's count on a GPU, the
    live storages the forward created (`LiveStorages`) on a CPU."""
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be an nn.Module, got {type(model).__name__}")
    require_tensors(idx=idx, targets=targets, dtypes=(torch.int64,), ndim=2, same_shape=True, max_numel=None,
                    max_span=None, device=idx.device if isinstance(idx, torch.Tensor) else None)
    require_choice("autocast", autocast, AUTOCAST)
    if idx.device.type == "cuda":
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated()
        with torch.autocast("cuda", dtype=autocast or torch.float32, enabled=autocast is not None):
            loss = model(idx, targets)
        kept = torch.cuda.memory_allocated() - before
    else:
        with LiveStorages() as live, torch.autocast("cpu", dtype=autocast or torch.float32,
                                                    enabled=autocast is not None):
            loss = model(idx, targets)
        kept = live.live_bytes()
    loss.backward()
    model.zero_grad(set_to_none=True)
    return kept


def gpu_peak(step: Callable[[], object]) -> dict[str, int]:
    """Run ``step()`` once on the GPU and read the caching allocator: the bytes allocated before, the peak,
    what it reserved, and its counters (torch.cuda.memory_stats)."""
    _require_callable("step", step)
    _require_cuda("gpu_peak")
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    step()
    torch.cuda.synchronize()
    stats = torch.cuda.memory_stats()
    return {"allocated before": before, "peak allocated": torch.cuda.max_memory_allocated(),
            "allocated after": torch.cuda.memory_allocated(), "peak reserved": torch.cuda.max_memory_reserved(),
            "cudaMalloc retries": stats.get("num_alloc_retries", 0),
            "inactive split bytes": stats.get("inactive_split_bytes.all.current", 0)}


# ---- a memory snapshot: record, read, draw -------------------------------------------------------------------
PHASES = ("forward", "backward", "optimizer")
CATEGORIES = ("before the trace (parameters, AdamW moments)", "gradients", "optimizer state", "activations",
              "temporaries")


def record_snapshot(step: Callable[[Callable[[str], None]], object], steps: int, path: str | Path) -> Path:
    """Record the CUDA caching allocator's history over ``steps`` calls of ``step(mark)`` and dump it to ``path``
    (a pickle that pytorch.org/memory_viz opens); ``mark(phase)`` notes where each phase starts, saved beside
    it as ``<path>.phases.json`` (trace indices)."""
    _require_callable("step", step)
    steps = require_number("steps", steps, integer=True, low=1)
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path, got {type(path).__name__}")
    _require_cuda("record_snapshot")
    memory, device = torch.cuda.memory, torch.cuda.current_device()
    marks: list[tuple[str, int]] = []
    torch.cuda.synchronize()
    memory._record_memory_history(max_entries=1_000_000, stacks="python")
    try:
        for _ in range(steps):
            step(lambda phase: marks.append((phase, len(memory._snapshot()["device_traces"][device]))))
        torch.cuda.synchronize()
        marks.append(("end", len(memory._snapshot()["device_traces"][device])))
        memory._dump_snapshot(str(path))
    finally:
        memory._record_memory_history(enabled=None)
    Path(f"{path}.phases.json").write_text(json.dumps({"device": device, "marks": marks}) + "\n", encoding="utf-8")
    return Path(path)


def read_snapshot(path: str | Path) -> dict:
    """The snapshot ``torch.cuda.memory._dump_snapshot`` wrote: a dict with "segments" (the allocator's memory
    at the end) and "device_traces" (one list of events per device). Anything else gets a ValueError that says
    what the file is. (Like any pickle, open only files you trust.)"""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or Path to a snapshot file, got {type(path).__name__}")
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"path: no such snapshot file {path}")
    try:
        with path.open("rb") as f:
            data = pickle.load(f)
    except Exception as err:  # noqa: BLE001 - whatever unpickling raised, the file is not a snapshot
        raise ValueError(f"{path.name} is not a memory snapshot: it does not unpickle ({type(err).__name__}: "
                         f"{err}). Write one with torch.cuda.memory._dump_snapshot(path)") from None
    if isinstance(data, list):
        raise ValueError(f"{path.name} holds a list of segments only, no trace: record with "
                         "torch.cuda.memory._record_memory_history() before torch.cuda.memory._dump_snapshot()")
    if not isinstance(data, dict) or not {"segments", "device_traces"} <= set(data):
        what = f"a dict with keys {sorted(data)[:6]}" if isinstance(data, dict) else f"a {type(data).__name__}"
        raise ValueError(f"{path.name} is not a memory snapshot: it holds {what}, not a dict with 'segments' and "
                         "'device_traces' (what torch.cuda.memory._dump_snapshot writes)")
    traces = data["device_traces"]
    if not isinstance(traces, list) or not all(isinstance(t, list) for t in traces):
        raise ValueError(f"{path.name}: 'device_traces' must be a list of lists of events")
    for trace in traces:
        for event in trace[:1000]:
            if not isinstance(event, dict) or "action" not in event or "size" not in event:
                raise ValueError(f"{path.name}: an event of 'device_traces' is not a dict with 'action' and 'size': "
                                 f"{str(event)[:80]}")
    return data


def _phase_at(marks: list[tuple[str, int]]) -> Callable[[int], tuple[int, str]]:
    starts = [(i, phase) for phase, i in marks]

    def at(index: int) -> tuple[int, str]:
        """(step number, phase) of the event at ``index``: (-1, "before") before the first mark."""
        step, phase = -1, "before"
        for i, (start, name) in enumerate(starts):
            if start > index:
                break
            step, phase = (step + 1 if name == "forward" else step), name
        return step, phase
    return at


def _category(born: tuple[int, str], died: tuple[int, str] | None) -> str:
    """What an allocation was, from the phase it was made in and the phase it was freed in."""
    same = died is not None and died == born
    if born[1] == "forward":
        return "temporaries" if same else "activations"
    if born[1] == "backward":
        return "temporaries" if same else "gradients"
    if born[1] == "optimizer":
        return "temporaries" if same else "optimizer state"
    return "temporaries"


def timeline(snapshot: dict, marks: list[tuple[str, int]] | None = None, device: int = 0) -> pd.DataFrame:
    """Live bytes by category after every event of one device's trace, and the bytes reserved (segments).

    Allocations alive before the trace began (parameters, optimizer moments of earlier steps) are found from what
    the trace frees without having made it, and from the blocks still allocated at the end. Others are named by
    their phases (``marks``: [(phase, first event index)], phase in forward/backward/optimizer/end): made in the
    forward and freed later, activations; made in backward and kept, gradients; made and freed within one
    phase, temporaries."""
    if not isinstance(snapshot, dict) or not {"segments", "device_traces"} <= set(snapshot):
        raise TypeError("snapshot must be the dict read_snapshot() returns (keys 'segments' and 'device_traces'), "
                        f"got {type(snapshot).__name__}")
    marks = _require_marks(marks)
    device = require_number("device", device, integer=True)
    traces = snapshot["device_traces"]
    if not 0 <= device < len(traces):
        raise ValueError(f"device must be in [0, {len(traces)}): the snapshot has {len(traces)} device traces")
    events = [e for e in traces[device] if e["action"] in ("alloc", "free_completed", "segment_alloc", "segment_free")]
    at = _phase_at(list(marks or []))
    index = {id(e): i for i, e in enumerate(traces[device])}
    born, life = {}, {}  # addr -> (event index, size) of the live allocation made in the trace
    for e in events:
        if e["action"] == "alloc":
            born[e["addr"]] = (index[id(e)], e["size"])
        elif e["action"] == "free_completed" and e["addr"] in born:
            i, _ = born.pop(e["addr"])
            life[i] = index[id(e)]
    before = 0
    live = set()
    for e in events:  # frees of what the trace never made: alive before it
        if e["action"] == "alloc":
            live.add(e["addr"])
        elif e["action"] == "free_completed":
            before += 0 if e["addr"] in live else e["size"]
            live.discard(e["addr"])
    segments = [s for s in snapshot["segments"] if s.get("device", device) == device]
    for seg in segments:  # blocks allocated at the end that the trace did not make
        address = seg.get("address", 0)
        for block in seg.get("blocks", []):
            addr = block.get("address", address)
            if block.get("state") == "active_allocated" and addr not in born:
                before += block["size"]
            address = addr + block["size"]
    reserved = sum(s["total_size"] for s in segments)
    reserved -= sum(e["size"] if e["action"] == "segment_alloc" else -e["size"]
                    for e in events if e["action"] in ("segment_alloc", "segment_free"))
    rows, now = [], dict.fromkeys(CATEGORIES, 0)
    now[CATEGORIES[0]] = before
    kind: dict[int, str] = {}
    for e in events:
        i, action = index[id(e)], e["action"]
        if action == "alloc":
            died = life.get(i)
            kind[e["addr"]] = _category(at(i), None if died is None else at(died))
            now[kind[e["addr"]]] += e["size"]
        elif action == "free_completed":
            now[kind.pop(e["addr"], CATEGORIES[0])] -= e["size"]
        else:
            reserved += e["size"] if action == "segment_alloc" else -e["size"]
        rows.append({"event": i, **now, "reserved": reserved})
    return pd.DataFrame(rows, columns=["event", *CATEGORIES, "reserved"])


def _require_marks(marks) -> list[tuple[str, int]]:
    """marks: None or [(phase, first event index)], phase in forward/backward/optimizer/end."""
    if marks is None:
        return []
    if not isinstance(marks, (list, tuple)) or not all(
            isinstance(m, (list, tuple)) and len(m) == 2 for m in marks):
        raise TypeError(f"marks must be a list of (phase, event index) pairs, got {marks!r:.80}")
    for phase, start in marks:
        require_choice("marks' phase", phase, (*PHASES, "end"))
        require_number("marks' event index", start, integer=True, low=0)
    return [(phase, int(start)) for phase, start in marks]


def plot_timeline(frame: pd.DataFrame, marks: list[tuple[str, int]] | None = None, title: str = ""):
    """Stacked live bytes by category over the trace's events, the reserved bytes as a line, phases marked."""
    import matplotlib.pyplot as plt

    if not isinstance(frame, pd.DataFrame) or not {"event", "reserved", *CATEGORIES} <= set(frame.columns):
        raise ValueError("frame must be what timeline() returns (columns event, the categories, reserved)")
    marks = _require_marks(marks)
    fig, ax = plt.subplots(figsize=(10, 4))
    gib = 2.0 ** 30
    ax.stackplot(frame["event"], *[frame[c] / gib for c in CATEGORIES], labels=CATEGORIES, step="post")
    ax.step(frame["event"], frame["reserved"] / gib, where="post", color="black", lw=1, label="reserved (segments)")
    for phase, start in marks or []:
        if phase == "forward":
            ax.axvline(start, color="grey", lw=0.6, ls=":")
    ax.set_xlabel("allocator event (dotted: a step's forward starts)")
    ax.set_ylabel("GiB")
    ax.set_title(title or "live allocations by category")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


# ---- the payoff: the largest model that trains in a budget ----------------------------------------------------
def largest_that_fits(try_size: Callable[[int], object], *, start: int = 1, limit: int = 256) -> int:
    """The largest n in [start, limit] for which ``try_size(n)`` returns rather than raising
    torch.OutOfMemoryError (0 if even ``start`` does not fit): doubling, then bisection, assuming that a size
    that fits means every smaller one fits."""
    _require_callable("try_size", try_size)
    start = require_number("start", start, integer=True, low=1)
    limit = require_number("limit", limit, integer=True, low=start)

    def fits(n: int) -> bool:
        try:
            try_size(n)
            ok = True
        except torch.OutOfMemoryError:
            ok = False
        if torch.cuda.is_available():  # the exception is gone: free what the try left, then the cached segments
            gc.collect()
            torch.cuda.empty_cache()
        return ok

    if not fits(start):
        return 0
    good, bad = start, None
    while bad is None and good < limit:  # double until it no longer fits
        n = min(2 * good, limit)
        good, bad = (n, None) if fits(n) else (good, n)
    while bad is not None and bad - good > 1:
        mid = (good + bad) // 2
        good, bad = (mid, bad) if fits(mid) else (good, mid)
    return good


def require_budget(budget_bytes: int) -> int:
    return require_number("budget_bytes", budget_bytes, integer=True, low=1)


def trains_on_gpu(cfg: GPTConfig, budget_bytes: int, *, checkpointing: str | None = None,
                  autocast: torch.dtype | None = None, fused: bool = False, steps: int = 2) -> None:
    """Build ``cfg``'s model on the GPU and train ``steps`` steps with the allocator capped at ``budget_bytes`` more
    than this process already holds (torch.cuda.set_per_process_memory_fraction); raises torch.OutOfMemoryError
    if it does not fit."""
    _require_cfg(cfg)
    budget_bytes = require_budget(budget_bytes)
    GPT.checkpointing.fset(types.SimpleNamespace(), checkpointing)  # the model's own check, before any allocation
    require_choice("autocast", autocast, AUTOCAST)
    _require_flag("fused", fused)
    steps = require_number("steps", steps, integer=True, low=1)
    _require_cuda("trains_on_gpu")
    model = opt = None
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()  # what this process already holds stays outside the budget
    torch.cuda.set_per_process_memory_fraction(min(1.0, (torch.cuda.memory_reserved() + budget_bytes) / total))
    try:
        with torch.device("cuda"):
            model = GPT(cfg, checkpointing=checkpointing)
        opt = torch.optim.AdamW(model.parameters(), fused=fused or None, foreach=None if fused else True)
        idx, targets = make_batch(cfg, "cuda")
        for _ in range(steps):
            train_step(model, opt, idx, targets, autocast=autocast)
        torch.cuda.synchronize()
    finally:
        model = opt = None
        torch.cuda.set_per_process_memory_fraction(1.0)


def trains_by_formula(cfg: GPTConfig, budget_bytes: int, *, checkpointing: str | None = None) -> None:
    """The CPU twin of `trains_on_gpu`: raises torch.OutOfMemoryError when the predicted peak (fp32; full
    checkpointing keeps one (B, T, d) input per block and recomputes one block at a time) exceeds the budget."""
    _require_cfg(cfg)
    budget_bytes = require_budget(budget_bytes)
    require_choice("checkpointing", checkpointing, (None, "full"))
    parts = predict_budget(cfg)
    if checkpointing == "full":
        one_block = block_saved_bytes(cfg.batch, cfg.seq, cfg.width, cfg.heads)
        kept = parts["activations"] - cfg.layers * one_block + cfg.layers * FP32 * cfg.batch * cfg.seq * cfg.width
        peak = max(3 * parts["parameters"] + kept + parts["backward temporaries"],
                   4 * parts["parameters"] + kept + one_block)
    else:
        peak = parts["predicted peak"]
    if peak > budget_bytes:
        raise torch.OutOfMemoryError(f"predicted peak {peak:,} bytes > budget {budget_bytes:,} bytes")


def with_layers(cfg: GPTConfig, layers: int) -> GPTConfig:
    return replace(_require_cfg(cfg), layers=layers)
