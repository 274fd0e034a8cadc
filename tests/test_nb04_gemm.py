"""Notebook 04's lesson code (lessons/nb04_gemm.py and .cu): the sections the notebooks show, rung 11's shapes
read from the CUDA file, the wrapper's input checks, and (on a GPU) every rung against torch.matmul."""

import pytest
import torch

import course_utils as cu
from course_utils.cuda_build import ToolchainError, compile_cuda
from course_utils.export import show
from lessons import nb04_gemm as gemm


def test_every_rung_is_a_section_that_show_prints(capsys):
    for rung in gemm.RUNG_NAMES:
        body = gemm.section(f"rung {rung}")
        assert "__global__" in body or "SIZE_SHAPES" in body, f"rung {rung}"
        show("lessons/nb04_gemm.cu", section=f"rung {rung}")
        assert capsys.readouterr().out.strip() == body.strip(), f"show() and section() disagree on rung {rung}"
    assert "torch::Tensor gemm(" in gemm.section("host code")
    with pytest.raises(ValueError, match="no section"):
        gemm.section("rung 12")


def test_rung_11_shapes_come_from_the_cuda_file():
    assert len(gemm.SIZE_CONFIGS) == len(gemm.SIZE_LABELS) == 6
    assert gemm.SIZE_CONFIGS[0] == ("gemm_vecstore", 128, 128, 16, 8, 8, 8, 2)  # rung 10 itself
    assert gemm.SIZE_CONFIGS[4] == ("gemm_tuned", 128, 128, 8, 8, 8, 8, 2)      # rung 9's kernel
    assert gemm.SIZE_LABELS[4].endswith("rung 9's kernel")
    assert gemm.rung_label(11, 2).startswith("rung 11 shape per size [64x128 tile")


def test_config_for_takes_the_nearest_measured_size():
    chosen = {1024: 2, 2048: 4, 4096: 4}
    assert gemm.config_for({}, 4096, 4096, 4096) == 0
    assert gemm.config_for(chosen, 1000, 1000, 1000) == 2
    assert gemm.config_for(chosen, 8192, 8192, 8192) == 4
    assert gemm.config_for(chosen, 0, 5, 5) == 2


def ones(*shape, dtype=torch.float32):
    return torch.ones(*shape, dtype=dtype, device=cu.DEVICE)


@pytest.mark.parametrize("call, error, words", [
    (lambda: gemm.matmul(None, ones(2, 3), ones(4, 5)), ValueError, "need a (M x K)"),
    (lambda: gemm.matmul(None, ones(2, 3, dtype=torch.float64), ones(3, 5)), TypeError, "a must have"),
    (lambda: gemm.matmul(None, ones(2, 3), ones(3)), ValueError, "b must be 2-D"),
    (lambda: gemm.matmul(None, ones(2, 3), [[1.0]]), TypeError, "b must be a torch.Tensor"),
    (lambda: gemm.matmul(None, ones(2, 3), ones(3, 5), rung=0), ValueError, "rung must be"),
])
def test_the_wrapper_refuses_bad_input_naming_the_argument(call, error, words):
    with pytest.raises(error, match=words.replace("(", r"\(").replace(")", r"\)")):
        call()


def test_wavefronts_of_rung_6_and_rung_7_reads():
    float4_words = lambda starts: [s + i for s in starts for i in range(4)]  # noqa: E731
    assert gemm.smem_wavefronts(float4_words(lane % 16 * 8 for lane in range(32))) == 4  # rung 6's B read
    assert gemm.smem_wavefronts(float4_words(lane % 4 * 4 for lane in range(32))) == 1   # rung 7's B read
    assert gemm.smem_wavefronts(range(32)) == 1 and gemm.smem_wavefronts([0, 32, 64]) == 3


def test_the_upper_rungs_compile_to_ptx_without_a_gpu():
    source = "".join(gemm.section(name) for name in ("common helpers", "rung 9", "rung 10", "rung 11"))
    try:
        ptx = compile_cuda(source, arch="sm_80")
    except ToolchainError:
        pytest.skip("no nvcc on this machine")
    assert ptx.count(".entry") == 12  # six shapes, float4 and scalar paths


@pytest.mark.gpu
def test_every_rung_matches_torch_matmul_on_awkward_shapes():
    ext = gemm.build()
    with gemm.fp32_matmul():
        for rung in gemm.RUNG_NAMES:
            for config in range(len(gemm.RUNG_CONFIGS.get(rung, [None]))):
                report = cu.check(lambda a, b: gemm.matmul(ext, a, b, rung, config), torch.matmul,
                                  gemm.gemm_cases("cuda", gemm.GPU_SHAPES), rtol=1e-4, atol=1e-3)
                assert report.passed, f"{gemm.rung_label(rung, config)}: {report}"


@pytest.mark.gpu
def test_empty_products_and_bad_configs_on_the_gpu():
    """M, N or K of 0 launch nothing (C is empty, or zeros: a sum of nothing); a config the rung lacks, a grad or
    a too large C is refused before the launch."""
    ext = gemm.build()
    for (m, k), (k2, n) in (((0, 5), (5, 3)), ((4, 5), (5, 0)), ((4, 0), (0, 3))):
        c = gemm.matmul(ext, torch.ones(m, k, device="cuda"), torch.ones(k2, n, device="cuda"), 9)
        assert c.shape == (m, n) and c.device.type == "cuda" and not c.any()
    a = torch.ones(4, 4, device="cuda")
    with pytest.raises(ValueError, match="config must be >= 0 and <= 2"):
        gemm.matmul(ext, a, a, 9, 3)
    with pytest.raises(ValueError, match="a requires grad"):
        gemm.matmul(ext, a.clone().requires_grad_(), a, 1)
    with pytest.raises(ValueError, match="would have 65,536 x 65,536 elements"):
        gemm.matmul(ext, torch.ones(2**16, 1, device="cuda"), torch.ones(1, 2**16, device="cuda"), 1)
