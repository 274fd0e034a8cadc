"""Notebook 15's kernels (lessons/nb15_flash_attention.py), at the block size the notebook launches."""

from compile_targets import Target

M = "lessons.nb15_flash_attention"

TARGETS = [
    Target(M, "scale_kernel", {"x_ptr": "*fp32", "out_ptr": "*fp32", "alpha": "fp32", "n_elements": "i32"},
           {"BLOCK_SIZE": 1024}),
]
