"""Notebook 06's kernels (lessons/nb06_softmax.py), at the shapes the notebook benchmarks (rows of 8192 fp32)."""

from compile_targets import Target

M = "lessons.nb06_softmax"
P = "lessons.nb06_softmax_persistent"
ROWS = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32", "out_row_stride": "i32", "n_cols": "i32"}

TARGETS = [
    # softmax_num_warps: 4 warps up to 4096 columns, 8 at 8192, 16 beyond
    Target(M, "softmax_kernel", ROWS, {"BLOCK_SIZE": 8192}, num_warps=8),
    Target(M, "softmax_kernel", ROWS, {"BLOCK_SIZE": 32768}, num_warps=16),
    Target(M, "softmax_kernel", {**ROWS, "out_ptr": "*fp16", "in_ptr": "*fp16"}, {"BLOCK_SIZE": 8192}, num_warps=8),
    Target(M, "softmax_kernel", {**ROWS, "out_ptr": "*bf16", "in_ptr": "*bf16"}, {"BLOCK_SIZE": 8192}, num_warps=8),
    Target(P, "softmax_persistent_kernel", {**ROWS, "n_rows": "i32"}, {"BLOCK_SIZE": 8192, "NUM_STAGES": 2},
           num_warps=8),
]
