"""Peak memory bandwidth and FLOP/s of the GPUs a learner is likely to have.

Figures are dense (no sparsity) spec-sheet numbers, in decimal units: GB/s = 1e9 bytes/s and
TFLOP/s = 1e12 FLOP/s. A GPU missing from the table gets peaks measured on the spot, which are
lower bounds: a copy and a large matmul never quite reach the spec sheet (`course_utils.timing.device_peaks`
measures them; this module only holds the table).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DevicePeaks:
    """Peak throughputs of one device. ``tf32_tflops`` is None where the GPU has no TF32."""

    name: str
    bandwidth_gbps: float
    fp32_tflops: float
    tf32_tflops: float | None
    fp16_tflops: float  # fp16 and bf16 tensor cores, fp32 accumulate
    source: str = "spec sheet"

    def tflops_for(self, dtype: torch.dtype, *, tf32: bool = False) -> float:
        """Peak TFLOP/s for a matmul in ``dtype`` (``tf32=True``: fp32 inputs on TF32 tensor cores)."""
        if dtype in (torch.float16, torch.bfloat16):
            return self.fp16_tflops
        if dtype == torch.float32:
            return self.tf32_tflops if (tf32 and self.tf32_tflops) else self.fp32_tflops
        raise ValueError(f"no peak FLOP/s for dtype {dtype}; use float32, float16 or bfloat16")


# Order matters: the first pattern that matches the device name wins (PCIe before plain H100).
_SPEC_SHEET: list[tuple[str, DevicePeaks]] = [
    (r"H100.*PCIe", DevicePeaks("H100 PCIe", 2000, 51.2, 378, 756)),
    (r"H100.*NVL", DevicePeaks("H100 NVL", 3900, 60.0, 418, 835)),
    (r"H100", DevicePeaks("H100 SXM", 3350, 66.9, 494.7, 989.4)),
    (r"H200", DevicePeaks("H200", 4800, 66.9, 494.7, 989.4)),
    (r"A100.*80GB.*PCIe", DevicePeaks("A100 80GB PCIe", 1935, 19.5, 156, 312)),
    (r"A100.*80GB", DevicePeaks("A100 80GB SXM", 2039, 19.5, 156, 312)),
    (r"A100", DevicePeaks("A100 40GB", 1555, 19.5, 156, 312)),
    (r"A10G", DevicePeaks("A10G", 600, 31.2, 62.5, 125)),
    (r"\bA10\b", DevicePeaks("A10", 600, 31.2, 62.5, 125)),
    (r"\bL4\b", DevicePeaks("L4", 300, 30.3, 60, 121)),
    (r"\bT4\b", DevicePeaks("T4", 320, 8.1, None, 65)),
    (r"RTX 4090", DevicePeaks("RTX 4090", 1008, 82.6, 82.6, 165.2)),
]


def lookup_peaks(device_name: str) -> DevicePeaks | None:
    """Spec-sheet peaks for a device name as CUDA reports it, or None if it is not in the table."""
    if not isinstance(device_name, str):
        raise TypeError(f"device_name must be a str, got {type(device_name).__name__}")
    for pattern, peaks in _SPEC_SHEET:
        if re.search(pattern, device_name):
            return peaks
    return None
