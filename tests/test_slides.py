"""The lecture decks (slides/, built by `./course.sh slides`): one per notebook, every one builds offline,
its images are the notebooks' committed plots, its figures equal results/, and a real browser shows it
without an error. The browser part needs Debian's chromium (installed by .ci/run); without one it skips
and says so."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "slides"))

import build_decks as decks  # noqa: E402
import deck_browser  # noqa: E402

NOTEBOOKS = decks.notebooks()
STEMS = [p.stem for p in NOTEBOOKS]
SCREENSHOTS = decks.BUILD_DIR / "screenshots"


@pytest.fixture(scope="module")
def built():
    """Every deck built once into .cache/slides/: {stem: Deck, or the DeckError that stopped it}."""
    results, assets = decks.Results(), decks.reveal_assets()
    out = {}
    for path in NOTEBOOKS:
        try:
            out[path.stem] = decks.build_one(path, results, assets, decks.BUILD_DIR)
        except decks.DeckError as err:
            out[path.stem] = err
    manifest = {stem: decks.manifest_entry(d) for stem, d in out.items() if isinstance(d, decks.Deck)}
    (decks.BUILD_DIR / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n",
                                                   encoding="utf-8")
    return out


def deck_of(built, stem):
    deck = built[stem]
    if isinstance(deck, decks.DeckError):
        pytest.fail(f"slides/{stem}.md does not build: {deck}")
    return deck


def page_of(built, stem) -> str:
    return deck_of(built, stem).html_path.read_text(encoding="utf-8")


def sections(page: str):
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(decks.slides_markup(page), "html.parser")
    return soup.find("div", class_="slides").find_all("section", recursive=False)


# --- every notebook has its deck, and the README links it ----------------------------------------------


def test_every_notebook_has_a_deck_and_every_deck_a_notebook():
    assert NOTEBOOKS, "no notebooks found"
    missing = [f"slides/{p.stem}.md" for p in NOTEBOOKS if not decks.deck_source(p).exists()]
    assert not missing, f"notebooks without a deck: {missing}"
    orphans = [p.name for p in decks.SLIDES_DIR.glob("[0-9][0-9]_*.md") if p.stem not in STEMS]
    assert not orphans, f"decks without a notebook (renamed?): {orphans}"


def test_readme_links_every_deck_in_the_lectures_column():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    header = next(line for line in readme.splitlines() if line.startswith("| notebook | what you learn"))
    assert header.rstrip().endswith("| lectures |"), "the README's notebooks table needs a last column 'lectures'"
    for stem in STEMS:
        row = next(line for line in readme.splitlines() if line.startswith(f"| [{stem}](notebooks/{stem}.ipynb)"))
        assert row.rstrip().endswith(f"| [slides](slides/{stem}.md) |"), f"README row of {stem} does not link its deck"


# --- every deck builds, and passes the checks ------------------------------------------------------------


@pytest.mark.parametrize("stem", STEMS)
def test_deck_builds_and_passes_its_checks(built, stem):
    deck = deck_of(built, stem)
    problems = decks.check_deck(deck.html_path.read_text(encoding="utf-8"), ROOT / "notebooks" / f"{stem}.ipynb",
                                expected_slides=len(deck.slides))
    assert not problems, f"{stem}:\n" + "\n".join(problems)


@pytest.mark.parametrize("stem", STEMS)
def test_deck_has_its_title_question_try_and_summary_slides(built, stem):
    found = sections(page_of(built, stem))
    assert decks.MIN_SLIDES <= len(found) <= decks.MAX_SLIDES
    kinds = [s.get("data-kind") for s in found]
    assert kinds[0] == "title"
    title = decks.Notebook.load(ROOT / "notebooks" / f"{stem}.ipynb").plain_title
    assert title in found[0].find("h1").get_text()
    assert {"question", "try", "summary"} <= set(kinds), kinds
    assert "Summary" in found[kinds.index("summary")].find("h2").get_text()
    assert sum(1 for s in found if s.find("aside", class_="notes")) >= len(found) - 1, "speaker notes missing"


@pytest.mark.parametrize("stem", STEMS)
def test_every_image_resolves_to_the_notebooks_committed_plot(built, stem):
    from PIL import Image

    nb = decks.Notebook.load(ROOT / "notebooks" / f"{stem}.ipynb")
    images = [img for s in sections(page_of(built, stem)) for img in s.find_all("img")]
    for img in images:
        src = img["src"]
        assert src.startswith("data:image/png;base64,"), f"not embedded: {src[:60]}"
        data = base64.b64decode(src.split(",", 1)[1])
        with Image.open(io.BytesIO(data)) as picture:
            picture.verify()  # a real, complete PNG
        origin = json.loads(img["data-origin"])
        _, pngs = decks.Notebook.load(ROOT / "notebooks" / f"{origin['nb']}.ipynb").images(f"id:{origin['cell']}")
        assert pngs[origin["index"]] == src.split(",", 1)[1], "the plot differs from the notebook's output"
    if nb.cpu_outputs:
        assert not images, f"{stem} has CPU outputs: its deck must not show their plots"
    elif list(nb.cells) and any("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", [])):
        assert images, f"{stem} has H100 plots, and its deck shows none"


# --- figures: from results/, never typed by hand ----------------------------------------------------------


def test_the_check_catches_a_figure_typed_by_hand(built):
    page = page_of(built, "04_cuda_gemm_ladder")
    tampered = page.replace("<h2", "<p>cuBLAS reached 52.1 TFLOP/s and rung 9 a 0.88x share</p><h2", 1)
    problems = decks.check_deck(tampered, ROOT / "notebooks/04_cuda_gemm_ladder.ipynb")
    assert any("'52.1 TFLOP/s' is typed by hand" in p for p in problems), problems
    assert any("'0.88x' is typed by hand" in p for p in problems), problems


def test_the_check_catches_a_figure_typed_into_a_caption_or_a_code_block(built):
    page = page_of(built, "06_triton_softmax")
    tampered = page.replace("<figcaption>", "<figcaption>fused: 2,859 GB/s · ", 1)
    tampered = tampered.replace("<h2", "<pre><code>print('1.61x')</code></pre><h2", 1)
    problems = decks.check_deck(tampered, ROOT / "notebooks/06_triton_softmax.ipynb")
    assert any("'2,859 GB/s' is typed by hand" in p for p in problems), problems
    assert any("'1.61x' is typed by hand" in p for p in problems), problems


def test_the_check_catches_a_figure_typed_by_hand_in_the_speaker_notes(built):
    page = page_of(built, "01_timing_gpu_code")
    tampered = page.replace('<aside class="notes">', '<aside class="notes"><p>It ran at 90% of peak.</p>', 1)
    problems = decks.check_deck(tampered, ROOT / "notebooks/01_timing_gpu_code.ipynb")
    assert any("'90%' is typed by hand" in p for p in problems), problems


def test_the_check_catches_a_quoted_figure_that_differs_from_results(built):
    page = page_of(built, "04_cuda_gemm_ladder")
    first = re.search(r"""(<span class="fig" data-result=(?:"[^"]*"|'[^']*')>)([^<]*)(</span>)""", page)
    tampered = page.replace(first.group(0), first.group(1) + "53 TFLOP/s" + first.group(3), 1)
    problems = decks.check_deck(tampered, ROOT / "notebooks/04_cuda_gemm_ladder.ipynb")
    assert any("quotes '53 TFLOP/s' where results/ says" in p for p in problems), problems


