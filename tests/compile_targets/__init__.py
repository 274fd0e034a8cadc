"""Which Triton kernels of the course CI compiles, and for which GPUs (see tests/test_compile_targets.py).

Each notebook that exports Triton kernels to `lessons/` has a file here, ``nbNN.py``, with a list
``TARGETS`` of `Target`: the kernel, an example signature and constexprs, and the architectures it
must compile for. Every ``@triton.jit`` function in `lessons/` must appear in some file's TARGETS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Colab's free T4, the A100, the H100.
ALL_ARCHS = ("sm_75", "sm_80", "sm_90")


@dataclass(frozen=True)
class Target:
    module: str  # e.g. "lessons.nb05_vector_add"
    kernel: str  # the @triton.jit function's name in that module
    signature: dict[str, str]  # runtime arguments -> Triton type ('*fp32', 'i32', ...)
    constexprs: dict[str, Any] = field(default_factory=dict)
    archs: tuple[str, ...] = ALL_ARCHS
    num_warps: int = 4
    num_stages: int = 3
    #: Arguments Triton may assume are multiples of 16 (None: every pointer, no integer), as the JIT
    #: would specialize them for aligned tensors and sizes; it changes vector widths and registers.
    divisible_by_16: tuple[str, ...] | None = None
    #: Why ``archs`` leaves out a GPU (e.g. "TMA needs sm_90; sm_75/80 use the pointer kernel").
    why_not_all: str = ""
