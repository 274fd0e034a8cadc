"""`autotune`: ``triton.autotune`` that also works when Triton runs in its interpreter.

Triton's autotuner times each config with ``triton.testing.do_bench``, which needs a GPU. In the
interpreter we hand it a CPU timer instead; the choice it then makes says nothing about GPU speed,
but the code path (configs, keys, the grid as a function of the chosen config) is the same.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import triton

from course_utils.device import INTERPRET
from course_utils.timing import benchmark


def cpu_do_bench(kernel_call: Callable[[], Any], quantiles: Sequence[float] | None = None,
                 **_: Any) -> float | list[float]:
    """A ``do_bench`` replacement for the autotuner that times one interpreted call on the CPU."""
    result = benchmark(kernel_call, device="cpu", warmup_ms=0, rep_ms=1e-3, max_reps=1)
    if quantiles is None:
        return result.median_ms
    return [result.median_ms for _ in quantiles]  # one sample: every quantile is that sample


def autotune(configs: Sequence[triton.Config], key: Sequence[str], **kwargs: Any) -> Callable:
    """Drop-in for ``@triton.autotune(configs=..., key=...)`` that runs on a CPU as well."""
    if not configs:
        raise ValueError("autotune needs at least one triton.Config")
    if INTERPRET and "do_bench" not in kwargs:
        kwargs["do_bench"] = cpu_do_bench
    return triton.autotune(configs=list(configs), key=list(key), **kwargs)
