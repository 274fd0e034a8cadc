"""Notebook 13's GIoU loss (lessons/nb13_giou.py): the reference against torchvision, the Triton kernels
and their gradient against autograd of the reference in every dtype, degenerate boxes, empty images and
batches, padding that holds NaN, the registered operator under torch.compile, bad input, and the CUDA
source through nvcc. On a CPU the kernels run in Triton's interpreter; the gpu-marked tests need CUDA.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import course_utils as cu  # first: on a CPU it switches Triton to its interpreter (before torchvision imports triton)

import pytest
import torch
from torchvision.ops import generalized_box_iou_loss

from lessons import nb13_giou as g

DEV = cu.DEVICE
HALF_AND_FULL = (torch.float32, torch.float16, torch.bfloat16)
ALL_DTYPES = HALF_AND_FULL + (torch.float64,)

DEGENERATE = [  # (pred, target)
    ((0.25, 0.25, 0.75, 0.5), (0.25, 0.25, 0.75, 0.5)),          # identical
    ((0.5, 0.25, 0.5, 0.75), (0.25, 0.25, 0.75, 0.75)),          # zero width
    ((0.25, 0.5, 0.75, 0.5), (0.25, 0.25, 0.75, 0.75)),          # zero height
    ((0.5, 0.5, 0.5, 0.5), (0.5, 0.5, 0.5, 0.5)),                # two points
    ((0.375, 0.375, 0.625, 0.625), (0.25, 0.25, 0.75, 0.75)),    # pred inside target
    ((0.125, 0.125, 0.875, 0.875), (0.25, 0.25, 0.75, 0.75)),    # target inside pred
    ((0.75, 0.25, 0.25, 0.75), (0.25, 0.25, 0.75, 0.75)),        # x1 > x2 as given
    ((0.0, 0.0, 0.5, 0.5), (0.5, 0.0, 1.0, 0.5)),                # touching edges
    ((0.0, 0.0, 0.125, 0.125), (0.75, 0.75, 1.0, 1.0)),          # far apart
]


def degenerate_batch(dtype):
    pred = torch.full((2, len(DEGENERATE), 4), float("nan"))
    target = torch.full((2, len(DEGENERATE), 4), float("nan"))
    pred[0] = torch.tensor([p for p, _ in DEGENERATE])
    target[0] = torch.tensor([t for _, t in DEGENERATE])
    mask = torch.zeros(2, len(DEGENERATE), dtype=torch.bool)
    mask[0] = True  # image 1 has no valid box
    return pred.to(DEV, dtype), target.to(DEV, dtype), mask.to(DEV)


def grad_of(loss_fn, pred, target, mask):
    pred = pred.detach().requires_grad_()
    loss = loss_fn(pred, target, mask)
    (grad,) = torch.autograd.grad(loss, pred)
    return loss.detach(), grad


TRITON_FORWARDS = {
    "tiles": lambda p, t, m: g.giou_loss_triton(p, t, m),
    "per_image": lambda p, t, m: g.giou_loss_triton(p, t, m, per_image=True),
    "atomic": lambda p, t, m: g.giou_forward(p, t, m, atomic=True)[0],
    "op": g.giou_loss_op,
}


# ------------------------------------------------------------------------------------ data and reference
def test_random_boxes_layout_and_seed():
    pred, target, mask = g.random_boxes(5, 40, seed=4, pad_value=-1.0, min_fill=0.5)
    assert pred.shape == target.shape == (5, 40, 4) and mask.shape == (5, 40) and mask.dtype == torch.bool
    counts = mask.sum(dim=1)
    assert ((counts >= 20) & (counts <= 40)).all()
    assert torch.equal(mask, torch.arange(40) < counts[:, None]), "valid boxes come first"
    assert (pred[~mask] == -1).all() and (target[~mask] == -1).all()
    assert (target[mask][:, 2:] > target[mask][:, :2]).all(), "targets are proper boxes"
    again = g.random_boxes(5, 40, seed=4, pad_value=-1.0, min_fill=0.5)
    assert all(torch.equal(a, b) for a, b in zip((pred, target, mask), again))
    with pytest.raises(ValueError, match="min_fill"):
        g.random_boxes(2, 3, min_fill=1.5)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_reference_matches_torchvision_on_the_valid_boxes(dtype):
    p, t, m = g.random_boxes(6, 50, dtype=dtype, seed=1, pad_value=float("nan"), device=DEV)
    ours = g.giou_loss_reference(p, t, m)
    assert ours.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    theirs = generalized_box_iou_loss(p[m].to(ours.dtype), t[m].to(ours.dtype), reduction="mean")
    torch.testing.assert_close(ours, theirs)


def test_reference_gradient_ignores_what_the_padding_holds():
    p, t, m = g.random_boxes(3, 20, seed=2, device=DEV)
    loss0, grad0 = grad_of(g.giou_loss_reference, p, t, m)
    for pad in (float("nan"), float("inf"), 1e30):
        p2 = torch.where(m[..., None], p, pad)
        t2 = torch.where(m[..., None], t, pad)
        loss, grad = grad_of(g.giou_loss_reference, p2, t2, m)
        torch.testing.assert_close(loss, loss0)
        torch.testing.assert_close(grad, grad0)
        assert (grad[~m] == 0).all()


def test_hand_gradient_matches_autograd_in_float64():
    p, t, m = g.random_boxes(4, 30, dtype=torch.float64, seed=9, device=DEV)
    dp, dt, dm = degenerate_batch(torch.float64)
    for pred, target in ((p[m], t[m]), (dp[dm], dt[dm])):
        leaf = pred.clone().requires_grad_()
        (expected,) = torch.autograd.grad(g.giou_per_box(leaf, target).sum(), leaf)
        torch.testing.assert_close(g.giou_per_box_grad(pred, target), expected)


# ------------------------------------------------------------------------------------ Triton kernels
@pytest.mark.parametrize("variant", list(TRITON_FORWARDS))
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (2, 513), (5, 64)], ids=str)
def test_triton_loss_matches_reference(variant, dtype, shape):
    p, t, m = g.random_boxes(*shape, dtype=dtype, seed=shape[1], pad_value=float("nan"), device=DEV)
    expected = g.giou_loss_reference(p, t, m)
    got = TRITON_FORWARDS[variant](p, t, m)
    assert got.dtype == expected.dtype and got.shape == ()
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("variant", ["tiles", "per_image", "op"])
def test_triton_gradient_matches_eager_autograd(dtype, variant):
    p, t, m = g.random_boxes(4, 300, dtype=dtype, seed=17, pad_value=float("nan"), device=DEV)
    loss_ref, grad_ref = grad_of(g.giou_loss_reference, p, t, m)
    loss, grad = grad_of(TRITON_FORWARDS[variant], p, t, m)
    assert grad.dtype == dtype and grad.shape == p.shape
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(grad, grad_ref)
    assert (grad[~m] == 0).all()


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_degenerate_boxes_are_finite_and_match_the_reference(dtype):
    p, t, m = degenerate_batch(dtype)
    loss_ref, grad_ref = grad_of(g.giou_loss_reference, p, t, m)
    for variant in ("tiles", "per_image"):
        loss, grad = grad_of(TRITON_FORWARDS[variant], p, t, m)
        assert torch.isfinite(loss) and torch.isfinite(grad).all()
        torch.testing.assert_close(loss, loss_ref)
        torch.testing.assert_close(grad, grad_ref)


def test_identical_boxes_split_the_gradient_at_ties_like_autograd():
    box = torch.tensor([[[0.25, 0.25, 0.75, 0.5]]], dtype=torch.float64, device=DEV)
    mask = torch.ones(1, 1, dtype=torch.bool, device=DEV)
    _, grad_ref = grad_of(g.giou_loss_reference, box, box.clone(), mask)
    _, grad = grad_of(g.giou_loss_triton, box, box.clone(), mask)
    torch.testing.assert_close(grad, grad_ref)
    assert grad.abs().max() < 1e-5, "a perfect match is a minimum: no gradient but eps's"


@pytest.mark.parametrize("batch, n_boxes", [(3, 9), (3, 0), (0, 5)])
@pytest.mark.parametrize("variant", list(TRITON_FORWARDS))
def test_a_batch_without_valid_boxes_gives_zero_not_nan(variant, batch, n_boxes):
    p, t, _ = g.random_boxes(batch, n_boxes, device=DEV)
    m = torch.zeros(batch, n_boxes, dtype=torch.bool, device=DEV)
    assert g.giou_loss_reference(p, t, m).item() == 0.0
    if variant == "atomic":
        assert TRITON_FORWARDS[variant](p, t, m).item() == 0.0
        return
    loss, grad = grad_of(TRITON_FORWARDS[variant], p, t, m)
    assert loss.item() == 0.0 and grad.shape == p.shape and (grad == 0).all()


def test_an_image_without_boxes_does_not_change_the_mean():
    p, t, m = g.random_boxes(3, 12, seed=3, device=DEV)
    empty = torch.zeros(1, 12, dtype=torch.bool, device=DEV)
    p2, t2, m2 = torch.cat([p, p[:1] * float("nan")]), torch.cat([t, t[:1]]), torch.cat([m, empty])
    for variant in ("tiles", "per_image", "op"):
        torch.testing.assert_close(TRITON_FORWARDS[variant](p2, t2, m2), g.giou_loss_reference(p, t, m))


def test_gradcheck_in_float64():
    p, t, m = g.random_boxes(2, 4, dtype=torch.float64, seed=3, device=DEV, min_fill=0.5)
    p.requires_grad_()
    assert torch.autograd.gradcheck(lambda x: g.giou_loss_triton(x, t, m), (p,))
    assert torch.autograd.gradcheck(lambda x: g.giou_loss_triton(x, t, m, per_image=True), (p,), fast_mode=True)


def test_the_two_kernel_mean_is_deterministic():
    p, t, m = g.random_boxes(16, 300, seed=8, device=DEV)
    values = {g.giou_forward(p, t, m)[0].item() for _ in range(5)}
    assert len(values) == 1


def test_non_contiguous_and_mixed_dtype_inputs():
    p, t, m = g.random_boxes(6, 40, seed=12, device=DEV)
    p_view, t_view, m_view = p[::2], t[::2], m[::2]          # strided along the batch
    torch.testing.assert_close(g.giou_loss_triton(p_view, t_view, m_view), g.giou_loss_reference(p_view, t_view, m_view))
    mixed_p, mixed_t = p.to(torch.bfloat16), t                # bf16 predictions, fp32 targets
    loss_ref, grad_ref = grad_of(g.giou_loss_reference, mixed_p, mixed_t, m)
    loss, grad = grad_of(g.giou_loss_triton, mixed_p, mixed_t, m)
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(grad, grad_ref)


# ------------------------------------------------------------------------------------ bad input
def _bad_inputs():
    p, t, m = g.random_boxes(2, 5, device=DEV)
    return {
        "mismatched shapes": ((p, t[:, :4], m), ValueError, "shape of pred"),
        "last dim not 4": ((p[..., :3], t[..., :3], m), ValueError, r"\(batch, max_boxes, 4\)"),
        "not 3-D": ((p[0], t[0], m[0]), ValueError, r"\(batch, max_boxes, 4\)"),
        "mask shape": ((p, t, m[:, :4]), ValueError, "mask must have shape"),
        "mask dtype": ((p, t, m.float()), TypeError, "bool"),
        "integer boxes": ((p.long(), t, m), TypeError, "float32, float16, bfloat16 or float64"),
        "not a tensor": ((p.tolist(), t, m), TypeError, "pred must be a torch.Tensor"),
        "device mix": ((p, t, m.to("meta")), ValueError, "one device"),
        "target requires grad": ((p, t.clone().requires_grad_(), m), ValueError, "target must not require grad"),
    }


@pytest.mark.parametrize("loss_fn", [g.giou_loss_triton, g.giou_loss_op], ids=["function", "op"])
@pytest.mark.parametrize("case", list(_bad_inputs()))
def test_bad_input_raises_a_clear_error(loss_fn, case):
    args, error, message = _bad_inputs()[case]
    with pytest.raises(error, match=message):
        loss_fn(*args)


@pytest.mark.parametrize("case", [c for c in _bad_inputs() if c != "target requires grad"])
def test_the_reference_rejects_the_same_input(case):
    args, error, message = _bad_inputs()[case]
    with pytest.raises(error, match=message):
        g.giou_loss_reference(*args)


def test_kernels_refuse_tensors_on_the_wrong_device():
    p, t, m = g.random_boxes(2, 5)
    other = "cpu" if g.KERNEL_DEVICE == "cuda" else "meta"
    with pytest.raises(ValueError, match=f"runs on {g.KERNEL_DEVICE} tensors"):
        g.giou_loss_triton(p.to(other), t.to(other), m.to(other))


# ------------------------------------------------------------------------------------ torch.library
def test_operator_registration_passes_opcheck():
    p, t, m = g.random_boxes(3, 37, seed=2, device=DEV)
    results = torch.library.opcheck(torch.ops.gpu_course_nb13.giou_forward.default, (p.requires_grad_(), t, m))
    assert all(r == "SUCCESS" for r in results.values()), results


def test_operator_traces_without_graph_break():
    p, t, m = g.random_boxes(3, 37, dtype=torch.bfloat16, seed=2, device=DEV)
    backend = "inductor" if torch.cuda.is_available() else "aot_eager"  # aot_eager: no C++ build on a CPU
    compiled = torch.compile(lambda a, b, c: g.giou_loss_op(a, b, c) * 2, fullgraph=True, backend=backend)
    loss, grad = grad_of(compiled, p, t, m)
    loss_ref, grad_ref = grad_of(lambda a, b, c: g.giou_loss_reference(a, b, c) * 2, p, t, m)
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(grad, grad_ref)


# ------------------------------------------------------------------------------------ CUDA source
def _nvcc_available() -> bool:
    return shutil.which("nvcc") is not None or Path("/usr/local/cuda/bin/nvcc").is_file()


@pytest.mark.skipif(not _nvcc_available(), reason="needs nvcc")
def test_cuda_kernels_compile_and_use_vector_loads():
    from course_utils.cuda_build import compile_cuda

    ptx = compile_cuda(g.GIOU_DEVICE_SRC, arch="sm_90")
    assert ".entry" in ptx and "giou_per_image_kernel" in ptx and "giou_backward_kernel" in ptx
    assert "ld.global.nc.v4.f32" in ptx, "float4 boxes should be read with 128-bit loads"


@pytest.mark.skipif(not _nvcc_available(), reason="needs nvcc")
def test_cuda_host_functions_compile():
    """The launchers are built only on a GPU by the notebook: nvcc checks them here (slow: torch headers)."""
    from course_utils.cuda_build import compile_cuda

    ptx = compile_cuda(g.GIOU_DEVICE_SRC + g.GIOU_HOST_SRC, arch="sm_90")
    assert "giou_per_image_kernel" in ptx


# ------------------------------------------------------------------------------------ GPU only
@pytest.mark.gpu
def test_gpu_and_cpu_tensors_mixed_raise():
    p, t, m = g.random_boxes(2, 5, device="cuda")
    with pytest.raises(ValueError, match="one device"):
        g.giou_loss_triton(p, t, m.cpu())
    with pytest.raises(ValueError, match="runs on cuda tensors"):
        g.giou_loss_triton(p.cpu(), t.cpu(), m.cpu())


@pytest.mark.gpu
def test_cuda_extension_matches_the_reference():
    from course_utils.cuda_build import build_extension

    ext = build_extension("giou_cuda", g.GIOU_CPP_DECLS, g.GIOU_DEVICE_SRC + g.GIOU_HOST_SRC,
                          functions=["giou_forward_cuda", "giou_backward_cuda"])
    p, t, m = g.random_boxes(8, 700, seed=5, pad_value=float("nan"), device="cuda")
    sums, counts = ext.giou_forward_cuda(p, t, m)
    count = counts.sum().float()
    torch.testing.assert_close(sums.sum() / count, g.giou_loss_reference(p, t, m))
    _, grad_ref = grad_of(g.giou_loss_reference, p, t, m)
    grad = ext.giou_backward_cuda(torch.ones((), device="cuda"), p, t, m, count)
    torch.testing.assert_close(grad, grad_ref)


# ------------------------------------------------------------------------------------ CUDA twin, measuring tools
def test_cuda_twins_match_the_reference_loss_and_gradient():
    p, t, m = g.random_boxes(3, 300, seed=4, pad_value=float("nan"))        # more boxes than a block's threads
    sums, counts = g.per_image_twin(p, t, m)
    assert counts.tolist() == m.sum(dim=1).tolist()
    count = counts.sum().float()
    torch.testing.assert_close(sums.sum() / count, g.giou_loss_reference(p, t, m))
    _, grad_ref = grad_of(g.giou_loss_reference, p, t, m)
    grad = g.backward_twin(torch.tensor(1.0), p, t, m, count)
    torch.testing.assert_close(grad, grad_ref)
    assert (grad[~m] == 0).all()


@pytest.mark.skipif(g.KERNEL_DEVICE != "cpu", reason="the twins take CPU tensors; on a GPU the extension is tested")
@pytest.mark.parametrize("dtype", HALF_AND_FULL, ids=str)
def test_make_cuda_loss_converts_to_fp32_and_differentiates(dtype):
    loss_fn = g.make_cuda_loss(g.per_image_twin, g.backward_twin)
    p, t, m = g.random_boxes(4, 50, dtype=dtype, seed=6)
    loss, grad = grad_of(loss_fn, p, t, m)
    loss_ref, grad_ref = grad_of(g.giou_loss_reference, p, t, m)
    assert loss.dtype == torch.float32 and grad.dtype == dtype
    torch.testing.assert_close(loss, loss_ref)
    torch.testing.assert_close(grad, grad_ref)


def test_degenerate_batch_and_loss_cases():
    p, t, m = g.degenerate_batch(torch.float64, device="cpu")
    assert m[0].all() and not m[1].any() and p[1].isnan().all()
    assert torch.isfinite(g.giou_loss_reference(p, t, m))
    cases = g.loss_cases((torch.float32,), device="cpu")
    assert len(cases) == 9 and all(len(c.make_inputs()) == 3 for c in cases)
    report = cu.check(g.giou_loss_reference, g.giou_loss_reference, cases)
    assert report.passed


def test_loss_call_gives_the_loss_or_its_gradient_on_fixed_inputs():
    calls = []
    fn = g.loss_call(lambda p, t, m: calls.append(p.requires_grad) or g.giou_loss_reference(p, t, m), 3, 8,
                     phase="forward", dtype=torch.float32, device="cpu")
    assert calls == [False], "called once at creation, on inputs that do not require grad"
    assert fn().shape == () and torch.equal(fn(), fn())
    (grad,) = g.loss_call(g.giou_loss_reference, 3, 8, dtype=torch.float32, device="cpu")()
    p, t, m = g.random_boxes(3, 8, seed=3 * 10_000 + 8)
    torch.testing.assert_close(grad, grad_of(g.giou_loss_reference, p, t, m)[1])


def test_time_modes_and_count_launches():
    fn = g.loss_call(g.giou_loss_reference, 2, 8, dtype=torch.float32, device="cpu")
    ms = g.time_modes(fn, warmup_ms=0, rep_ms=2)
    assert set(ms) == {"wall", "graph"} and all(v > 0 for v in ms.values())
    assert set(g.time_modes(fn, modes=("wall",), warmup_ms=0, rep_ms=2)) == {"wall"}
    with pytest.raises(ValueError, match="modes"):
        g.time_modes(fn, modes=("cold",))
    forward = g.count_launches(g.loss_call(g.giou_loss_reference, 2, 8, phase="forward", device="cpu"))
    both = g.count_launches(g.loss_call(g.giou_loss_reference, 2, 8, device="cpu"))
    assert 10 < forward < both, (forward, both)


def test_flags_must_be_booleans():
    p, t, m = g.random_boxes(2, 5, device=DEV)
    with pytest.raises(ValueError, match="per_image"):
        g.giou_loss_triton(p, t, m, per_image="yes")
    with pytest.raises(ValueError, match="atomic"):
        g.giou_forward(p, t, m, atomic=1)
