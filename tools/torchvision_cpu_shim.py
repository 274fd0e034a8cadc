"""Let PyPI's torchvision wheel import next to the CPU-only torch wheel (used by `./course.sh` only).

PyPI serves torchvision built against CUDA torch; its C++ ops (`torchvision/_C.so`) cannot load next to
the CPU torch that CI and laptops install, and torchvision then fails at import time on the two fake
(meta) kernels it registers without checking that the ops exist (`torchvision::nms`, `torchvision::qnms`).
Defining those two schemas first lets the pure-Python parts the course uses import and run: datasets,
transforms, models and `ops.generalized_box_iou_loss`. The C++ ops themselves (nms, roi_align, CPU
JPEG decoding through `torchvision.io`) stay unavailable on such an install, and say so when called.

`course.sh` installs this as a `.pth` hook in the virtual environment only when `import torchvision`
fails there; a matching torch/torchvision pair (the H100 image, Colab, the PyTorch CPU index) never
loads it.
"""

import importlib.abc
import sys

_LIBRARY = None  # the torch.library.Library holding the two schemas: they live as long as it does


class _DefineMissingOpsFirst(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        global _LIBRARY
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)  # once is enough
        import torch

        for op in ("nms", "qnms"):
            if not hasattr(torch.ops.torchvision, op):
                if _LIBRARY is None:
                    _LIBRARY = torch.library.Library("torchvision", "FRAGMENT")
                _LIBRARY.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
        return None  # the normal import machinery goes on to import torchvision itself


def install() -> None:
    """Called from the .pth file at interpreter start-up; imports nothing until torchvision is imported."""
    if not any(isinstance(f, _DefineMissingOpsFirst) for f in sys.meta_path):  # a .pth may be read twice
        sys.meta_path.insert(0, _DefineMissingOpsFirst())
