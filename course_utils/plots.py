"""Throughput-vs-size, bar and roofline plots in one style, drawn from `sweep` DataFrames.

Every function takes an optional ``ax`` and returns the Axes, so a notebook can combine plots.
Nothing here picks a matplotlib backend: notebooks render inline and headless runs use Agg.
"""

from __future__ import annotations

from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from course_utils.checks import require_number
from course_utils.peaks import DevicePeaks

STYLE = {"figure.figsize": (7.5, 4.2), "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
         "axes.spines.right": False, "font.size": 10, "legend.frameon": False}

_METRICS = {"gbps": "GB/s", "tflops": "TFLOP/s", "median_ms": "time (ms)",
            "pct_peak_bandwidth": "% of peak bandwidth", "pct_peak_flops": "% of peak FLOP/s"}


def _axes(ax: Axes | None) -> Axes:
    if ax is not None:
        return ax
    with plt.rc_context(STYLE):
        _, ax = plt.subplots()
    return ax


def plot_throughput(frame: pd.DataFrame, metric: str = "gbps", *, peak: float | None = None,
                    peak_label: str = "peak", title: str = "", xlabel: str = "size",
                    ax: Axes | None = None) -> Axes:
    """One line per provider of ``metric`` against size (log scale), with a dashed line at ``peak``."""
    if metric not in _METRICS:
        raise ValueError(f"metric must be one of {list(_METRICS)}, got {metric!r}")
    if not isinstance(frame, pd.DataFrame) or not {"provider", "size", metric} <= set(frame.columns):
        raise TypeError(f"frame must be a sweep DataFrame with columns provider, size and {metric}, "
                        f"got {type(frame).__name__}")
    if peak is not None:
        peak = require_number("peak", peak)
    ax = _axes(ax)
    with plt.rc_context(STYLE):
        for name in dict.fromkeys(frame["provider"]):
            rows = frame[frame["provider"] == name].sort_values("size")
            ax.plot(rows["size"], rows[metric], marker="o", markersize=3, label=name)
        if peak is not None:
            ax.axhline(peak, color="black", linestyle="--", linewidth=1)
            ax.annotate(f"{peak_label}: {peak:,.0f}", (0.01, peak), xycoords=("axes fraction", "data"),
                        va="bottom", fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(_METRICS[metric])
        ax.set_title(title)
        ax.legend()
    return ax


def plot_bars(values: Mapping[str, float], *, ylabel: str, title: str = "",
              reference: float | None = None, reference_label: str = "", ax: Axes | None = None) -> Axes:
    """A labelled bar per entry of ``values`` (for example rungs of a ladder -> TFLOP/s)."""
    if not isinstance(values, Mapping) or not values:
        raise ValueError(f"values must be a non-empty mapping of name -> number, got {values!r}")
    heights = [require_number(f"values[{k!r}]", v) for k, v in values.items()]
    if reference is not None:
        reference = require_number("reference", reference)
    ax = _axes(ax)
    with plt.rc_context(STYLE):
        names = list(values)
        bars = ax.bar(names, heights, color="tab:blue")
        ax.bar_label(bars, labels=[f"{h:,.3g}" for h in heights], fontsize=8)
        if reference is not None:
            ax.axhline(reference, color="black", linestyle="--", linewidth=1, label=reference_label or None)
            if reference_label:
                ax.legend()
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.tick_params(axis="x", labelrotation=30)
    return ax


_MARKERS = "osD^vPX*<>"  # one per point when the roofline's labels go in a legend


def plot_roofline(points: Mapping[str, tuple[float, float]], peaks: DevicePeaks, *,
                  peak_tflops: float | None = None, title: str = "", labels: str = "annotate",
                  ax: Axes | None = None) -> Axes:
    """Roofline: attainable TFLOP/s against arithmetic intensity (FLOP/byte), with each point.

    ``points`` maps a label to (FLOP per byte of DRAM traffic, achieved TFLOP/s). The compute roof is
    ``peak_tflops`` (default: the fp16 tensor-core peak); the slope is the memory bandwidth.
    ``labels="annotate"`` writes each label next to its point; ``labels="legend"`` gives each point its own
    marker and lists the labels in a legend, for points close enough that their labels would overlap.
    """
    if labels not in ("annotate", "legend"):
        raise ValueError(f"labels must be 'annotate' or 'legend', got {labels!r}")
    if not isinstance(peaks, DevicePeaks):
        raise TypeError(f"peaks must be a DevicePeaks (cu.device_peaks() is None on a machine without a GPU: "
                        f"pass cu.lookup_peaks('H100') to draw a GPU's roof), got {peaks!r}")
    if not isinstance(points, Mapping):
        raise TypeError(f"points must map a label to (FLOP per byte, TFLOP/s), got {type(points).__name__}")
    for label, point in points.items():  # both axes are logarithmic: only positive figures have a place
        if not isinstance(point, (tuple, list)) or len(point) != 2:
            raise ValueError(f"points[{label!r}] must be (FLOP per byte, TFLOP/s), got {point!r}")
        for what, value in zip(("intensity", "TFLOP/s"), point):
            if require_number(f"points[{label!r}] {what}", value) <= 0:
                raise ValueError(f"points[{label!r}] {what} must be > 0 (the axes are logarithmic), got {value!r}")
    roof = peaks.fp16_tflops if peak_tflops is None else require_number("peak_tflops", peak_tflops)
    if roof <= 0:
        raise ValueError(f"peak_tflops must be > 0, got {peak_tflops!r}")
    bandwidth_tbps = peaks.bandwidth_gbps / 1e3
    ax = _axes(ax)
    with plt.rc_context(STYLE):
        intensities = [float(p[0]) for p in points.values()] or [1.0]
        lo = min(min(intensities) / 4, 0.05)
        hi = max(max(intensities) * 4, 4 * roof / bandwidth_tbps)
        x = np.logspace(np.log10(lo), np.log10(hi), 200)
        ax.plot(x, np.minimum(roof, bandwidth_tbps * x), color="black", linewidth=1.5,
                label=f"{peaks.name}: {peaks.bandwidth_gbps:,.0f} GB/s, {roof:,.0f} TFLOP/s")
        legend = labels == "legend"  # then the empty upper left (above the slope) holds the legend
        for i, (label, (intensity, tflops)) in enumerate(points.items()):
            ax.scatter([intensity], [tflops], zorder=3, marker=_MARKERS[i % len(_MARKERS)] if legend else "o",
                       alpha=0.8 if legend else None, label=label if legend else None)
            if not legend:
                ax.annotate(label, (intensity, tflops), textcoords="offset points", xytext=(4, 4), fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(title)
        ax.legend(loc="upper left", fontsize=8) if legend else ax.legend(loc="lower right")
    return ax
