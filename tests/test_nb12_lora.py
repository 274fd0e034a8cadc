"""Notebook 12's code (lessons/nb12_lora.py, nb12_peft.py, nb12_bench.py): the fused add-mul-activation (Triton,
CUDA source), the fused LoRA linear (persistent TMA and pointer kernels), its autograd Function, `fuse_lora` on a
real peft model, and the bugs bad inputs found (each with a test). On a CPU the Triton kernels run in the
interpreter at tiny sizes; GPU-marked tests run the same checks compiled, at larger sizes."""

import re

import pytest
import torch

import course_utils as cu  # first: on a CPU it switches Triton to its interpreter
from course_utils import kernel_inspect as ki
from course_utils.cuda_build import BuildError, compile_cuda
from course_utils.toolchain import find_nvcc
from lessons import nb12_lora as nb

TOL = {torch.float16: dict(rtol=4e-3, atol=4e-3), torch.bfloat16: dict(rtol=2e-2, atol=3e-2)}
NAN, INF = float("nan"), float("inf")


def lora_inputs(m, n, k, r, dtype, *, w_transposed=False, bias=True, seed=0, device=None, adapter_dtype=None):
    gen = torch.Generator().manual_seed(seed)
    rnd = lambda *shape, std=1.0, dt=dtype: (torch.randn(*shape, generator=gen) * std).to(device or cu.DEVICE, dt)
    x = rnd(m, k)
    W = rnd(k, n, std=k**-0.5).t() if w_transposed else rnd(n, k, std=k**-0.5)
    ad = adapter_dtype or dtype
    return x, W, rnd(n, std=0.1) if bias else None, rnd(r, k, std=k**-0.5, dt=ad), rnd(n, r, std=r**-0.5, dt=ad)


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
    (lambda t: nb.add_mul_act(t, t.t()), ValueError, "base and lora must have the same shape"),
    (lambda t: nb.add_mul_act(t, t.half()), TypeError, "base and lora must share one dtype"),
    (lambda t: nb.add_mul_act(t.double(), t.double()), TypeError, "base must have a dtype in"),
    (lambda t: nb.add_mul_act(t.long(), t.long()), TypeError, "base must have a dtype in"),
    (lambda t: nb.add_mul_act(t, t.to("meta")), ValueError, "base and lora must be on one device"),
    (lambda t: nb.add_mul_act(t.to("meta"), t.to("meta")), ValueError, "base must be on"),
    (lambda t: nb.add_mul_act(t, t, 1.0, "tanh"), ValueError, "activation must be one of"),
    (lambda t: nb.add_mul_act(t, t, True), TypeError, "scale must be a number"),
    (lambda t: nb.add_mul_act(t, t, float("nan")), ValueError, "scale must be finite"),
    (lambda t: nb.add_mul_act(t, t.tolist()), TypeError, "lora must be a torch.Tensor"),
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
SHAPES = [(1, 1, 1, 1), (17, 33, 65, 3), (40, 24, 72, 8), (33, 40, 40, 20), (70, 48, 96, 16)]


