"""Make executed notebooks fit to commit: no absolute machine paths, no compiler IR dumps in outputs.

    python tools/scrub_outputs.py notebooks/14_*.ipynb

Run after `./course.sh execute`. It rewrites, in stream outputs only:
- IPython's cell file names (``/tmp/ipykernel_123/456.py:7``) as ``<cell>:7``;
- the project's own files, in warnings and tracebacks (``/any/checkout/lessons/nb12_lora.py:618``), relative to
  the project (``lessons/nb12_lora.py:618``);
- an MLIR module that a failing Triton compile prints to stderr (hundreds of lines) as one line saying
  how many lines were cut; the error lines around it stay.
tests/test_notebooks_structure.py checks that no output holds an absolute path of the machine it ran on.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import nbformat

CELL_FILE = re.compile(r"/tmp/ipykernel_\d+/\d+\.py")
PROJECT_FILE = re.compile(r"(?<![\w.])/(?:[\w.-]+/)*?((?:lessons|course_utils|exercises|solutions|notebooks|tests)/[\w./-]+)")
MLIR_START = re.compile(r"^(module \{|\{-#)")


def scrub_text(text: str) -> str:
    text = CELL_FILE.sub("<cell>", text)
    text = PROJECT_FILE.sub(r"\1", text)
    lines, out, skipping, cut = text.split("\n"), [], False, 0
    for line in lines:
        if not skipping and MLIR_START.match(line):
            skipping, cut = True, 0
        if skipping:
            cut += 1
            if line.startswith("#-}"):  # the end of the reproducer block that follows the module
                out.append(f"[{cut} lines of the compiler's MLIR dump cut by tools/scrub_outputs.py]")
                skipping = False
            continue
        out.append(line)
    if skipping:
        out.append(f"[{cut} lines of the compiler's MLIR dump cut by tools/scrub_outputs.py]")
    return "\n".join(out)


def scrub(path: Path) -> bool:
    nb = nbformat.read(path, as_version=4)
    changed = False
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                new = scrub_text(output["text"])
                changed |= new != output["text"]
                output["text"] = new
    if changed:
        nbformat.write(nb, path)
    return changed


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        print(f"{arg}: {'scrubbed' if scrub(Path(arg)) else 'clean'}")
