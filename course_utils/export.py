"""Code a later lesson reuses is written once, in its notebook, and exported to the `lessons` package.

A code cell whose first line is ``# export: lessons/<module>.py`` is part of that module: the
notebook keeps the code where a learner reads it, and a later notebook imports it
(``from lessons.nb05_vector_add import add_kernel``) instead of pasting it. The module is the marked
cells of one notebook in order, below a header that names the notebook.

    python -m course_utils.export           # rewrite lessons/*.py from the notebooks
    python -m course_utils.export --check   # exit 1 if a module and its notebook have drifted apart

A CI test runs the check, so an edit to either side that is not carried to the other fails.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

PROJECT_DIR = Path(__file__).resolve().parent.parent
MARKER = re.compile(r"^# export: (lessons/[a-z][a-z0-9_]*\.py)\s*$")
HEADER = ('"""Exported from notebooks/{notebook} by `python -m course_utils.export`: edit the notebook, '
          'not this file."""\n')


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def exported_modules(project_dir: Path = PROJECT_DIR) -> dict[Path, str]:
    """module path -> the text it must have, for every marked cell of every notebook."""
    cells: dict[str, list[str]] = {}
    owner: dict[str, str] = {}
    for notebook in sorted((project_dir / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] != "code":
                continue
            first, _, body = _source(cell).partition("\n")
            match = MARKER.match(first)
            if not match:
                continue
            target = match.group(1)
            if owner.setdefault(target, notebook.name) != notebook.name:
                raise ValueError(f"{target} is exported from two notebooks: {owner[target]} and {notebook.name}")
            cells.setdefault(target, []).append(body.strip("\n"))
    return {project_dir / target: HEADER.format(notebook=owner[target]) + "\n" + "\n\n\n".join(bodies) + "\n"
            for target, bodies in cells.items()}


def show(what: object, *, section: str | None = None) -> None:
    """Show a lesson's code in the notebook: a function or Triton kernel (its source), or a file of
    `lessons/` (``"lessons/nb04_gemm.cu"``), or only its ``section``: the lines from a comment line holding
    ``section`` up to the next line holding ``section:end`` (``// rung 3`` ... ``// rung 3:end``).

    Long kernels live in `lessons/` (no notebook cell over 40 lines); the notebook shows them with this, so
    the learner reads the code where it is taught. Displays highlighted code in Jupyter (prints it elsewhere).
    """
    import inspect
    import textwrap

    if isinstance(what, (str, Path)):
        path = Path(what) if Path(what).is_absolute() else PROJECT_DIR / what
        if not path.is_file():
            raise FileNotFoundError(f"what: no such file {what}")
        text, language = path.read_text(encoding="utf-8"), {".cu": "cuda", ".cpp": "cpp"}.get(path.suffix, "python")
    else:
        target = getattr(what, "fn", what)  # a @triton.jit kernel wraps its Python function in .fn
        try:
            text, language = inspect.getsource(target), "python"
        except (TypeError, OSError) as err:
            raise TypeError(f"what must be a function, a kernel or a path under lessons/, got {what!r}") from err
    if section is not None:
        lines = text.splitlines()
        begin = next((i for i, line in enumerate(lines) if section in line and f"{section}:end" not in line), None)
        if begin is None:
            raise ValueError(f"section: no line holds {section!r}")
        end = next((i for i in range(begin + 1, len(lines)) if f"{section}:end" in lines[i]), len(lines))
        text = textwrap.dedent("\n".join(lines[begin + 1:end]))  # a section inside a function reads unindented
    text = text.strip("\n")
    try:
        from IPython.display import Markdown, display

        from IPython import get_ipython

        if get_ipython() is not None:
            display(Markdown(f"```{language}\n{text}\n```"))
            return
    except ImportError:
        pass
    print(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Export the marked notebook cells to lessons/.")
    parser.add_argument("--check", action="store_true", help="exit 1 if lessons/ differs from the notebooks")
    parser.add_argument("--project", type=Path, default=PROJECT_DIR)
    args = parser.parse_args(argv)
    wanted = exported_modules(args.project)
    # a module written by hand (a kernel too long for a notebook cell, shown by the notebook) is not exported
    present = {p for p in (args.project / "lessons").glob("*.py")
               if p.name != "__init__.py" and p.read_text(encoding="utf-8").startswith('"""Exported from')}
    stale = sorted(p.name for p in present - set(wanted))
    changed = sorted(p.name for p, text in wanted.items()
                     if not p.exists() or p.read_text(encoding="utf-8") != text)
    if args.check:
        for name in changed:
            print(f"lessons/{name} differs from its notebook's export cells", file=sys.stderr)
        for name in stale:
            print(f"lessons/{name} is exported by no notebook", file=sys.stderr)
        if changed or stale:
            print("run: python -m course_utils.export", file=sys.stderr)
        return 1 if (changed or stale) else 0
    (args.project / "lessons").mkdir(exist_ok=True)
    for path, text in wanted.items():
        path.write_text(text, encoding="utf-8")
    for name in stale:
        (args.project / "lessons" / name).unlink()
    print(f"wrote {len(wanted)} module(s); removed {len(stale)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
