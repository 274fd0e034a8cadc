"""Notebook 11's Triton kernels (lessons/nb11_dlrm.py): the fused bias-add + ReLU and, from its exercise,
ReLU's backward pass."""

from compile_targets import Target

M = "lessons.nb11_dlrm"
BIAS_RELU = {"x_ptr": "*fp32", "bias_ptr": "*fp32", "out_ptr": "*fp32", "n_elements": "i32", "n_cols": "i32"}

TARGETS = [
    # any shape (the awkward cases): aligned pointers, sizes not known to be multiples of 16
    Target(M, "bias_relu_kernel", BIAS_RELU, {"BLOCK": 1024}),
    # the benchmark's 16384 x 2048: every size a multiple of 16, so loads and stores become 128-bit
    Target(M, "bias_relu_kernel", BIAS_RELU, {"BLOCK": 1024},
           divisible_by_16=("x_ptr", "bias_ptr", "out_ptr", "n_elements", "n_cols")),
    Target(M, "bias_relu_kernel", {**BIAS_RELU, "x_ptr": "*fp16", "bias_ptr": "*fp16", "out_ptr": "*fp16"},
           {"BLOCK": 1024}),
]
