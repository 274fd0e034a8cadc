"""Notebook 17's collective benchmark: one process per GPU, started by torchrun.

    torchrun --standalone --nproc-per-node 2 -m lessons.nb17_collectives --out .cache/nb17/collectives.json

Times all_reduce, all_gather_into_tensor and reduce_scatter_tensor on fp32 buffers of 1 MiB to 1 GiB (4 KiB to 1 MiB
on a CPU, gloo), turns each time into nccl-tests' bus bandwidth, then times the 1 GiB all-reduce on communicators
with a fixed number of NCCL CTAs (thread blocks, one SM each). Rank 0 writes the JSON; every rank reports the
slowest rank's time (a collective is as fast as its last rank). ``--skip-settings`` leaves the NCCL settings out.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record

from lessons.nb17_multi_gpu_training import COLLECTIVES, bus_bandwidth, init_distributed


# timing
def time_collective(op: str, nbytes: int, device: torch.device, group=None, iters: int = 20) -> float:
    """Seconds per call of one collective on fp32 buffers (``nbytes``: the larger one), the slowest rank's."""
    world = dist.get_world_size(group)
    n = nbytes // 4 // world * world                     # all_gather and reduce_scatter split it in world parts
    big, small = torch.ones(n, device=device), torch.empty(n // world, device=device)
    call = {"all_reduce": lambda: dist.all_reduce(big, group=group),
            "all_gather": lambda: dist.all_gather_into_tensor(big, small, group=group),      # small -> big
            "reduce_scatter": lambda: dist.reduce_scatter_tensor(small, big, group=group)}[op]  # big -> small
    for _ in range(3):                                   # warm-up: the first call sets up NCCL's connections
        call()
    if device.type == "cuda":
        torch.cuda.synchronize()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        call()
    if device.type == "cuda":
        torch.cuda.synchronize()                         # NCCL runs asynchronously: wait for the last call
    seconds = torch.tensor([(time.perf_counter() - start) / iters], device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=group)
    return seconds.item()
# timing:end


def cta_groups(world: int) -> dict[str, object]:
    """Communicators whose NCCL kernels use exactly k CTAs (ncclConfig_t's minCTAs = maxCTAs = k), by name."""
    groups = {"NCCL default": None}
    options = getattr(dist, "ProcessGroupNCCL", None)
    if options is None or not hasattr(options.Options(), "config"):
        return groups
    for k in (4, 8, 16, 32):
        opts = dist.ProcessGroupNCCL.Options()
        opts.config.min_ctas = opts.config.max_ctas = k
        try:  # the same outcome on every rank: a build that refuses the setting skips it everywhere
            groups[f"{k} CTAs"] = dist.new_group(list(range(world)), backend="nccl", pg_options=opts)
        except (RuntimeError, ValueError) as err:
            print(f"{k} CTAs: skipped ({type(err).__name__}: {str(err)[:200]})")
    return groups


@record
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--skip-settings", action="store_true", help="only the sweep: no communicator per CTA count")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=FutureWarning)  # newer torch renames reduce_scatter_tensor
    rank, world, device = init_distributed()
    gpu = device.type == "cuda"
    sizes = [2**k for k in (range(20, 31) if gpu else range(12, 21, 2))]
    sweep = []
    for op in COLLECTIVES:
        for nbytes in sizes:
            seconds = time_collective(op, nbytes, device, iters=max(5, min(50, 2**31 // nbytes)) if gpu else 3)
            sweep.append({"op": op, "bytes": nbytes, "seconds": seconds,
                          "bus GB/s": bus_bandwidth(op, nbytes, seconds, world)})
    settings = {}
    if gpu and not args.skip_settings:
        groups = cta_groups(world)
        for _ in range(3):                               # interleaved rounds: clocks drift, so each gets a share
            for name, group in groups.items():
                seconds = time_collective("all_reduce", 2**30, device, group, iters=10)
                settings.setdefault(name, []).append(bus_bandwidth("all_reduce", 2**30, seconds, world))
        settings = {name: sorted(values)[len(values) // 2] for name, values in settings.items()}
    names = [None] * world
    dist.all_gather_object(names, torch.cuda.get_device_name(device) if gpu else "cpu")
    if rank == 0:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"world": world, "backend": dist.get_backend(), "devices": names,
                                        "sweep": sweep, "settings 1 GiB all_reduce": settings}, indent=1))
        print(f"rank 0 of {world} ({dist.get_backend()}): {len(sweep)} timings, {len(settings)} NCCL settings "
              f"-> {args.out.name}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
