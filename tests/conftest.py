"""GPU-marked tests skip without CUDA; on the H100 run them with `bash .gpu/on-gpu.sh pytest -m gpu tests/`."""

import pytest
import torch


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the H100: see README, 'Testing')")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
