"""Notebook 13's GIoU loss kernels (lessons/nb13_giou.py), at the tile sizes and warps the notebook launches:
bf16 boxes read directly (the "no conversion" path), fp32 (after conversion) and fp64 (gradcheck)."""

from compile_targets import Target

M = "lessons.nb13_giou"


def boxes(dtype: str, acc: str = "fp32") -> dict[str, str]:
    return {"pred_ptr": f"*{dtype}", "target_ptr": f"*{dtype}", "mask_ptr": "*i1", "sums_ptr": f"*{acc}",
            "counts_ptr": "*i32", "n_boxes": "i32"}


def backward(dtype: str, acc: str = "fp32") -> dict[str, str]:
    return {"pred_ptr": f"*{dtype}", "target_ptr": f"*{dtype}", "mask_ptr": "*i1", "grad_loss_ptr": f"*{acc}",
            "count_ptr": "*fp32", "grad_ptr": f"*{dtype}", "n_boxes": "i32"}


FINISH = {"sums_ptr": "*fp32", "counts_ptr": "*i32", "n_partials": "i32", "loss_ptr": "*fp32", "count_ptr": "*fp32"}
FP32, FP64 = dict(EPS=1e-7, FP64=False), dict(EPS=1e-7, FP64=True)

TARGETS = [
    # the direct port: one program per image (BLOCK: next power of two of max_boxes, at most 1024)
    Target(M, "giou_per_image_kernel", boxes("fp32"), {**FP32, "BLOCK": 256}),
    # the tiled forward: bf16 read directly, partial sums to a slot each; atomics (fp32); fp64 for gradcheck
    Target(M, "giou_tile_kernel", boxes("bf16"), {**FP32, "BLOCK": 512, "ATOMIC": False}),
    Target(M, "giou_tile_kernel", boxes("fp32"), {**FP32, "BLOCK": 512, "ATOMIC": True}),
    Target(M, "giou_tile_kernel", boxes("fp64", "fp64"), {**FP64, "BLOCK": 512, "ATOMIC": False}),
    Target(M, "giou_finish_kernel", FINISH, {"BLOCK": 1024}),
    # the backward kernel, gradient written in pred's dtype
    Target(M, "giou_backward_kernel", backward("bf16"), {**FP32, "BLOCK": 512}),
    Target(M, "giou_backward_kernel", backward("fp64", "fp64"), {**FP64, "BLOCK": 512}),
]
