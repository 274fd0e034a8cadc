"""Notebook 14's kernels (lessons/nb14_hopper_matmul.py) against PyTorch: on a CPU in Triton's interpreter
(which emulates tensor descriptors and fp8, and ignores warp specialization), and on a Hopper GPU for real."""

import course_utils as cu  # noqa: F401 - first: on a CPU it switches Triton to its interpreter

import pytest
import torch
import triton

from lessons.nb14_hopper_matmul import matmul_fp8_kernel, matmul_persistent_kernel, skinny_matmul_kernel

FP8 = torch.float8_e4m3fn


def _scratch(size: int, alignment: int, stream) -> torch.Tensor:
    return torch.empty(size, dtype=torch.int8, device=cu.DEVICE)


triton.set_allocator(_scratch)  # tl.make_tensor_descriptor needs global scratch memory


def _widen(t: torch.Tensor) -> torch.Tensor:
    # the interpreter's tl.dot multiplies bf16 tiles as raw integers (triton-lang/triton#11584)
    return t.float() if cu.INTERPRET and t.dtype == torch.bfloat16 else t


def persistent(a, w, programs, block=32, block_k=32, subtiles=2, ws=False, warps=4, stages=1):
    (m, k), n = a.shape, w.shape[0]
    c = torch.empty(m, n, dtype=a.dtype, device=a.device)
    matmul_persistent_kernel[(programs,)](_widen(a), _widen(w), c, m, n, k, BLOCK_M=block, BLOCK_N=block,
                                          BLOCK_K=block_k, GROUP_M=2, SUBTILES=subtiles, FLATTEN=not ws,
                                          WARP_SPECIALIZE=ws, num_warps=warps, num_stages=stages)
    return c


def quantize(x: torch.Tensor, rowwise: bool):
    amax = x.abs().amax(dim=1, keepdim=True) if rowwise else x.abs().amax().reshape(1, 1)
    scale = (amax / torch.finfo(FP8).max).clamp(min=1e-12)
    return (x / scale).to(FP8), scale.reshape(-1).float()


def skinny(x, w, split, counters, block_n=32, block_m=16, block_k=32, warps=4, stages=1):
    (m, k), n = x.shape, w.shape[0]
    c = torch.empty(m, n, dtype=x.dtype, device=x.device)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n), split)
    part = torch.empty(grid[0] * grid[1] * split * block_n * block_m, device=x.device)
    skinny_matmul_kernel[grid](_widen(x), _widen(w), c, part, counters, m, n, k, x.stride(0), w.stride(0), c.stride(0),
                               BLOCK_N=block_n, BLOCK_M=block_m, BLOCK_K=block_k, SPLIT_K=split, num_warps=warps,
                               num_stages=stages)
    return c


def _operands(m, n, k, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=gen).to(dtype=dtype, device=cu.DEVICE)
    w = torch.randn(n, k, generator=gen).to(dtype=dtype, device=cu.DEVICE)
    return a, w


needs_interpreter = pytest.mark.skipif(not cu.INTERPRET, reason="tiny tiles for the interpreter")


@needs_interpreter
@pytest.mark.parametrize("m,n,k", [(1, 8, 8), (17, 40, 24), (70, 56, 40)])  # K=24 < BLOCK_K; ragged M and N
@pytest.mark.parametrize("subtiles,ws", [(1, False), (2, False), (1, True)])
def test_persistent_kernel_matches_torch(m, n, k, subtiles, ws):
    a, w = _operands(m, n, k, torch.float16)
    c = persistent(a, w, programs=3, subtiles=subtiles, ws=ws)  # 3 programs: several tiles each
    torch.testing.assert_close(c.float(), a.float() @ w.float().t(), rtol=1e-2, atol=1e-2)


@needs_interpreter
def test_persistent_kernel_bf16_and_grid_size_does_not_change_the_bits():
    a, w = _operands(70, 72, 48, torch.bfloat16)
    persistent_c = persistent(a, w, programs=2)
    per_tile_c = persistent(a, w, programs=triton.cdiv(70, 32) * triton.cdiv(72, 32))
    assert persistent_c.dtype == torch.bfloat16
    torch.testing.assert_close(persistent_c.float(), a.float() @ w.float().t(), rtol=3e-2, atol=3e-2)
    assert torch.equal(persistent_c, per_tile_c), "the grid decides who computes a tile, not what it holds"


