"""Notebook 03's square_matrix (lessons/nb03_square_matrix.py, exported from the notebook): the build (the
CUDA extension on a GPU, the C++ twin of its launcher elsewhere) against torch.square on awkward shapes,
the wrapper's checks (a TypeError or ValueError that names what is wrong, never an answer), the launch
check of a block CUDA refuses, and the CUDA source through nvcc where nvcc is installed.
"""

from __future__ import annotations

import shutil

import course_utils as cu

import pytest
import torch

from course_utils import cuda_build
from lessons import nb03_square_matrix as sm

if shutil.which("ninja") is None or (shutil.which("c++") is None and shutil.which("g++") is None):
    pytest.skip("building the extension needs a C++ compiler and ninja", allow_module_level=True)


@pytest.fixture(scope="module")
def ext():
    return sm.build_square_matrix()  # cached under .cache/extensions after the first build


SHAPES = [(1, 1), (1, 17), (17, 1), (16, 16), (17, 33), (37, 70), (1, 1025), (255, 257)]


def test_matches_torch_square_on_awkward_shapes(ext):
    report = cu.check(ext.square_matrix, torch.square, cu.awkward_cases(SHAPES, non_contiguous=False))
    assert report.passed, str(report)


@pytest.mark.parametrize("block", [(16, 16), (32, 8), (8, 32), (1, 256), (256, 1), (3, 5), (32, 32)])
def test_every_block_shape_covers_the_matrix(ext, block):
    m = torch.randn(37, 70, device=cu.DEVICE)
    torch.testing.assert_close(ext.square_matrix_block(m, *block), m * m, rtol=0, atol=0)


def test_an_empty_matrix_launches_nothing(ext):
    assert ext.square_matrix(torch.empty(0, 5, device=cu.DEVICE)).shape == (0, 5)


@pytest.mark.parametrize("label, make, error, words", [
    ("float64", lambda m: m.double(), TypeError, "must be float32"),
    ("float16", lambda m: m.half(), TypeError, "must be float32"),
    ("transposed view", lambda m: m.t(), ValueError, "must be contiguous"),
    ("1-D", lambda m: m[0], ValueError, "must be 2-D"),
    ("3-D", lambda m: m.unsqueeze(0), ValueError, "must be 2-D"),
])
def test_bad_input_is_a_python_error_that_says_what_is_wrong(ext, label, make, error, words):
    with pytest.raises(error, match=words):
        ext.square_matrix(make(torch.randn(37, 70, device=cu.DEVICE)))


def test_a_tensor_on_the_wrong_device_is_a_type_error(ext):
    other = torch.randn(4, 4, device="cpu" if cu.HAS_CUDA else "meta")
    with pytest.raises(TypeError, match="square_matrix: m must be a"):
        ext.square_matrix(other)


def test_a_block_cuda_refuses_is_reported_at_the_launch(ext):
    with pytest.raises(RuntimeError, match=r"kernel launch failed: .*\(grid 2x2, block 64x32\)"):
        ext.square_matrix_block(torch.randn(37, 70, device=cu.DEVICE), 64, 32)


@pytest.mark.parametrize("block", [(0, 16), (16, 0), (-16, 16), (2**32 + 16, 1)])
def test_a_block_of_no_threads_or_too_many_is_a_value_error(ext, block):
    # block 0 divided by zero in the grid's size (a crash, SIGFPE); 2**32 + 16 became 16 in dim3 (a wrong launch)
    with pytest.raises(ValueError, match="block_x and block_y must be 1 to 1024"):
        ext.square_matrix_block(torch.randn(37, 70, device=cu.DEVICE), *block)


def test_cuda_source_compiles_with_nvcc(ext):
    if shutil.which("nvcc") is None and not cu.HAS_CUDA:
        pytest.skip("nvcc is not installed")
    # sm_90, as build_square_matrix compiles it (the `ext` fixture, first): nvcc's output comes from the cache
    ptx = cuda_build.compile_cuda(sm.KERNEL_SRC + sm.LAUNCH_SRC, arch="sm_90")
    assert "square_matrix_kernel" in ptx and "ld.global" in ptx