@pytest.mark.parametrize("dtype", nb.LORA_DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("w_transposed", [False, True], ids=["row-major", "W-transposed"])
def test_lora_linear_matches_fp32_reference(dtype, shape, w_transposed):
    inputs = lora_inputs(*shape, dtype, w_transposed=w_transposed)
    out = nb.lora_linear(*inputs, 1.5)
    assert out.dtype == dtype and out.shape == (shape[0], shape[1])
    torch.testing.assert_close(out, nb.lora_reference(*inputs, 1.5), **TOL[dtype])


@pytest.mark.parametrize("dtype", nb.LORA_DTYPES, ids=str)
def test_x_a_in_the_loop_matches_on_the_tma_kernel(dtype):
    for shape in [(40, 24, 72, 8), (70, 48, 96, 16), (33, 40, 40, 20)]:
        inputs = lora_inputs(*shape, dtype)
        torch.testing.assert_close(nb.lora_linear(*inputs, 1.5, xa_in_loop=True), nb.lora_reference(*inputs, 1.5),
                                   **TOL[dtype])


@pytest.mark.parametrize("dtype", nb.LORA_DTYPES, ids=str)
def test_both_epilogues_match_on_the_tma_kernel(dtype):
    """The adapter added by a second dot (RANK_FMA False) or by rank-1 updates (True), with each config launched
    by hand (the CPU's autotuner keeps the dot only), in the forward's layout and in dx's (W read as stored). The
    tile that needs the least shared memory: rank 20 pads to 32, and the dot's operands must fit next to its stages."""
    tile = min(nb.LORA_TILES, key=lambda t: nb.shared_elements(nb.tile_config(*t, RANK_FMA=False), 32, False))
    for shape in [(40, 24, 72, 8), (33, 40, 40, 20), (70, 48, 96, 1)]:
        x, W, b, A, B = lora_inputs(*shape, dtype)
        expected = nb.lora_reference(x, W, b, A, B, 1.5)
        xa = x @ A.t()
        for fma in (False, True):
            cfg = nb.tile_config(*tile, RANK_FMA=fma)
            for w_kn, w_op in ((False, W.t()), (True, W.t().contiguous())):
                out = nb._launch_persistent(cfg, w_kn, x, w_op, b, A, B.t(), 1.5, "none", xa, False, False, None)[0]
                torch.testing.assert_close(out, expected, **TOL[dtype], msg=f"{shape}, RANK_FMA={fma}, W_KN={w_kn}")
    assert "rank-1 updates" in nb.config_text(nb.tile_config(*tile, RANK_FMA=True))
    assert "rank-1" not in nb.config_text(nb.tile_config(*tile, RANK_FMA=False))


def test_x_a_in_the_loop_refuses_what_tma_cannot_read():
    inputs = lora_inputs(17, 33, 65, 3, torch.float16)  # rows of 65 fp16: not 16-byte aligned
    with pytest.raises(ValueError, match="xa_in_loop=True needs the persistent TMA kernel"):
        nb.lora_linear(*inputs, 1.5, xa_in_loop=True)


def test_both_layouts_of_w_take_the_tma_kernel():
    x, W, b, A, B = lora_inputs(40, 24, 72, 8, torch.float16)
    assert nb.tma_layout(x, W.t(), 24) is False  # a forward: W (d_out x d_in rows) read transposed in the dot
    assert nb.tma_layout(x, W.t().contiguous().t().t(), 24) is True  # a K x N row-major operand
    g = torch.ones(40, 24, device=cu.DEVICE, dtype=torch.float16)
    assert nb.tma_layout(g, W, 72) is True  # dx = g W: W read as stored, no transposed copy, no pointer fallback
    assert nb.tma_layout(x, W.t(), 23) is None  # output rows of 46 bytes: TMA cannot write them
    assert nb.tma_layout(x[:, 1:], W[:, 1:].t(), 24) is None  # rows that start off 16-byte boundaries
    text = nb.lora_linear_config(x, W, b, A, B, 2.0)
    assert re.fullmatch(r"TMA persistent kernel, \d+x\d+x\d+, \d+ stages?, \d+ warps, .*", text), text
    assert nb.lora_linear_config(*lora_inputs(17, 33, 65, 3, torch.float16), 2.0).startswith("pointer kernel, ")
    assert nb.lora_linear_config(*lora_inputs(0, 24, 72, 8, torch.float16), 2.0) == "no launch (empty output)"


@pytest.mark.parametrize("activation", nb.ACTIVATIONS[1:])
@pytest.mark.parametrize("w_transposed", [False, True], ids=["tma", "W-transposed"])
def test_lora_linear_activations_without_bias(activation, w_transposed):
    inputs = lora_inputs(40, 24, 72, 8, torch.bfloat16, bias=False, w_transposed=w_transposed)
    torch.testing.assert_close(nb.lora_linear(*inputs, 2.0, activation),
                               nb.lora_reference(*inputs, 2.0, activation), **TOL[torch.bfloat16])


def test_lora_linear_keeps_leading_dimensions_and_strided_x():
    x, W, b, A, B = lora_inputs(12, 24, 32, 4, torch.bfloat16)
    out = nb.lora_linear(x.reshape(3, 4, 32), W, b, A, B, 0.5)
    assert out.shape == (3, 4, 24)
    torch.testing.assert_close(out.reshape(12, 24), nb.lora_linear(x, W, b, A, B, 0.5))
    wide = torch.randn(12, 80, device=cu.DEVICE).bfloat16()
    for view in (wide[:, :32], wide[:, 1:33], wide[:, ::2][:, :32]):  # TMA (aligned rows), pointer, pointer
        torch.testing.assert_close(nb.lora_linear(view, W, b, A, B, 0.5), nb.lora_reference(view, W, b, A, B, 0.5),
                                   **TOL[torch.bfloat16])


def test_peft_style_fp32_adapters_and_bias_on_a_bf16_base():
    x, W, b, A, B = lora_inputs(40, 24, 72, 8, torch.bfloat16, adapter_dtype=torch.float32)
    assert A.dtype == B.dtype == torch.float32
    torch.testing.assert_close(nb.lora_linear(x, W, b.float(), A, B, 2.0), nb.lora_reference(x, W, b, A, B, 2.0),
                               **TOL[torch.bfloat16])


def test_scale_zero_is_the_frozen_layer():
    x, W, b, A, B = lora_inputs(33, 40, 48, 8, torch.float16)
    torch.testing.assert_close(nb.lora_linear(x, W, b, A, B, 0.0), torch.nn.functional.linear(x, W, b), **TOL[torch.float16])


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
    (lambda x, W, b, A, B: (x.float(), W.float(), b, A, B), TypeError, "x must have a dtype in"),
    (lambda x, W, b, A, B: (x.half(), W, b, A, B), TypeError, "x and W must share one dtype"),
    (lambda x, W, b, A, B: (x, W, b, A.half(), B.half()), TypeError, "A must have a dtype in"),
    (lambda x, W, b, A, B: (x, W, b, A.float(), B), TypeError, "A and B must share one dtype"),
    (lambda x, W, b, A, B: (x, W, b.half(), A, B), TypeError, "b must have a dtype in"),
    (lambda x, W, b, A, B: (x, W, b, A.to("meta"), B), ValueError, "must be on one device"),
    (lambda x, W, b, A, B: (x, W, b, A, B.tolist()), TypeError, "B must be a torch.Tensor"),
], ids=["x-width", "A-width", "B-height", "rank-mismatch", "rank-too-large", "bias", "x-1d", "fp32", "mixed-dtype",
        "adapter-dtype", "adapters-differ", "bias-dtype", "mixed-device", "B-not-a-tensor"])
