"""Build the lecture decks: ``slides/NN_name.md`` -> ``.cache/slides/NN_name.html``, one per notebook.

    python slides/build_decks.py            # every deck, then a PDF handout of each where Chromium exists
    python slides/build_decks.py 04 07      # some decks (by number or stem)
    python slides/build_decks.py --no-pdf   # HTML only

(``./course.sh slides`` runs it in the course's environment.) A deck is Markdown text with Jinja2
expressions. Each ``---`` line starts a slide; a ``Note:`` line starts its speaker notes. The build:

1. renders the Jinja2 expressions. They are the only way a measured figure, a plot or a kernel gets
   onto a slide: ``H(what)`` quotes a headline of ``results/<GPU>/<notebook>.json`` (``<GPU>``: the card
   that ran the notebook's committed outputs, H100 or H200, never both in one deck), ``R(**where)`` a
   row of its sweep, ``sweep(...)`` and ``bars(...)`` draw a chart of them (slides/figures.py),
   ``table(...)`` sets them in a table, ``diagram(name)`` draws a mechanism (slides/diagrams.py),
   ``code(path, name)`` shows an excerpt of a function of ``lessons/``, ``cell_code(cell text, start)``
   one of a kernel written in a notebook cell, ``output(cell text)`` a cell's printed output;
2. turns the slides into a notebook whose cells carry Jupyter's slide metadata
   (``slideshow.slide_type``: ``slide`` / ``notes``), the format that JupyterLab, RISE and nbconvert
   share, written to ``.cache/slides/ipynb/`` (present it live with RISE if you like);
3. exports it with nbconvert's reveal.js exporter through ``slides/templates/course_reveal``, which
   writes reveal.js, its speaker-notes plugin, the theme and the text and code fonts into the page
   (from the pinned ``sphinx-revealjs`` wheel, which bundles reveal.js, and matplotlib's DejaVu Sans
   Mono), so a deck needs no network when shown;
4. checks the result (`check_deck`): slide count, title / question / what-to-try / summary slides,
   every image a chart that equals what its spec draws from ``results/``, the word budgets, and every
   number with a unit on a slide or in its notes a tagged figure that equals its value in ``results/``.

Nothing here needs a GPU or the network.
"""

from __future__ import annotations

import argparse
import ast
import base64
import functools
import html
import json
import math
import re
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

SLIDES_DIR = ROOT / "slides"
TEMPLATE_DIR = SLIDES_DIR / "templates"
TEMPLATE_NAME = "course_reveal"
BUILD_DIR = ROOT / ".cache" / "slides"
NOTEBOOKS_DIR = ROOT / "notebooks"
RESULTS_DIR = ROOT / "results"
REFERENCE_DEVICE = "NVIDIA_H100_80GB_HBM3"
COURSE_NAME = "GPU performance engineering for deep learning"
#: The first cell of a notebook whose committed outputs come from a CPU run says exactly this
#: (tests/test_notebooks_structure.py keeps it so). Its deck then quotes no figure and shows no plot.
CPU_OUTPUTS_BANNER = "**The outputs below come from a CPU run: this notebook's H100 run is still owed.**"
#: ... or from a run on the other card the course runs on (H200): its deck quotes that card's figures, from
#: results/NVIDIA_H200/, and its title slide says so and that the H100's are owed.
H200_OUTPUTS_BANNER = "**The outputs below come from a run on H200 GPUs: this notebook's H100 run is still owed.**"
MIN_SLIDES, MAX_SLIDES = 10, 25
#: Slide kinds a deck marks with ``<!-- kind: NAME -->``; the first four are required in every deck.
REQUIRED_KINDS = ("title", "question", "try", "summary")
KINDS = REQUIRED_KINDS + ("owed",)
MAX_CODE_LINES = 17  # an excerpt on a slide: the lines that matter, at CODE_PX

#: Units that make a number a measured figure: such a number must come from results/ through a tag.
FIGURE_UNITS = (r"TFLOP/s|GFLOP/s|PFLOP/s|TB/s|GB/s|MB/s|GiB/s|MiB/s|steps/s|M boxes/s|boxes/s|images/s|"
                r"img/s|samples/s|it/s|ms\b|us\b|µs\b|μs\b|ns\b|s\b|%")
#: ... and a ratio is a number with an x attached ("3.77x"; "16 x 16" and "16x16" are shapes).
FIGURE_PATTERN = re.compile(r"(?<![\w.^/])(\d[\d,]*(?:\.\d+)?)(?:\s?(?:" + FIGURE_UNITS + r")|x(?!\w)|×)")


class DeckError(Exception):
    """A deck cannot be built as written; the message says which deck and what is wrong."""


# --------------------------------------------------------------------------------------------------
# Notebooks: titles, the CPU-outputs banner, cell outputs found by their source text


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else (value or "")


@dataclass
class Notebook:
    path: Path
    cells: list[dict]

    @classmethod
    def load(cls, path: Path) -> "Notebook":
        return cls(path, json.loads(path.read_text(encoding="utf-8"))["cells"])

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def number(self) -> str:
        return self.stem[:2]

    @property
    def title(self) -> str:
        """'Timing GPU code' from the first cell's '# 01. Timing GPU code'."""
        first = _source(self.cells[0]).splitlines()[0]
        found = re.match(r"#\s*\d\d\.\s*(.+)", first)
        if not found:
            raise DeckError(f"{self.path.name}: its first cell does not start with '# NN. Title'")
        return found.group(1).strip()

    @property
    def plain_title(self) -> str:
        """The title without its Markdown code marks."""
        return self.title.replace("`", "")

    @property
    def cpu_outputs(self) -> bool:
        return CPU_OUTPUTS_BANNER in _source(self.cells[0])

    @property
    def h200_outputs(self) -> bool:
        return H200_OUTPUTS_BANNER in _source(self.cells[0])

    def provenance(self) -> str:
        """The text output of the provenance cell (cell 3: cu.print_environment())."""
        return "".join(_text(o.get("text")) for o in self.cells[2].get("outputs", []))

    def environment(self) -> dict[str, str]:
        """The provenance cell's ``key : value`` lines (gpu, torch, triton, ...)."""
        return dict(re.findall(r"^(\w+)\s*:\s*(.+?)\s*$", self.provenance(), re.MULTILINE))

    @property
    def card(self) -> str | None:
        """The folder of results/ that holds the figures of the card that ran the committed outputs: the
        reference H100's, the H200's for a notebook whose first cell says its outputs come from an H200 run
        (named by its provenance cell), None for a CPU run (its deck quotes no figure)."""
        if self.cpu_outputs:
            return None
        if not self.h200_outputs:
            return REFERENCE_DEVICE
        from course_utils.results import device_slug

        gpu = self.environment().get("gpu", "")
        if "H200" not in gpu:
            raise DeckError(f"{self.path.name} says its outputs come from an H200 run, but its provenance cell "
                            f"names {gpu or 'no GPU'}")
        return device_slug({"gpu": gpu})

    def code_cell(self, match: str) -> tuple[int, dict]:
        """The one code cell whose source contains ``match`` (or whose id is ``id:...``); fails loudly."""
        if match.startswith("id:"):
            found = [(i, c) for i, c in enumerate(self.cells) if c.get("id") == match[3:]]
        else:
            found = [(i, c) for i, c in enumerate(self.cells)
                     if c["cell_type"] == "code" and match in _source(c)]
        if len(found) != 1:
            raise DeckError(f"{self.path.name}: {len(found)} code cells match {match!r}; a deck names exactly "
                            "one (quote more of its source, or use 'id:<cell id>')")
        return found[0]

    def text_output(self, match: str) -> tuple[dict, str]:
        index, cell = self.code_cell(match)
        parts = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                parts.append(_text(o.get("text")))
            elif "text/plain" in o.get("data", {}) and "image/png" not in o.get("data", {}):
                parts.append(_text(o["data"]["text/plain"]) + "\n")
        return cell, "".join(parts)


