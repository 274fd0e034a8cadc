"""Notebook 12's kernels (lessons/nb12_lora.py), at the tiles and options the notebook launches."""

from compile_targets import Target

M = "lessons.nb12_lora"
ELEMENTWISE = {"base_ptr": "*fp32", "lora_ptr": "*fp32", "out_ptr": "*fp32", "scale": "fp32", "n": "i32"}
HALF = {name: "*bf16" for name in ("base_ptr", "lora_ptr", "out_ptr")}
SIZES = {"M": "i32", "N": "i32", "K": "i32", "R": "i32", "scale": "fp32", "inv_scale": "fp32"}
TILE = {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}
# inference at the headline: x A^T computed first, bias, no activation; training: the pre-activation stored
INFERENCE = {"HAS_ADAPTER": True, "HAS_BIAS": True, "STORE_PRE": False, "ACTIVATION": "none"}
TRAINING = {"HAS_ADAPTER": True, "HAS_BIAS": True, "STORE_PRE": True, "ACTIVATION": "gelu"}
TMA_ONLY = ("the persistent kernel builds TMA tensor descriptors (sm_90); elsewhere lora_linear() takes "
            "lora_blocked_kernel")


def persistent(dtype: str, *, w_kn=False, in_loop=False, rank_fma=False, subtiles=2, options=INFERENCE) -> Target:
    """lora_persistent_kernel as notebook 14's pipelined configs run it (8 warps, flattened tile loop)."""
    pointers = ("x_ptr", "w_ptr", "a_ptr", "xa_ptr", "up_ptr", "bias_ptr", "out_ptr", "pre_ptr")
    strides = ("stride_xm", "stride_w", "stride_a", "stride_xam", "stride_upr", "stride_upn", "stride_bias")
    signature = {**{p: f"*{dtype}" for p in pointers}, **SIZES, **{s: "i32" for s in strides}}
    mode = {"SUBTILES": subtiles, "FLATTEN": True, "WARP_SPECIALIZE": False}
    return Target(M, "lora_persistent_kernel", signature,
                  {**TILE, "BLOCK_R": 16, **mode, "W_KN": w_kn, "XA_IN_LOOP": in_loop, "STORE_XA": in_loop,
                   "RANK_FMA": rank_fma, **options}, archs=("sm_90",), num_warps=8,
                  num_stages=4 if subtiles == 2 else 3, why_not_all=TMA_ONLY)


def blocked(dtype: str, tile: dict, options: dict, **kw) -> Target:
    pointers = ("x_ptr", "w_ptr", "xa_ptr", "up_ptr", "bias_ptr", "out_ptr", "pre_ptr")
    strides = ("stride_xm", "stride_wn", "stride_xam", "stride_upr", "stride_upn", "stride_bias")
    signature = {**{p: f"*{dtype}" for p in pointers}, **SIZES, **{s: "i32" for s in strides}}
    # x row-major and W^T read from W's rows: the JIT turns these unit strides into constants
    return Target(M, "lora_blocked_kernel", signature,
                  {**tile, "stride_xk": 1, "stride_wk": 1, "BLOCK_R": 16, **options}, **kw)


TARGETS = [
    Target(M, "add_mul_act_kernel", ELEMENTWISE, {"BLOCK": 1024, "ACTIVATION": "relu"}),
    Target(M, "add_mul_act_kernel", {**ELEMENTWISE, **HALF}, {"BLOCK": 2048, "ACTIVATION": "gelu"}),
    persistent("bf16"),  # lora_linear's default at the headline shape, the adapter by a second dot
    persistent("bf16", rank_fma=True, subtiles=1),  # ... or as rank-1 updates on the CUDA cores
    persistent("bf16", in_loop=True),  # the measured alternative: x A^T in the K loop
    persistent("bf16", w_kn=True, rank_fma=True, options={**INFERENCE, "HAS_BIAS": False}),  # dx = g W + s (g B) A
    persistent("fp16", subtiles=1, options=TRAINING),  # a training forward: pre-activation and GELU
    # any GPU: the small tile of the checks (fp16 for the T4), and the big one (bf16 needs sm_80)
    blocked("fp16", {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "GROUP_M": 8}, TRAINING),
    blocked("bf16", TILE, {**INFERENCE, "ACTIVATION": "relu"}, archs=("sm_80", "sm_90"), num_warps=8, num_stages=3,
            why_not_all="bf16 tensor cores start at sm_80: on a T4 (sm_75) use fp16"),
]
