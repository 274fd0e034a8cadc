"""Notebook 15's lesson (lessons/nb15_flash_attention.py): right on awkward shapes and every dtype it claims; bad
input gets an error that names the argument."""

import pytest
import torch

import course_utils as cu
from lessons.nb15_flash_attention import SUPPORTED, scale


def test_scale_matches_pytorch_on_awkward_cases():
    report = cu.check(lambda x: scale(x, 2.5), lambda x: (2.5 * x.float()).to(x.dtype),
                      cu.awkward_cases((1, 7, 1023, 1025, 4099), dtypes=SUPPORTED))
    assert report.passed, str(report)


@pytest.mark.parametrize("args, error, words", [
    (([1.0, 2.0], 2.0), TypeError, "x must be a torch.Tensor"),
    ((torch.ones(3, dtype=torch.int32), 2.0), TypeError, "x must have a dtype"),
    ((torch.ones(2, 3), 2.0), ValueError, "x must be 1-D"),
    ((torch.ones(3), "2"), TypeError, "alpha must be a number"),
])
def test_scale_refuses_bad_input_naming_the_argument(args, error, words):
    x, alpha = args
    if isinstance(x, torch.Tensor):
        x = x.to(cu.DEVICE)
    with pytest.raises(error, match=words):
        scale(x, alpha)
