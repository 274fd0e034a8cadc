"""Notebook 12's exported helpers (lessons/nb12_lora.py): the fused add-mul-activation (Triton, CUDA source),
the fused LoRA linear (pointer and TMA kernels) and its autograd Function. On a CPU the Triton kernels run in
the interpreter at tiny sizes; GPU-marked tests run the same checks compiled, at larger sizes."""

import re

import pytest
import torch

import course_utils as cu  # first: on a CPU it switches Triton to its interpreter
from course_utils.cuda_build import BuildError, compile_cuda
from course_utils.toolchain import find_nvcc
from lessons import nb12_lora as nb

TOL = {torch.float16: dict(rtol=4e-3, atol=4e-3), torch.bfloat16: dict(rtol=2e-2, atol=3e-2)}


def lora_inputs(m, n, k, r, dtype, *, w_transposed=False, bias=True, seed=0, device=None):
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *shape, std=1.0: (torch.randn(*shape, generator=gen) * std).to(device or cu.DEVICE, dtype)
    x = rnd(m, k)
    W = rnd(k, n, std=k**-0.5).t() if w_transposed else rnd(n, k, std=k**-0.5)
    return x, W, rnd(n, std=0.1) if bias else None, rnd(r, k, std=k**-0.5), rnd(n, r, std=r**-0.5)


# ------------------------------------------------------------------------------- add-mul-activation
@pytest.mark.parametrize("activation", nb.ACTIVATIONS)
@pytest.mark.parametrize("dtype", nb.ELEMENTWISE_DTYPES, ids=str)
def test_add_mul_act_matches_fp32_reference(activation, dtype):
    cases = cu.awkward_cases([(1, 1), (7, 13), (3, 1025)], dtypes=(dtype,), n_inputs=2)
    report = cu.check(lambda b, l: nb.add_mul_act(b, l, -0.75, activation),
                      lambda b, l: nb.add_mul_act_reference(b, l, -0.75, activation), cases)
    assert report.passed, str(report)


def test_add_mul_act_relu_clamps_and_scales():
    base = torch.tensor([1.0, -3.0, 0.5, 2.0], device=cu.DEVICE)
    lora = torch.tensor([1.0, 1.0, -1.0, -2.0], device=cu.DEVICE)
    assert nb.add_mul_act(base, lora, 2.0, "relu").tolist() == [3.0, 0.0, 0.0, 0.0]
    assert nb.add_mul_act(base, lora, 2.0, "none").tolist() == [3.0, -1.0, -1.5, -2.0]


def test_add_mul_act_empty_and_views():
    empty = torch.empty(0, 5, device=cu.DEVICE)
    assert nb.add_mul_act(empty, empty).shape == (0, 5)
    base = torch.randn(6, 8, device=cu.DEVICE)
    lora = torch.randn(8, 6, device=cu.DEVICE).t()  # a transposed view: copied, same result
    torch.testing.assert_close(nb.add_mul_act(base, lora, 0.5, "silu"),
                               nb.add_mul_act_reference(base, lora, 0.5, "silu"))


@pytest.mark.parametrize("call, error, words", [
    (lambda t: nb.add_mul_act(t, t.t()), ValueError, "same shape"),
    (lambda t: nb.add_mul_act(t, t.half()), TypeError, "one dtype"),
    (lambda t: nb.add_mul_act(t.double(), t.double()), TypeError, "dtype must be one of"),
    (lambda t: nb.add_mul_act(t.long(), t.long()), TypeError, "dtype must be one of"),
    (lambda t: nb.add_mul_act(t, t.to("meta")), ValueError, "one device"),
    (lambda t: nb.add_mul_act(t.to("meta"), t.to("meta")), ValueError, "must be on the"),
    (lambda t: nb.add_mul_act(t, t, 1.0, "tanh"), ValueError, "activation must be one of"),
    (lambda t: nb.add_mul_act(t, t, True), TypeError, "scale"),
    (lambda t: nb.add_mul_act(t, t, float("nan")), TypeError, "scale"),
    (lambda t: nb.add_mul_act(t, t.tolist()), TypeError, "torch.Tensor"),
], ids=["shape", "mixed-dtype", "float64", "int64", "mixed-device", "wrong-device", "activation", "bool-scale",
        "nan-scale", "not-a-tensor"])
def test_add_mul_act_rejects_bad_input(call, error, words):
    with pytest.raises(error, match=words):
        call(torch.ones(4, 8, device=cu.DEVICE))


