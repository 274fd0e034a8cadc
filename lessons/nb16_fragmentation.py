"""A fragmenting workload for notebook 16, run in a child process so that PYTORCH_CUDA_ALLOC_CONF (read once, when
CUDA initialises) can differ between runs. Prints one JSON line: peak allocated and reserved bytes, cudaMalloc
retries and calls. Needs a GPU."""

import json
import os

import torch


def main() -> None:
    # workload
    # Each step makes a batch's activations a little longer than the last (sequences of growing length). Every freed
    # block is a whole segment a little too small for the next, larger request: the default allocator cudaMallocs new
    # segments each step and keeps the old ones cached. Expandable segments map more pages onto one growing segment.
    for step in range(48):
        length = 1024 + 96 * step
        activations = [torch.empty(8 * length, 1024, device="cuda") for _ in range(4)]  # 32 MiB and up, each
        del activations
    torch.cuda.synchronize()
    # workload:end

    stats = torch.cuda.memory_stats()
    print(json.dumps({"alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
                      "peak_allocated": torch.cuda.max_memory_allocated(), "peak_reserved": torch.cuda.max_memory_reserved(),
                      "retries": stats.get("num_alloc_retries", 0), "cudaMallocs": stats.get("segment.all.allocated", 0)}))


if __name__ == "__main__":  # a script: importing it (as the compile test does with every lessons module) runs nothing
    main()