def test_lora_linear_rejects_bad_input(change, error, words):
    inputs = lora_inputs(8, 24, 32, 4, torch.bfloat16)
    with pytest.raises(error, match=words):
        nb.lora_linear(*change(*inputs), 1.0)


def test_lora_linear_rejects_bad_options():
    inputs = lora_inputs(8, 24, 32, 4, torch.bfloat16)
    with pytest.raises(ValueError, match="activation must be one of"):
        nb.lora_linear(*inputs, 1.0, "tanh")
    with pytest.raises(TypeError, match="scale must be a number"):
        nb.lora_linear(*inputs, torch.tensor(1.0))
    with pytest.raises(ValueError, match="scale must be 0 or between"):
        nb.lora_linear(*inputs, 1e300)
    with pytest.raises(ValueError, match="xa_in_loop must be one of"):
        nb.lora_linear(*inputs, 1.0, xa_in_loop="yes")


# ---------------------------------------------------------------------- the bugs bad inputs found
def test_bias_is_read_through_its_stride_in_the_forward_and_in_dx():
    """b[::2] used to be read as if contiguous: the wrong bias in the output (and in the pre-activation dx used)."""
    for w_transposed in (False, True):  # the TMA kernel and the pointer kernel
        x, W, _, A, B = lora_inputs(40, 24, 72, 8, torch.bfloat16, w_transposed=w_transposed)
        b = (torch.arange(48, device=cu.DEVICE) / 8).to(torch.bfloat16)[::2]  # 0, 0.25, 0.5, ...: stride 2
        torch.testing.assert_close(nb.lora_linear(x, W, b, A, B, 1.5), nb.lora_reference(x, W, b, A, B, 1.5),
                                   **TOL[torch.bfloat16])
        grad = torch.randn(40, 24, generator=torch.Generator().manual_seed(1)).to(cu.DEVICE, torch.bfloat16)
        ours = _grads(nb.lora_linear_trainable, (x, W, b, A, B), grad, torch.bfloat16, "gelu")
        theirs = _grads(nb.lora_eager, (x, W, b, A, B), grad, torch.float32, "gelu")
        for key in ours:  # with GELU, dx depends on the pre-activation, which holds the bias
            scale = theirs[key].abs().max().item()
            torch.testing.assert_close(ours[key].float(), theirs[key], rtol=3e-2, atol=3e-2 * scale)


