"""Measured results, one way: a notebook saves its headline figures; the README's table is made from them.

    from course_utils.results import Headline, save_results
    save_results("05_triton_vector_add", frame, [Headline("vector add fp32, 2^28", 3051.2, "GB/s",
                                                          "torch.add", 3036.0)])

writes ``results/<device>/05_triton_vector_add.json`` and prints each headline exactly as the README's
table will show it. ``python -m course_utils.results`` rewrites that table (between the README's
``<!-- figures:begin -->`` and ``<!-- figures:end -->`` markers) from the saved H100 files;
``--check`` only says whether it is current. A notebook is named by its file stem, nothing else.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import pandas as pd

from course_utils.checks import require_number
from course_utils.device import environment

PROJECT_DIR = Path(__file__).resolve().parent.parent
#: One folder per device, so a CPU run never overwrites GPU figures (results/cpu/ is git-ignored).
RESULTS_DIR = PROJECT_DIR / "results"
NOTEBOOKS_DIR = PROJECT_DIR / "notebooks"
REFERENCE_DEVICE = "NVIDIA_H100_80GB_HBM3"
TARGETS_PATH = RESULTS_DIR / "targets.json"
BEGIN, END = "<!-- figures:begin -->", "<!-- figures:end -->"


def format_figure(value: float) -> str:
    """How a figure is written everywhere (notebook output and README): 3 significant digits or whole."""
    value = require_number("value", value)
    return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"


@dataclass(frozen=True)
class Headline:
    """One figure for the README's table: what was measured and the baseline measured in the same run."""

    what: str
    value: float
    unit: str
    baseline: str = ""
    baseline_value: float | None = None

    def __post_init__(self) -> None:
        for name in ("value", "baseline_value"):  # NumPy numbers become floats; NaN and infinities are refused
            number = getattr(self, name)
            if number is not None:
                object.__setattr__(self, name, require_number(f"Headline.{name}", number))
        if not isinstance(self.what, str) or not isinstance(self.unit, str) or not self.what or not self.unit:
            raise ValueError("a Headline needs a description (what) and a unit")

    @property
    def ratio(self) -> float | None:
        return self.value / self.baseline_value if self.baseline_value else None

    def table_cells(self) -> tuple[str, str, str]:
        """(figure, baseline, ratio) as the README shows them."""
        figure = f"{format_figure(self.value)} {self.unit}"
        if not self.baseline_value:
            return figure, "-", "-"
        return (figure, f"{self.baseline}: {format_figure(self.baseline_value)} {self.unit}",
                f"{self.ratio:.2f}x")

    def __str__(self) -> str:
        figure, baseline, ratio = self.table_cells()
        return f"{self.what}: {figure}" + ("" if baseline == "-" else f" | {baseline} | {ratio}")


_TIME_UNITS = {"ns", "us", "µs", "ms", "s"}
_LOWER_IS_BETTER = _TIME_UNITS | {"bytes", "B", "KiB", "MiB", "GiB", "KB", "MB", "GB"}


@dataclass(frozen=True)
class Verdict:
    """One measurement judged: the printed line, its ratio to the baseline (> 1: better) and the prediction."""

    line: str
    ratio: float | None
    holds: bool | None  # None: no prediction, or not judged (a CPU run, where the prediction is for a GPU)

    def __str__(self) -> str:
        return self.line


