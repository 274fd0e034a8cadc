"""Plots and diagrams drawn for slides: 1280x720 slides seen from the back of a room.

Every chart is drawn here from the saved results records (``results/<GPU>/<notebook>.json``), never
copied from a notebook's output, with the course's slide style:

- full slide width, 1 point = 1 slide pixel, every text at least ``MIN_FONT_PX`` (16 px);
- one colour per provider across the course (``colour_of``), the lecture's own kernel ("ours") drawn
  thicker and labelled in bold;
- plain numbers on axes and bars (``4 K``, ``1,024``, ``3,051``), never scientific notation;
- no overlaps: `check_layout` measures the legend's bounding box against every bar, line, label and
  the other texts, tries the legend's places in turn, and fails when none is free.

A chart or diagram is rendered to SVG (text drawn as paths, so it looks the same in every browser and
needs no font) and embedded in the deck as an ``<img>`` of ``data:image/svg+xml``; its ``data-chart``
attribute says how to draw it again, which the deck check does to compare (through a cache under
``.cache/slides/figures/``, keyed by the results file and this code, so a test session draws each once).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = ROOT / ".cache" / "slides" / "figures"

#: (width, height) in slide pixels of a chart or diagram, by size name.
SIZES = {"": (1180, 440), "tall": (1180, 500), "short": (1180, 340), "half": (580, 420), "half-tall": (580, 500)}
MIN_FONT_PX = 16
FONT = {"tick": 17, "label": 18, "legend": 17, "value": 17, "note": 17, "title": 19}
#: The colour of text.
INK = "#1b2a41"

#: One colour per provider, across every deck: (words to look for in a provider's name, colour).
#: The first match wins, so the more specific names come first.
PROVIDER_COLOURS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("peak", "spec sheet", "spec-sheet"), "#c62828"),
    (("copy", "clone", "ceiling"), "#7f8c8d"),
    (("cublas", "_scaled_mm", "merged"), "#4a4a4a"),
    (("torch.compile", "compile", "inductor"), "#8e44ad"),
    (("triton",), "#0b5fb0"),
    (("cuda", "square_matrix", "rung", "ours", "fused"), "#2e8b57"),
    (("torch", "eager", "pytorch", "f.gelu", "sdpa", "peft"), "#e67e22"),
)
FALLBACK = ("#16a085", "#b9770e", "#5d6d7e", "#c0392b", "#2874a6")


def colour_of(provider: str, index: int = 0, default: str | None = None) -> str:
    """The course's colour for a provider (by the words in its name), else ``default``, else a fallback
    by position."""
    name = provider.lower()
    for words, colour in PROVIDER_COLOURS:
        if any(w in name for w in words):
            return colour
    return default or FALLBACK[index % len(FALLBACK)]


def plain_number(value: float) -> str:
    """A tick or bar label: 3 significant digits or whole, with thousands separators; never 1e+03."""
    if value == 0:
        return "0"
    if abs(value) < 100:
        text = f"{value:,.3g}"
        if "e" in text:  # very small: as many decimals as needed
            text = f"{value:.{max(0, 2 - int(math.floor(math.log10(abs(value)))))}f}"
        return text
    return f"{value:,.0f}"


def short_count(value: float) -> str:
    """A size on an axis: 256, 4 K, 16 M, 1 G (powers of 1024)."""
    for div, suffix in ((1 << 30, " G"), (1 << 20, " M"), (1 << 10, " K")):
        if abs(value) >= div and value % (div // 1024 or 1) == 0:
            return f"{value / div:g}{suffix}"
    return plain_number(value)


class LayoutError(ValueError):
    """A chart whose texts, legend or artists overlap or fall off the canvas."""


# --------------------------------------------------------------------------------------------------
# Rendering and checks


@dataclass
class Rendered:
    svg: str
    width: int
    height: int
    min_font: float  # the smallest text, in slide pixels at the native size
    texts: int


def _mpl():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return matplotlib, plt


def distinct_colours(names: Sequence[str]) -> list[str]:
    """The course colour of each name; two names of one chart never share a colour (a colour means
    one provider on a slide): a clash takes the next free fallback colour."""
    out = []
    for i, name in enumerate(names):
        colour = colour_of(name, i)
        if colour in out:
            colour = next(c for c in FALLBACK + tuple(c for _, c in PROVIDER_COLOURS) if c not in out)
        out.append(colour)
    return out


def new_figure(size: str = ""):
    matplotlib, plt = _mpl()
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {sorted(SIZES)}")
    width, height = SIZES[size]
    with matplotlib.rc_context(style()):
        fig = plt.figure(figsize=(width / 72, height / 72), dpi=72)
    return fig


def style() -> dict:
    return {"font.family": "DejaVu Sans", "font.size": FONT["tick"], "axes.labelsize": FONT["label"],
            "xtick.labelsize": FONT["tick"], "ytick.labelsize": FONT["tick"], "legend.fontsize": FONT["legend"],
            "axes.titlesize": FONT["title"], "axes.edgecolor": "#555", "axes.labelcolor": INK,
            "text.color": INK, "xtick.color": INK, "ytick.color": INK, "axes.spines.top": False,
            "axes.spines.right": False, "axes.grid": False, "svg.fonttype": "path", "svg.hashsalt": "course",
            "axes.formatter.useoffset": False, "axes.formatter.limits": (-9, 12), "lines.linewidth": 2.4}


def _visible_texts(fig) -> list:
    """The texts that a drawn figure shows: figure texts, axes texts, titles, axis labels, the tick
    labels of ticks in view (matplotlib keeps labels of ticks outside the view, undrawn), legends."""
    out = [t for t in fig.texts]
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out += list(ax.texts) + [ax.title, ax._left_title, ax._right_title]
        for axis in (ax.xaxis, ax.yaxis):
            if not ax.axison or not axis.get_visible():  # axis("off") draws no ticks or labels
                continue
            out.append(axis.label)
            for tick in axis._update_ticks():
                out += [label for label in (tick.label1, tick.label2) if label.get_visible()]
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            out += list(legend.get_texts())
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def _overlap(a, b, pad: float = 0.0) -> bool:
    return not (a.x1 <= b.x0 + pad or b.x1 <= a.x0 + pad or a.y1 <= b.y0 + pad or b.y1 <= a.y0 + pad)


def layout_problems(fig) -> list[str]:
    """What overlaps or falls off the canvas in a drawn figure, as sentences (empty: nothing)."""
    from matplotlib.patches import Rectangle

    fig.draw_without_rendering()  # lay out every artist (text extents included) without rasterizing
    renderer = fig.canvas.get_renderer()
    canvas = fig.bbox
    problems = []
    texts = _visible_texts(fig)
    boxes = [(t, t.get_window_extent(renderer)) for t in texts]
    in_legend = {id(t) for ax in fig.axes if ax.get_legend() is not None for t in ax.get_legend().get_texts()}
    for t, box in boxes:
        if box.x0 < canvas.x0 - 1 or box.x1 > canvas.x1 + 1 or box.y0 < canvas.y0 - 1 or box.y1 > canvas.y1 + 1:
            problems.append(f"text {t.get_text()!r} falls off the canvas")
    free = boxes
    for i, (t1, b1) in enumerate(free):  # texts never overlap each other
        for t2, b2 in free[i + 1:]:
            if _overlap(b1, b2, pad=1.0) and not (id(t1) in in_legend and id(t2) in in_legend):
                problems.append(f"texts {t1.get_text()!r} and {t2.get_text()!r} overlap")
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible():
            continue
        lbox = legend.get_window_extent(renderer)
        for patch in ax.patches:
            if isinstance(patch, Rectangle) and patch.get_visible() and _overlap(lbox, patch.get_window_extent(renderer)):
                problems.append("the legend covers a bar")
                break
        for line in ax.lines:
            if not line.get_visible() or line.get_label().startswith("_legend_skip"):
                continue
            xy = ax.transData.transform(list(zip(*line.get_data())))
            for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
                if any(lbox.contains(x0 + (x1 - x0) * s / 24, y0 + (y1 - y0) * s / 24) for s in range(25)):
                    problems.append(f"the legend covers the line {line.get_label()!r}")
                    break
            else:
                if len(xy) == 1 and lbox.contains(*xy[0]):
                    problems.append(f"the legend covers the point {line.get_label()!r}")
        for t, box in boxes:
            if id(t) not in in_legend and _overlap(lbox, box):
                problems.append(f"the legend covers the text {t.get_text()!r}")
    for ax in fig.axes:  # a line drawn through a label
        labels = [(t, t.get_window_extent(renderer)) for t in ax.texts if t.get_visible() and t.get_text().strip()]
        for line in ax.lines:
            if not line.get_visible() or not labels:
                continue
            xy = line.get_transform().transform(list(zip(*line.get_data())))
            for t, box in labels:
                for (x0, y0), (x1, y1) in zip(xy[:-1], xy[1:]):
                    if any(box.contains(x0 + (x1 - x0) * k / 48, y0 + (y1 - y0) * k / 48) for k in range(49)):
                        problems.append(f"a line crosses the text {t.get_text()!r}")
                        break
    return problems


def place_legend(ax, candidates: Sequence[str] = ("upper left", "lower right", "upper right", "lower left",
                                                  "center left", "center right"), **kwargs) -> bool:
    """A legend where it covers nothing: the first free place (True), else above the plot (False)."""
    fig = ax.figure
    for loc in candidates:
        ax.legend(loc=loc, frameon=True, framealpha=1.0, edgecolor="#ccc", fontsize=FONT["legend"], **kwargs)
        if not any("legend" in p for p in layout_problems(fig)):
            return True
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.02), ncols=min(len(labels), 4), frameon=False,
              borderaxespad=0, fontsize=FONT["legend"], **kwargs)
    return False


def render(fig) -> Rendered:
    """Check the drawn figure (overlaps, text size) and return it as SVG text."""
    _, plt = _mpl()
    try:
        problems = layout_problems(fig)
        texts = _visible_texts(fig)
        sizes = [t.get_fontsize() for t in texts]
        small = [f"{t.get_text()!r} at {t.get_fontsize():.0f} px" for t in texts if t.get_fontsize() < MIN_FONT_PX]
        if small:
            problems.append(f"texts below {MIN_FONT_PX} px: {', '.join(small[:4])}")
        if problems:
            raise LayoutError("; ".join(dict.fromkeys(problems)))
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", metadata={"Date": None})
        width, height = round(fig.get_figwidth() * 72), round(fig.get_figheight() * 72)
        svg = buffer.getvalue()
        svg = svg[svg.find("<svg"):]  # no XML declaration or doctype: it goes into a data: URI
        return Rendered(svg, width, height, min(sizes) if sizes else 0.0, len(texts))
    finally:
        plt.close(fig)


def finish_axes(ax, xlabel: str = "", ylabel: str = "") -> None:
    if xlabel:
        ax.set_xlabel(xlabel, fontsize=FONT["label"])
    if ylabel:
        ax.set_ylabel(ylabel, fontsize=FONT["label"])
    ax.tick_params(labelsize=FONT["tick"])


# --------------------------------------------------------------------------------------------------
# Charts of measured figures


def bar_chart(items: Sequence[tuple[str, float]], unit: str, ours: Iterable[str] = (), size: str = "",
              reference: tuple[str, float] | None = None, xlabel: str | None = None) -> Rendered:
    """Horizontal bars, one per (label, value), top to bottom, each labelled with its value; ``ours`` in
    bold and full colour, the rest in their providers' colours, lighter; ``reference`` a labelled
    vertical line (a peak, a ceiling)."""
    import matplotlib

    ours = set(ours)
    with matplotlib.rc_context(style()):
        fig = new_figure(size)
        ax = fig.add_subplot()
        labels = [label for label, _ in items]
        values = [float(v) for _, v in items]
        top = max(values + ([reference[1]] if reference else []))
        y = list(range(len(items)))[::-1]
        colours = [colour_of(label, i, default="#5d6d7e") for i, label in enumerate(labels)]  # one colour a kind
        for i, (label, value) in enumerate(items):
            mine = label in ours
            ax.barh(y[i], value, height=0.66, color=colours[i], alpha=1.0 if mine or not ours else 0.55,
                    edgecolor=INK if mine else "none", linewidth=2 if mine else 0)
            # the value after the bar, or inside its end where the reference line would cross it
            inside = reference is not None and value <= reference[1] < value + top * 0.09
            ax.text(value - top * 0.01 if inside else value + top * 0.01, y[i], plain_number(value), va="center",
                    ha="right" if inside else "left", fontsize=FONT["value"],
                    fontweight="bold" if mine else "normal", color="white" if inside and mine else INK)
        if reference:
            ax.axvline(reference[1], color=colour_of(reference[0]), linestyle="--", linewidth=2)
            ax.text(reference[1] - top * 0.006, len(items) - 0.45, reference[0], ha="right", va="bottom",
                    fontsize=FONT["note"], color=colour_of(reference[0]))
        ax.set_yticks(y, labels)
        for tick, label in zip(ax.get_yticklabels(), labels):
            if label in ours:
                tick.set_fontweight("bold")
        ax.set_xlim(0, top * 1.16)
        ax.set_ylim(-0.6, len(items) - 0.4 + (0.5 if reference else 0))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: plain_number(v)))
        finish_axes(ax, xlabel if xlabel is not None else unit)
        fig.tight_layout(pad=0.4)
        return render(fig)


def line_chart(series: dict[str, Sequence[tuple[float, float]]], xlabel: str, ylabel: str,
               ours: Iterable[str] = (), size: str = "", logx: bool = True, logy: bool = False,
               reference: tuple[str, float] | None = None, count_ticks: bool = True) -> Rendered:
    """One line per series (name -> [(x, y)]), markers at the measured points, ``ours`` thicker; the x
    axis ticks at the measured x values (``4 K``, ``16 M``: plain counts), a legend that covers nothing."""
    import matplotlib

    ours = set(ours)
    with matplotlib.rc_context(style()):
        fig = new_figure(size)
        ax = fig.add_subplot()
        xs_all = sorted({x for points in series.values() for x, _ in points})
        colours = distinct_colours(list(series) + ([reference[0]] if reference else []))
        for i, (name, points) in enumerate(series.items()):
            points = sorted(points)
            mine = name in ours
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=8 if mine else 6,
                    linewidth=4 if mine else 2.2, color=colours[i], label=name, zorder=3 if mine else 2)
        if reference:
            ax.axhline(reference[1], color=colours[-1], linestyle="--", linewidth=2, label=reference[0])
        if logx:
            ax.set_xscale("log", base=2)
        if logy:
            ax.set_yscale("log")
        ticks = xs_all if len(xs_all) <= 9 else xs_all[::math.ceil(len(xs_all) / 9)]
        ax.set_xticks(ticks, [short_count(t) if count_ticks else plain_number(t) for t in ticks])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: plain_number(v)))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        top = max([y for points in series.values() for _, y in points] + ([reference[1]] if reference else []))
        if not logy:
            ax.set_ylim(0, top * 1.12)
        ax.grid(axis="y", color="#e5e5e5", zorder=0)
        finish_axes(ax, xlabel, ylabel)
        fig.tight_layout(pad=0.4)
        if not place_legend(ax):  # the legend went above the plot: make room for it
            fig.tight_layout(pad=0.4)
        for text in ax.get_legend().get_texts():
            if text.get_text() in ours:
                text.set_fontweight("bold")
        return render(fig)


# --------------------------------------------------------------------------------------------------
# Cache: each chart drawn once per change of its inputs


def _code_version() -> str:
    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for name in ("figures.py", "diagrams.py"):
        path = here / name
        if path.exists():
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def cached(key: dict, draw: Callable[[], Rendered], cache_dir: Path = CACHE_DIR) -> Rendered:
    """``draw()``, or what it drew last time for the same key and the same code."""
    text = json.dumps(key, sort_keys=True, default=str) + _code_version()
    name = hashlib.sha256(text.encode()).hexdigest()[:24]
    path = Path(cache_dir) / f"{name}.json"
    if path.exists():
        try:
            return Rendered(**json.loads(path.read_text(encoding="utf-8")))
        except (ValueError, TypeError):
            pass
    rendered = draw()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rendered.__dict__), encoding="utf-8")
    return rendered
