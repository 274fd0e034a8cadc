"""Notebook 14's kernels (lessons/nb14_hopper_matmul.py), at tile sizes the H100 run autotunes among.

The persistent kernels build TMA tensor descriptors in the kernel and the fp8 ones multiply e4m3 tiles
on the tensor cores: both are Hopper (sm_90) features. Each appears twice: the pipelined form (8 warps,
flattened tile loop) and the warp-specialized form (4 warps, loop not flattened: the only form Triton
warp-specializes on sm_90).
"""

from compile_targets import Target

M = "lessons.nb14_hopper_matmul"
SIZES = {"M": "i32", "N": "i32", "K": "i32"}
TILE = {"BLOCK_M": 128, "BLOCK_N": 256, "GROUP_M": 8}
PIPELINED = {"SUBTILES": 2, "FLATTEN": True, "WARP_SPECIALIZE": False}
WARP_SPECIALIZED = {"SUBTILES": 1, "FLATTEN": False, "WARP_SPECIALIZE": True}
TMA_ONLY = ("TMA is Hopper hardware (sm_90): on older GPUs Triton would emulate the tensor descriptors with "
            "plain loads, so notebook 14's matmul_persistent takes notebook 07's pointer kernel there instead")
FP8_ONLY = "fp8 e4m3 tensor-core MMA and TMA need sm_90 (of the course's GPUs, the H100)"
F16 = {"a_ptr": "*fp16", "w_ptr": "*fp16", "c_ptr": "*fp16", **SIZES}
F8 = {"a_ptr": "*fp8e4nv", "w_ptr": "*fp8e4nv", "c_ptr": "*bf16", "a_scale_ptr": "*fp32", "w_scale_ptr": "*fp32",
      **SIZES}
SKINNY = {"part_ptr": "*fp32", "count_ptr": "*i32", **SIZES, "stride_xm": "i32", "stride_wn": "i32", "stride_cm": "i32"}

TARGETS = [
    Target(M, "matmul_persistent_kernel", F16, {**TILE, "BLOCK_K": 64, **PIPELINED},
           archs=("sm_90",), num_warps=8, num_stages=4, why_not_all=TMA_ONLY),
    Target(M, "matmul_persistent_kernel", {**F16, "a_ptr": "*bf16", "w_ptr": "*bf16", "c_ptr": "*bf16"},
           {**TILE, "BLOCK_K": 64, **WARP_SPECIALIZED}, archs=("sm_90",), num_warps=4, num_stages=3,
           why_not_all=TMA_ONLY),
    Target(M, "matmul_fp8_kernel", F8, {**TILE, "BLOCK_K": 128, **PIPELINED, "ROWWISE": True},
           archs=("sm_90",), num_warps=8, num_stages=3, why_not_all=FP8_ONLY),
    Target(M, "matmul_fp8_kernel", F8, {**TILE, "BLOCK_K": 128, **WARP_SPECIALIZED, "ROWWISE": False},
           archs=("sm_90",), num_warps=4, num_stages=3, why_not_all=FP8_ONLY),
    Target(M, "skinny_matmul_kernel", {"x_ptr": "*fp16", "w_ptr": "*fp16", "c_ptr": "*fp16", **SKINNY},
           {"BLOCK_N": 64, "BLOCK_M": 16, "BLOCK_K": 256, "SPLIT_K": 4}, num_warps=4, num_stages=4),
    Target(M, "skinny_matmul_kernel", {"x_ptr": "*bf16", "w_ptr": "*bf16", "c_ptr": "*bf16", **SKINNY},
           {"BLOCK_N": 128, "BLOCK_M": 64, "BLOCK_K": 128, "SPLIT_K": 1}, archs=("sm_80", "sm_90"), num_warps=4,
           num_stages=3, why_not_all="bf16 tensor cores start at sm_80: on a T4 (sm_75) use fp16"),
]