@needs_interpreter
@pytest.mark.parametrize("rowwise", [False, True])
@pytest.mark.parametrize("m,n,k", [(1, 16, 16), (33, 48, 80)])
def test_fp8_kernel_matches_dequantized_reference(m, n, k, rowwise):
    a, w = _operands(m, n, k, torch.float32, seed=1)
    (a_q, sa), (w_q, sw) = quantize(a / k**0.25, rowwise), quantize(w / k**0.25, rowwise)
    c = torch.empty(m, n, dtype=torch.bfloat16, device=cu.DEVICE)
    matmul_fp8_kernel[(2,)](a_q, w_q, c, sa, sw, m, n, k, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, SUBTILES=2,
                            ROWWISE=rowwise, FLATTEN=True, WARP_SPECIALIZE=False)
    expected = (a_q.float() * sa.reshape(-1, 1)) @ (w_q.float() * sw.reshape(-1, 1)).t()
    torch.testing.assert_close(c.float(), expected, rtol=1e-2, atol=1e-2)
    if rowwise:  # a wrong pairing of scales with rows would be off by far more than the tolerance
        swapped = (a_q.float() * sa.flip(0).reshape(-1, 1)) @ (w_q.float() * sw.reshape(-1, 1)).t()
        assert m == 1 or not torch.allclose(c.float(), swapped, rtol=1e-2, atol=1e-2)


@needs_interpreter
@pytest.mark.parametrize("m,n,k,split", [(1, 40, 24, 4), (5, 100, 1000, 3), (17, 64, 520, 1)])  # K=24: empty slices
def test_skinny_kernel_matches_torch(m, n, k, split):
    for dtype, tol in ((torch.float16, 1e-2), (torch.bfloat16, 3e-2)):
        x, w = _operands(m, n, k, dtype, seed=2)
        counters = torch.zeros(64, dtype=torch.int32, device=cu.DEVICE)
        c = skinny(x, w, split, counters)
        torch.testing.assert_close(c.float(), x.float() @ w.float().t(), rtol=tol, atol=tol)
        assert int(counters.abs().sum()) == 0, "the last program of each tile must reset its counter"


