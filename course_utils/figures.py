"""Regenerate the README's table of headline figures from saved results.

    python -m course_utils.figures [--device NVIDIA_H100_80GB_HBM3] [--readme README.md] [--check]

Reads ``results/<device>/*.json`` (written by `course_utils.sweeps.save_results`) and replaces the
lines between the README's ``<!-- figures:begin -->`` and ``<!-- figures:end -->`` markers.
``--check`` exits 1 if the README is out of date instead of writing it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from course_utils.sweeps import RESULTS_DIR, load_results

BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"
REFERENCE_DEVICE = "NVIDIA_H100_80GB_HBM3"


def _fmt(value: float) -> str:
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


def figures_table(results_dir: Path, device: str) -> str:
    """The markdown table of every headline saved for ``device``, ordered by notebook."""
    paths = sorted((results_dir / device).glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no saved results in {results_dir / device}")
    rows, machines = [], set()
    for path in paths:
        env, _, headlines = load_results(path)
        machine = f"{env['gpu']}, torch {env['torch']}, triton {env['triton']}"
        machines.add(machine)
        for h in headlines:
            baseline = f"{h.baseline}: {_fmt(h.baseline_value)} {h.unit}" if h.baseline_value else "-"
            ratio = f"{h.ratio:.2f}x" if h.ratio else "-"
            rows.append([h.notebook[:2], h.what, f"{_fmt(h.value)} {h.unit}", baseline, ratio, machine])
    rows.sort(key=lambda r: r[0])  # stable: a notebook's rows keep the order it saved them in
    header = ["notebook", "what", "figure", "baseline (same run)", "ratio", "measured on"]
    if len(machines) == 1:  # say it once rather than on every row
        header, rows = header[:-1], [r[:-1] for r in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if len(machines) == 1:
        lines = [f"Measured on {machines.pop()}.", ""] + lines
    return "\n".join(lines)


def update_readme(readme: Path, table: str) -> str:
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{readme} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=REFERENCE_DEVICE)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--readme", type=Path, default=RESULTS_DIR.parent / "README.md")
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is out of date")
    args = parser.parse_args(argv)
    new = update_readme(args.readme, figures_table(args.results, args.device))
    if args.check:
        if new != args.readme.read_text(encoding="utf-8"):
            print(f"{args.readme} is out of date: run python -m course_utils.figures", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new, encoding="utf-8")
    print(f"updated {args.readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