def test_relu_keeps_nan_as_torch_relu_does():
    """The interpreter's maximum (NumPy) keeps NaN whatever the kernel says, so this passes on a CPU either way;
    the compile test below is what catches a kernel that a GPU would run with NaN -> 0."""
    base = torch.tensor([[NAN, -1.0, 2.0, INF], [-INF, NAN, 0.0, -0.5]], device=cu.DEVICE)
    for dtype in nb.ELEMENTWISE_DTYPES:
        got = nb.add_mul_act(base.to(dtype), torch.zeros_like(base, dtype=dtype), 1.0, "relu")
        torch.testing.assert_close(got, torch.relu(base).to(dtype), equal_nan=True)
    for w_transposed in (False, True):  # the TMA kernel and the pointer kernel
        x, W, _, A, B = lora_inputs(4, 16, 16, 4, torch.float16, w_transposed=w_transposed)
        b = torch.tensor([NAN, -INF, INF, 0.0] * 4, device=cu.DEVICE, dtype=torch.float16)
        torch.testing.assert_close(nb.lora_linear(x, W, b, A, B, 1.0, "relu"), nb.lora_reference(x, W, b, A, B, 1.0, "relu"),
                                   equal_nan=True, **TOL[torch.float16])


# (kernel, signature, constexprs) of the two kernels whose ReLU the test below reads, by test id
RELU_KERNELS = dict(zip(["add_mul_act", "lora_epilogue"], [
    ("add_mul_act_kernel", {"base_ptr": "*fp32", "lora_ptr": "*fp32", "out_ptr": "*fp32", "scale": "fp32", "n": "i32"},
     {"BLOCK": 1024, "ACTIVATION": "relu"}),
    ("lora_blocked_kernel", {**{p: "*fp16" for p in ("x_ptr", "w_ptr", "xa_ptr", "up_ptr", "bias_ptr", "out_ptr",
                                                      "pre_ptr")},
                             **{i: "i32" for i in ("M", "N", "K", "R", "stride_xm", "stride_wn", "stride_xam",
                                                   "stride_upr", "stride_upn", "stride_bias")},
                             "scale": "fp32", "inv_scale": "fp32"},
     {"stride_xk": 1, "stride_wk": 1, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32, "BLOCK_R": 16, "GROUP_M": 8,
      "HAS_ADAPTER": True, "HAS_BIAS": True, "STORE_PRE": False, "ACTIVATION": "relu"}),
]))


@pytest.fixture(scope="module")
def relu_ptx():
    """Both kernels compiled for sm_90 by one worker (a worker start imports torch and Triton: ~2.5 s)."""
    jobs = [dict(kernel=getattr(nb, kernel), signature=signature, constexprs=constexprs, arch="sm_90")
            for kernel, signature, constexprs in RELU_KERNELS.values()]
    return dict(zip(RELU_KERNELS, ki.compile_triton_jobs(jobs)))


@pytest.mark.parametrize("label", list(RELU_KERNELS))
def test_relu_compiles_to_a_nan_keeping_max_on_the_h100(label, relu_ptx):
    """What a GPU runs, checked without one: PTX for sm_90. tl.maximum(y, 0.0) compiles to max.f32, which returns
    0 for NaN; the kernels ask for PropagateNan.ALL, which compiles to max.NaN.f32."""
    stages = relu_ptx[label]
    assert stages.arch == "sm_90" and stages.name == RELU_KERNELS[label][0]
    assert stages.grep("max.NaN.f32"), "ReLU must keep NaN on the GPU"
    assert not stages.grep("max.f32"), f"a NaN-dropping max in the PTX: {stages.grep('max.f32')[:2]}"


def test_a_view_reaching_past_int32_offsets_is_refused_not_launched():
    """The guard used to count elements: 48 rows of a view 2**26 apart (3.2e9 elements reached) passed it. Meta
    tensors: described, never allocated or launched."""
    meta = lambda *shape: torch.empty(*shape, device="meta", dtype=torch.bfloat16)  # noqa: E731
    x = meta(48 * 64).as_strided((48, 64), (2**26, 1))
    with pytest.raises(ValueError, match=r"x reaches element offset 3,154,116,671"):
        nb.lora_linear(x, meta(32, 64), None, meta(4, 64), meta(32, 4))
    W = meta(64).as_strided((32, 64), (2**27, 1))
    with pytest.raises(ValueError, match="W reaches element offset"):
        nb.lora_linear(meta(48, 64), W, None, meta(4, 64), meta(32, 4))
    big = lambda *shape: torch.empty(*shape, device=cu.DEVICE, dtype=torch.bfloat16)  # noqa: E731 (1 MB each)
    with pytest.raises(ValueError, match="the output would have 65,536 x 65,536 elements"):
        nb.lora_linear(big(2**16, 8), big(2**16, 8), None, big(4, 8), big(2**16, 4))


