"""Notebook 12's kernels (lessons/nb12_lora.py), at the tiles and options the notebook launches."""

from compile_targets import Target

M = "lessons.nb12_lora"
ELEMENTWISE = {"base_ptr": "*fp32", "lora_ptr": "*fp32", "out_ptr": "*fp32", "scale": "fp32", "n": "i32"}
HALF = {name: "*bf16" for name in ("base_ptr", "lora_ptr", "out_ptr")}
SIZES = {"M": "i32", "N": "i32", "K": "i32", "R": "i32", "scale": "fp32"}
POINTERS = ("x_ptr", "w_ptr", "a_ptr", "b_ptr", "bias_ptr", "out_ptr", "xa_ptr", "pre_ptr")
STRIDES = {"stride_xm": "i32", "stride_wn": "i32", "stride_ar": "i32", "stride_bn": "i32"}
# row-major operands: the JIT turns these unit strides into constants
UNIT_STRIDES = {"stride_xk": 1, "stride_wk": 1, "stride_ak": 1, "stride_br": 1}
TRAINING = {"XA_IN_LOOP": True, "HAS_BIAS": True, "STORE_XA": True, "STORE_PRE": True, "ACTIVATION": "gelu"}
INFERENCE = {"XA_IN_LOOP": False, "HAS_BIAS": True, "STORE_XA": False, "STORE_PRE": False, "ACTIVATION": "none"}


def lora_pointers(dtype: str) -> dict[str, str]:
    return {**{name: f"*{dtype}" for name in POINTERS}, **SIZES, **STRIDES}


def tma_target(xa_in_loop: bool) -> Target:
    """lora_linear_tma_kernel at the headline tile, bf16, with x A^T in the K loop or read in the epilogue."""
    tiles = {"x_desc": (128, 64), "w_desc": (256, 64), "a_desc": (16, 64), "b_desc": (256, 16), "out_desc": (128, 256)}
    signature = {name: f"tensordesc<bf16[{rows}, {cols}]>" for name, (rows, cols) in tiles.items()}
    signature |= {"bias_ptr": "*bf16", "xa_ptr": "*bf16", "pre_ptr": "*bf16", **SIZES}
    return Target(M, "lora_linear_tma_kernel", signature,
                  {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "BLOCK_R": 16, "GROUP_M": 8, **INFERENCE,
                   "XA_IN_LOOP": xa_in_loop}, archs=("sm_90",), num_warps=8,
                  why_not_all="TMA needs sm_90; on sm_75/sm_80 lora_linear() takes the pointer kernel")


TARGETS = [
    Target(M, "add_mul_act_kernel", ELEMENTWISE, {"BLOCK": 1024, "ACTIVATION": "relu"}),
    Target(M, "add_mul_act_kernel", {**ELEMENTWISE, **HALF}, {"BLOCK": 2048, "ACTIVATION": "gelu"}),
    # the pointer kernel with everything on (x A^T in the loop, stores for the backward pass, an activation),
    # at the small tile the checks and the backward pass's small problems use
    Target(M, "lora_linear_kernel", lora_pointers("fp16"),
           {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "BLOCK_R": 16, "GROUP_M": 8, **UNIT_STRIDES, **TRAINING}),
    Target(M, "lora_linear_kernel", lora_pointers("bf16"),
           {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "BLOCK_R": 64, "GROUP_M": 8, **UNIT_STRIDES, **INFERENCE},
           archs=("sm_80", "sm_90"), num_warps=8,
           why_not_all="bf16 tensor cores start at sm_80: on a T4 (sm_75) use fp16"),
    tma_target(xa_in_loop=True),  # the alternative: x A^T computed in the K loop
    tma_target(xa_in_loop=False),  # lora_linear's default at the headline shape: x A^T first, read in the epilogue
]
