"""Run several providers over several sizes; every benchmark table and plot comes from here.

A provider is a function ``setup(size) -> fn``: it allocates the inputs for one size and returns
the zero-argument function to time. The result is a tidy DataFrame (one row per provider and size)
that `course_utils.plots` draws and `course_utils.results.save_results` stores.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from course_utils.timing import benchmark

COLUMNS = ["provider", "size", "median_ms", "q20_ms", "q80_ms", "gbps", "tflops",
           "pct_peak_bandwidth", "pct_peak_flops"]


def sweep(providers: Mapping[str, Callable[[int], Callable[[], Any]]], sizes: Sequence[int], *,
          bytes_moved: Callable[[int], int] | None = None, flops: Callable[[int], int] | None = None,
          **benchmark_kwargs: Any) -> pd.DataFrame:
    """Benchmark ``providers[name](size)`` for every name and size.

    Args:
        providers: name -> setup function; ``setup(size)`` returns the function to time.
        sizes: the problem sizes (the x axis of the plots).
        bytes_moved, flops: size -> bytes / FLOPs of one call, for GB/s and TFLOP/s columns.
        benchmark_kwargs: passed to `course_utils.benchmark` (``dtype``, ``rep_ms``...).
    """
    if not isinstance(providers, Mapping) or not providers:
        raise TypeError("providers must be a non-empty mapping of name -> setup(size) function")
    for name, setup in providers.items():
        if not callable(setup):
            raise TypeError(f"provider {name!r} must be a setup(size) function, got {type(setup).__name__}")
    if len(sizes) == 0:
        raise ValueError("sizes must not be empty")
    for size in sizes:
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"sizes must be positive integers, got {size!r}")
    rows = []
    for size in sizes:
        for name, setup in providers.items():
            fn = setup(size)
            result = benchmark(fn, bytes_moved=bytes_moved(size) if bytes_moved else None,
                               flops=flops(size) if flops else None, **benchmark_kwargs)
            rows.append({"provider": name, "size": size, **{c: getattr(result, c) for c in COLUMNS[2:]}})
    return pd.DataFrame(rows, columns=COLUMNS)