#: Code and printed output are set at CODE_PX (slide pixels at 1280x720): an excerpt must fit at that size.
CODE_PX = 20
MAX_CODE_COLS = 104
#: A table on a slide: at most this many rows of figures.
MAX_TABLE_ROWS = 6
#: Words a slide may carry (its speaker notes carry the rest); the title slide is not counted.
MAX_WORDS, MAX_WORDS_SUMMARY = 60, 80


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def deck_source(notebook: Path) -> Path:
    return SLIDES_DIR / f"{notebook.stem}.md"


# --------------------------------------------------------------------------------------------------
# Figures: every measured number on a slide is resolved from results/ and tagged with where it came from


def card_name(device: str) -> str:
    """'H100' for the reference folder, 'H200' for NVIDIA_H200: how slides name a card."""
    return "H100" if device == REFERENCE_DEVICE else device.removeprefix("NVIDIA_").split("_")[0]


class Results:
    """The saved results of one card, ``results/<device>/``, loaded once per notebook; ``on(device)`` is the
    same for another card (one object per card, so a deck and its checks read one folder)."""

    def __init__(self, results_dir: Path = RESULTS_DIR, device: str = REFERENCE_DEVICE):
        self.root, self.device = Path(results_dir), device
        self.folder = self.root / device
        self._cache: dict[str, Any] = {}
        self._cards = {device: self}

    def on(self, device: str) -> "Results":
        if device not in self._cards:
            other = Results(self.root, device)
            other._cards = self._cards
            self._cards[device] = other
        return self._cards[device]

    def of(self, notebook: "Notebook") -> "Results":
        """The results of the card whose run a notebook's committed outputs are (a CPU run's: the
        reference's, from which its deck quotes nothing)."""
        return self.on(notebook.card or REFERENCE_DEVICE)

    def get(self, notebook: str):
        from course_utils.results import load_results

        if notebook not in self._cache:
            path = self.folder / f"{notebook}.json"
            if not path.exists():
                raise DeckError(f"no {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                                f"notebook {notebook} has no saved results on the {card_name(self.device)} to quote")
            self._cache[notebook] = load_results(path)
        return self._cache[notebook]

    def records(self, notebook: str) -> list[dict]:
        """The rows of a notebook's saved sweep, as dicts (made once)."""
        key = ("records", notebook)
        if key not in self._cache:
            self._cache[key] = self.get(notebook).frame.to_dict("records")
        return self._cache[key]


def format_quantity(value: float, unit: str) -> str:
    """How a figure reads on a slide: the README's number format (3 significant digits or whole)."""
    from course_utils.results import format_figure

    if unit == "x":
        return f"{value:.2f}x"
    return f"{format_figure(value)}{'' if unit.startswith('%') else ' '}{unit}"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return not math.isnan(a) and a == b
    return a == b


_UNIT_OF_COLUMN = {"gbps": "GB/s", "tflops": "TFLOP/s", "median_ms": "ms", "q20_ms": "ms", "q80_ms": "ms",
                   "pct_peak_bandwidth": "%", "pct_peak_flops": "%"}


def unit_of_column(column: str) -> str:
    if column in _UNIT_OF_COLUMN:
        return _UNIT_OF_COLUMN[column]
    found = re.search(r"\(([^()]+)\)\s*$", column)
    if found:
        return found.group(1).strip()
    if column.startswith("%"):
        return "%"
    if re.fullmatch(FIGURE_UNITS.replace(r"\b", ""), column):
        return column
    raise DeckError(f"column {column!r} has no unit in its name: give unit=...")


def resolve(spec: dict, results: Results) -> tuple[float, str]:
    """The value and unit a tag points at (raises DeckError when it points at nothing)."""
    kind = spec.get("kind")
    if kind == "headline":
        saved = results.get(spec["nb"])
        found = [h for h in saved.headlines
                 if h.what == spec["what"] and (spec.get("baseline") is None or h.baseline == spec["baseline"])]
        if len(found) != 1:
            options = "; ".join(f"{h.what!r} vs {h.baseline!r}" for h in saved.headlines)
            raise DeckError(f"{len(found)} headlines of {spec['nb']} match what={spec['what']!r}, "
                            f"baseline={spec.get('baseline')!r}; there are: {options}")
        headline = found[0]
        if spec["field"] == "value":
            return headline.value, headline.unit
        if spec["field"] == "baseline_value":
            if headline.baseline_value is None:
                raise DeckError(f"headline {headline.what!r} of {spec['nb']} has no baseline value")
            return headline.baseline_value, headline.unit
        if spec["field"] == "ratio":
            if headline.ratio is None:
                raise DeckError(f"headline {headline.what!r} of {spec['nb']} has no ratio")
            return headline.ratio, "x"
        raise DeckError(f"unknown headline field {spec['field']!r}")
    if kind == "record":
        rows = [r for r in results.records(spec["nb"])
                if all(_same(r.get(k), v) for k, v in spec["where"].items())]
        if len(rows) != 1:
            raise DeckError(f"{len(rows)} rows of {spec['nb']}'s results match {spec['where']}; a slide quotes one")
        value = rows[0].get(spec["column"])
        if not isinstance(value, (int, float)) or isinstance(value, bool) or math.isnan(value):
            raise DeckError(f"{spec['nb']}: column {spec['column']!r} of the row {spec['where']} holds no number "
                            f"({value!r})")
        return float(value), spec["unit"]
    if kind in ("ratio", "share"):
        numerator, _ = resolve(spec["num"], results)
        denominator, _ = resolve(spec["den"], results)
        return (numerator / denominator, "x") if kind == "ratio" else (100 * numerator / denominator, "%")
    raise DeckError(f"unknown figure tag {spec!r}")


def figure_text(spec: dict, value: float, unit: str) -> str:
    """How a tagged figure reads: with its unit, or bare (``"bare": true``, in a column whose header
    carries the unit)."""
    if spec.get("bare"):
        from course_utils.results import format_figure

        return format_figure(value)
    return format_quantity(value, unit)


class Fig:
    """A quoted figure: renders as ``<span class="fig" data-result='{tag}'>45.7 TFLOP/s</span>``."""

    def __init__(self, spec: dict, results: Results):
        self.spec, self._results = spec, results
        self.value, self.unit = resolve(spec, results)
        self.text = figure_text(spec, self.value, self.unit)

    @property
    def nb(self) -> str:
        spec = self.spec
        while "nb" not in spec:
            spec = spec["num"]
        return spec["nb"]

    def bare(self) -> "Fig":
        """The same figure without its unit (for a table column whose header names it)."""
        return Fig(dict(self.spec, bare=True), self._results)

    def __str__(self) -> str:
        tag = html.escape(json.dumps(self.spec, sort_keys=True), quote=True)
        return f'<span class="fig" data-result="{tag}">{self.text}</span>'

    __html__ = __str__


class HeadlineRef:
    def __init__(self, spec: dict, results: Results):
        resolve(dict(spec, field="value"), results)  # fails loudly now if it names nothing
        self._spec, self._results = spec, results

    def _fig(self, field_name: str) -> Fig:
        return Fig(dict(self._spec, field=field_name), self._results)

    @property
    def value(self) -> Fig:
        return self._fig("value")

    @property
    def baseline_value(self) -> Fig:
        return self._fig("baseline_value")

    @property
    def ratio(self) -> Fig:
        return self._fig("ratio")

    def __str__(self) -> str:
        return str(self.value)


class RecordRef:
    def __init__(self, notebook: str, where: dict, results: Results):
        self._nb, self._where, self._results = notebook, where, results

    def fig(self, column: str, unit: str | None = None) -> Fig:
        return Fig({"kind": "record", "nb": self._nb, "where": self._where, "column": column,
                    "unit": unit or unit_of_column(column)}, self._results)

    __call__ = fig


def _as_fig(value: Any) -> Fig:
    if isinstance(value, HeadlineRef):
        return value.value
    if isinstance(value, Fig):
        return value
    raise DeckError(f"{value!r} is not a quoted figure: use H(...) or R(...).fig(...)")


def _inline(text: str) -> str:
    """A table cell or caption: escaped, with `code` marks."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


# --------------------------------------------------------------------------------------------------
# Charts and diagrams, drawn for slides by slides/figures.py and slides/diagrams.py


def _series_data(spec: dict, results: Results) -> dict[str, list[tuple[float, float]]]:
    rows = [r for r in results.records(spec["nb"]) if all(_same(r.get(k), v) for k, v in spec["where"].items())]
    names = spec["include"] or list(dict.fromkeys(r[spec["series"]] for r in rows))
    out = {}
    for name in names:
        points = [(float(r[spec["x"]]), float(r[spec["y"]])) for r in rows if r.get(spec["series"]) == name
                  and isinstance(r.get(spec["y"]), (int, float)) and not math.isnan(r[spec["y"]])]
        if not points:
            raise DeckError(f"{spec['nb']}: no rows of {spec['series']}={name!r} with a {spec['y']!r} "
                            f"(where {spec['where']})")
        out[str(name)] = points
    return out


def draw_chart(spec: dict, results: Results):
    """Draw (or take from the cache) the chart or diagram ``spec`` describes, from ``results``."""
    import figures

    kind = spec.get("kind")
    try:
        if kind == "diagram":
            import diagrams

            return figures.cached(spec, diagrams.DIAGRAMS[spec["name"]])
        reference = None
        if spec.get("reference"):
            reference = (spec["reference"][0], resolve(spec["reference"][1], results)[0])
        if kind == "bars":
            items = [(label, resolve(fig, results)[0]) for label, fig in spec["items"]]
            return figures.cached({"spec": spec, "data": items, "reference": reference}, lambda: figures.bar_chart(
                items, spec["unit"], ours=spec["ours"], size=spec["size"], reference=reference,
                xlabel=spec.get("xlabel")))
        if kind == "sweep":
            data = _series_data(spec, results)
            return figures.cached({"spec": spec, "data": data, "reference": reference}, lambda: figures.line_chart(
                data, spec["xlabel"], spec["ylabel"], ours=spec["ours"], size=spec["size"], logx=spec["logx"],
                reference=reference, count_ticks=spec.get("count_ticks", True)))
    except figures.LayoutError as err:
        raise DeckError(f"the chart {spec.get('name') or spec.get('kind')} does not lay out: {err}") from None
    raise DeckError(f"unknown chart {spec!r}")


def chart_html(spec: dict, rendered, caption: str, size: str) -> str:
    data = base64.b64encode(rendered.svg.encode("utf-8")).decode("ascii")
    tag = html.escape(json.dumps(spec, sort_keys=True), quote=True)
    kind = "diagram" if spec.get("kind") == "diagram" else "plot"
    return (f'\n<figure class="{kind} chart {size}"><img src="data:image/svg+xml;base64,{data}" '
            f'width="{rendered.width}" height="{rendered.height}" alt="{html.escape(caption)}" '
            f'data-chart="{tag}" data-min-font="{rendered.min_font:g}" data-native-width="{rendered.width}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>\n")


# --------------------------------------------------------------------------------------------------
# Code excerpts: functions of lessons/, kernels written in notebook cells


def fits_on_a_slide(lines: list[str], what: str) -> None:
    """Code or printed output is set at CODE_PX: at most MAX_CODE_LINES lines of MAX_CODE_COLS."""
    if len(lines) > MAX_CODE_LINES:
        raise DeckError(f"{what}: {len(lines)} lines do not fit on a slide at {CODE_PX} px (at most "
                        f"{MAX_CODE_LINES}); show the lines that matter (start=, end=, skip=[...])")
    wide = [line for line in lines if len(line) > MAX_CODE_COLS]
    if wide:
        raise DeckError(f"{what}: a line of {len(wide[0])} characters does not fit on a slide at {CODE_PX} px "
                        f"(at most {MAX_CODE_COLS}): {wide[0].strip()[:60]!r}...")


_LEXERS = {"python": "python", "cuda": "cuda", "c": "c", "cpp": "cpp", "c++": "cpp", "text": "text"}


@functools.lru_cache(maxsize=None)
def _lexer(name: str):
    from pygments.lexers import get_lexer_by_name

    return get_lexer_by_name(name)



def _matching(lines: list[str], patterns, missing: str) -> set[int]:
    """The indices of the lines that contain any of ``patterns``; a pattern that matches none is an error."""
    found = set()
    for pattern in patterns:
        hits = {i for i, line in enumerate(lines) if pattern in line}
        if not hits:
            raise DeckError(missing.format(pattern))
        found |= hits
    return found

def highlight_code(code: str, lang: str, key_lines: Iterable[str] = ()) -> str:
    """Pygments HTML of ``code``, one ``<span class="line">`` a line; lines containing one of
    ``key_lines`` get the class ``hl`` (drawn highlighted)."""
    from pygments import highlight
    from pygments.formatters import HtmlFormatter

    lines = code.split("\n")
    marked = _matching(lines, key_lines, "hl={!r} matches no line of the excerpt")
    body = highlight(code, _lexer(_LEXERS.get(lang, lang)), HtmlFormatter(nowrap=True))
    out = body.rstrip("\n").split("\n")
    if len(out) != len(lines):  # Pygments keeps lines as they are; if not, show the code plainly
        out = [html.escape(line) for line in lines]
    return "\n".join(f'<span class="line{" hl" if i in marked else ""}">{text}</span>'
                      for i, text in enumerate(out))


def _fenced(code: str, lang: str, path_note: str, key_lines: Iterable[str] = ()) -> str:
    """A code excerpt as highlighted HTML in a ``<pre class="code">`` that says where it comes from
    (extracted code is verbatim, so the figure check leaves it alone; code typed into a deck is checked
    like prose). It starts a line with ``<pre``, so Markdown passes it through, blank lines and all."""
    lines = code.rstrip().splitlines()
    fits_on_a_slide(lines, path_note)
    return (f'\n<pre class="code" data-lang="{lang}" data-origin="{html.escape(path_note, quote=True)}"><code>'
            + highlight_code("\n".join(lines), lang, key_lines) + "</code></pre>\n")


@functools.lru_cache(maxsize=None)
def _parsed(path: Path, mtime_ns: int) -> tuple[str, dict[str, list]]:
    """A Python file's text and its functions and classes by name (parsed once per version of the file)."""
    text = path.read_text(encoding="utf-8")
    by_name: dict[str, list] = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            by_name.setdefault(node.name, []).append(node)
    return text, by_name


def python_function(path: Path, name: str, strip_docstring: bool = True) -> str:
    """The source of function or class ``name`` (``Class.method`` for a method) of a Python file,
    decorators included; a name defined twice must be qualified."""
    text, defs_by_name = _parsed(path, path.stat().st_mtime_ns)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    scope, _, name = name.rpartition(".")
    if scope:
        owners = [n for n in defs_by_name.get(scope, []) if isinstance(n, ast.ClassDef)]
        nodes = [n for owner in owners for n in owner.body if isinstance(n, defs) and n.name == name]
    else:
        nodes = defs_by_name.get(name, [])
    if len(nodes) > 1:
        raise DeckError(f"{path.relative_to(ROOT)} defines {name!r} {len(nodes)} times: write Class.{name}")
    if not nodes:
        raise DeckError(f"{path.relative_to(ROOT)} defines no function or class "
                        f"{(scope + '.' if scope else '') + name!r}")
    node = nodes[0]
    start = min([node.lineno] + [d.lineno for d in node.decorator_list])
    lines = text.splitlines()[start - 1:node.end_lineno]
    body = node.body
    if strip_docstring and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        first, last = body[0].lineno - start, body[0].end_lineno - start
        lines = lines[:first] + lines[last + 1:]
    return "\n".join(lines)


def source_section(path: Path, name: str) -> str:
    """The lines of a CUDA or C++ file between the line ``// name`` and the line ``// name:end``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    begin = [i for i, line in enumerate(lines) if line.strip() == f"// {name}"]
    end = [i for i, line in enumerate(lines) if line.strip() == f"// {name}:end"]
    if len(begin) != 1 or len(end) != 1 or end[0] < begin[0]:
        raise DeckError(f"{path.relative_to(ROOT)} has no section {name!r} (a line '// {name}' ... '// {name}:end')")
    return "\n".join(lines[begin[0] + 1:end[0]])


def strip_docstrings(code: str) -> str:
    """Python code without the docstrings of its functions and classes (they are for readers of the file)."""
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:
        return code
    drop = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                drop.update(range(first.lineno, first.end_lineno + 1))
    return "\n".join(line for number, line in enumerate(code.splitlines(), 1) if number not in drop)


def block_from(source: str, start: str, lang: str, end: str | None = None) -> str:
    """The block of ``source`` that begins on the line containing ``start`` and ends on the first line
    after it that contains ``end``; without ``end``, brace-balanced for C/CUDA, indentation-delimited
    for Python (a decorator takes its function along)."""
    lines = source.splitlines()
    first = [i for i, line in enumerate(lines) if start in line]
    if len(first) != 1:
        raise DeckError(f"{len(first)} lines contain {start!r}; name a unique start")
    i = first[0]
    if end is not None:
        last = [j for j in range(i, len(lines)) if end in lines[j]]
        if not last:
            raise DeckError(f"no line after {start!r} contains end={end!r}")
        return "\n".join(lines[i:last[0] + 1])
    if lang in ("cuda", "c", "cpp", "c++"):
        depth, seen, out = 0, False, []
        for line in lines[i:]:
            out.append(line)
            depth += line.count("{") - line.count("}")
            seen = seen or "{" in line
            if seen and depth <= 0:
                return "\n".join(out)
        raise DeckError(f"the block starting at {start!r} never closes")
    indent = len(lines[i]) - len(lines[i].lstrip())
    out = [lines[i]]
    while lines[i].lstrip().startswith("@") and i + 1 < len(lines):  # decorators, then the def
        i += 1
        out.append(lines[i])
    for line in lines[i + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent and not line.lstrip().startswith(("@", ")")):
            break
        out.append(line)
    while out and not out[-1].strip():
        out.pop()
    return "\n".join(out)


def strip_comments(code: str, lang: str) -> str:
    """The code without its comments (a slide shows the code; the notes say what the comments said):
    a line that was only a comment goes, a trailing comment is cut off."""
    out = []
    if lang == "python":
        import io
        import tokenize

        try:
            comments = {(t.start[0], t.start[1]) for t in tokenize.generate_tokens(io.StringIO(code).readline)
                        if t.type == tokenize.COMMENT}
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return code
        for number, line in enumerate(code.splitlines(), 1):
            cut = [col for (row, col) in comments if row == number]
            if cut:
                line = line[:cut[0]].rstrip()
                if not line.strip():
                    continue
            out.append(line)
        return "\n".join(out)
    for line in code.splitlines():
        found = re.search(r"\s*//.*$", line)
        if found and line.count('"', 0, found.start()) % 2 == 0:
            line = line[:found.start()]
            if not line.strip():
                continue
        out.append(line)
    return "\n".join(out)


def _dedent_and_trim(code: str, skip: Iterable[str] = (), end: str | None = None) -> str:
    lines = textwrap.dedent(code).splitlines()
    if end is not None:
        cut = [i for i, line in enumerate(lines) if end in line]
        if not cut:
            raise DeckError(f"no line contains end={end!r}")
        lines = lines[:cut[0] + 1]
    dropped = _matching(lines, skip, "skip={!r} matches no line: the excerpt changed")
    out = []
    for i, line in enumerate(lines):  # each run of skipped lines shows as one "..." at its indentation
        if i not in dropped:
            out.append(line)
        elif i - 1 not in dropped:
            out.append(line[:len(line) - len(line.lstrip())] + "...")
    return "\n".join(out)


# --------------------------------------------------------------------------------------------------
# One deck: the Jinja2 context, the slides, the notebook with slide metadata, the HTML


@dataclass
class Slide:
    body: str
    notes: str = ""
    kind: str | None = None


@dataclass
class Deck:
    stem: str
    source: Path
    notebook: Notebook
    slides: list[Slide] = field(default_factory=list)
    html_path: Path | None = None
    ipynb_path: Path | None = None


class DeckContext:
    """What a deck's Jinja2 expressions can call. Everything fails loudly when it finds nothing."""

    def __init__(self, notebook: Notebook, results: Results):
        self.nb, self.results = notebook, results.of(notebook)  # the card of the notebook's outputs
        self._notebooks = {notebook.stem: notebook}

    # figures ------------------------------------------------------------------------------------
    def _stem_any(self, nb: str) -> str:
        """A notebook's stem from its stem or number."""
        matches = [p.stem for p in notebooks() if p.stem == nb or p.stem[:2] == nb]
        if len(matches) != 1:
            raise DeckError(f"no notebook {nb!r}")
        return matches[0]

    def _stem(self, nb: str | None) -> str:
        """The notebook whose measured figures, plots and printed output a slide quotes (this deck's by
        default): never one whose committed outputs are a CPU run, and never one run on another card than
        this deck's notebook (a deck does not mix cards)."""
        stem = self.nb.stem if nb is None else self._stem_any(nb)
        for notebook in (self.nb, self._notebook(stem)):
            if notebook.cpu_outputs:
                raise DeckError(f"{notebook.stem}'s committed outputs come from a CPU run (its first cell says so): "
                                "its H100 figures are owed, and its deck quotes none")
        card = self._notebook(stem).card
        if card != self.results.device:
            raise DeckError(f"{stem}'s figures come from results/{card}/, and this deck quotes "
                            f"results/{self.results.device}/ ({self.nb.stem}'s committed outputs are an "
                            f"{card_name(self.results.device)} run): a deck never mixes cards")
        return stem

    def _notebook(self, stem: str) -> Notebook:
        if stem not in self._notebooks:
            self._notebooks[stem] = Notebook.load(NOTEBOOKS_DIR / f"{stem}.ipynb")
        return self._notebooks[stem]

    def H(self, what: str, baseline: str | None = None, nb: str | None = None) -> HeadlineRef:
        spec = {"kind": "headline", "nb": self._stem(nb), "what": what}
        if baseline is not None:
            spec["baseline"] = baseline
        return HeadlineRef(spec, self.results)

    def R(self, where: dict | None = None, nb: str | None = None, **match: Any) -> RecordRef:
        return RecordRef(self._stem(nb), {**(where or {}), **match}, self.results)

    def ratio(self, numerator: Fig, denominator: Fig) -> Fig:
        return Fig({"kind": "ratio", "num": numerator.spec, "den": denominator.spec}, self.results)

    def share(self, part: Fig, whole: Fig) -> Fig:
        return Fig({"kind": "share", "num": part.spec, "den": whole.spec}, self.results)

    # charts, diagrams, tables and printed output -----------------------------------------------
    def _chart(self, spec: dict, caption: str, size: str) -> str:
        rendered = draw_chart(spec, self.results)
        if spec.get("nb"):
            source = f"drawn from results/{self.results.device}/{spec['nb']}.json"
            caption = f"{caption} · {source}" if caption else source
        return chart_html(spec, rendered, caption, size)

    def bars(self, items: Iterable[tuple[str, Any]], ours: Iterable[str] = (), caption: str = "",
             size: str = "", reference: tuple[str, Any] | None = None, xlabel: str | None = None) -> str:
        """A bar chart of quoted figures: ``[(label, H(...) or R(...).fig(...)), ...]``; ``ours`` the labels
        of the lecture's own kernels; ``reference`` a (label, figure) drawn as a dashed line."""
        items = [(str(label), _as_fig(value)) for label, value in items]
        units = {fig.unit for _, fig in items}
        if len(units) != 1:
            raise DeckError(f"bars(...) of figures in {len(units)} units {sorted(units)}: one chart, one unit")
        spec = {"kind": "bars", "nb": items[0][1].nb, "unit": units.pop(), "ours": sorted(set(ours)),
                "items": [[label, fig.spec] for label, fig in items], "size": size, "xlabel": xlabel}
        if reference is not None:
            spec["reference"] = [str(reference[0]), _as_fig(reference[1]).spec]
        missing = set(ours) - {label for label, _ in items}
        if missing:
            raise DeckError(f"bars(...): ours={sorted(missing)} names no bar")
        return self._chart(spec, caption, size)

    def sweep(self, x: str, y: str, series: str, where: dict | None = None, include: Iterable[str] | None = None,
              ours: Iterable[str] = (), caption: str = "", size: str = "", xlabel: str = "", ylabel: str = "",
              logx: bool = True, reference: tuple[str, Any] | None = None, nb: str | None = None,
              count_ticks: bool = True) -> str:
        """A line chart of the saved sweep: column ``y`` against column ``x``, one line per value of
        column ``series`` (those in ``include``, in that order), over the rows matching ``where``."""
        stem = self._stem(nb)
        spec = {"kind": "sweep", "nb": stem, "x": x, "y": y, "series": series, "where": where or {},
                "include": list(include) if include is not None else None, "ours": sorted(set(ours)),
                "size": size, "xlabel": xlabel or x, "ylabel": ylabel or y, "logx": logx,
                "count_ticks": count_ticks}
        if reference is not None:
            spec["reference"] = [str(reference[0]), _as_fig(reference[1]).spec]
        return self._chart(spec, caption, size)

    def diagram(self, name: str, caption: str = "", size: str = "") -> str:
        """A diagram of slides/diagrams.py, drawn by code."""
        import diagrams

        if name not in diagrams.DIAGRAMS:
            raise DeckError(f"no diagram {name!r}; slides/diagrams.py draws {sorted(diagrams.DIAGRAMS)}")
        return self._chart({"kind": "diagram", "name": name}, caption, size)

    def table(self, header: Sequence[str], rows: Sequence[Sequence[Any]], ours: Iterable[Any] = (),
              caption: str = "") -> str:
        """A table for a slide: at most MAX_TABLE_ROWS rows; a column of figures in one unit gets the unit
        in its header and bare numbers, right-aligned; ``ours`` the rows (by index or first cell) drawn
        highlighted."""
        rows = [list(r) for r in rows]
        if len(rows) > MAX_TABLE_ROWS:
            raise DeckError(f"a table of {len(rows)} rows; a slide shows at most {MAX_TABLE_ROWS}: choose")
        if any(len(r) != len(header) for r in rows):
            raise DeckError(f"a table row whose length differs from its header {list(header)}")
        ours = set(ours)
        units = []
        for j in range(len(header)):
            cells = [r[j] for r in rows]
            figs = [_as_fig(c) for c in cells if isinstance(c, (Fig, HeadlineRef))]
            unit_set = {f.unit for f in figs}
            units.append(unit_set.pop() if figs and len(figs) == len(cells) and len(unit_set) == 1 else None)
        head = "".join(f'<th class="{"num" if u else ""}">{_inline(h)}'
                       f'{f" <span class=unit>({html.escape(u)})</span>" if u and u != "x" and u not in h else ""}</th>'
                       for h, u in zip(header, units))
        body = []
        for i, r in enumerate(rows):
            mine = i in ours or (r and str(r[0]) in ours)
            cells = []
            for c, u in zip(r, units):
                if isinstance(c, (Fig, HeadlineRef)):
                    fig = _as_fig(c)
                    cells.append(f'<td class="num">{fig.bare() if u and u != "x" else fig}</td>')
                else:
                    cells.append(f"<td>{_inline(str(c))}</td>")
            body.append(f'<tr class="{"ours" if mine else ""}">{"".join(cells)}</tr>')
        caption_html = f'<caption>{_inline(caption)}</caption>' if caption else ""
        return (f'\n<table class="figures">{caption_html}<thead><tr>{head}</tr></thead><tbody>'
                + "".join(body) + "</tbody></table>\n")

    def output(self, match: str, first: int | None = None, lines: tuple[int, int] | None = None,
               nb: str | None = None) -> str:
        """A cell's printed output, verbatim (an exhibit: it is never retyped), set at CODE_PX."""
        stem = self._stem(nb)
        cell, text = self._notebook(stem).text_output(match)
        rows, start = text.rstrip("\n").splitlines(), 0
        if lines is not None:
            start = lines[0]
            rows = rows[lines[0]:lines[1]]
        elif first is not None:
            rows = rows[:first]
        if not rows:
            raise DeckError(f"{stem}: the cell matching {match!r} printed nothing to show")
        fits_on_a_slide(rows, f"{stem}: the output of the cell matching {match!r}")
        origin = html.escape(json.dumps({"nb": stem, "cell": cell.get("id"), "lines": [start, len(rows)]}),
                             quote=True)
        body = html.escape("\n".join(rows))
        return (f'\n<pre class="exhibit" data-origin="{origin}"><code>{body}</code></pre>\n\n'
                f'<p class="exhibit-caption">printed by notebook {stem[:2]}, committed '
                f'{card_name(self.results.device)} output</p>\n')

    # code ---------------------------------------------------------------------------------------
    def code(self, path: str, name: str, skip: Iterable[str] = (), start: str | None = None,
             end: str | None = None, lang: str = "python", hl: Iterable[str] = (), comments: bool = True) -> str:
        """Function or class ``name`` of a file of lessons/, or the part of it from the line containing
        ``start`` to the line containing ``end``. In a CUDA or C++ file (``.cu``, ``.cpp``) ``name`` is a
        section: the lines between one holding ``// name`` and one holding ``// name:end``."""
        if path.endswith((".cu", ".cpp")):
            source = source_section(ROOT / path, name)
            lang = "cuda" if lang == "python" else lang
        else:
            source = python_function(ROOT / path, name)
        if start is not None:
            try:
                source = block_from(source, start, lang, end)
            except DeckError as err:
                raise DeckError(f"{path}:{name}: {err}") from None
            end = None
        if not comments:
            source = strip_comments(textwrap.dedent(source), lang)
        try:
            return _fenced(_dedent_and_trim(source, skip, end), lang, f"{path}:{name}", hl)
        except DeckError as err:
            raise DeckError(f"{path}:{name}: {err}") from None

    def cell_code(self, match: str, start: str, lang: str = "python", skip: Iterable[str] = (),
                  end: str | None = None, nb: str | None = None, hl: Iterable[str] = (),
                  comments: bool = True) -> str:
        notebook = self._notebook(self.nb.stem if nb is None else self._stem_any(nb))
        _, cell = notebook.code_cell(match)
        try:
            block = block_from(_source(cell), start, lang, end)
        except DeckError as err:
            raise DeckError(f"{notebook.path.name}, cell matching {match!r}: {err}") from None
        if lang == "python":
            block = strip_docstrings(block)
        if not comments:
            block = strip_comments(textwrap.dedent(block), lang)
        return _fenced(_dedent_and_trim(block, skip), lang, f"{notebook.path.name}:{start}", hl)

    def snippet(self, text: str, lang: str = "python", hl: Iterable[str] = ()) -> str:
        """Code typed into the deck (``{% filter snippet("cuda", hl=[...]) %} ... {% endfilter %}``), set
        like an excerpt; being typed, it is checked like prose (no data-origin)."""
        lines = textwrap.dedent(text).strip("\n").splitlines()
        fits_on_a_slide(lines, "a snippet")
        return (f'\n<pre class="code" data-lang="{lang}"><code>'
                + highlight_code("\n".join(lines), lang, hl) + "</code></pre>\n")

    # the title slide ----------------------------------------------------------------------------
    def title_slide(self, question: str) -> str:
        nb, card = self.nb, self.results.device
        if nb.cpu_outputs:
            provenance = (f'<div class="owed"><strong>H100 figures owed.</strong> The committed outputs of '
                          f"notebooks/{nb.stem}.ipynb come from a CPU run, and no H100 results are saved for it "
                          "yet: this deck shows the method and the code, and quotes no measured figure.</div>")
        else:
            if (self.results.folder / f"{nb.stem}.json").exists():
                env = self.results.get(nb.stem).environment
                where = f"results/{card}/{nb.stem}.json"
                if card_name(card) not in env.get("gpu", ""):
                    raise DeckError(f"{where} was measured on {env.get('gpu')!r}, not an {card_name(card)}")
                provenance = (f'<p class="provenance">Figures measured on {html.escape(env["gpu"])} '
                              f"(torch {html.escape(env['torch'])}, triton {html.escape(env['triton'])}): "
                              f"{where} and the committed outputs of notebooks/{nb.stem}.ipynb</p>")
            else:  # a lecture that saves no figures: its outputs still come from its card
                env = nb.environment()
                if card_name(card) not in env.get("gpu", ""):
                    raise DeckError(f"{nb.stem} has neither saved results nor {card_name(card)} outputs to show")
                provenance = (f'<p class="provenance">Outputs from the committed {html.escape(env["gpu"])} run of '
                              f"notebooks/{nb.stem}.ipynb (torch {html.escape(env.get('torch', '?'))}, triton "
                              f"{html.escape(env.get('triton', '?'))}); this lecture saves no headline figures</p>")
            if card != REFERENCE_DEVICE:  # another card's figures: said plainly, and the H100's owed
                gpu = html.escape(env["gpu"])
                provenance = (f'<div class="owed"><strong>Measured on an {gpu}: H100 figures owed.</strong> '
                              f"This notebook ran on an {gpu}, not on the course's reference H100: the figures "
                              f"here are the {card_name(card)}'s, and the H100's are still owed.</div>\n"
                              + provenance)
        title = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(nb.title))
        return "\n".join([
            "<!-- kind: title -->",
            f'<p class="course-name">{COURSE_NAME} · lecture {nb.number}</p>',
            f'<h1 class="{"long" if len(nb.plain_title) > 44 else ""}">'
            f'<span class="lecture-number">{nb.number}</span>{title}</h1>',
            f'<p class="question">{question}</p>',
            provenance,
        ])

    def globals(self) -> dict[str, Any]:
        return {"H": self.H, "R": self.R, "ratio": self.ratio, "share": self.share, "bars": self.bars,
                "sweep": self.sweep, "diagram": self.diagram, "table": self.table,
                "output": self.output, "code": self.code, "cell_code": self.cell_code,
                "title_slide": self.title_slide, "owed": self.nb.cpu_outputs,
                "notebook": self.nb.stem, "number": self.nb.number}