@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_cuda_source_compiles_with_vector_accesses():
    from torch.utils.cpp_extension import COMMON_NVCC_FLAGS

    ptx = compile_cuda(nb.ADD_MUL_ACT_CU, arch="sm_90", extra_flags=[*COMMON_NVCC_FLAGS, "-std=c++17"])
    assert len(re.findall(r"\.entry\s+\w+\(", ptx)) == 30  # 3 dtypes x 5 activations x vector/scalar
    lines = [line.strip() for line in ptx.splitlines()]
    assert sum(line.startswith("ld.global.nc.v4") for line in lines) == 30  # 2 inputs x 15 vector kernels
    assert sum(line.startswith("st.global.v4") for line in lines) == 15


@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
def test_cuda_source_compile_error_is_reported():
    with pytest.raises(BuildError, match="error"):
        compile_cuda(nb.ADD_MUL_ACT_CU.replace("fmaxf(y, 0.0f)", "fmaxf(y, 0.0f"), arch="sm_90")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message a machine without a GPU gives")
def test_add_mul_act_cuda_without_gpu_says_so():
    t = torch.ones(3)
    with pytest.raises(BuildError, match="CUDA is not available"):
        nb.add_mul_act_cuda(t, t)


@pytest.mark.gpu
@pytest.mark.parametrize("activation", nb.ACTIVATIONS)
def test_add_mul_act_cuda_matches_reference(activation):
    cases = cu.awkward_cases([(1, 1), (7, 13), (33, 1025), (4099,)], dtypes=nb.ELEMENTWISE_DTYPES, n_inputs=2)
    cases.append(cu.Case("misaligned", lambda: tuple(torch.randn(4100, device="cuda")[1:] for _ in range(2))))
    report = cu.check(lambda b, l: nb.add_mul_act_cuda(b, l, 0.5, activation),
                      lambda b, l: nb.add_mul_act_reference(b, l, 0.5, activation), cases)
    assert report.passed, str(report)


@pytest.mark.gpu
def test_triton_add_mul_act_at_a_large_size():
    base, lora = torch.randn(2, 2**22 + 3, device="cuda", dtype=torch.bfloat16)
    torch.testing.assert_close(nb.add_mul_act(base, lora, 2.0, "gelu"),
                               nb.add_mul_act_reference(base, lora, 2.0, "gelu"))


# ------------------------------------------------------------------------------------- LoRA linear
@pytest.mark.parametrize("dtype", nb.LORA_DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 1, 1, 1), (17, 33, 65, 3), (40, 24, 72, 8), (33, 40, 40, 20)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("w_transposed", [False, True], ids=["row-major", "W-transposed"])
@pytest.mark.parametrize("xa_in_loop", [True, False], ids=["xa-in-loop", "xa-first"])
def test_lora_linear_matches_fp32_reference(dtype, shape, w_transposed, xa_in_loop):
    inputs = lora_inputs(*shape, dtype, w_transposed=w_transposed)
    out = nb.lora_linear(*inputs, 1.5, xa_in_loop=xa_in_loop)
    assert out.dtype == dtype and out.shape == (shape[0], shape[1])
    torch.testing.assert_close(out, nb.lora_reference(*inputs, 1.5), **TOL[dtype])


@pytest.mark.parametrize("activation", nb.ACTIVATIONS[1:])
def test_lora_linear_activations_without_bias(activation):
    inputs = lora_inputs(40, 24, 72, 8, torch.bfloat16, bias=False)
    torch.testing.assert_close(nb.lora_linear(*inputs, 2.0, activation),
                               nb.lora_reference(*inputs, 2.0, activation), **TOL[torch.bfloat16])


def test_lora_linear_takes_both_kernels():
    row_major = lora_inputs(40, 24, 72, 8, torch.float16)
    assert nb.uses_tma(*(t for i, t in enumerate(row_major) if i != 2)) == nb.HAS_TMA
    transposed = lora_inputs(40, 24, 72, 8, torch.float16, w_transposed=True)
    assert not nb.uses_tma(transposed[1])


def test_lora_linear_keeps_leading_dimensions():
    x, W, b, A, B = lora_inputs(12, 24, 32, 4, torch.bfloat16)
    out = nb.lora_linear(x.reshape(3, 4, 32), W, b, A, B, 0.5)
    assert out.shape == (3, 4, 24)
    torch.testing.assert_close(out.reshape(12, 24), nb.lora_linear(x, W, b, A, B, 0.5))


def test_lora_linear_computes_x_a_first_by_default():
    inputs = lora_inputs(40, 24, 72, 8, torch.bfloat16)
    assert torch.equal(nb.lora_linear(*inputs, 2.0), nb.lora_linear(*inputs, 2.0, xa_in_loop=False))


