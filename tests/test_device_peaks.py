import os

import pytest
import torch

import course_utils as cu
from course_utils.device import require_device


def test_interpreter_is_on_without_cuda():
    if torch.cuda.is_available():
        assert cu.DEVICE.type == "cuda"
    else:
        assert os.environ["TRITON_INTERPRET"] == "1"
        assert cu.INTERPRET and cu.DEVICE.type == "cpu"


def test_pick_size_follows_the_device():
    assert cu.pick_size(2**28, 2**12) == (2**28 if torch.cuda.is_available() else 2**12)


def test_environment_report_names_versions_and_hardware():
    env = cu.environment()
    assert env["torch"] == torch.__version__
    assert {"gpu", "triton", "python", "triton_mode"} <= env.keys()
    if not torch.cuda.is_available():
        assert env["gpu"] == "none" and "cpu" in env


def test_print_environment(capsys):
    cu.print_environment()
    out = capsys.readouterr().out
    assert "torch" in out and "triton_mode" in out


@pytest.mark.parametrize("bad", ["tpu", 3.5, "not a device"])
def test_require_device_rejects_unknown_devices(bad):
    with pytest.raises(ValueError):
        require_device(bad)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message given when there is no GPU")
def test_require_device_rejects_cuda_without_gpu():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        require_device("cuda")


@pytest.mark.parametrize("name, expected", [
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA H100 NVL", "H100 NVL"),
    ("NVIDIA H200", "H200"),
    ("NVIDIA A100-SXM4-80GB", "A100 80GB SXM"),
    ("NVIDIA A100 80GB PCIe", "A100 80GB PCIe"),
    ("NVIDIA A100-SXM4-40GB", "A100 40GB"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA L4", "L4"),
    ("Tesla T4", "T4"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
])
def test_lookup_peaks_by_device_name(name, expected):
    peaks = cu.lookup_peaks(name)
    assert peaks is not None and peaks.name == expected
    assert peaks.bandwidth_gbps > 0 and peaks.fp16_tflops > peaks.fp32_tflops


def test_lookup_peaks_unknown_and_wrong_type():
    assert cu.lookup_peaks("NVIDIA L40S") is None  # not "L4": the pattern needs a word boundary
    with pytest.raises(TypeError):
        cu.lookup_peaks(42)


def test_peak_flops_by_dtype():
    h100 = cu.lookup_peaks("NVIDIA H100 80GB HBM3")
    assert h100.tflops_for(torch.bfloat16) == h100.fp16_tflops
    assert h100.tflops_for(torch.float32) == h100.fp32_tflops
    assert h100.tflops_for(torch.float32, tf32=True) == h100.tf32_tflops
    assert cu.lookup_peaks("Tesla T4").tflops_for(torch.float32, tf32=True) == 8.1  # no TF32 on T4
    with pytest.raises(ValueError):
        h100.tflops_for(torch.int8)


@pytest.mark.gpu
def test_device_peaks_on_gpu():
    peaks = cu.device_peaks()
    assert peaks is not None and peaks.bandwidth_gbps > 0
