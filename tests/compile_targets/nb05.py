"""Notebook 05's kernels (lessons/nb05_vector_add.py), at the block sizes and warps the notebook launches."""

from compile_targets import Target

M = "lessons.nb05_vector_add"
ROW = "lessons.nb05_row_kernels"
ADD = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
ROWS = {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_row_stride": "i32", "out_row_stride": "i32", "n_cols": "i32"}

TARGETS = [
    Target(M, "add_kernel_no_mask", {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32"}, {"BLOCK_SIZE": 1024}),
    Target(M, "add_kernel", ADD, {"BLOCK_SIZE": 1024}),
    # the config the autotuner picked on the H100 (2^24 fp32), and the half-precision paths
    Target(M, "add_kernel", ADD, {"BLOCK_SIZE": 4096}, num_warps=8),
    Target(M, "add_kernel", {**ADD, "x_ptr": "*fp16", "y_ptr": "*fp16", "out_ptr": "*fp16"}, {"BLOCK_SIZE": 1024}),
    Target(M, "add_kernel", {**ADD, "x_ptr": "*bf16", "y_ptr": "*bf16", "out_ptr": "*bf16"}, {"BLOCK_SIZE": 1024}),
    # deep dive 05b: a row of 4097 and of 31240 columns as one block (rowblock_warps), or chunks of 1024
    Target(ROW, "square_rowblock_kernel", ROWS, {"BLOCK_SIZE": 8192}, num_warps=16),
    Target(ROW, "square_rowblock_kernel", ROWS, {"BLOCK_SIZE": 32768}, num_warps=16),
    Target(ROW, "square_chunked_kernel", ROWS, {"BLOCK_SIZE": 1024}),
]