def test_the_check_catches_a_figure_that_is_not_in_results(built):
    page = page_of(built, "04_cuda_gemm_ladder")
    tag = json.dumps({"kind": "headline", "nb": "04_cuda_gemm_ladder", "what": "rung 10 magic", "field": "value"})
    span = f'<span class="fig" data-result="{tag.replace(chr(34), "&quot;")}">99 TFLOP/s</span>'
    tampered = page.replace("<h2", f"<p>{span}</p><h2", 1)
    problems = decks.check_deck(tampered, ROOT / "notebooks/04_cuda_gemm_ladder.ipynb")
    assert any("quotes '99 TFLOP/s', which is not in results/" in p for p in problems), problems


def test_the_check_follows_results_when_they_change(built, tmp_path):
    """A new H100 run rewrites results/: a deck built from the old file no longer passes."""
    device = tmp_path / decks.REFERENCE_DEVICE
    shutil.copytree(decks.RESULTS_DIR / decks.REFERENCE_DEVICE, device)
    record = json.loads((device / "04_cuda_gemm_ladder.json").read_text())
    record["headlines"][0]["value"] *= 1.1  # cuBLAS got faster
    (device / "04_cuda_gemm_ladder.json").write_text(json.dumps(record))
    problems = decks.check_deck(page_of(built, "04_cuda_gemm_ladder"), ROOT / "notebooks/04_cuda_gemm_ladder.ipynb",
                                results=decks.Results(tmp_path))
    new_text = decks.format_quantity(record["headlines"][0]["value"], "TFLOP/s")
    assert any(f"where results/ says '{new_text}'" in p for p in problems), problems


def test_a_figure_quoted_through_a_template_is_tagged_with_its_source():
    results = decks.Results()
    context = decks.DeckContext(decks.Notebook.load(ROOT / "notebooks/04_cuda_gemm_ladder.ipynb"), results)
    record = json.loads((decks.RESULTS_DIR / decks.REFERENCE_DEVICE / "04_cuda_gemm_ladder.json").read_text())
    measured = next(r["TFLOP/s"] for r in record["records"] if r["rung"] == "9 tuned tile shape")
    quoted = str(context.R(rung="9 tuned tile shape").fig("TFLOP/s"))
    assert quoted.endswith(f">{decks.format_quantity(measured, 'TFLOP/s')}</span>") and 'data-result="' in quoted
    assert decks.resolve({"kind": "record", "nb": "04_cuda_gemm_ladder", "where": {"rung": "9 tuned tile shape"},
                          "column": "TFLOP/s", "unit": "TFLOP/s"}, results)[0] == pytest.approx(measured)


