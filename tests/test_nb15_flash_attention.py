"""Notebook 15's attention (lessons/nb15_flash_attention.py): forward and backward right against SDPA's math
backend, causal and not, over head dims 16/32/64 (and 128 on a GPU), sequence lengths that are no multiple of
the tile, every dtype the wrapper claims; gradcheck in float64 at tiny sizes; bad input gets an error that
names the argument."""

import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import course_utils as cu
from lessons.nb15_flash_attention import (attention_flops, flash_attention, flash_attention_tma, naive_attention,
                                          tiled_attention)

TOL = {torch.float64: 1e-9, torch.float32: 2e-5, torch.float16: 4e-3, torch.bfloat16: 3e-2}
HEAD_DIMS = (16, 32, 64) + ((128,) if cu.HAS_CUDA else ())


def inputs(shape, dtype, seed=0, grad=True):
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=gen, dtype=torch.float32).to(cu.DEVICE, dtype).requires_grad_(grad)
            for _ in range(3)]


def reference(q, k, v, causal):
    """SDPA's math backend in float64: the exact answer the kernels round."""
    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, d", [(1, 16), (17, 16), (64, 32), (45, 64)] + ([(300, 128)] if cu.HAS_CUDA else []))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_and_backward_match_sdpa_math(causal, n, d, dtype):
    q, k, v = inputs((2, 2, n, d), dtype)
    out = flash_attention(q, k, v, causal)
    ref = reference(q, k, v, causal)
    assert out.dtype == dtype and out.shape == q.shape
    torch.testing.assert_close(out.double(), ref, rtol=TOL[dtype], atol=TOL[dtype])
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), do)
    expected = torch.autograd.grad(ref, (q, k, v), do.double())
    for name, g, e in zip("qkv", grads, expected):
        assert g.dtype == dtype, name
        torch.testing.assert_close(g.double(), e.double(), rtol=4 * TOL[dtype], atol=4 * TOL[dtype],
                                   msg=lambda m: f"d{name}: {m}")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n, d", [(17, 16), (45, 64)] + ([(300, 128)] if cu.HAS_CUDA else []))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_tma_forward_trains_like_the_pointer_forward(causal, n, d, dtype):
    # tma=True: the forward of section 6 (TMA loads) under the same backward; its logsumexp must be the one the
    # backward expects. q starts 2 elements into its allocation: a descriptor's base must be 16-byte aligned.
    q, k, v = inputs((2, 2, n, d), dtype, grad=False)
    q = torch.cat([torch.zeros(2, device=q.device, dtype=dtype), q.flatten()])[2:].view(q.shape).requires_grad_()
    k, v = k.requires_grad_(), v.requires_grad_()
    out = flash_attention(q, k, v, causal, tma=True)
    ref = reference(q, k, v, causal)
    torch.testing.assert_close(out.double(), ref, rtol=TOL[dtype], atol=TOL[dtype])
    do = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), do)
    for name, g, e in zip("qkv", grads, torch.autograd.grad(ref, (q, k, v), do.double())):
        torch.testing.assert_close(g.double(), e.double(), rtol=4 * TOL[dtype], atol=4 * TOL[dtype],
                                   msg=lambda m: f"d{name}: {m}")


def test_the_forward_picks_tma_on_hopper_for_half_precision_only():
    import lessons.nb15_flash_attention as fa
    half, single = inputs((1, 1, 8, 16), torch.float16, grad=False)[0], inputs((1, 1, 8, 16), torch.float32)[0]
    hopper = cu.HAS_CUDA and torch.cuda.get_device_capability()[0] >= 9
    assert fa.uses_tma(half, None) is hopper, "None: TMA exactly where it is the faster kernel"
    assert fa.uses_tma(single, None) is False and fa.uses_tma(half, False) is False
    assert fa.uses_tma(half, True) is True, "the interpreter and Hopper both run the TMA kernel when asked"