def test_a_large_scale_does_not_overflow_fp16_on_the_way():
    """s (x A^T) used to be rounded to fp16 before the epilogue's dot: inf beyond 65504, although the output fits."""
    x, W, b, A, _ = lora_inputs(40, 24, 72, 8, torch.float16)
    B = torch.randn(24, 8, generator=torch.Generator().manual_seed(5)).to(cu.DEVICE, torch.float16) * 1e-4
    expected = nb.lora_reference(x, W, b, A, B, 2e5)
    assert expected.isfinite().all() and (nb.lora_reference(x, W, b, A, B * 0, 0.0).float() - expected.float()).abs().max() > 1
    for in_loop in (False, True):
        torch.testing.assert_close(nb.lora_linear(x, W, b, A, B, 2e5, xa_in_loop=in_loop), expected, rtol=1e-2, atol=5e-2)


# ------------------------------------------------------------------------------------------ autograd
@pytest.mark.parametrize("activation", nb.ACTIVATIONS)
def test_gradcheck_of_the_function_in_float64(activation):
    gen = torch.Generator().manual_seed(3)
    x, A, B = (torch.randn(*s, generator=gen, dtype=torch.float64).to(cu.DEVICE).requires_grad_()
               for s in [(5, 7), (3, 7), (6, 3)])
    W, b = (torch.randn(*s, generator=gen, dtype=torch.float64).to(cu.DEVICE) for s in [(6, 7), (6,)])
    assert torch.autograd.gradcheck(
        lambda x, A, B: nb.lora_linear_trainable(x, W, b, A, B, 0.7, activation, reference=True), (x, A, B))


def _grads(fn, inputs, grad_out, dtype, activation, x_grad=True, **options):
    keep = dtype != torch.float32 and inputs[3].dtype == torch.float32  # peft's fp32 adapters stay fp32
    x, W, b, A, B = (None if t is None else t.detach().to(torch.float32 if keep and i >= 3 else dtype)
                     for i, t in enumerate(inputs))
    x = x.clone().requires_grad_(x_grad)
    A, B = A.clone().requires_grad_(), B.clone().requires_grad_()
    out = fn(x, W, b, A, B, 1.5, activation, **options)
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


@pytest.mark.parametrize("case", ["W-transposed", "xa-in-loop", "fp32-adapters", "no-x-grad"])
def test_gradients_in_every_layout(case):
    inputs = lora_inputs(40, 24, 72, 8, torch.bfloat16, w_transposed=case == "W-transposed",
                         adapter_dtype=torch.float32 if case == "fp32-adapters" else None)
    grad_out = torch.randn(40, 24, generator=torch.Generator().manual_seed(2)).to(cu.DEVICE, torch.bfloat16)
    options = {"xa_in_loop": True} if case == "xa-in-loop" else {}
    ours = _grads(nb.lora_linear_trainable, inputs, grad_out, inputs[0].dtype, "none", case != "no-x-grad", **options)
    theirs = _grads(nb.lora_eager, inputs, grad_out, torch.float32, "none", case != "no-x-grad")
    if case == "no-x-grad":
        assert ours["dx"] is None
    if case == "fp32-adapters":
        assert ours["dA"].dtype == ours["dB"].dtype == torch.float32
    for key in [k for k in ours if ours[k] is not None]:
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


@pytest.mark.gpu
def test_relu_keeps_nan_on_the_gpu():
    for dtype in nb.LORA_DTYPES:
        x, W, _, A, B = lora_inputs(256, 64, 128, 16, dtype, device="cuda")
        b = torch.tensor([NAN, -INF, INF, 0.0] * 16, device="cuda", dtype=dtype)
        for w in (W, W.t().contiguous().t()):  # the TMA kernel and the pointer kernel
            got = nb.lora_linear(x, w, b, A, B, 1.0, "relu")
            assert got[:, 0::4].isnan().all() and not got[:, 1::4].isnan().any()
            torch.testing.assert_close(got, nb.lora_reference(x, w, b, A, B, 1.0, "relu"), equal_nan=True, **TOL[dtype])
        base = torch.tensor([[NAN, -1.0, 2.0, INF], [-INF, NAN, 0.0, -0.5]], device="cuda").repeat(64, 4).to(dtype)
        torch.testing.assert_close(nb.add_mul_act(base, torch.zeros_like(base), 1.0, "relu"), torch.relu(base),
                                   equal_nan=True)