# --- loud failures, and the decks whose H100 run is owed ---------------------------------------------------


def test_a_plot_that_cannot_be_found_fails_the_build_loudly():
    context = decks.DeckContext(decks.Notebook.load(ROOT / "notebooks/01_timing_gpu_code.ipynb"), decks.Results())
    with pytest.raises(decks.DeckError, match=r"01_timing_gpu_code.ipynb: 0 code cells match 'no such source text'"):
        context.plot("no such source text")
    with pytest.raises(decks.DeckError, match="has 1 PNG outputs, not 2"):
        context.plot("plot_throughput(frame", index=1)
    with pytest.raises(decks.DeckError, match="no function or class 'no_such_kernel'"):
        context.code("lessons/nb05_vector_add.py", "no_such_kernel")


def test_a_deck_cannot_quote_or_plot_a_notebook_whose_outputs_are_a_cpu_run():
    owed = [p for p in NOTEBOOKS if decks.Notebook.load(p).cpu_outputs]
    if not owed:
        pytest.skip("every notebook has its H100 outputs committed")
    context = decks.DeckContext(decks.Notebook.load(owed[0]), decks.Results())
    with pytest.raises(decks.DeckError, match="come from a CPU run"):
        context.H("anything")
    with pytest.raises(decks.DeckError, match="come from a CPU run"):
        context.plot("import")


@pytest.mark.parametrize("stem", [p.stem for p in NOTEBOOKS if decks.Notebook.load(p).cpu_outputs])
def test_owed_decks_say_so_and_quote_nothing(built, stem):
    found = sections(page_of(built, stem))
    assert "H100 figures owed" in found[0].get_text()
    assert not any(s.find("span", class_="fig") or s.find("figure") for s in found)


# --- a real browser ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser():
    binary = deck_browser.find_chromium()
    if binary is None:
        reason = ("no chromium binary on this machine (Debian: apt-get install chromium; .ci/run installs it): "
                  "the decks' browser test did not run")
        warnings.warn(reason)
        pytest.skip(reason)
    with deck_browser.Chromium(binary) as chromium:
        yield chromium


def _not_blank(png: bytes) -> None:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as picture:
        colours = picture.convert("RGB").getcolors(maxcolors=1 << 16)
    assert colours is None or len(colours) > 8, "the screenshot is (nearly) blank"


@pytest.mark.parametrize("stem", STEMS)
def test_a_browser_shows_every_slide_with_no_error(built, browser, stem):
    deck = deck_of(built, stem)
    report = browser.open_deck(deck.html_path)
    try:
        assert report.slides == len(deck.slides), f"reveal.js counts {report.slides} slides, the source has {len(deck.slides)}"
        assert report.notes >= len(deck.slides) - 1
        assert not report.errors, "\n".join(report.errors)
        assert all(url.startswith(deck_browser.LOCAL_SCHEMES) for url in report.requests)
        _not_blank(browser.screenshot(report, 0, SCREENSHOTS / f"{stem}_1_title.png"))
        entry = decks.manifest_entry(deck)
        second = entry["figure_slide"] if entry["figure_slide"] is not None else entry["code_slide"]
        label = "figure" if entry["figure_slide"] is not None else "code"
        _not_blank(browser.screenshot(report, second, SCREENSHOTS / f"{stem}_2_{label}.png"))
        if not deck.notebook.cpu_outputs and any("image/png" in o.get("data", {}) for c in deck.notebook.cells
                                                 for o in c.get("outputs", [])):
            assert entry["figure_slide"] is not None, f"{stem}: no figure slide to show"
    finally:
        browser.close_page(report.session)


def test_the_speaker_view_and_the_pdf_handout_work_offline(built, browser, tmp_path):
    deck = deck_of(built, "04_cuda_gemm_ladder")
    report = browser.open_deck(deck.html_path)
    try:
        notes = browser.speaker_view(report, 3, SCREENSHOTS / "04_cuda_gemm_ladder_3_speaker_view.png")
        expected = deck.slides[3].notes.split()[:6]
        assert notes.split()[:6] == expected, (notes[:120], expected)
    finally:
        browser.close_page(report.session)
    pages = browser.print_pdf(deck.html_path, tmp_path / "04.pdf")
    assert pages == len(deck.slides)
    assert (tmp_path / "04.pdf").read_bytes().startswith(b"%PDF")
