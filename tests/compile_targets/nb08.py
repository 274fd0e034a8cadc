"""Notebook 08's kernels (lessons/nb08_debugging.py): the planted bugs compile too, which is the point."""

from compile_targets import Target

M = "lessons.nb08_debugging"
VEC = {"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32"}
GRID_2D = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32", "stride_xr": "i32",
           "stride_xc": "i32"}
BLOCKS_2D = {"BLOCK_R": 16, "BLOCK_C": 32}

TARGETS = [
    Target(M, "add_kernel_buggy", VEC, {"BLOCK_SIZE": 1024}),
    Target(M, "add_kernel_fixed", VEC, {"BLOCK_SIZE": 1024}),
    Target(M, "double_2d_kernel_buggy", GRID_2D, BLOCKS_2D),
    Target(M, "double_2d_kernel", GRID_2D, BLOCKS_2D),
]
