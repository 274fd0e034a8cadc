"""The course's design rules, measured: reading minutes, cells, longest code cell, typed figures, process words.

    python tools/design_check.py                      # a table for every notebook (main and deep dives)
    python tools/design_check.py notebooks/05_*.ipynb # some notebooks; add --figures to list typed figures

CONTRIBUTING.md states the rules; tests/test_design.py enforces them with the functions below.

- Reading minutes = markdown words / 180 + code lines / 12 + output lines / 40 (text outputs; an image
  counts as 10 lines).
- A *typed figure* is a number followed by a unit of measurement (time, throughput, FLOP/s, a speed-up
  written with `x`, a percentage, a clock, a decimal memory size) in a markdown cell, outside code spans.
  Spec-sheet peaks (course_utils.peaks) are allowed everywhere; a notebook allows other non-measured facts
  (arithmetic, a tile's bytes, a sleep of 20 ms) in its metadata: ``metadata.course.non_measured_figures``,
  a list of the exact strings, each with the reason beside it in CONTRIBUTING.md's sense (a fact, not a run).
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
DEEP_DIVES = NOTEBOOKS / "deep_dives"

#: The design's limits: (reading minutes, cells) for a main notebook, a case study, a deep dive.
LIMITS = {"main": (60, 35), "case study": (75, 45), "deep dive": (60, 45)}
MAX_CODE_LINES = 40
CASE_STUDIES = ("10_", "11_", "12_", "13_")
#: Notebooks not yet in the design's shape; each names the work that brings it there. Empty when done.
NOT_YET_REDESIGNED: set[str] = set()

_NUMBER = r"(?<![\w.^/])(?:~|≈)?\d[\d,]*(?:\.\d+)?(?:\s?[-–]\s?\d[\d,]*(?:\.\d+)?)?"
_UNITS = (r"(?:[kMGT]?B/s|[KMGT]iB/s|[GT]FLOP/s|[GT]FLOPS|TOPS|ns|us|µs|μs|ms|s|sec|seconds?|minutes?|min|"
          r"cycles|[MG]Hz|W|%)")
#: `x` is a speed-up ("1.07x cuBLAS"), not a shape ("16 x 16", "4096x4096").
FIGURE = re.compile(_NUMBER + r"(?:\s?" + _UNITS + r"(?![\w/])|\s?[x×](?![\w/])(?!\s?[\d(]))")
DECIMAL_SIZE = re.compile(r"(?<![\w.^/])\d[\d,]*\.\d+\s?(?:[KMGT]B|[KMGT]iB)(?![\w/])")
CODE_SPAN = re.compile(r"```.*?```|`[^`\n]*`|\$\$.*?\$\$|\$[^$\n]*\$", re.S)
PROCESS_WORDS = re.compile(r"(?i)\bissue\s*#?\s*\d+|#\d{1,3}\b|targets? of issue|\bpull request\b|\bclosing note\b")


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def kind(path: Path) -> str:
    path = Path(path)
    if path.parent.name == "deep_dives":
        return "deep dive"
    return "case study" if path.name.startswith(CASE_STUDIES) or path.name.startswith("14") else "main"


def output_lines(cell: dict) -> int:
    lines = 0
    for out in cell.get("outputs", []):
        if "text" in out:
            lines += "".join(out["text"]).count("\n") + 1
        data = out.get("data", {})
        if "image/png" in data or "image/svg+xml" in data:
            lines += 10
        elif "text/markdown" in data:
            lines += "".join(data["text/markdown"]).count("\n") + 1
        elif "text/html" in data:
            lines += "".join(data["text/html"]).count("<tr")  or 1
        elif "text/plain" in data:
            lines += "".join(data["text/plain"]).count("\n") + 1
    return lines


@functools.lru_cache(maxsize=1)
def peak_figures() -> frozenset[str]:
    """Spec-sheet figures as they may be written: '3,350 GB/s', '3.35 TB/s', '989.4 TFLOP/s'."""
    sys.path.insert(0, str(ROOT))
    from course_utils.peaks import _SPEC_SHEET

    out = set()
    for _, p in _SPEC_SHEET:
        for gbps in (p.bandwidth_gbps,):
            out |= {f"{gbps:,.0f} GB/s", f"{gbps:.0f} GB/s", f"{gbps / 1000:g} TB/s", f"{gbps / 1000:.1f} TB/s"}
        for t in (p.fp32_tflops, p.tf32_tflops, p.fp16_tflops):
            if t:
                out |= {f"{t:g} TFLOP/s", f"{t:.0f} TFLOP/s", f"{t:g} TFLOPS", f"{t:.0f} TFLOPS"}
    return frozenset(out)


def typed_figures(nb: dict) -> list[str]:
    """Figures with a unit in markdown that are neither spec-sheet peaks nor allowed by the notebook."""
    allowed = set(nb.get("metadata", {}).get("course", {}).get("non_measured_figures", [])) | peak_figures()
    found = []
    for cell in nb["cells"]:
        if cell["cell_type"] != "markdown":
            continue
        text = CODE_SPAN.sub(" ", _source(cell))
        for match in list(FIGURE.finditer(text)) + list(DECIMAL_SIZE.finditer(text)):
            figure = match.group(0).strip()
            if figure not in allowed and figure.lstrip("~≈") not in allowed:
                found.append(figure)
    return found


def process_words(nb: dict) -> list[str]:
    hits = []
    for cell in nb["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "code":  # comments and strings a learner reads count too
            text = "\n".join(line for line in text.splitlines())
        hits += [m.group(0) for m in PROCESS_WORDS.finditer(text)]
    return hits


@dataclass
class Metrics:
    name: str
    kind: str
    cells: int
    reading_minutes: float
    longest_code_cell: int
    typed_figures: int
    process_words: int


def metrics(path: Path) -> Metrics:
    nb = load(path)
    words = code = outs = longest = 0
    for cell in nb["cells"]:
        src = _source(cell)
        if cell["cell_type"] == "markdown":
            words += len(src.split())
        elif cell["cell_type"] == "code":
            n = len([line for line in src.splitlines() if line.strip()])
            code += n
            longest = max(longest, n)
            outs += output_lines(cell)
    minutes = words / 180 + code / 12 + outs / 40
    return Metrics(Path(path).stem, kind(path), len(nb["cells"]), round(minutes, 1), longest,
                   len(typed_figures(nb)), len(process_words(nb)))


def all_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]*_*.ipynb")) + sorted(DEEP_DIVES.glob("[0-9][0-9]*_*.ipynb"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", type=Path)
    parser.add_argument("--figures", action="store_true", help="list each notebook's typed figures")
    args = parser.parse_args(argv)
    paths = args.paths or all_notebooks()
    print(f"| notebook | kind | cells | reading (min) | longest code cell | typed figures | process words |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    total = 0.0
    for path in paths:
        m = metrics(path)
        total += m.reading_minutes
        print(f"| {m.name} | {m.kind} | {m.cells} | {m.reading_minutes:.0f} | {m.longest_code_cell} | "
              f"{m.typed_figures} | {m.process_words} |")
        if args.figures:
            for figure in typed_figures(load(path)):
                print(f"    {figure}")
    print(f"\ntotal reading: {total / 60:.1f} hours")
    return 0


if __name__ == "__main__":
    sys.exit(main())
