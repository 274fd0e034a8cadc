"""The script notebook 04c profiles with Nsight Compute: rung 9's kernel and cuBLAS's FP32 kernel, once each.

    python lessons/nb04_ncu_child.py [CONFIG]      # CONFIG: rung 9's shape (0, 1, 2), default 0

``ncu --profile-from-start off`` (what `course_utils.profiling.run_ncu` passes) profiles only the launches
between ``torch.cuda.profiler.start()`` and ``stop()``: the two kernels, after the build, the random inputs
and a warm-up, so no kernel-name filter is needed (cuBLAS's kernel names change between versions).
"""

import sys

import torch


def main() -> None:
    if not torch.cuda.is_available():
        sys.exit("this script profiles CUDA kernels: it needs a CUDA GPU")
    from lessons import nb04_gemm as gemm

    config = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    ext = gemm.build()  # the notebook's module: same sources, same name, loaded from the build cache
    print(f"module {ext.__name__}, rung 9 in shape {config}: {gemm.TUNED_CONFIGS[config]}")
    torch.manual_seed(0)
    a, b = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    with gemm.fp32_matmul():  # cuBLAS in true FP32, as in the ladder
        for _ in range(3):  # warm-up, outside the profiled window
            ext.gemm(a, b, 9, config)
            torch.matmul(a, b)
        torch.cuda.synchronize()
        torch.cuda.profiler.start()  # profiling starts here
        ext.gemm(a, b, 9, config)  # rung 9's kernel, once
        torch.matmul(a, b)  # cuBLAS's FP32 kernel, once
        torch.cuda.synchronize()
        torch.cuda.profiler.stop()


if __name__ == "__main__":  # a script: importing it (as the compile test does with every lessons module) runs nothing
    main()