@pytest.mark.parametrize("causal", [False, True])
def test_gradcheck_in_float64(causal):
    q, k, v = inputs((1, 2, 21, 16), torch.float64)  # 21: one full tile of 16 and a partial one
    assert torch.autograd.gradcheck(lambda q, k, v: flash_attention(q, k, v, causal), (q, k, v), fast_mode=True)


@pytest.mark.parametrize("causal", [False, True])
def test_pytorch_models_agree_with_the_kernel(causal):
    q, k, v = inputs((1, 3, 37, 32), torch.float32, grad=False)
    ref = reference(q, k, v, causal).float()
    torch.testing.assert_close(naive_attention(q, k, v, causal), ref, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(tiled_attention(q, k, v, causal), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(cu.HAS_CUDA and torch.cuda.get_device_capability()[0] < 9, reason="TMA needs sm_90")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_tma_forward(causal, dtype):
    q, k, v = inputs((2, 2, 45, 64), dtype, grad=False)
    torch.testing.assert_close(flash_attention_tma(q, k, v, causal).double(), reference(q, k, v, causal),
                               rtol=TOL[dtype], atol=TOL[dtype])


def test_a_strided_view_is_read_right():
    q, k, v = (t.detach() for t in inputs((2, 8, 3, 32), torch.float32, grad=False))  # (B, N, H, d) as models hold it
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    torch.testing.assert_close(flash_attention(q, k, v, True), reference(q, k, v, True).float(), rtol=2e-5, atol=2e-5)


def test_flop_convention():
    assert attention_flops(4, 32, 4096, 128, causal=False) == 4 * 4 * 32 * 4096**2 * 128
    assert attention_flops(4, 32, 4096, 128, causal=True) == 2 * 4 * 32 * 4096**2 * 128
    assert attention_flops(1, 1, 8, 16, causal=False, backward=True) == 3.5 * 4 * 8 * 8 * 16


def _t(shape=(1, 2, 8, 16), dtype=torch.float16, device=None):
    return torch.randn(shape).to(device or cu.DEVICE, dtype)


@pytest.mark.parametrize("args, kwargs, error, words", [
    (([1.0], _t(), _t()), {}, TypeError, "q must be a torch.Tensor"),
    ((_t(dtype=torch.int32), _t(), _t()), {}, TypeError, "q must have a dtype"),
    ((_t(), _t(dtype=torch.float32), _t()), {}, TypeError, "must share one dtype"),
    ((_t((2, 8, 16)), _t((2, 8, 16)), _t((2, 8, 16))), {}, ValueError, "q must be 4-D"),
    ((_t(), _t((1, 2, 9, 16)), _t()), {}, ValueError, "same shape"),
    ((_t((1, 2, 8, 24)),) * 3, {}, ValueError, "head dim"),
    ((_t((1, 2, 8, 256)),) * 3, {}, ValueError, "head dim"),
    ((_t((1, 2, 0, 16)),) * 3, {}, ValueError, "at least one"),
    ((_t(), _t(), _t()), {"causal": 1}, TypeError, "causal must be True or False"),
    ((_t(), _t(), _t()), {"sm_scale": float("nan")}, ValueError, "sm_scale must be finite"),
    ((_t(), _t(), _t()), {"sm_scale": -1.0}, ValueError, "sm_scale must be >="),
])
def test_bad_input_gets_an_error_naming_the_argument(args, kwargs, error, words):
    with pytest.raises(error, match=words):
        flash_attention(*args, **kwargs)


def test_mismatched_devices_and_spans_past_int32_are_refused():
    if cu.HAS_CUDA:
        with pytest.raises(ValueError, match="one device"):
            flash_attention(_t(), _t(device="cpu"), _t())
    else:
        with pytest.raises(ValueError, match="must be on"):
            flash_attention(_t(device="meta"), _t(device="meta"), _t(device="meta"))
    # a view whose last offset is past 2**31 - 1 (offsets are int32): refused before any launch, no allocation
    big = torch.empty(0, device="meta", dtype=torch.float16).as_strided((1, 1, 2, 16), (1, 1, 2**31, 1))
    with pytest.raises(ValueError, match="int32"):
        flash_attention(big, big, big)


def test_tma_variant_refuses_fp32():
    with pytest.raises(TypeError, match="dtype"):
        flash_attention_tma(_t(dtype=torch.float32), _t(dtype=torch.float32), _t(dtype=torch.float32))


def test_prune_reads_arguments_given_by_keyword():
    """Triton 3.6 hands the prune the positional arguments as `named_args` and those given by keyword apart."""
    from lessons.nb15_flash_attention import GPU_FWD, configs, for_head_dim

    prune, all_configs = for_head_dim(GPU_FWD), configs(GPU_FWD)
    by_keyword = prune(all_configs, {"N_CTX": 4096, "N_KEY": 4096}, HEAD_DIM=128, CAUSAL=True)
    assert by_keyword == prune(all_configs, {"N_CTX": 4096, "N_KEY": 4096, "HEAD_DIM": 128, "CAUSAL": True})
    assert {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in by_keyword} == set(GPU_FWD[128])


def test_lengths_share_a_tuning_per_bucket():
    """The autotuner's key is a bucket of N: every length up to 128 shares one key and one small tile (nothing is
    timed), lengths up to 1024 share a power of two, and every longer length shares the last bucket."""
    from lessons.nb15_flash_attention import GPU_DKDV, GPU_FWD, KEY, LONG, configs, for_head_dim, n_key

    assert "N_KEY" in KEY and "N_CTX" not in KEY
    assert {n_key(n) for n in (1, 17, 64, 100, 128)} == {128}
    assert [n_key(n) for n in (129, 300, 1024, 1025, 4096, 65536)] == [256, 512, 1024, LONG, LONG, LONG]
    for table in (GPU_FWD, GPU_DKDV):
        prune, all_configs = for_head_dim(table), configs(table)
        for d in (64, 128):
            short = prune(all_configs, {"N_CTX": 1, "N_KEY": n_key(1)}, HEAD_DIM=d, CAUSAL=False)
            smallest = min(bm * bn for bm, bn, _, _ in table[d])
            assert len(short) == 1 and short[0].kwargs["BLOCK_M"] * short[0].kwargs["BLOCK_N"] == smallest
            long = prune(all_configs, {"N_CTX": 16384, "N_KEY": n_key(16384)}, HEAD_DIM=d, CAUSAL=True)
            assert {(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"], c.num_warps, c.num_stages) for c in long} == set(table[d])


def test_kernels_take_the_length_unspecialized():
    """A new N compiles nothing new: N_CTX is not specialized (no == 1 or divisible-by-16 variants)."""
    import lessons.nb15_flash_attention as fa

    for kernel in (fa.attn_fwd_kernel, fa.attn_bwd_preprocess_kernel, fa.attn_bwd_dkdv_kernel, fa.attn_bwd_dq_kernel):
        # a compiled JITFunction keeps the list as do_not_specialize, the interpreter's function in its kwargs
        spec = getattr(kernel, "do_not_specialize", None) or getattr(kernel, "kwargs", {}).get("do_not_specialize")
        assert spec and ("N_CTX" in spec or list(kernel.arg_names).index("N_CTX") in spec), kernel


def test_proton_metadata_names_either_forward_and_counts_its_flops():
    from triton.tools.tensor_descriptor import TensorDescriptor

    import lessons.nb15_flash_attention as fa
    q = torch.zeros(6, 8, 16, dtype=torch.float16)
    common = {"N_CTX": 8, "HEAD_DIM": 16, "CAUSAL": True}
    pointer = fa.fwd_metadata((1, 6, 1), None, {**common, "Q": q})
    tma = fa.fwd_metadata((1, 6, 1), None, {**common, "q_desc": TensorDescriptor.from_tensor(q, [1, 8, 16])})
    assert pointer["name"].startswith("attn_fwd [") and tma["name"].startswith("attn_fwd_tma [")
    assert pointer["flops16"] == tma["flops16"] == 4 * 6 * 8 * 8 * 16 * 0.5