def verdict(what: str, value: float, unit: str, *, baseline: str = "", baseline_value: float | None = None,
            expect: tuple[float | None, float | None] | None = None, judge: bool | None = None,
            lower_is_better: bool | None = None) -> Verdict:
    """Print and return one line that states a measurement, its same-run baseline and the prediction's fate.

        verdict("Triton add, 2^28 fp32", 3051, "GB/s", baseline="torch.add", baseline_value=3036, expect=(0.9, None))
        -> "Triton add, 2^28 fp32: 3,051 GB/s vs torch.add 3,036 GB/s = 1.01x; predicted >= 0.90x: holds"

    The ratio is "how many times better than the baseline": value / baseline, or baseline / value for units
    where lower is better (times, bytes; ``lower_is_better`` overrides). ``expect=(low, high)`` bounds that
    ratio (either end None), or the value itself when there is no baseline. ``judge``: whether to judge the
    prediction (default: only on a GPU, since the course's predictions are about GPUs).
    """
    from course_utils.device import HAS_CUDA

    if not isinstance(what, str) or not what or not isinstance(unit, str) or not unit:
        raise ValueError("verdict needs `what` and `unit` as non-empty strings")
    value = require_number("value", value)
    baseline_value = None if baseline_value is None else require_number("baseline_value", baseline_value)
    if expect is not None and (not isinstance(expect, tuple) or len(expect) != 2 or expect == (None, None)):
        raise ValueError(f"expect must be (low, high) with at least one bound, got {expect!r}")
    if expect is not None:
        expect = tuple(None if b is None else require_number(f"expect[{i}]", b) for i, b in enumerate(expect))
    lower = unit in _LOWER_IS_BETTER if lower_is_better is None else lower_is_better
    line = f"{what}: {format_figure(value)} {unit}"
    ratio = None
    if baseline_value is not None:
        if baseline_value <= 0 or value <= 0:
            raise ValueError(f"value and baseline_value must be > 0 to compare, got {value} and {baseline_value}")
        ratio = baseline_value / value if lower else value / baseline_value
        line += f" vs {baseline or 'baseline'} {format_figure(baseline_value)} {unit} = {ratio:.2f}x"
        if lower:  # the ratio reads as "times faster" for a time, "times smaller" for a size
            line += " (speed-up)" if unit in _TIME_UNITS else " (smaller)" if unit in _LOWER_IS_BETTER else " (lower)"
    holds = None
    if expect is not None:
        judged = ratio if ratio is not None else value
        low, high = expect
        suffix = "x" if ratio is not None else f" {unit}"
        bound = " and ".join(b for b in (f">= {low:g}{suffix}" if low is not None else "",
                                          f"<= {high:g}{suffix}" if high is not None else "") if b)
        if (HAS_CUDA if judge is None else judge):
            holds = (low is None or judged >= low) and (high is None or judged <= high)
            line += f"; predicted {bound}: {'holds' if holds else 'does NOT hold'}"
        else:
            line += f"; predicted {bound} on a GPU (not judged on this CPU run)"
    print(line)
    return Verdict(line, ratio, holds)


class SavedResults(NamedTuple):
    notebook: str
    environment: dict[str, str]
    frame: pd.DataFrame
    headlines: list[Headline]


@dataclass(frozen=True)
class Target:
    """What an issue asks of one headline: its ratio to the baseline (unit 'x') or its figure, at least
    (``at_least``) or at most (``at_most``, e.g. an error or a difference that must stay small)."""

    issue: int
    notebook: str
    what: str
    baseline: str
    at_least: float | None = None
    unit: str = "x"
    note: str = ""  # where the issue's target spans several headlines, e.g. "on at least 6 of the 12 pairs"
    at_most: float | None = None
    pending: bool = False  # set before the first run that saves its headline (a new or reworked notebook's goal)

    def __post_init__(self) -> None:
        if (self.at_least is None) == (self.at_most is None):
            raise ValueError(f"target {self.what!r}: give exactly one of at_least and at_most")

    def judges(self, notebook: str, headline: Headline) -> bool:
        return (notebook, headline.what, headline.baseline) == (self.notebook, self.what, self.baseline)

    def goal(self) -> str:
        """e.g. '>= 1.02x' or '<= 0.005 AUC', with the note where the goal spans several headlines."""
        sign, limit = (">=", self.at_least) if self.at_least is not None else ("<=", self.at_most)
        bound = f"{limit:.2f}x" if self.unit == "x" else f"{format_figure(limit)} {self.unit}"
        return f"{sign} {bound}" + (f", {self.note}" if self.note else "")

    def verdict(self, headline: Headline) -> str:
        """e.g. '>= 1.02x: missed', judged on the unrounded figure."""
        measured = headline.ratio if self.unit == "x" else headline.value
        met = measured is not None and (measured >= self.at_least if self.at_least is not None
                                        else measured <= self.at_most)
        return f"{self.goal()}: {'met' if met else 'missed'}"