# ------------------------------------------------------------------------------------ fuse_lora on peft
peft = pytest.importorskip("peft")  # pinned in requirements-ci.txt: present in CI
from lessons import nb12_bench as bench  # noqa: E402
from lessons import nb12_peft as P  # noqa: E402


def _peft_run(model, layer, x, grad):
    xx = x.detach().clone().requires_grad_()
    out = model(xx)
    out.backward(grad)
    grads = (xx.grad, layer.lora_A["default"].weight.grad.clone(), layer.lora_B["default"].weight.grad.clone())
    model.zero_grad(set_to_none=True)
    return (out, *grads)


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_fuse_lora_gives_peft_outputs_and_gradients(bias):
    model = P.peft_linear(72, 40, 8, alpha=16, dtype=torch.bfloat16, bias=bias)  # peft's defaults: fp32 adapters
    layer = model.base_model.model.proj
    assert layer.lora_A["default"].weight.dtype == torch.float32 and layer.scaling["default"] == 2.0
    x = torch.randn(2, 17, 72, generator=torch.Generator().manual_seed(1)).to(cu.DEVICE, torch.bfloat16)
    grad = torch.randn(2, 17, 40, generator=torch.Generator().manual_seed(2)).to(cu.DEVICE, torch.bfloat16)
    theirs = _peft_run(model, layer, x, grad)
    report = P.fuse_lora(model)
    assert report.fused == ["base_model.model.proj"] and not report.skipped
    assert P.explain(layer, x) == "fused kernels"
    ours = _peft_run(model, layer, x, grad)
    for name, a, b in zip(("out", "dx", "dA", "dB"), ours, theirs):
        assert a.dtype == b.dtype, name
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2 * b.float().abs().max().item(),
                                   msg=lambda m: f"{name}: {m}")
    assert P.unfuse_lora(model) == 1 and P.explain(layer, x).startswith("could run")


def test_fuse_lora_leaves_unsupported_calls_to_peft_with_a_reason():
    model = P.peft_linear(32, 24, 4, dropout=0.1)
    layer = model.base_model.model.proj
    x = torch.randn(5, 32, device=cu.DEVICE).bfloat16()
    P.fuse_lora(model)
    model.train()
    assert P.explain(layer, x) == "peft's path: dropout 0.1 > 0 in training mode"
    model.eval()  # dropout is the identity in eval mode: fused
    assert P.explain(layer, x) == "fused kernels"
    torch.testing.assert_close(model(x), P.unfuse_lora(model) and model(x), **TOL[torch.bfloat16])
    P.fuse_lora(model)
    model.base_model.merge_adapter()
    assert P.explain(layer, x).startswith("peft's path: adapter merged")
    model.base_model.unmerge_adapter()
    model.add_adapter("second", peft.LoraConfig(r=4, target_modules=["proj"]))
    model.base_model.set_adapter(["default", "second"])
    assert P.explain(layer, x) == "peft's path: 2 active adapters (the kernels fuse one)"
    model.base_model.set_adapter("default")
    assert P.explain(layer, x.float()).startswith("peft's path: input dtype torch.float32")


def test_fuse_lora_skips_layers_it_cannot_fuse_and_refuses_models_without_lora():
    model = P.peft_linear(32, 24, 4, dtype=torch.float32)
    report = P.fuse_lora(model)
    assert report.fused == [] and "float16 or bfloat16" in report.skipped["base_model.model.proj"]
    assert "fused 0 of 1 LoRA Linear layers" in str(report)
    with pytest.raises(ValueError, match="no peft LoRA Linear layer"):
        P.fuse_lora(torch.nn.Linear(3, 4))
    with pytest.raises(TypeError, match="model must be a torch.nn.Module"):
        P.fuse_lora("model")


def test_benchmark_functions_run_on_tiny_shapes():
    rows = bench.compare_forward([bench.HEADLINE], rounds=1)
    assert {"fused / merged weight", "fused / eager", "fused / peft", "fused / fuse_lora(peft)"} <= set(rows[0])
    steps = bench.train_steps(bench.HEADLINE)
    for step in steps.values():
        step()
    assert set(steps) == {"eager", "fused", "peft"}
    with pytest.raises(ValueError, match="argv: expected at most --ncu or --quick"):
        bench.main(["--full"])
