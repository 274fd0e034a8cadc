"""Notebook 07's kernels (lessons/nb07_matmul.py), at the tile sizes the GPU run autotunes among."""

from compile_targets import Target

M = "lessons.nb07_matmul"
STRIDES = {"stride_am": "i32", "stride_bk": "i32", "stride_cm": "i32"}
UNIT_STRIDES = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "GROUP_M": 8}

TARGETS = [
    Target(M, "blocked_matmul_kernel", {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
                                        "K": "i32", **STRIDES},
           {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, **UNIT_STRIDES}, num_warps=8),
    Target(M, "grouped_matmul_kernel", {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
                                        "K": "i32", **STRIDES},
           {**TILE, **UNIT_STRIDES}, num_warps=8),
    Target(M, "matmul_kernel", {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32",
                                "K": "i32", **STRIDES},
           {**TILE, **UNIT_STRIDES, "ACTIVATION": "gelu_tanh"}, num_warps=8),
    Target(M, "matmul_kernel", {"a_ptr": "*bf16", "b_ptr": "*bf16", "c_ptr": "*bf16", "M": "i32", "N": "i32",
                                "K": "i32", **STRIDES},
           {**TILE, **UNIT_STRIDES, "ACTIVATION": ""}, num_warps=8),
    Target(M, "tile_order_kernel", {"order_ptr": "*i32", "M": "i32", "N": "i32"}, {"GROUP_M": 4}),
    Target(M, "matmul_tma_kernel", {"a_desc": "tensordesc<fp16[128, 64]>", "b_desc": "tensordesc<fp16[64, 256]>",
                                    "c_desc": "tensordesc<fp16[128, 256]>", "M": "i32", "N": "i32", "K": "i32"},
           {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8, "ACTIVATION": ""},
           archs=("sm_90",), num_warps=8,
           why_not_all="TMA needs sm_90; on sm_75/sm_80 notebook 07's matmul() takes the blocked kernel"),
    Target(M, "empty_kernel", {"x_ptr": "*fp32"}),
]
