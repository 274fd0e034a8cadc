"""Build the lecture decks: ``slides/NN_name.md`` -> ``.cache/slides/NN_name.html``, one per notebook.

    python slides/build_decks.py            # every deck, then a PDF handout of each where Chromium exists
    python slides/build_decks.py 04 07      # some decks (by number or stem)
    python slides/build_decks.py --no-pdf   # HTML only

(``./course.sh slides`` runs it in the course's environment.) A deck is Markdown text with Jinja2
expressions. Each ``---`` line starts a slide; a ``Note:`` line starts its speaker notes. The build:

1. renders the Jinja2 expressions. They are the only way a measured figure, a plot or a kernel gets
   onto a slide: ``H(what)`` quotes a headline of ``results/<GPU>/<notebook>.json``, ``R(**where)``
   a row of its sweep, ``plot(cell text)`` the PNG a notebook cell committed, ``code(path, name)`` a
   function of ``lessons/``, ``cell_code(cell text, start)`` a kernel written in a notebook cell;
2. turns the slides into a notebook whose cells carry Jupyter's slide metadata
   (``slideshow.slide_type``: ``slide`` / ``notes``), the format that JupyterLab, RISE and nbconvert
   share, written to ``.cache/slides/ipynb/`` (present it live with RISE if you like);
3. exports it with nbconvert's reveal.js exporter through ``slides/templates/course_reveal``, which
   writes reveal.js, its speaker-notes plugin, the theme and the fonts into the page (from the pinned
   ``sphinx-revealjs`` wheel, which bundles reveal.js), so a deck needs no network when shown;
4. checks the result (`check_deck`): slide count, title / question / what-to-try / summary slides,
   every image a PNG that equals the notebook's committed output, and every number with a unit on a
   slide or in its notes a tagged figure that equals its value in ``results/``.

Nothing here needs a GPU or the network.
"""

from __future__ import annotations

import argparse
import ast
import base64
import html
import json
import math
import re
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

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
MIN_SLIDES, MAX_SLIDES = 10, 25
#: Slide kinds a deck marks with ``<!-- kind: NAME -->``; the first four are required in every deck.
REQUIRED_KINDS = ("title", "question", "try", "summary")
KINDS = REQUIRED_KINDS + ("owed",)
MAX_CODE_LINES = 24  # a kernel on a slide must fit on the slide

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

    def provenance(self) -> str:
        """The text output of the provenance cell (cell 3: cu.print_environment())."""
        return "".join(_text(o.get("text")) for o in self.cells[2].get("outputs", []))

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

    def images(self, match: str) -> tuple[dict, list[str]]:
        index, cell = self.code_cell(match)
        pngs = [_text(o["data"]["image/png"]).replace("\n", "") for o in cell.get("outputs", [])
                if "image/png" in o.get("data", {})]
        return cell, pngs

    def text_output(self, match: str) -> tuple[dict, str]:
        index, cell = self.code_cell(match)
        parts = []
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stdout":
                parts.append(_text(o.get("text")))
            elif "text/plain" in o.get("data", {}) and "image/png" not in o.get("data", {}):
                parts.append(_text(o["data"]["text/plain"]) + "\n")
        return cell, "".join(parts)


#: (width, height) in slide pixels that a plot is scaled to fit: plot(..., size="half") in a column.
PLOT_BOXES = {"": (1180, 490), "tall": (1180, 530), "short": (1180, 380), "half": (580, 470),
              "half-short": (580, 370)}
MAX_UPSCALE = 1.5  # matplotlib's PNGs are ~100 dpi: enlarge them for a hall, but not until they blur


def png_size(data: str) -> tuple[int, int]:
    header = base64.b64decode(data[:48])
    if not header.startswith(b"\x89PNG\r\n\x1a\n"):
        raise DeckError("an image output that is not a PNG")
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS_DIR.glob("[0-9][0-9]_*.ipynb"))


def deck_source(notebook: Path) -> Path:
    return SLIDES_DIR / f"{notebook.stem}.md"


# --------------------------------------------------------------------------------------------------
# Figures: every measured number on a slide is resolved from results/ and tagged with where it came from