@pytest.mark.parametrize("xa_in_loop", [True, False], ids=["xa-in-loop", "xa-first"])
def test_lora_forward_keeps_x_a_and_the_pre_activation_for_training(xa_in_loop):
    x, W, b, A, B = lora_inputs(33, 40, 48, 8, torch.float16)
    out, xa, pre = nb.lora_forward(x, W, b, A, B, 1.5, "gelu", xa_in_loop=xa_in_loop, store_xa=True, store_pre=True)
    ref_out, ref_xa, ref_pre = nb.lora_forward_reference(*(t.float() for t in (x, W, b, A, B)), 1.5, "gelu")
    for ours, ref in ((out, ref_out), (xa, ref_xa), (pre, ref_pre)):
        assert ours.dtype == torch.float16
        torch.testing.assert_close(ours.float(), ref, **TOL[torch.float16])


def test_config_text_gives_tile_warps_and_stages():
    import triton

    config = triton.Config({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, num_warps=8, num_stages=3)
    assert nb.config_text(config) == "128x256x64, 8 warps, 3 stages"
    assert nb.config_text(triton.Config({"BLOCK_M": 32, "BLOCK_N": 32, "BLOCK_K": 32}, num_warps=4, num_stages=1)) \
        == "32x32x32, 4 warps, 1 stage"


def test_lora_linear_config_names_the_kernel_and_the_autotuners_choice():
    inputs = lora_inputs(40, 24, 72, 8, torch.bfloat16)
    kernel = "TMA" if nb.HAS_TMA else "pointer"
    for xa_in_loop in (False, True):
        text = nb.lora_linear_config(*inputs, 2.0, xa_in_loop=xa_in_loop)
        assert re.fullmatch(rf"{kernel} kernel, \d+x\d+x\d+, \d+ warps, \d+ stages?", text), text
        chosen = (nb.lora_linear_tma_tuned if nb.HAS_TMA else nb.lora_linear_tuned).best_config
        assert text.endswith(nb.config_text(chosen))
    transposed = lora_inputs(40, 24, 72, 8, torch.bfloat16, w_transposed=True)
    assert nb.lora_linear_config(*transposed, 2.0).startswith("pointer kernel, ")
    assert nb.lora_linear_config(*lora_inputs(0, 24, 72, 8, torch.bfloat16), 2.0) == "no launch (empty output)"


def test_merged_weight_gives_the_same_layer():
    x, W, b, A, B = lora_inputs(33, 40, 48, 8, torch.float16)
    merged = (W.float() + 2.0 * B.float() @ A.float()).to(torch.float16)
    torch.testing.assert_close(nb.lora_linear(x, W, b, A, B, 2.0), nb.lora_reference(x, merged, b, A, B * 0, 0.0),
                               rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("change, error, words", [
    (lambda x, W, b, A, B: (x[:, :16], W, b, A, B), ValueError, "features"),
    (lambda x, W, b, A, B: (x, W, b, A[:, :16], B), ValueError, "A must be r x d_in"),
    (lambda x, W, b, A, B: (x, W, b, A, B[:20]), ValueError, "B must be d_out x r"),
    (lambda x, W, b, A, B: (x, W, b, A, B[:, :3]), ValueError, "ranks differ"),
    (lambda x, W, b, A, B: (x, W, b, A[:1].expand(200, 32), B[:, :1].expand(24, 200)), ValueError, "rank must be"),
    (lambda x, W, b, A, B: (x, W, b[:5], A, B), ValueError, "b must have shape"),
    (lambda x, W, b, A, B: (x[0], W, b, A, B), ValueError, r"x must be \(\.\.\., d_in\)"),
    (lambda x, W, b, A, B: (x.float(), W.float(), b.float(), A.float(), B.float()), TypeError, "dtype must be one of"),
    (lambda x, W, b, A, B: (x.half(), W, b, A, B), TypeError, "one dtype"),
    (lambda x, W, b, A, B: (x, W, b, A.to("meta"), B), ValueError, "one device"),
    (lambda x, W, b, A, B: (x, W, b, A, B.tolist()), TypeError, "B must be a torch.Tensor"),
], ids=["x-width", "A-width", "B-height", "rank-mismatch", "rank-too-large", "bias", "x-1d", "fp32", "mixed-dtype",
        "mixed-device", "B-not-a-tensor"])
def test_lora_linear_rejects_bad_input(change, error, words):
    inputs = lora_inputs(8, 24, 32, 4, torch.bfloat16)
    with pytest.raises(error, match=words):
        nb.lora_linear(*change(*inputs), 1.0)


def test_lora_linear_rejects_bad_options():
    inputs = lora_inputs(8, 24, 32, 4, torch.bfloat16)
    with pytest.raises(ValueError, match="activation"):
        nb.lora_linear(*inputs, 1.0, "tanh")
    with pytest.raises(TypeError, match="scale"):
        nb.lora_linear(*inputs, torch.tensor(1.0))


# ------------------------------------------------------------------------------------------ autograd
@pytest.mark.parametrize("activation", nb.ACTIVATIONS)
def test_gradcheck_of_the_function_in_float64(activation):
    gen = torch.Generator().manual_seed(3)
    x, A, B = (torch.randn(*s, generator=gen, dtype=torch.float64).to(cu.DEVICE).requires_grad_()
               for s in [(5, 7), (3, 7), (6, 3)])
    W, b = (torch.randn(*s, generator=gen, dtype=torch.float64).to(cu.DEVICE) for s in [(6, 7), (6,)])
    assert torch.autograd.gradcheck(
        lambda x, A, B: nb.lora_linear_trainable(x, W, b, A, B, 0.7, activation, reference=True), (x, A, B))


def _grads(fn, inputs, grad_out, dtype, activation, x_grad=True):
    x, W, b, A, B = (None if t is None else t.detach().to(dtype) for t in inputs)
    x = x.clone().requires_grad_(x_grad)
    A, B = A.clone().requires_grad_(), B.clone().requires_grad_()
    out = fn(x, W, b, A, B, 1.5, activation)
    out.backward(grad_out.to(dtype))
    return {"out": out, "dx": x.grad, "dA": A.grad, "dB": B.grad}


@pytest.mark.parametrize("dtype", nb.LORA_DTYPES, ids=str)
@pytest.mark.parametrize("activation", ["none", "sigmoid", "gelu", "silu"])
def test_kernel_gradients_match_eager_autograd(dtype, activation):
    inputs = lora_inputs(33, 40, 48, 8, dtype)
    grad_out = torch.randn(33, 40, generator=torch.Generator().manual_seed(1)).to(cu.DEVICE, dtype)
    ours = _grads(nb.lora_linear_trainable, inputs, grad_out, dtype, activation)
    theirs = _grads(nb.lora_eager, inputs, grad_out, torch.float32, activation)
    tol = TOL[dtype]["rtol"]
    for key in ours:
        assert ours[key].dtype == dtype
        torch.testing.assert_close(ours[key].float(), theirs[key], rtol=tol, atol=tol * theirs[key].abs().max().item())


def test_gradients_without_x_grad():
    inputs = lora_inputs(33, 40, 48, 8, torch.bfloat16)
    grad_out = torch.randn(33, 40, generator=torch.Generator().manual_seed(2)).to(cu.DEVICE, torch.bfloat16)
    ours = _grads(nb.lora_linear_trainable, inputs, grad_out, torch.bfloat16, "none", x_grad=False)
    theirs = _grads(nb.lora_eager, inputs, grad_out, torch.float32, "none", x_grad=False)
    assert ours["dx"] is None
    for key in ("dA", "dB"):
        scale = theirs[key].abs().max().item()
        torch.testing.assert_close(ours[key].float(), theirs[key], rtol=2e-2, atol=2e-2 * scale)


def test_trainable_refuses_trainable_base_weights():
    x, W, b, A, B = lora_inputs(8, 24, 32, 4, torch.bfloat16)
    with pytest.raises(ValueError, match="W must not require grad"):
        nb.lora_linear_trainable(x, W.requires_grad_(), b, A, B)
    with pytest.raises(ValueError, match="b must not require grad"):
        nb.lora_linear_trainable(x, W.detach(), b.requires_grad_(), A, B)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", nb.LORA_DTYPES, ids=str)
def test_lora_linear_and_gradients_at_a_gpu_size(dtype):
    inputs = lora_inputs(1000, 768, 1024, 16, dtype, device="cuda")
    torch.testing.assert_close(nb.lora_linear(*inputs, 2.0), nb.lora_reference(*inputs, 2.0), **TOL[dtype])
    torch.testing.assert_close(nb.lora_linear(*inputs, 2.0, xa_in_loop=True), nb.lora_reference(*inputs, 2.0),
                               **TOL[dtype])
    grad_out = torch.randn(1000, 768, device="cuda").to(dtype)
    ours = _grads(nb.lora_linear_trainable, inputs, grad_out, dtype, "none")
    theirs = _grads(nb.lora_eager, inputs, grad_out, torch.float32, "none")
    for key in ours:
        scale = theirs[key].abs().max().item()
        torch.testing.assert_close(ours[key].float(), theirs[key], rtol=2e-2, atol=2e-2 * scale)
