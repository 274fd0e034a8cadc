"""Run several providers over several sizes; every benchmark table and plot comes from here.

A provider is a function ``setup(size) -> fn``: it allocates the inputs for one size and returns
the zero-argument function to time. The result is a tidy DataFrame (one row per provider and size)
that `course_utils.plots` draws and `course_utils.results.save_results` stores.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from course_utils.checks import require_number
from course_utils.timing import benchmark

COLUMNS = ["provider", "size", "median_ms", "q20_ms", "q80_ms", "gbps", "tflops",
           "pct_peak_bandwidth", "pct_peak_flops"]


def sweep(providers: Mapping[str, Callable[..., Any]], sizes: Sequence[int], *,
          inputs: Callable[[int], Sequence[Any]] | None = None,
          bytes_moved: Callable[[int], int] | None = None, flops: Callable[[int], int] | None = None,
          **benchmark_kwargs: Any) -> pd.DataFrame:
    """Benchmark every provider at every size.

    The common case passes ``inputs`` (size -> the arguments) and the functions themselves, which all
    get the same arguments at a size::

        sweep({"torch.add": torch.add, "triton": add}, sizes, inputs=lambda n: (randn(n), randn(n)))

    Without ``inputs`` each provider is a setup function: ``setup(size)`` allocates what it needs and
    returns the zero-argument function to time (for providers whose inputs differ).

    Args:
        providers: name -> function of the inputs, or (without ``inputs``) name -> setup(size).
        sizes: the problem sizes (the x axis of the plots).
        inputs: size -> a tuple of arguments for every provider at that size.
        bytes_moved, flops: size -> bytes / FLOPs of one call, for GB/s and TFLOP/s columns.
        benchmark_kwargs: passed to `course_utils.benchmark` (``dtype``, ``rep_ms``...).
    """
    if not isinstance(providers, Mapping) or not providers:
        raise TypeError("providers must be a non-empty mapping of name -> function")
    for name, fn in providers.items():
        if not callable(fn):
            raise TypeError(f"provider {name!r} must be a function, got {type(fn).__name__}")
    if inputs is not None and not callable(inputs):
        raise TypeError(f"inputs must be a function size -> arguments, got {type(inputs).__name__}")
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) == 0:
        raise ValueError(f"sizes must be a non-empty list of positive integers, got {sizes!r}")
    sizes = [require_number("sizes[i]", size, integer=True, low=1) for size in sizes]  # NumPy ints too
    for name, fn in (("bytes_moved", bytes_moved), ("flops", flops)):
        if fn is not None and not callable(fn):
            raise TypeError(f"{name} must be a function size -> number, got {type(fn).__name__}")
    rows = []
    for size in sizes:
        args = tuple(inputs(size)) if inputs is not None else None
        for name, provider in providers.items():
            fn = provider(size) if args is None else (lambda provider=provider: provider(*args))
            result = benchmark(fn, bytes_moved=bytes_moved(size) if bytes_moved else None,
                               flops=flops(size) if flops else None, **benchmark_kwargs)
            rows.append({"provider": name, "size": size, **{c: getattr(result, c) for c in COLUMNS[2:]}})
    return pd.DataFrame(rows, columns=COLUMNS)
