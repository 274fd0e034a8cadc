"""The script notebook 15 profiles with Nsight Compute: the Triton forward once, at the headline size.

    python lessons/nb15_ncu_child.py [causal]

``ncu --profile-from-start off`` (what `course_utils.profiling.run_ncu` passes) profiles only the launches
between ``torch.cuda.profiler.start()`` and ``stop()``: after the autotuning and a warm-up.
"""

import sys

import torch


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("this script profiles a CUDA kernel: it needs a CUDA GPU")
    from lessons.nb15_flash_attention import flash_attention

    causal = len(sys.argv) > 1 and sys.argv[1] == "causal"
    torch.manual_seed(0)
    q, k, v = (torch.randn(4, 32, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    with torch.no_grad():
        for _ in range(3):  # autotuning and warm-up, outside the profiled window
            flash_attention(q, k, v, causal)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()
        flash_attention(q, k, v, causal)
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":
    main()