@needs_interpreter
def test_skinny_split_k_is_deterministic_and_takes_strided_rows():
    x, w = _operands(34, 72, 200, torch.float16, seed=3)
    x = x[::2]  # 17 rows, row stride 400
    counters = torch.zeros(64, dtype=torch.int32, device=cu.DEVICE)
    runs = [skinny(x, w, 3, counters) for _ in range(2)]
    assert torch.equal(runs[0], runs[1]), "the partial sums are added in a fixed order"
    torch.testing.assert_close(runs[0].float(), x.float() @ w.float().t(), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_kernels_on_hopper():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA descriptors and fp8 tensor cores need a Hopper GPU")
    a, w = _operands(1000, 1040, 520, torch.float16)
    expected = a.float() @ w.float().t()
    for ws, warps, stages, subtiles in ((False, 8, 3, 2), (True, 4, 3, 1)):
        c = persistent(a, w, programs=5, block=128, block_k=64, subtiles=subtiles, ws=ws, warps=warps, stages=stages)
        torch.testing.assert_close(c.float(), expected, rtol=1e-2, atol=5e-2)
    a8, w8 = _operands(300, 512, 1024, torch.float32)
    (a_q, sa), (w_q, sw) = quantize(a8 / 1024**0.25, True), quantize(w8 / 1024**0.25, True)
    c = torch.empty(300, 512, dtype=torch.bfloat16, device="cuda")
    matmul_fp8_kernel[(4,)](a_q, w_q, c, sa, sw, 300, 512, 1024, BLOCK_M=128, BLOCK_N=128, BLOCK_K=128, GROUP_M=8,
                            SUBTILES=2, ROWWISE=True, FLATTEN=True, WARP_SPECIALIZE=False, num_warps=8, num_stages=3)
    expected = (a_q.float() * sa.reshape(-1, 1)) @ (w_q.float() * sw.reshape(-1, 1)).t()
    torch.testing.assert_close(c.float(), expected, rtol=1e-2, atol=1e-2)
    x, w = _operands(16, 4096, 4096, torch.float16)
    counters = torch.zeros(1024, dtype=torch.int32, device="cuda")
    c = skinny(x, w, 4, counters, block_n=64, block_k=256, stages=4)
    torch.testing.assert_close(c.float(), x.float() @ w.float().t(), rtol=1e-2, atol=5e-2)
    assert int(counters.abs().sum()) == 0


@pytest.mark.gpu
def test_wrappers_refuse_bad_input_and_stay_right_on_hopper():
    """What the interpreter cannot show: TMA on a view that is not row-major, or starts off a 16-byte boundary,
    would read the wrong bytes (or fault) on a GPU; the wrappers refuse it or copy it first."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("TMA descriptors and fp8 tensor cores need a Hopper GPU")
    from lessons import nb14_hopper_matmul as L14

    assert L14.scratch_for_descriptors(1000, 128, None).data_ptr() % 128 == 0
    a, w = _operands(100, 128, 256, torch.float32, seed=4)
    (a_q, sa), (w_q, sw) = L14.quantize_fp8(a / 4, True), L14.quantize_fp8(w / 4, True)
    expected = L14.dequantized_reference(a_q, w_q, sa, sw).float()
    flat = torch.empty(a_q.numel() + 1, dtype=FP8, device="cuda")
    flat[1:].copy_(a_q.reshape(-1))
    for view in (a_q.t().contiguous().t(), flat[1:].view(100, 256)):  # column-major; row-major but 1 byte off
        torch.testing.assert_close(L14.matmul_fp8(view, w_q, sa, sw).float(), expected, rtol=1e-2, atol=1e-2)
    c, cfg8 = torch.empty(100, 128, dtype=torch.bfloat16, device="cuda"), L14.tile_config(*L14.GPU_FP8_TILES[0])
    with pytest.raises(ValueError, match="a_q must be contiguous"):  # refused before any launch
        L14.launch_fp8(flat[1:].view(100, 256), w_q, sa, sw, c, cfg8, True)
    with pytest.raises(ValueError, match="rowwise must be True"):  # False would read one scale per tensor
        L14.launch_fp8(a_q, w_q, sa, sw, c, cfg8, False)

    a16, w16 = _operands(64, 136, 128, torch.float16, seed=5)
    shifted = torch.empty(a16.numel() + 1, dtype=torch.float16, device="cuda")[1:].view(64, 128).copy_(a16)
    c16 = torch.empty(64, 136, dtype=torch.float16, device="cuda")
    cfg = L14.tile_config(*L14.GPU_TILES[0])
    for bad in (a16.t().contiguous().t(), shifted):
        with pytest.raises(ValueError, match="a must be contiguous"):
            L14.launch_persistent(bad, w16, c16, cfg)
        torch.testing.assert_close(L14.matmul_persistent(bad, w16).float(), a16.float() @ w16.float().t(),
                                   rtol=1e-2, atol=5e-2)  # notebook 07's pointer kernel reads it
    assert not L14.matmul_persistent(a16[:, :0], w16[:, :0]).any()  # K = 0: zeros, no empty descriptor
    with pytest.raises(ValueError, match="a requires grad"):
        L14.matmul_persistent(a16.clone().requires_grad_(), w16)
    with pytest.raises(ValueError, match="w requires grad"):
        L14.skinny_matmul(a16[:4], w16.clone().requires_grad_())
    assert not L14.skinny_matmul(a16[:4, :0], w16[:, :0]).any()
    assert L14.linear(a16[:0, :0], w16[:0, :0]).shape == (0, 0)
    torch.testing.assert_close(L14.linear(a16[:4], w16).float(), a16[:4].float() @ w16.float().t(),
                               rtol=1e-2, atol=5e-2)
