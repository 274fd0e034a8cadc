"""Notebook 17's training runs: one process per GPU, started by torchrun.

    torchrun --standalone --nproc-per-node 2 -m lessons.nb17_train --out .cache/nb17/train.json

First a small model in fp32: the gradients that each data-parallel way leaves on every rank against those of one
process that sees every rank's batch. Then the GPT-like model (GPTConfig(): about 150M parameters; a tiny one on a
CPU), each way on the same per-GPU batch: the step time (the slowest rank's), the memory that parameters, gradients
and optimizer state hold per GPU, the step's peak; rank 0 records a profiler trace of a few steps of some of them.
``--check-only`` stops after the gradients; ``--skip-check`` leaves them out; ``--variants NAME ...`` times only those
ways (names of VARIANTS; default: all); ``--batch N``: N sequences per GPU (default: the config's). Rank 0 writes the
JSON and the traces beside it.

    torchrun --standalone --nproc-per-node 4 -m lessons.nb17_train --out .cache/nb17b/4/train.json --skip-check \\
        --variants "1 GPU (no communication)" FSDP2
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import re
import time
import warnings
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.profiler import ProfilerActivity, profile

from lessons.nb17_multi_gpu_training import (GPT, BucketedDDP, GPTConfig, allreduce_each, allreduce_flat,
                                             init_distributed, make_batch)

TINY = GPTConfig(vocab=128, seq=32, width=64, heads=4, layers=2, batch=2)
#: name -> (kind, options). "1 GPU" runs each rank's step with no communication: what one GPU alone does.
VARIANTS = {
    "1 GPU (no communication)": ("local", {}),
    "(a) all-reduce each gradient": ("each", {}),
    "(b) one flat all-reduce": ("flat", {}),
    "(c) buckets from hooks, 25 MB": ("bucketed", {"cap_mb": 25}),
    "torch DDP, default (25 MB buckets)": ("ddp", {}),
    "torch DDP, one bucket": ("ddp", {"one_bucket": True}),
    "torch DDP, 25 MB, NCCL 8 CTAs": ("ddp", {"ctas": 8}),
    "torch DDP, 25 MB, bucket view + static graph": ("ddp", {"view": True}),
    "torch DDP, one bucket, bucket view + static graph": ("ddp", {"one_bucket": True, "view": True}),
    "torch DDP, one bucket, bf16 compression": ("ddp", {"one_bucket": True, "view": True, "compress": True}),
    "FSDP2": ("fsdp", {"blocks_per_group": 2}),
}
PROFILED = ("1 GPU (no communication)", "(c) buckets from hooks, 25 MB", "torch DDP, default (25 MB buckets)",
            "torch DDP, one bucket", "torch DDP, 25 MB, NCCL 8 CTAs", "FSDP2")


def _cta_group(world: int, k: int):
    """A communicator whose NCCL kernels use k CTAs (k SMs), or None where the build cannot set it."""
    if not hasattr(dist, "ProcessGroupNCCL") or not hasattr(dist.ProcessGroupNCCL.Options(), "config"):
        return None
    opts = dist.ProcessGroupNCCL.Options()
    opts.config.min_ctas = opts.config.max_ctas = k
    return dist.new_group(list(range(world)), backend="nccl", pg_options=opts)


def build(kind: str, options: dict, model: torch.nn.Module, device: torch.device, world: int):
    """(module to call, gradient sync after backward, zero_grad) for one way of training ``model``."""
    cuda, sync, zero = device.type == "cuda", (lambda: None), None
    wrapped = model
    if kind == "ddp":
        megabytes = sum(p.numel() * p.element_size() for p in model.parameters()) / 2**20
        wrapped = DDP(model, device_ids=[device] if cuda else None, bucket_cap_mb=megabytes + 1
                      if options.get("one_bucket") else 25, gradient_as_bucket_view=options.get("view", False),
                      static_graph=options.get("view", False),
                      process_group=_cta_group(world, options["ctas"]) if options.get("ctas") else None)
        if options.get("compress"):  # gloo has no bf16 all-reduce: fp16 on a CPU
            wrapped.register_comm_hook(None, default_hooks.bf16_compress_hook if cuda
                                       else default_hooks.fp16_compress_hook)
    elif kind == "fsdp":  # a group: one all-gather before its forward, one before its backward, one reduce-scatter
        # parameters all-gathered in bf16 (cast once per gather, not by autocast at every matmul), gradients
        # reduce-scattered in fp32 as DDP all-reduces them; on a CPU, as autocast, nothing: fp32
        mp = MixedPrecisionPolicy(torch.bfloat16, torch.float32) if cuda else MixedPrecisionPolicy()
        blocks, k = list(model.blocks), options.get("blocks_per_group", 1)
        for i in range(0, len(blocks), k):           # each group costs host work every step: few, not tiny
            fully_shard(blocks[i:i + k] if k > 1 else blocks[i], mp_policy=mp,
                        reshard_after_forward=i + k < len(blocks))  # the last: its backward comes right after
        fully_shard(model, mp_policy=mp)             # the rest: embeddings, final LayerNorm, head
    elif kind == "bucketed":
        buckets = BucketedDDP(model, cap_mb=options["cap_mb"])
        sync, zero = buckets.finish, buckets.zero_grad
    elif kind == "each":
        sync = lambda: allreduce_each(model)  # noqa: E731
    elif kind == "flat":
        sync = lambda: allreduce_flat(model)  # noqa: E731
    return wrapped, sync, zero


def make_step(kind: str, options: dict, cfg: GPTConfig, device: torch.device, rank: int, world: int):
    torch.manual_seed(0)                             # the same initial weights on every rank
    with torch.device(device):
        model = GPT(cfg)
    wrapped, sync, zero = build(kind, options, model, device, world)
    # fused: each parameter, gradient and moment read and written once a step (foreach: one pass per arithmetic op)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    zero = zero or (lambda: opt.zero_grad(set_to_none=True))
    idx, targets = make_batch(cfg, device, seed=rank)  # each rank its own data

    def step() -> None:
        zero()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
            loss = wrapped(idx, targets)
        loss.backward()
        sync()
        opt.step()
    return step, model, opt


def _max_over_ranks(value: float, device: torch.device) -> float:
    t = torch.tensor([float(value)], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.item()


def gradient_check(device: torch.device, rank: int, world: int) -> dict[str, float]:
    """Largest gradient error, relative to the largest gradient, of each way against one process that sees the
    batches of every rank (its mean loss is the mean of the ranks' mean losses), fp32, the worst rank's."""
    torch.manual_seed(0)
    base = GPT(TINY).to(device)
    batches = [make_batch(TINY, device, seed=r) for r in range(world)]
    one = copy.deepcopy(base)
    one(torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])).backward()
    errors = {}
    for name, kind, options in (("no all-reduce (a control: each rank its own gradient)", "local", {}),
                                ("(a) all-reduce each gradient", "each", {}), ("(b) one flat all-reduce", "flat", {}),
                                ("(c) buckets from hooks", "bucketed", {"cap_mb": 0.05}),
                                ("torch DDP", "ddp", {})):
        model = copy.deepcopy(base)
        wrapped, sync, _ = build(kind, options, model, device, world)
        wrapped(*batches[rank]).backward()
        sync()
        worst = max(((p.grad - q.grad).abs().max() / q.grad.abs().max().clamp_min(1e-30)).item()
                    for p, q in zip(model.parameters(), one.parameters()))
        errors[name] = _max_over_ranks(worst, device)
    return errors


def held_bytes(model: torch.nn.Module, opt: torch.optim.Optimizer) -> int:
    """Bytes of this rank's parameters, gradients and optimizer state (each storage once; a shard's local part)."""
    tensors = [*model.parameters(), *(p.grad for p in model.parameters() if p.grad is not None),
               *(v for state in opt.state.values() for v in state.values() if isinstance(v, torch.Tensor))]
    local = [t.to_local() if hasattr(t, "to_local") else t for t in tensors]
    return sum({t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in local}.values())


def measure(name: str, cfg: GPTConfig, device: torch.device, rank: int, world: int, out_dir: Path) -> dict:
    cuda = device.type == "cuda"
    kind, options = VARIANTS[name]
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()
        before = torch.cuda.memory_allocated(device)
    step, model, opt = make_step(kind, options, cfg, device, rank, world)
    # DDP records CUDA events in each of its first 10 iterations and waits for them (its runtime statistics): a
    # host-device sync per step; the timed steps come after them
    warmup, steps, rounds = (11, 5, 3) if cuda else (1, 1, 1)
    for _ in range(warmup):
        step()
    times = []
    for _ in range(rounds):
        if cuda:
            torch.cuda.synchronize()
        dist.barrier()
        start = time.perf_counter()
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) / steps)
    row = {"variant": name, "step ms": 1e3 * _max_over_ranks(sorted(times)[len(times) // 2], device),
           "held MiB": held_bytes(model, opt) / 2**20}
    if cuda:  # after a step: parameters, gradients, optimizer state (and DDP's buckets), no activations
        row["allocated MiB"] = (torch.cuda.memory_allocated(device) - before) / 2**20
        torch.cuda.reset_peak_memory_stats(device)
        step()
        torch.cuda.synchronize()
        row["peak MiB"] = (torch.cuda.max_memory_allocated(device) - before) / 2**20
    if name in PROFILED:
        row["trace"] = f"trace_{re.sub(r'[^a-z0-9]+', '_', name.lower()).strip('_')}.json"
        # profile
        if rank == 0:
            with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
                for _ in range(PROFILED_STEPS if cuda else 1):
                    step()
                if cuda:
                    torch.cuda.synchronize()
            prof.export_chrome_trace(str(out_dir / row["trace"]))
        else:
            for _ in range(PROFILED_STEPS if cuda else 1):
                step()
        # profile:end
        row["profiled steps"] = PROFILED_STEPS if cuda else 1
    del step, model, opt
    dist.barrier()
    return row


PROFILED_STEPS = 3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line; ``variants`` comes back as names of VARIANTS in VARIANTS' order (all of them by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--check-only", action="store_true", help="only compare the gradients with one process'")
    parser.add_argument("--skip-check", action="store_true", help="time the ways without comparing the gradients")
    parser.add_argument("--variants", nargs="+", choices=list(VARIANTS), metavar="NAME",
                        help="the ways to time, names of VARIANTS (default: all): " + "; ".join(VARIANTS))
    parser.add_argument("--batch", type=int, metavar="N",
                        help="sequences per GPU (default: GPTConfig's on GPUs, the tiny model's on a CPU)")
    args = parser.parse_args(argv)
    if args.check_only and args.skip_check:
        parser.error("--check-only and --skip-check exclude each other")
    if args.batch is not None and args.batch < 1:
        parser.error(f"--batch must be >= 1, got {args.batch}")
    args.variants = [name for name in VARIANTS if name in (args.variants or VARIANTS)]
    return args


@record
def main() -> None:
    args = parse_args()
    warnings.filterwarnings("ignore", message=".*(static_graph|bucket_view|TypedStorage).*")
    rank, world, device = init_distributed()
    cuda = device.type == "cuda"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    result = {"world": world, "backend": dist.get_backend()}
    if not args.skip_check:
        result["gradient check"] = gradient_check(device, rank, world)
    if not args.check_only:
        cfg = GPTConfig() if cuda else TINY
        cfg = replace(cfg, batch=args.batch or cfg.batch)
        result.update(config=vars(cfg), params=cfg.params(), bytes_per_param=4, rows=[
            measure(name, cfg, device, rank, world, args.out.parent)
            for name in args.variants if cuda or "ctas" not in VARIANTS[name][1]])
    if rank == 0:
        args.out.write_text(json.dumps(result, indent=1))
        print(f"rank 0 of {world} ({dist.get_backend()}): {len(result.get('rows', []))} ways timed -> {args.out.name}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
