"""Run several providers over several sizes; every benchmark table and plot comes from here.

A provider is a function ``setup(size) -> fn``: it allocates the inputs for one size and returns
the zero-argument function to time. Results are a tidy DataFrame (one row per provider and size)
that `course_utils.plots` draws and `save_results` stores with the environment it was measured on.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from course_utils.device import environment
from course_utils.timing import benchmark

#: Where notebooks save results: one folder per device, so a CPU run never overwrites GPU figures.
RESULTS_DIR = Path(__file__).resolve().parent.parent / "results"

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


@dataclass(frozen=True)
class Headline:
    """One figure for the README's table: what was measured, against which baseline."""

    notebook: str
    what: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline_value if self.baseline_value else None


def device_slug(env: Mapping[str, str] | None = None) -> str:
    """Folder name for a device: 'cpu', or the GPU name made file-safe."""
    env = environment() if env is None else env
    return "cpu" if env.get("gpu", "none") == "none" else re.sub(r"[^A-Za-z0-9]+", "_", env["gpu"]).strip("_")


def save_results(name: str, frame: pd.DataFrame | None = None, headlines: Sequence[Headline] = (),
                 results_dir: Path | str | None = None) -> Path:
    """Save a sweep and its headline figures with the environment they were measured on.

    Writes ``results/<device>/<name>.json`` and returns its path.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise ValueError(f"name must be letters, digits, '.', '_' or '-', got {name!r}")
    env = environment()
    folder = Path(results_dir or RESULTS_DIR) / device_slug(env)
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "name": name,
        "environment": env,
        "headlines": [asdict(h) for h in headlines],
        "records": [] if frame is None else json.loads(frame.to_json(orient="records")),
    }
    path = folder / f"{name}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return path


def load_results(path: Path | str) -> tuple[dict[str, Any], pd.DataFrame, list[Headline]]:
    """Read what `save_results` wrote: (environment, records as a DataFrame, headlines)."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    return (record["environment"], pd.DataFrame(record["records"]),
            [Headline(**h) for h in record["headlines"]])