class Results:
    """The saved results of the reference GPU, loaded once per notebook."""

    def __init__(self, results_dir: Path = RESULTS_DIR, device: str = REFERENCE_DEVICE):
        self.folder = Path(results_dir) / device
        self._cache: dict[str, Any] = {}

    def get(self, notebook: str):
        from course_utils.results import load_results

        if notebook not in self._cache:
            path = self.folder / f"{notebook}.json"
            if not path.exists():
                raise DeckError(f"no {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}: "
                                f"notebook {notebook} has no saved results on the reference GPU to quote")
            self._cache[notebook] = load_results(path)
        return self._cache[notebook]


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
        saved = results.get(spec["nb"])
        rows = [r for r in saved.frame.to_dict("records")
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


class Fig:
    """A quoted figure: renders as ``<span class="fig" data-result='{tag}'>45.7 TFLOP/s</span>``."""

    def __init__(self, spec: dict, results: Results):
        self.spec = spec
        self.value, self.unit = resolve(spec, results)
        self.text = format_quantity(self.value, self.unit)

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


# --------------------------------------------------------------------------------------------------
# Code excerpts: functions of lessons/, kernels written in notebook cells


def text_size(lines: list[str]) -> str:
    """A font-size class for code or printed output: as large as its longest line and its height allow."""
    width, height = max((len(line) for line in lines), default=0), len(lines)
    for name, max_width, max_height in (("size-l", 96, 16), ("size-m", 110, 20), ("size-s", 132, 24)):
        if width <= max_width and height <= max_height:
            return name
    return "size-xs"


def _fenced(code: str, lang: str, path_note: str) -> str:
    """A code excerpt, fenced for Pygments, in a div that says where it comes from (extracted code is
    verbatim, so the figure check leaves it alone; code typed into a deck is checked like prose)."""
    lines = code.rstrip().splitlines()
    if len(lines) > MAX_CODE_LINES:
        raise DeckError(f"{path_note}: {len(lines)} lines do not fit on a slide (at most {MAX_CODE_LINES}); "
                        "pick a shorter excerpt (skip=..., or end=...)")
    return (f'<div class="code {text_size(lines)}" data-origin="{html.escape(path_note, quote=True)}">\n\n'
            f"```{lang}\n" + "\n".join(lines) + "\n```\n\n</div>")


def python_function(path: Path, name: str, strip_docstring: bool = True) -> str:
    """The source of function or class ``name`` (``Class.method`` for a method) of a Python file,
    decorators included; a name defined twice must be qualified."""
    text = path.read_text(encoding="utf-8")
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    scope, _, name = name.rpartition(".")
    tree = ast.parse(text)
    if scope:
        owners = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == scope]
        nodes = [n for owner in owners for n in owner.body if isinstance(n, defs) and n.name == name]
    else:
        nodes = [n for n in ast.walk(tree) if isinstance(n, defs) and n.name == name]
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