_FENCE = re.compile(r"^\s*(```|~~~)")
_KIND = re.compile(r"^<!--\s*kind:\s*([a-z]+)\s*-->\s*$", re.MULTILINE)
_NOTE = re.compile(r"^Note:[ \t]*", re.MULTILINE)


def split_slides(text: str, name: str) -> list[Slide]:
    """Slides are separated by lines that are exactly '---' (outside code fences)."""
    chunks, current, fenced = [], [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
        if line.strip() == "---" and not fenced:
            chunks.append("\n".join(current))
            current = []
        else:
            current.append(line)
    chunks.append("\n".join(current))
    slides = []
    for number, chunk in enumerate(chunks, 1):
        if not chunk.strip():
            raise DeckError(f"{name}: slide {number} is empty")
        kinds = _KIND.findall(chunk)
        if len(kinds) > 1 or any(k not in KINDS for k in kinds):
            raise DeckError(f"{name}: slide {number} marks kinds {kinds}; one of {KINDS} at most")
        chunk = _KIND.sub("", chunk)
        parts = _NOTE.split(chunk)
        if len(parts) > 2:
            raise DeckError(f"{name}: slide {number} has more than one 'Note:' line")
        slides.append(Slide(body=parts[0].strip(), notes=parts[1].strip() if len(parts) == 2 else "",
                            kind=kinds[0] if kinds else None))
    return slides


def render_deck(notebook_path: Path, results: Results | None = None) -> Deck:
    """Read slides/<stem>.md, render its expressions, split it into slides."""
    import jinja2

    notebook = Notebook.load(notebook_path)
    source = deck_source(notebook_path)
    if not source.exists():
        raise DeckError(f"notebooks/{notebook_path.name} has no deck: write slides/{source.name}")
    context = DeckContext(notebook, results or Results())
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["snippet"] = context.snippet
    try:
        text = env.from_string(source.read_text(encoding="utf-8")).render(**context.globals())
    except DeckError as err:
        raise DeckError(f"slides/{source.name}: {err}") from None
    except jinja2.TemplateError as err:
        raise DeckError(f"slides/{source.name}: {type(err).__name__}: {err}") from None
    deck = Deck(notebook.stem, source, notebook, split_slides(text, f"slides/{source.name}"))
    if not MIN_SLIDES <= len(deck.slides) <= MAX_SLIDES:
        raise DeckError(f"slides/{source.name} has {len(deck.slides)} slides; a deck has {MIN_SLIDES} to {MAX_SLIDES}")
    kinds = [s.kind for s in deck.slides]
    if kinds[0] != "title":
        raise DeckError(f"slides/{source.name}: the first slide must be {{{{ title_slide(question) }}}}")
    missing = [k for k in REQUIRED_KINDS if k not in kinds]
    if missing:
        raise DeckError(f"slides/{source.name} has no slide marked <!-- kind: {missing[0]} -->")
    return deck


def deck_notebook(deck: Deck):
    """The deck as a notebook whose cells carry Jupyter's slideshow metadata."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["title"] = f"{deck.notebook.number}. {deck.notebook.plain_title}"
    nb.metadata["slides_built_from"] = f"slides/{deck.source.name}"
    for slide in deck.slides:
        cell = nbformat.v4.new_markdown_cell(slide.body)
        cell.metadata["slideshow"] = {"slide_type": "slide"}
        if slide.kind:
            cell.metadata["slideshow"]["data"] = {"kind": slide.kind}
        nb.cells.append(cell)
        if slide.notes:
            notes = nbformat.v4.new_markdown_cell(slide.notes)
            notes.metadata["slideshow"] = {"slide_type": "notes"}
            nb.cells.append(notes)
    return nb


#: The code font, embedded in every deck: DejaVu Sans Mono (matplotlib ships it), cut down to the
#: characters code and printed output use, as WOFF; built once into .cache/slides/fonts/.
CODE_FONT = "Course Mono"
_CODE_CHARS = [*range(0x20, 0x7F), *range(0xA0, 0x180), *range(0x2010, 0x2040), *range(0x2070, 0x20A0),
               *range(0x2190, 0x21FF), *range(0x2200, 0x2300), *range(0x2500, 0x2580), 0x25A0, 0x25CF, 0x2713,
               0x2717, *range(0x391, 0x3CA)]


def code_font_faces() -> list[str]:
    import logging

    import matplotlib
    from fontTools import subset

    logging.getLogger("fontTools.subset").setLevel(logging.ERROR)

    faces = []
    for weight, name in ((400, "DejaVuSansMono.ttf"), (700, "DejaVuSansMono-Bold.ttf")):
        source = Path(matplotlib.get_data_path()) / "fonts" / "ttf" / name
        out = BUILD_DIR / "fonts" / f"{source.stem}-{source.stat().st_size}.woff"
        if not out.exists():
            options = subset.Options()
            options.flavor = "woff"
            options.layout_features = []
            options.hinting = False
            font = subset.load_font(str(source), options)
            subsetter = subset.Subsetter(options)
            subsetter.populate(unicodes=_CODE_CHARS)
            subsetter.subset(font)
            out.parent.mkdir(parents=True, exist_ok=True)
            subset.save_font(font, str(out), options)
        data = base64.b64encode(out.read_bytes()).decode("ascii")
        faces.append(f"@font-face {{ font-family: '{CODE_FONT}'; font-style: normal; font-weight: {weight}; "
                     f"src: url(data:font/woff;base64,{data}) format('woff'); }}")
    return faces


def pygments_css() -> str:
    from pygments.formatters import HtmlFormatter

    return HtmlFormatter(style="default").get_style_defs(".reveal pre.code")


def reveal_assets() -> dict[str, str]:
    """reveal.js, its notes plugin, theme and fonts, from the pinned sphinx-revealjs wheel."""
    try:
        import sphinx_revealjs
    except ImportError:
        raise DeckError("the pinned sphinx-revealjs (reveal.js for the decks) is not installed: "
                        "./course.sh slides installs requirements-ci.txt first") from None

    root = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs"
    if not (root / "dist" / "reveal.js").exists():
        raise DeckError(f"sphinx-revealjs has no reveal.js under {root}: is the pinned version installed?")
    version = re.search(r"reveal\.js (\d+\.\d+\.\d+)", (root / "dist" / "reveal.js").read_text(encoding="utf-8")[:300])
    theme = (root / "dist" / "theme" / "white.css").read_text(encoding="utf-8")
    theme = re.sub(r"@import url\([^)]*\);", "", theme)  # the fonts come inline, below
    fonts = []
    for weight, name in ((400, "regular"), (600, "semibold")):
        data = base64.b64encode((root / "dist/theme/fonts/source-sans-pro" / f"source-sans-pro-{name}.woff")
                                .read_bytes()).decode("ascii")
        fonts.append(f"@font-face {{ font-family: 'Source Sans Pro'; font-style: normal; font-weight: {weight}; "
                     f"src: url(data:font/woff;base64,{data}) format('woff'); }}")

    fonts += code_font_faces()

    def script(path: Path) -> str:
        return path.read_text(encoding="utf-8").replace("</script", "<\\/script")

    return {"reveal_js": script(root / "dist" / "reveal.js"),
            "notes_js": script(root / "plugin" / "notes" / "notes.js"),
            "reveal_css": (root / "dist" / "reveal.css").read_text(encoding="utf-8"),
            "theme_css": theme, "fonts_css": "\n".join(fonts), "pygments_css": pygments_css(),
            "reveal_version": version.group(1) if version else "unknown"}


REVEAL_CONFIG = {
    "width": 1280, "height": 720, "margin": 0.05, "minScale": 0.2, "maxScale": 2.0,
    "center": False, "hash": True, "controls": True, "progress": True, "slideNumber": "c/t",
    "transition": "none", "backgroundTransition": "none", "pdfMaxPagesPerSlide": 1,
    "pdfSeparateFragments": False,
}


@functools.lru_cache(maxsize=1)
def _exporter():
    """One reveal.js exporter for every deck (its templates are compiled once)."""
    from nbconvert.exporters import SlidesExporter

    return SlidesExporter(template_name=TEMPLATE_NAME, extra_template_basedirs=[str(TEMPLATE_DIR)],
                          exclude_anchor_links=True)


def export_html(deck: Deck, assets: dict[str, str]) -> str:
    import nbconvert

    exporter = _exporter()
    course = dict(assets)
    course.update(title=f"{deck.notebook.number}. {deck.notebook.plain_title} (lecture slides)",
                  number=deck.notebook.number, short_title=deck.notebook.plain_title,
                  course_css=(TEMPLATE_DIR / TEMPLATE_NAME / "course.css").read_text(encoding="utf-8"),
                  reveal_config=json.dumps(REVEAL_CONFIG), nbconvert_version=nbconvert.__version__)
    body, _ = exporter.from_notebook_node(deck_notebook(deck), resources={"course": course})
    return body


# --------------------------------------------------------------------------------------------------
# Checks of a built deck (run by the build and by tests/test_slides.py)


_SKIP_TAGS = ("script", "style", "svg", "img")


def slides_markup(page: str) -> str:
    """The part of a built page that holds the slides (the inline scripts and styles are skipped)."""
    start = page.find('<div class="slides">')
    end = page.find("<script>", start)
    if start < 0 or end < 0:
        raise DeckError("not a built deck: no <div class=\"slides\"> followed by the scripts")
    return page[start:end]


def _visible_text(node) -> str:
    """The text of a slide that is written in its deck: everything but tagged figures and what the build
    copied verbatim from a notebook or lessons/ (elements with a data-origin: plots, printed output,
    extracted code). Captions, tables, notes and code typed into the deck are included."""
    from bs4 import NavigableString, Tag

    parts = []
    for child in node.children:
        if isinstance(child, NavigableString):
            if type(child).__name__ in ("Comment", "Doctype"):
                continue
            parts.append(str(child))
        elif isinstance(child, Tag):
            if child.name in _SKIP_TAGS or "fig" in (child.get("class") or []) or child.get("data-origin"):
                parts.append(" ")
                continue
            parts.append(_visible_text(child) + (" " if child.name in ("p", "li", "td", "th", "div", "pre") else ""))
    return "".join(parts)


_NOT_PROSE = ("aside", "pre", "table", "figure", "script", "style", "svg")


def slide_words(section) -> int:
    """The words a slide shows as prose: headings, paragraphs, lists and the figures in them; not its
    notes, code, printed output, tables or charts (they are read differently)."""
    from bs4 import NavigableString, Tag

    def walk(node) -> str:
        parts = []
        for child in node.children:
            if isinstance(child, NavigableString):
                if type(child).__name__ not in ("Comment", "Doctype"):
                    parts.append(str(child))
            elif isinstance(child, Tag) and child.name not in _NOT_PROSE \
                    and "exhibit-caption" not in (child.get("class") or []):
                parts.append(" " + walk(child) + " ")
        return "".join(parts)

    return len([w for w in walk(section).split() if any(ch.isalnum() for ch in w)])


def quoted_notebooks(spec: Any) -> set[str]:
    """The notebooks whose results a figure tag or chart spec reads (ratios and bars nest figures)."""
    if isinstance(spec, dict):
        found = {spec["nb"]} if isinstance(spec.get("nb"), str) else set()
        return found.union(*(quoted_notebooks(v) for v in spec.values()))
    if isinstance(spec, list):
        return set().union(*(quoted_notebooks(v) for v in spec))
    return set()


def check_deck(page: str, notebook_path: Path, results: Results | None = None,
               expected_slides: int | None = None) -> list[str]:
    """Everything wrong with a built deck, as sentences (an empty list: nothing). Figures and charts are
    checked against the results of the card that ran the notebook's committed outputs."""
    from bs4 import BeautifulSoup

    notebook = Notebook.load(notebook_path)
    results = (results or Results()).of(notebook)
    cards = {notebook.stem: notebook.card}

    def other_cards(stems: Iterable[str], what: str) -> list[str]:
        """What is wrong with quoting these notebooks in this deck: a CPU run, or another card's run."""
        out = []
        for stem in sorted(stems):
            if stem not in cards:
                path = NOTEBOOKS_DIR / f"{stem}.ipynb"
                if not path.exists():
                    out.append(f"{what} of {stem}, which is not a notebook of notebooks/")
                    continue
                cards[stem] = Notebook.load(path).card
            if cards[stem] is None:
                out.append(f"{what} of {stem}, whose committed outputs are a CPU run")
            elif cards[stem] != results.device:
                out.append(f"{what} of {stem}, whose figures are in results/{cards[stem]}/, in a deck of "
                           f"results/{results.device}/ figures: a deck never mixes cards")
        return out

    soup = BeautifulSoup(slides_markup(page), "html.parser")
    sections = soup.find("div", class_="slides").find_all("section", recursive=False)
    problems = []
    if not MIN_SLIDES <= len(sections) <= MAX_SLIDES:
        problems.append(f"{len(sections)} slides; a deck has {MIN_SLIDES} to {MAX_SLIDES}")
    if expected_slides is not None and len(sections) != expected_slides:
        problems.append(f"{len(sections)} slides built from a source of {expected_slides}")
    kinds = [s.get("data-kind") for s in sections]
    if not kinds or kinds[0] != "title":
        problems.append("the first slide is not the title slide")
    else:
        h1 = sections[0].find("h1")
        if h1 is None or notebook.plain_title not in h1.get_text():
            problems.append(f"the title slide does not carry the notebook's title {notebook.plain_title!r}")
    for kind in REQUIRED_KINDS[1:]:
        if kind not in kinds:
            problems.append(f"no {kind} slide")
    if "summary" in kinds and kinds.index("summary") < len(kinds) - 3:
        problems.append("the summary slide is not among the last three")
    for number, section in enumerate(sections, 1):
        where = f"slide {number}"
        # images: charts and diagrams drawn for slides, each equal to what its spec draws from results/
        for img in section.find_all("img"):
            src = img.get("src", "")
            spec = json.loads(img.get("data-chart") or "null")
            if not src.startswith("data:image/svg+xml;base64,") or not spec:
                problems.append(f"{where}: an image that is not a chart or diagram drawn for slides: {src[:60]!r}")
                continue
            problems += other_cards(quoted_notebooks(spec), f"{where}: a chart")
            try:
                rendered = draw_chart(spec, results)
                if base64.b64decode(src.split(",", 1)[1]).decode("utf-8") != rendered.svg:
                    problems.append(f"{where}: a chart that differs from what results/ draws ({spec.get('kind')})")
                if float(img.get("data-min-font", 0)) != rendered.min_font:
                    problems.append(f"{where}: a chart whose data-min-font is not its smallest text")
            except DeckError as err:
                problems.append(f"{where}: {err}")
        # words: a slide is read in seconds; the notes carry the rest
        if kinds[number - 1] != "title":
            limit = MAX_WORDS_SUMMARY if kinds[number - 1] == "summary" else MAX_WORDS
            words = slide_words(section)
            if words > limit:
                problems.append(f"{where}: {words} words on the slide (at most {limit}); move the rest to the notes")
        # exhibits: printed output, verbatim
        for pre in section.find_all("pre", class_="exhibit"):
            origin = json.loads(pre.get("data-origin") or "null")
            try:
                problems += other_cards([origin["nb"]], f"{where}: printed output")
                _, text = Notebook.load(NOTEBOOKS_DIR / f"{origin['nb']}.ipynb").text_output(f"id:{origin['cell']}")
                start, count = origin["lines"]
                if "\n".join(text.rstrip("\n").splitlines()[start:start + count]) != pre.get_text():
                    problems.append(f"{where}: printed output that differs from notebook {origin['nb']}")
            except (DeckError, TypeError, KeyError) as err:
                problems.append(f"{where}: an exhibit whose origin does not resolve: {err}")
        # links and sources: nothing to fetch when the deck is shown
        for tag in section.find_all(["img", "script", "link", "iframe", "video", "audio", "source"]):
            for attr in ("src", "href"):
                value = tag.get(attr, "")
                if value and not value.startswith("data:"):
                    problems.append(f"{where}: <{tag.name} {attr}={value[:60]!r}> would be fetched when shown")
        # figures: tagged ones equal results/, and no figure typed by hand
        for span in section.find_all("span", class_="fig"):
            try:
                spec = json.loads(span.get("data-result", ""))
                problems += other_cards(quoted_notebooks(spec), f"{where}: a figure {span.get_text()!r}")
                value, unit = resolve(spec, results)
                if span.get_text() != figure_text(spec, value, unit):
                    problems.append(f"{where}: quotes {span.get_text()!r} where results/ says "
                                    f"{figure_text(spec, value, unit)!r} ({spec})")
            except (DeckError, ValueError, KeyError) as err:
                problems.append(f"{where}: quotes {span.get_text()!r}, which is not in results/: {err}")
        text = _visible_text(section)
        for found in FIGURE_PATTERN.finditer(text):
            context = text[max(0, found.start() - 40):found.end() + 20].replace("\n", " ")
            problems.append(f"{where}: {found.group(0)!r} is typed by hand (\"...{context}...\"): "
                            "quote figures with H(...) or R(...)")
    title = " ".join(t for t in (sections[0].find_all(string=True) if sections else [])
                     if not t.find_parent("aside"))  # what the title slide shows, its notes left out
    if notebook.cpu_outputs:
        if soup.find("span", class_="fig") or soup.find("figure", class_="plot"):
            problems.append("the notebook's outputs are a CPU run, yet the deck quotes figures or shows plots")
        if "H100 figures owed" not in title or "a CPU run" not in title:
            problems.append("the title slide does not say that the outputs are a CPU run and the H100 figures owed")
    elif results.device != REFERENCE_DEVICE:
        said = f"Measured on an {notebook.environment().get('gpu')}: H100 figures owed"
        if said not in title:
            problems.append(f"the title slide does not say {said!r}")
    return problems


# --------------------------------------------------------------------------------------------------
# Building


@dataclass
class BuildReport:
    decks: list[Deck]
    seconds: float
    manifest: Path


def select(names: Iterable[str] = ()) -> list[Path]:
    paths = notebooks()
    names = list(names)
    if not names:
        return paths
    chosen = [p for p in paths if any(p.stem == n or p.stem[:2] == n.zfill(2) or p.name == n or
                                      Path(n).stem == p.stem for n in names)]
    if len(chosen) < len(names):
        raise DeckError(f"no notebook for some of {names}")
    return chosen


def build_one(notebook_path: Path, results: Results, assets: dict[str, str], out_dir: Path = BUILD_DIR) -> Deck:
    """Render, export and write one deck: ``out_dir/<stem>.html`` and ``out_dir/ipynb/<stem>.ipynb``."""
    import nbformat

    deck = render_deck(notebook_path, results)
    page = export_html(deck, assets)
    out_dir = Path(out_dir)
    (out_dir / "ipynb").mkdir(parents=True, exist_ok=True)
    deck.html_path = out_dir / f"{deck.stem}.html"
    deck.html_path.write_text(page, encoding="utf-8")
    deck.ipynb_path = out_dir / "ipynb" / f"{deck.stem}.ipynb"
    nbformat.write(deck_notebook(deck), deck.ipynb_path)
    return deck


def manifest_entry(deck: Deck) -> dict:
    """What the browser test needs to know about a built deck: its key slides, among others."""
    def first(marker: str) -> int | None:
        found = [i for i, s in enumerate(deck.slides) if marker in s.body]
        return found[0] if found else None

    return {"html": deck.html_path.name, "slides": len(deck.slides), "kinds": [s.kind for s in deck.slides],
            "figure_slide": first('<figure class="plot'), "diagram_slide": first('<figure class="diagram'),
            "code_slide": first('<pre class="code'), "table_slide": first('<table class="figures'),
            "notes": [s.notes for s in deck.slides], "cpu_outputs": deck.notebook.cpu_outputs,
            "card": deck.notebook.card,
            "title": deck.notebook.plain_title}


def build(names: Iterable[str] = (), out_dir: Path = BUILD_DIR, check: bool = True) -> BuildReport:
    """Build decks into ``out_dir`` (HTML, and the intermediate notebooks under ``ipynb/``)."""
    started = time.perf_counter()
    results = Results()
    assets = reveal_assets()
    out_dir = Path(out_dir)
    decks, problems = [], []
    for notebook_path in select(names):
        deck = build_one(notebook_path, results, assets, out_dir)
        if check:
            page = deck.html_path.read_text(encoding="utf-8")
            problems += [f"{deck.stem}: {p}" for p in check_deck(page, notebook_path, results, len(deck.slides))]
        decks.append(deck)
    if problems:
        raise DeckError("the built decks have problems:\n  " + "\n  ".join(problems))
    manifest = out_dir / "manifest.json"
    previous = json.loads(manifest.read_text(encoding="utf-8")) if manifest.exists() else {}
    previous.update({deck.stem: manifest_entry(deck) for deck in decks})
    manifest.write_text(json.dumps(previous, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return BuildReport(decks, time.perf_counter() - started, manifest)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the lecture decks (slides/*.md) into self-contained HTML.")
    parser.add_argument("decks", nargs="*", help="numbers or stems (default: every deck)")
    parser.add_argument("--out", type=Path, default=BUILD_DIR, help=f"output folder (default: {BUILD_DIR.relative_to(ROOT)})")
    parser.add_argument("--no-pdf", action="store_true", help="skip the PDF handouts")
    args = parser.parse_args(argv)
    try:
        report = build(args.decks, args.out)
    except DeckError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    for deck in report.decks:
        size = deck.html_path.stat().st_size / 1e6
        card = deck.notebook.card
        owed = ("  (H100 figures owed)" if card is None else "" if card == REFERENCE_DEVICE
                else f"  ({card_name(card)} figures; H100 figures owed)")
        print(f"{deck.html_path.relative_to(ROOT) if deck.html_path.is_relative_to(ROOT) else deck.html_path}: "
              f"{len(deck.slides)} slides, {size:.1f} MB{owed}")
    print(f"built {len(report.decks)} decks in {report.seconds:.1f} s; open one in a browser "
          "(S: speaker notes, F: full screen)")
    if args.no_pdf:
        return 0
    import deck_browser

    binary = deck_browser.find_chromium()
    if binary is None:
        print("no Chromium here: PDF handouts skipped (apt-get install chromium, or print a deck from a browser "
              "with ?print-pdf after its name)")
        return 0
    started = time.perf_counter()
    (args.out / "pdf").mkdir(parents=True, exist_ok=True)
    with deck_browser.Chromium(binary) as browser:
        for deck in report.decks:
            pdf = args.out / "pdf" / f"{deck.stem}.pdf"
            pages = browser.print_pdf(deck.html_path, pdf)
            print(f"{pdf.relative_to(ROOT) if pdf.is_relative_to(ROOT) else pdf}: {pages} pages")
    print(f"printed {len(report.decks)} PDF handouts in {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