def load_targets(path: Path = TARGETS_PATH) -> list[Target]:
    """The targets the issues set (results/targets.json), written before the runs they judge."""
    return [Target(**t) for t in json.loads(Path(path).read_text(encoding="utf-8"))["targets"]]


def device_slug(env: Mapping[str, str]) -> str:
    """Folder name for a device: 'cpu', or the GPU name made file-safe."""
    return "cpu" if env.get("gpu", "none") == "none" else re.sub(r"[^A-Za-z0-9]+", "_", env["gpu"]).strip("_")


def check_notebook_name(notebook: str, notebooks_dir: Path = NOTEBOOKS_DIR) -> str:
    """``notebook`` must be the stem of a notebook of the course, e.g. '05_triton_vector_add'."""
    if not isinstance(notebook, str) or not re.fullmatch(r"\d\d[a-z]?_[a-z0-9_]+", notebook):
        raise ValueError(f"notebook must be a notebook's file stem such as '05_triton_vector_add', got {notebook!r}")
    places = (notebooks_dir / f"{notebook}.ipynb", notebooks_dir / "deep_dives" / f"{notebook}.ipynb")
    if notebooks_dir.is_dir() and not any(p.exists() for p in places):
        raise ValueError(f"there is no notebooks/{notebook}.ipynb (nor notebooks/deep_dives/{notebook}.ipynb)")
    return notebook


def save_results(notebook: str, frame: pd.DataFrame | None = None, headlines: Sequence[Headline] = (), *,
                 results_dir: Path | str | None = None, notebooks_dir: Path = NOTEBOOKS_DIR) -> Path:
    """Save a notebook's sweep and headline figures with the environment they were measured on.

    Writes ``results/<device>/<notebook>.json``, prints every headline as the README will show it,
    and returns the path (relative to the results folder's parent when printed).
    """
    check_notebook_name(notebook, notebooks_dir)
    if frame is not None and not isinstance(frame, pd.DataFrame):
        raise TypeError(f"frame must be a pandas DataFrame or None, got {type(frame).__name__}")
    if not all(isinstance(h, Headline) for h in headlines):
        raise TypeError("headlines must be Headline objects")
    if frame is not None:
        numeric = frame.select_dtypes("number")
        infinite = [c for c in numeric.columns if numeric[c].abs().eq(float("inf")).any()]
        if infinite:
            raise ValueError(f"frame column(s) {infinite} hold infinities, which JSON cannot store: "
                             "a time of 0 or a division by zero upstream?")
    env = environment()
    root = Path(results_dir or RESULTS_DIR)
    folder = root / device_slug(env)
    folder.mkdir(parents=True, exist_ok=True)
    record = {
        "notebook": notebook,
        "environment": env,
        "headlines": [asdict(h) for h in headlines],
        "records": [] if frame is None else json.loads(frame.to_json(orient="records")),
    }
    path = folder / f"{notebook}.json"
    path.write_text(json.dumps(record, indent=1, sort_keys=True, allow_nan=False) + "\n", encoding="utf-8")
    for headline in headlines:
        print(headline)
    print("saved", path.relative_to(root.parent))
    return path


def load_results(path: Path | str) -> SavedResults:
    """Read what `save_results` wrote."""
    record = json.loads(Path(path).read_text(encoding="utf-8"))
    return SavedResults(record["notebook"], record["environment"], pd.DataFrame(record["records"]),
                        [Headline(**h) for h in record["headlines"]])