def _dedent_and_trim(code: str, skip: Iterable[str] = (), end: str | None = None) -> str:
    lines = textwrap.dedent(code).splitlines()
    if end is not None:
        cut = [i for i, line in enumerate(lines) if end in line]
        if not cut:
            raise DeckError(f"no line contains end={end!r}")
        lines = lines[:cut[0] + 1]
    dropped = set()
    for pattern in skip:
        hits = {i for i, line in enumerate(lines) if pattern in line}
        if not hits:
            raise DeckError(f"skip={pattern!r} matches no line: the excerpt changed")
        dropped |= hits
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
        self.nb, self.results = notebook, results
        self._notebooks = {notebook.stem: notebook}

    # figures ------------------------------------------------------------------------------------
    def _stem_any(self, nb: str) -> str:
        """A notebook's stem from its stem or number."""
        matches = [p.stem for p in notebooks() if p.stem == nb or p.stem[:2] == nb]
        if len(matches) != 1:
            raise DeckError(f"no notebook {nb!r}")
        return matches[0]

    def _stem(self, nb: str | None) -> str:
        """The notebook whose measured figures and plots a slide quotes (this deck's by default): never
        one whose committed outputs are a CPU run."""
        stem = self.nb.stem if nb is None else self._stem_any(nb)
        notebook = self._notebook(stem)
        if notebook.cpu_outputs:
            raise DeckError(f"{stem}'s committed outputs come from a CPU run (its first cell says so): "
                            "its H100 figures are owed, and its deck quotes none")
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

    # plots and outputs --------------------------------------------------------------------------
    def plot(self, match: str, index: int = 0, caption: str = "", size: str = "", nb: str | None = None) -> str:
        stem = self._stem(nb)
        notebook = self._notebook(stem)
        cell, pngs = notebook.images(match)
        if index >= len(pngs):
            raise DeckError(f"{notebook.path.name}: the cell matching {match!r} has {len(pngs)} PNG outputs, "
                            f"not {index + 1}")
        if size not in PLOT_BOXES:
            raise DeckError(f"plot size {size!r}: one of {sorted(PLOT_BOXES)}")
        origin = html.escape(json.dumps({"nb": stem, "cell": cell.get("id"), "index": index}), quote=True)
        where = f"notebook {stem[:2]}, committed H100 output"
        caption = f"{caption} · {where}" if caption else where
        width, height = png_size(pngs[index])
        box_width, box_height = PLOT_BOXES[size]
        scale = min(box_width / width, box_height / height, MAX_UPSCALE)
        return (f'<figure class="plot {size}"><img src="data:image/png;base64,{pngs[index]}" '
                f'width="{round(width * scale)}" height="{round(height * scale)}" '
                f'alt="{html.escape(caption)}" data-origin="{origin}">'
                f"<figcaption>{html.escape(caption)}</figcaption></figure>")

    def output(self, match: str, first: int | None = None, lines: tuple[int, int] | None = None,
               nb: str | None = None) -> str:
        """A cell's printed output, verbatim (an exhibit, like a plot: it is never retyped)."""
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
        origin = html.escape(json.dumps({"nb": stem, "cell": cell.get("id"), "lines": [start, len(rows)]}),
                             quote=True)
        body = html.escape("\n".join(rows))
        return (f'<pre class="exhibit {text_size(rows)}" data-origin="{origin}"><code>{body}</code></pre>\n'
                f'<p class="exhibit-caption">printed by notebook {stem[:2]}, committed H100 output</p>')

    # code ---------------------------------------------------------------------------------------
    def code(self, path: str, name: str, skip: Iterable[str] = (), start: str | None = None,
             end: str | None = None, lang: str = "python") -> str:
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
        return _fenced(_dedent_and_trim(source, skip, end), lang, f"{path}:{name}")

    def cell_code(self, match: str, start: str, lang: str = "python", skip: Iterable[str] = (),
                  end: str | None = None, nb: str | None = None) -> str:
        notebook = self._notebook(self.nb.stem if nb is None else self._stem_any(nb))
        _, cell = notebook.code_cell(match)
        try:
            block = block_from(_source(cell), start, lang, end)
        except DeckError as err:
            raise DeckError(f"{notebook.path.name}, cell matching {match!r}: {err}") from None
        if lang == "python":
            block = strip_docstrings(block)
        return _fenced(_dedent_and_trim(block, skip), lang, f"{notebook.path.name}:{start}")

    # the title slide ----------------------------------------------------------------------------
    def title_slide(self, question: str) -> str:
        nb = self.nb
        if nb.cpu_outputs:
            provenance = (f'<div class="owed"><strong>H100 figures owed.</strong> The committed outputs of '
                          f"notebooks/{nb.stem}.ipynb come from a CPU run, and no H100 results are saved for it "
                          "yet: this deck shows the method and the code, and quotes no measured figure.</div>")
        elif (self.results.folder / f"{nb.stem}.json").exists():
            env = self.results.get(nb.stem).environment
            provenance = (f'<p class="provenance">Figures measured on {html.escape(env["gpu"])} '
                          f"(torch {html.escape(env['torch'])}, triton {html.escape(env['triton'])}): "
                          f"results/{REFERENCE_DEVICE}/{nb.stem}.json and the committed outputs of "
                          f"notebooks/{nb.stem}.ipynb</p>")
        else:  # a lecture that saves no figures: its outputs still come from the reference GPU
            env = dict(re.findall(r"^(\w+)\s*:\s*(.+?)\s*$", nb.provenance(), re.MULTILINE))
            if "H100" not in env.get("gpu", ""):
                raise DeckError(f"{nb.stem} has neither saved results nor H100 outputs to show")
            provenance = (f'<p class="provenance">Outputs from the committed {html.escape(env["gpu"])} run of '
                          f"notebooks/{nb.stem}.ipynb (torch {html.escape(env.get('torch', '?'))}, triton "
                          f"{html.escape(env.get('triton', '?'))}); this lecture saves no headline figures</p>")
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
        return {"H": self.H, "R": self.R, "ratio": self.ratio, "share": self.share, "plot": self.plot,
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

    def script(path: Path) -> str:
        return path.read_text(encoding="utf-8").replace("</script", "<\\/script")

    return {"reveal_js": script(root / "dist" / "reveal.js"),
            "notes_js": script(root / "plugin" / "notes" / "notes.js"),
            "reveal_css": (root / "dist" / "reveal.css").read_text(encoding="utf-8"),
            "theme_css": theme, "fonts_css": "\n".join(fonts),
            "reveal_version": version.group(1) if version else "unknown"}


REVEAL_CONFIG = {
    "width": 1280, "height": 720, "margin": 0.05, "minScale": 0.2, "maxScale": 2.0,
    "center": False, "hash": True, "controls": True, "progress": True, "slideNumber": "c/t",
    "transition": "none", "backgroundTransition": "none", "pdfMaxPagesPerSlide": 1,
    "pdfSeparateFragments": False,
}


def export_html(deck: Deck, assets: dict[str, str]) -> str:
    import nbconvert
    from nbconvert.exporters import SlidesExporter

    exporter = SlidesExporter(template_name=TEMPLATE_NAME, extra_template_basedirs=[str(TEMPLATE_DIR)],
                              exclude_anchor_links=True)
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


def check_deck(page: str, notebook_path: Path, results: Results | None = None,
               expected_slides: int | None = None) -> list[str]:
    """Everything wrong with a built deck, as sentences (an empty list: nothing)."""
    from bs4 import BeautifulSoup

    results = results or Results()
    notebook = Notebook.load(notebook_path)
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
        # images: PNG data that equals the notebook's committed output
        for img in section.find_all("img"):
            src = img.get("src", "")
            if not src.startswith("data:image/png;base64,"):
                problems.append(f"{where}: an image that is not embedded PNG data: {src[:60]!r}")
                continue
            data = base64.b64decode(src.split(",", 1)[1], validate=True)
            if not data.startswith(b"\x89PNG\r\n\x1a\n"):
                problems.append(f"{where}: an image whose data is not a PNG")
            origin = json.loads(img.get("data-origin") or "null")
            if not origin:
                problems.append(f"{where}: an image with no data-origin (plots come from notebook outputs)")
                continue
            source_nb = Notebook.load(NOTEBOOKS_DIR / f"{origin['nb']}.ipynb")
            if source_nb.cpu_outputs:
                problems.append(f"{where}: a plot from {origin['nb']}, whose committed outputs are a CPU run")
            try:
                _, pngs = source_nb.images(f"id:{origin['cell']}")
                if origin["index"] >= len(pngs) or pngs[origin["index"]] != src.split(",", 1)[1]:
                    problems.append(f"{where}: a plot that differs from the committed output of "
                                    f"{origin['nb']} cell {origin['cell']}")
            except DeckError as err:
                problems.append(f"{where}: {err}")
        # exhibits: printed output, verbatim
        for pre in section.find_all("pre", class_="exhibit"):
            origin = json.loads(pre.get("data-origin") or "null")
            try:
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
                value, unit = resolve(spec, results)
                if span.get_text() != format_quantity(value, unit):
                    problems.append(f"{where}: quotes {span.get_text()!r} where results/ says "
                                    f"{format_quantity(value, unit)!r} ({spec})")
            except (DeckError, ValueError, KeyError) as err:
                problems.append(f"{where}: quotes {span.get_text()!r}, which is not in results/: {err}")
        text = _visible_text(section)
        for found in FIGURE_PATTERN.finditer(text):
            context = text[max(0, found.start() - 40):found.end() + 20].replace("\n", " ")
            problems.append(f"{where}: {found.group(0)!r} is typed by hand (\"...{context}...\"): "
                            "quote figures with H(...) or R(...)")
    if notebook.cpu_outputs:
        if soup.find("span", class_="fig") or soup.find("figure", class_="plot"):
            problems.append("the notebook's outputs are a CPU run, yet the deck quotes figures or shows plots")
        if not sections or "H100 figures owed" not in sections[0].get_text():
            problems.append("the title slide does not say that the H100 figures are owed")
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
    """What the browser test needs to know about a built deck."""
    figure_slides = [i for i, s in enumerate(deck.slides) if 'class="plot' in s.body]
    code_slides = [i for i, s in enumerate(deck.slides) if '<div class="code' in s.body]
    return {"html": deck.html_path.name, "slides": len(deck.slides), "kinds": [s.kind for s in deck.slides],
            "figure_slide": figure_slides[0] if figure_slides else None,
            "code_slide": code_slides[0] if code_slides else None,
            "notes": [s.notes for s in deck.slides], "cpu_outputs": deck.notebook.cpu_outputs,
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
        owed = "  (H100 figures owed)" if deck.notebook.cpu_outputs else ""
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
