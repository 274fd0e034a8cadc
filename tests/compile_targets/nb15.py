"""Notebook 15's kernels (lessons/nb15_flash_attention.py), at tiles the H100 run autotunes among (head dims 64
and 128), causal and not, bf16 on sm_80/sm_90 and fp16 on every GPU; the fp64 forward that gradcheck runs."""

from compile_targets import Target

M = "lessons.nb15_flash_attention"
FLAGS = {"PRECISION": "tf32", "FP64": False}
BF16_FROM_SM80 = "bf16 tensor cores start at sm_80: on a T4 (sm_75) the fp16 target above compiles instead"
TMA_ONLY = ("TMA (tensor descriptors) and warp specialization are Hopper (sm_90) features: elsewhere "
            "flash_attention() runs the pointer kernel")


def io(dtype: str, *names: str) -> dict:
    return {n: f"*{dtype}" for n in names}


def fwd(dtype: str) -> dict:
    return {**io(dtype, "Q", "K", "V", "O"), "LSE": "*fp32", "sm_scale": "fp32", "N_CTX": "i32", "N_KEY": "i32"}


def bwd(dtype: str, *grads: str) -> dict:
    return {**io(dtype, "Q", "K", "V", "DO"), "LSE": "*fp32", "DELTA": "*fp32", **io(dtype, *grads),
            "sm_scale": "fp32", "N_CTX": "i32", "N_KEY": "i32"}


def tma(dtype: str, bm: int, bn: int, d: int) -> dict:
    return {"q_desc": f"tensordesc<{dtype}[1, {bm}, {d}]>", "k_desc": f"tensordesc<{dtype}[1, {bn}, {d}]>",
            "v_desc": f"tensordesc<{dtype}[1, {bn}, {d}]>", "o_desc": f"tensordesc<{dtype}[1, {bm}, {d}]>",
            "LSE": "*fp32", "sm_scale": "fp32", "N_CTX": "i32"}


TARGETS = [
    Target(M, "attn_fwd_kernel", fwd("fp16"),
           {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": True, **FLAGS}, num_warps=4, num_stages=3),
    Target(M, "attn_fwd_kernel", fwd("bf16"),
           {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": False, **FLAGS}, archs=("sm_80", "sm_90"),
           num_warps=8, num_stages=3, why_not_all=BF16_FROM_SM80),
    Target(M, "attn_fwd_kernel", {**fwd("fp64"), "LSE": "*fp64", "sm_scale": "fp64"},
           {"HEAD_DIM": 16, "BLOCK_M": 16, "BLOCK_N": 16, "CAUSAL": True, "PRECISION": "ieee", "FP64": True},
           num_warps=4, num_stages=1),
    Target(M, "attn_bwd_preprocess_kernel", {**io("bf16", "O", "DO"), "DELTA": "*fp32", "N_CTX": "i32"},
           {"HEAD_DIM": 128, "BLOCK_M": 128, "FP64": False}),
    Target(M, "attn_bwd_dkdv_kernel", bwd("fp16", "DK", "DV"),
           {"HEAD_DIM": 64, "BLOCK_M": 32, "BLOCK_N": 128, "CAUSAL": True, **FLAGS}, num_warps=4, num_stages=3),
    Target(M, "attn_bwd_dkdv_kernel", bwd("bf16", "DK", "DV"),
           {"HEAD_DIM": 128, "BLOCK_M": 32, "BLOCK_N": 128, "CAUSAL": False, **FLAGS}, archs=("sm_80", "sm_90"),
           num_warps=8, num_stages=3, why_not_all=BF16_FROM_SM80),
    Target(M, "attn_bwd_dq_kernel", bwd("fp16", "DQ"),
           {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 32, "CAUSAL": False, **FLAGS}, num_warps=4, num_stages=3),
    Target(M, "attn_bwd_dq_kernel", bwd("bf16", "DQ"),
           {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 32, "CAUSAL": True, **FLAGS}, archs=("sm_80", "sm_90"),
           num_warps=8, num_stages=3, why_not_all=BF16_FROM_SM80),
    Target(M, "attn_fwd_tma_kernel", tma("bf16", 128, 64, 128),
           {"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": True, "WARP_SPECIALIZE": False},
           archs=("sm_90",), num_warps=8, num_stages=3, why_not_all=TMA_ONLY),
    Target(M, "attn_fwd_tma_kernel", tma("fp16", 128, 64, 64),
           {"HEAD_DIM": 64, "BLOCK_M": 128, "BLOCK_N": 64, "CAUSAL": False, "WARP_SPECIALIZE": True},
           archs=("sm_90",), num_warps=8, num_stages=3, why_not_all=TMA_ONLY),  # Triton 3.7 fails with 4 warps
]