def _link(notebook: str) -> str:
    """The README's link to a notebook or a deep dive (a stem like '14b_...')."""
    folder = "notebooks/deep_dives" if re.match(r"\d\d[a-z]_", notebook) else "notebooks"
    return f"[{notebook[:3].rstrip('_')}]({folder}/{notebook}.ipynb)"


def figures_table(results_dir: Path, device: str, targets: Sequence[Target] = (),
                  others: Sequence[str] = ()) -> str:
    """The markdown table of every headline saved for ``device``, ordered by notebook, each judged by
    its target where an issue set one; a target that judges none of its notebook's saved headlines is an error,
    unless it is ``pending`` (its headline comes with the notebook's next run): then it is listed as not yet measured.
    A notebook with no file for ``device`` is taken from the first of the ``others`` device folders that has one
    (its rows then name their card)."""
    paths = sorted((results_dir / device).glob("*.json"))
    if not paths:
        raise FileNotFoundError(f"no saved results in {results_dir / device}")
    for other in others:
        have = {path.stem for path in paths}
        paths += [path for path in sorted((results_dir / other).glob("*.json")) if path.stem not in have]
    paths.sort(key=lambda path: path.stem)
    rows, machines, used = [], set(), set()
    for path in paths:
        saved = load_results(path)
        env = saved.environment
        machine = f"{env['gpu']}, torch {env['torch']}, triton {env['triton']}"
        machines.add(machine)
        for h in saved.headlines:
            judged = [t for t in targets if t.judges(saved.notebook, h)]
            used.update(judged)
            verdicts = "; ".join(t.verdict(h) for t in judged) or "-"
            rows.append([_link(saved.notebook), h.what, *h.table_cells(), verdicts, machine])
    saved_notebooks = {path.stem for path in paths}  # a notebook not run on this device has nothing to judge
    unused = [t for t in targets if t not in used and t.notebook in saved_notebooks and not t.pending]
    if unused:
        raise ValueError("targets that judge no saved headline (renamed?): "
                         + "; ".join(f"{t.notebook}: {t.what!r} vs {t.baseline!r}" for t in unused))
    for t in targets:  # a goal with no run on this device yet (its notebook's, or a pending one): listed, not judged
        if t not in used and (t.notebook not in saved_notebooks or t.pending):
            rows.append([_link(t.notebook), t.what, "not yet measured on this GPU", t.baseline or "-", "-", t.goal(),
                         "-"])
    header = ["notebook", "what", "figure", "baseline (same run)", "ratio", "course goal", "measured on"]
    if len(machines) == 1:  # say it once rather than on every row
        header, rows = header[:-1], [r[:-1] for r in rows]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    if len(machines) == 1:
        lines = [f"Measured on {machines.pop()}.", ""] + lines
    return "\n".join(lines)


def update_readme(readme: Path, table: str) -> str:
    """The README's text with the figures table replaced by ``table``."""
    text = readme.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{readme.name} has no {BEGIN} ... {END} markers")
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the README's headline figures from results/.")
    parser.add_argument("--device", default=REFERENCE_DEVICE)
    parser.add_argument("--results", type=Path, default=RESULTS_DIR)
    parser.add_argument("--readme", type=Path, default=PROJECT_DIR / "README.md")
    parser.add_argument("--targets", type=Path, default=TARGETS_PATH, help="the issues' targets (JSON)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the README is out of date")
    args = parser.parse_args(argv)
    targets = load_targets(args.targets) if args.targets.exists() else []
    others = sorted(d.name for d in args.results.iterdir()  # other GPUs fill in what the reference has not run
                    if d.is_dir() and d.name not in (args.device, "cpu"))
    new = update_readme(args.readme, figures_table(args.results, args.device, targets, others))
    if args.check:
        if new != args.readme.read_text(encoding="utf-8"):
            print(f"{args.readme.name} is out of date: run python -m course_utils.results", file=sys.stderr)
            return 1
        return 0
    args.readme.write_text(new, encoding="utf-8")
    print(f"updated {args.readme.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
