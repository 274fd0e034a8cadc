"""The lecture decks (slides/, built by `./course.sh slides`): one per notebook, every one builds offline,
its charts are drawn from results/ and its diagrams by code, its figures equal results/, and a real
browser shows every slide legibly (text sizes, nothing spilling out, the word budget, at 1280x720 and
1024x768) without an error. The browser part needs Debian's chromium (installed by .ci/run); without one
it skips and says so."""

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
import diagrams  # noqa: E402
import figures  # noqa: E402

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
def test_every_image_is_a_chart_or_diagram_drawn_from_results(built, stem):
    from PIL import Image  # noqa: F401  (the course's image stack is installed)

    nb = decks.Notebook.load(ROOT / "notebooks" / f"{stem}.ipynb")
    found = sections(page_of(built, stem))
    images = [img for s in found for img in s.find_all("img")]
    for img in images:
        assert img["src"].startswith("data:image/svg+xml;base64,"), f"not an embedded SVG: {img['src'][:60]}"
        spec = json.loads(img["data-chart"])
        drawn = decks.draw_chart(spec, decks.Results().of(nb))  # the card that ran the notebook's outputs
        assert base64.b64decode(img["src"].split(",", 1)[1]).decode() == drawn.svg, "the chart differs from results/"
        assert float(img["data-min-font"]) >= figures.MIN_FONT_PX
    plots = [s for s in found if s.find("figure", class_="plot")]
    diagrams_shown = [s for s in found if s.find("figure", class_="diagram")]
    assert diagrams_shown, f"{stem}: no diagram of its mechanism"
    if nb.cpu_outputs:
        assert not plots, f"{stem} has CPU outputs: its deck must not plot them"
    elif nb.card == decks.REFERENCE_DEVICE and (decks.RESULTS_DIR / nb.card / f"{stem}.json").exists():
        assert plots, f"{stem} has saved H100 results, and its deck plots none"


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


def test_what_cannot_be_shown_fails_the_build_loudly():
    context = decks.DeckContext(decks.Notebook.load(ROOT / "notebooks/04_cuda_gemm_ladder.ipynb"), decks.Results())
    with pytest.raises(decks.DeckError, match="no function or class 'no_such_kernel'"):
        context.code("lessons/nb05_vector_add.py", "no_such_kernel")
    with pytest.raises(decks.DeckError, match=r"lines do not fit on a slide at 20 px"):
        context.code("lessons/nb04_gemm.cu", "rung 8")
    with pytest.raises(decks.DeckError, match="hl='no such line' matches no line"):
        context.code("lessons/nb04_gemm.cu", "rung 1", hl=["no such line"])
    with pytest.raises(decks.DeckError, match="a slide shows at most 6"):
        context.table(["rung", "TFLOP/s"], [[r, context.R(rung=r).fig("TFLOP/s")] for r in
                                            ["1 naive", "2 coalesced", "3 shared memory", "4 1D register blocking",
                                             "5 2D register blocking", "6 vectorized", "7 warp tiling"]])
    with pytest.raises(decks.DeckError, match="one chart, one unit"):
        context.bars([("a", context.R(rung="1 naive").fig("TFLOP/s")), ("b", context.R(rung="1 naive").fig("ms"))])
    with pytest.raises(decks.DeckError, match="no diagram 'no_such_diagram'"):
        context.diagram("no_such_diagram")


def test_a_table_puts_units_in_its_header_and_highlights_ours():
    from bs4 import BeautifulSoup

    context = decks.DeckContext(decks.Notebook.load(ROOT / "notebooks/04_cuda_gemm_ladder.ipynb"), decks.Results())
    rows = [[r, context.R(rung=r).fig("TFLOP/s"), context.R(rung=r).fig("% of cuBLAS")] for r in ("1 naive", "9 tuned tile shape")]
    table = BeautifulSoup(context.table(["rung", "speed", "of cuBLAS"], rows, ours=["9 tuned tile shape"]), "html.parser")
    assert [th.get_text() for th in table.find_all("th")] == ["rung", "speed (TFLOP/s)", "of cuBLAS (%)"]
    cells = table.find_all("td", class_="num")
    assert cells and all(not c.get_text().endswith(("TFLOP/s", "%")) for c in cells)
    assert [tr.get("class") for tr in table.tbody.find_all("tr")] == [[], ["ours"]]
    page = "<div class=\"slides\"><section>" + str(table) + "</section></div><script>"
    results = decks.Results()
    for span in BeautifulSoup(page, "html.parser").find_all("span", class_="fig"):  # bare figures still check
        spec = json.loads(span["data-result"])
        assert span.get_text() == decks.figure_text(spec, *decks.resolve(spec, results))


def test_the_layout_check_catches_a_legend_over_a_line_and_overlapping_labels():
    import matplotlib

    with matplotlib.rc_context(figures.style()):
        fig = figures.new_figure()
        ax = fig.add_axes([0.1, 0.15, 0.85, 0.8])
        ax.plot([1, 2, 3], [3, 3, 3], label="ours")
        ax.plot([1, 2, 3], [1, 1.1, 1.2], label="cuBLAS")
        ax.set_ylim(0, 4)
        ax.legend(loc="center left", bbox_to_anchor=(0.3, 0.75))  # on top of the upper line
        ax.text(2, 2, "a label")
        ax.text(2.01, 2.0, "another label")
        ax.text(1.5, 3, "crossed", va="center")
        problems = figures.layout_problems(fig)
    assert any("the legend covers the line 'ours'" in p for p in problems), problems
    assert any("'a label' and 'another label' overlap" in p for p in problems), problems
    assert any("a line crosses the text 'crossed'" in p for p in problems), problems
    with pytest.raises(figures.LayoutError):
        figures.render(fig)


def test_charts_are_legible_and_use_one_colour_per_provider():
    drawn = figures.line_chart({"Triton (ours)": [(1024, 10.0), (1 << 20, 2000.0)],
                                "torch.add": [(1024, 9.0), (1 << 20, 1900.0)]}, "elements", "GB/s",
                               ours=["Triton (ours)"])
    assert drawn.min_font >= figures.MIN_FONT_PX
    assert "e+" not in drawn.svg.lower()
    assert figures.colour_of("cuBLAS") == figures.colour_of("cuBLAS FP32") != figures.colour_of("Triton blocked")
    assert figures.colour_of("torch.compile") != figures.colour_of("torch.add")
    assert len(set(figures.distinct_colours(["torch.add", "torch eager", "copy"]))) == 3
    assert figures.plain_number(1.5e6) == "1,500,000" and figures.short_count(1 << 28) == "256 M"


@pytest.mark.parametrize("name", sorted(diagrams.DIAGRAMS))
def test_every_diagram_draws_legibly_with_nothing_overlapping(name):
    drawn = figures.cached({"kind": "diagram", "name": name}, diagrams.DIAGRAMS[name])
    assert drawn.svg.startswith("<svg") and drawn.texts >= 3
    assert drawn.min_font >= figures.MIN_FONT_PX


def _outputs_from(tmp_path, monkeypatch, stem: str, banner: str, gpu: str) -> Path:
    """notebooks/ copied to tmp_path (and made the decks' notebooks folder), with notebook ``stem`` made to
    say that its committed outputs come from another machine: ``banner`` in its first cell in place of its
    own, ``gpu`` in its provenance cell."""
    folder = tmp_path / "notebooks"
    folder.mkdir(parents=True)
    for path in NOTEBOOKS:
        shutil.copy(path, folder / path.name)
    target = folder / f"{stem}.ipynb"
    nb = json.loads(target.read_text(encoding="utf-8"))
    first = decks._source(nb["cells"][0])
    for old in (decks.CPU_OUTPUTS_BANNER, decks.H200_OUTPUTS_BANNER):
        first = first.replace(old, "")
    nb["cells"][0]["source"] = first.replace("\n\n", f"\n\n{banner}\n\n", 1) if banner else first
    for output in nb["cells"][2]["outputs"]:
        text = re.sub(r"^gpu(\s*): .*$", rf"gpu\1: {gpu}", decks._text(output.get("text")), flags=re.MULTILINE)
        if gpu == "none":
            text = text.replace("triton_mode        : compiled", "triton_mode        : interpreter (CPU)")
        output["text"] = text
    target.write_text(json.dumps(nb), encoding="utf-8")
    monkeypatch.setattr(decks, "NOTEBOOKS_DIR", folder)
    return target


H200_STEMS = [p.stem for p in NOTEBOOKS if decks.Notebook.load(p).h200_outputs]
QUOTING = "10_input_pipeline_case_study"  # a deck that quotes figures, tables, a chart and printed output
QUIET = "17_multi_gpu_training"  # a deck that quotes no figure


def test_a_cpu_output_deck_quotes_nothing_and_says_the_h100_figures_are_owed(built, tmp_path, monkeypatch):
    cpu = _outputs_from(tmp_path, monkeypatch, QUOTING, decks.CPU_OUTPUTS_BANNER, "none")
    notebook = decks.Notebook.load(cpu)
    assert notebook.cpu_outputs and not notebook.h200_outputs and notebook.card is None
    context = decks.DeckContext(notebook, decks.Results())
    for quote in (lambda: context.H("anything"), lambda: context.R(rung="1 baseline"),
                  lambda: context.sweep("size", "gbps", "provider"), lambda: context.output("id:34ed0b70"),
                  lambda: context.H("cuBLAS", nb="04")):  # nor another notebook's figures
        with pytest.raises(decks.DeckError, match="come from a CPU run"):
            quote()
    with pytest.raises(decks.DeckError, match="come from a CPU run"):  # the deck written for the H200 run
        decks.render_deck(cpu, decks.Results())
    problems = decks.check_deck(page_of(built, QUOTING), cpu)
    assert "the notebook's outputs are a CPU run, yet the deck quotes figures or shows plots" in problems, problems
    assert "the title slide does not say that the outputs are a CPU run and the H100 figures owed" in problems
    # a deck that quotes nothing builds, says so, and passes its checks
    quiet = _outputs_from(tmp_path / "quiet", monkeypatch, QUIET, decks.CPU_OUTPUTS_BANNER, "none")
    deck = decks.build_one(quiet, decks.Results(), decks.reveal_assets(), tmp_path / "out")
    found = sections(deck.html_path.read_text(encoding="utf-8"))
    owed = found[0].find("div", class_="owed").get_text()
    assert owed.startswith("H100 figures owed.") and "come from a CPU run" in owed and "H200" not in owed, owed
    assert not found[0].find("p", class_="provenance") and "Measured on" not in found[0].get_text()
    assert not any(s.find("span", class_="fig") or s.find("figure", class_="plot") for s in found)
    page = deck.html_path.read_text(encoding="utf-8")
    assert decks.check_deck(page, quiet, expected_slides=len(deck.slides)) == []
    assert decks.manifest_entry(deck)["card"] is None


@pytest.mark.parametrize("stem", H200_STEMS)
def test_an_h200_output_notebook_deck_quotes_the_h200_figures_and_says_so(built, stem):
    notebook = decks.Notebook.load(ROOT / "notebooks" / f"{stem}.ipynb")
    assert notebook.card == "NVIDIA_H200" and not notebook.cpu_outputs
    found = sections(page_of(built, stem))
    title = found[0].get_text()
    assert "Measured on an NVIDIA H200: H100 figures owed." in title, title
    saved = decks.RESULTS_DIR / "NVIDIA_H200" / f"{stem}.json"
    if saved.exists():
        env = json.loads(saved.read_text())["environment"]
        assert (f"Figures measured on NVIDIA H200 (torch {env['torch']}, triton {env['triton']}): "
                f"results/NVIDIA_H200/{stem}.json") in title, title
    h200 = decks.Results(device="NVIDIA_H200")
    for span in (span for s in found for span in s.find_all("span", class_="fig")):
        spec = json.loads(span["data-result"])
        assert decks.quoted_notebooks(spec) == {stem}
        assert span.get_text() == decks.figure_text(spec, *decks.resolve(spec, h200))
    for caption in (c.get_text() for s in found for c in s.select("figure.plot figcaption")):
        assert f"drawn from results/NVIDIA_H200/{stem}.json" in caption
    for caption in (c.get_text() for s in found for c in s.find_all("p", class_="exhibit-caption")):
        assert caption.endswith("committed H200 output"), caption


def test_the_h200_deck_quotes_h200_figures_and_its_check_reads_the_h200_folder(built, tmp_path):
    page = page_of(built, QUOTING)
    saved = json.loads((decks.RESULTS_DIR / "NVIDIA_H200" / f"{QUOTING}.json").read_text())
    quoted = [json.loads(s["data-result"]) for sec in sections(page) for s in sec.find_all("span", class_="fig")]
    assert quoted and any(s["kind"] == "headline" for s in quoted) and any(s["kind"] == "record" for s in quoted)
    final = decks.format_quantity(saved["headlines"][0]["value"], saved["headlines"][0]["unit"])
    assert f">{final}</span>" in page, f"the deck does not quote the H200 run's {final}"
    # the H100 folder holds a different (older) run of the notebook: the check does not read it
    for device in (decks.REFERENCE_DEVICE, "NVIDIA_H200"):
        shutil.copytree(decks.RESULTS_DIR / device, tmp_path / device)
    older = json.loads(json.dumps(saved))
    older["headlines"][0]["value"] *= 0.8
    older["environment"]["gpu"] = "NVIDIA H100 80GB HBM3"
    (tmp_path / decks.REFERENCE_DEVICE / f"{QUOTING}.json").write_text(json.dumps(older))
    notebook_path = ROOT / "notebooks" / f"{QUOTING}.ipynb"
    assert decks.check_deck(page, notebook_path, results=decks.Results(tmp_path)) == []
    # a title slide that does not say where the figures come from fails
    unsaid = page.replace("Measured on an NVIDIA H200: H100 figures owed.", "", 1)
    assert "the title slide does not say 'Measured on an NVIDIA H200: H100 figures owed'" in \
        decks.check_deck(unsaid, notebook_path)
    # a new H200 run: the deck built from the old file no longer passes
    (tmp_path / "NVIDIA_H200" / f"{QUOTING}.json").write_text(json.dumps(older))
    problems = decks.check_deck(page, notebook_path, results=decks.Results(tmp_path))
    new_text = decks.format_quantity(older["headlines"][0]["value"], older["headlines"][0]["unit"])
    assert any(f"where results/ says '{new_text}'" in p for p in problems), problems


def test_a_deck_never_mixes_cards(built):
    results = decks.Results()
    h100 = decks.DeckContext(decks.Notebook.load(ROOT / "notebooks/04_cuda_gemm_ladder.ipynb"), results)
    h200 = decks.DeckContext(decks.Notebook.load(ROOT / "notebooks" / f"{QUOTING}.ipynb"), results)
    assert (h100.results.device, h200.results.device) == (decks.REFERENCE_DEVICE, "NVIDIA_H200")
    with pytest.raises(decks.DeckError, match="a deck never mixes cards"):
        h100.H("anything", nb="10")
    with pytest.raises(decks.DeckError, match="a deck never mixes cards"):
        h100.sweep("rung", "images_per_s", "rung", nb=QUOTING)
    with pytest.raises(decks.DeckError, match="a deck never mixes cards"):
        h200.R(rung="1 naive", nb="04")
    with pytest.raises(decks.DeckError, match="a deck never mixes cards"):
        h200.output("TUNE_SIZES = (1024, 2048, 4096)", nb="04")
    # and the check catches a figure of the other card's results pasted into a built deck
    h200_fig = str(h200.H("GPU-busy share of the final rung's profiled window").value)
    h100_fig = str(h100.R(rung="1 naive").fig("TFLOP/s"))
    for stem, fig in (("04_cuda_gemm_ladder", h200_fig), (QUOTING, h100_fig)):
        tampered = page_of(built, stem).replace("<h2", f"<p>{fig}</p><h2", 1)
        problems = decks.check_deck(tampered, ROOT / "notebooks" / f"{stem}.ipynb")
        assert any("a deck never mixes cards" in p for p in problems), problems


def test_an_h200_banner_needs_an_h200_in_the_provenance_cell(tmp_path, monkeypatch):
    wrong = _outputs_from(tmp_path, monkeypatch, QUIET, decks.H200_OUTPUTS_BANNER, "NVIDIA H100 80GB HBM3")
    with pytest.raises(decks.DeckError, match="says its outputs come from an H200 run, but its provenance"):
        decks.DeckContext(decks.Notebook.load(wrong), decks.Results())


@pytest.mark.parametrize("stem", [p.stem for p in NOTEBOOKS if decks.Notebook.load(p).cpu_outputs])
def test_owed_decks_say_so_and_quote_nothing(built, stem):
    found = sections(page_of(built, stem))
    assert "H100 figures owed" in found[0].get_text()
    assert not any(s.find("span", class_="fig") or s.find("figure", class_="plot") for s in found)


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


#: What a person must be able to read, in slide pixels (1280x720; reveal.js scales the whole slide).
MIN_PX = {"code_px": decks.CODE_PX, "table_px": 20, "figure_px": figures.MIN_FONT_PX, "text_px": 16}
VIEWPORTS = ((1280, 720), (1024, 768))


def _budget_problems(measured: list[dict], viewport) -> list[str]:
    problems = []
    for r in measured:
        where = f"{viewport[0]}x{viewport[1]} slide {r['slide']}"
        problems += [f"{where}: {p}" for p in r["problems"]]
        for key, least in MIN_PX.items():
            if r[key] is not None and r[key] < least - 0.01:
                problems.append(f"{where}: {key.replace('_px', '')} text at {r[key]:.1f} px (at least {least})")
        if r["kind"] != "title":
            limit = decks.MAX_WORDS_SUMMARY if r["kind"] == "summary" else decks.MAX_WORDS
            if r["words"] > limit:
                problems.append(f"{where}: {r['words']} words (at most {limit})")
    return problems


@pytest.mark.parametrize("stem", STEMS)
def test_a_browser_shows_every_slide_legibly_with_no_error(built, browser, stem):
    """One page a deck: no error, and on every slide at both projector shapes what a person sees: text
    sizes, code in the embedded code font, nothing spilling out, the word budget. Screenshots of the key
    slides go to .cache/slides/screenshots/ for review, with the measurements."""
    deck = deck_of(built, stem)
    report = browser.open_deck(deck.html_path, settle=0)  # errors are collected at the end instead
    try:
        assert report.slides == len(deck.slides), f"reveal.js counts {report.slides} slides, the source has {len(deck.slides)}"
        assert report.notes >= len(deck.slides) - 1
        entry = decks.manifest_entry(deck)
        key = [("diagram", entry["diagram_slide"])]  # the key slides: the mechanism, and a plot (or code)
        key.append(("figure", entry["figure_slide"]) if entry["figure_slide"] is not None else ("code", entry["code_slide"]))
        for label, index in key:
            if index is not None:
                _not_blank(browser.screenshot(report, index, SCREENSHOTS / f"{stem}_{label}.png"))
        measured, problems = {}, []
        for viewport in VIEWPORTS:
            if viewport != (browser.width, browser.height):
                browser.set_viewport(report, *viewport)
            measured[f"{viewport[0]}x{viewport[1]}"] = browser.measure(report)
            problems += _budget_problems(measured[f"{viewport[0]}x{viewport[1]}"], viewport)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        (SCREENSHOTS / f"{stem}_layout.json").write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
        problems += browser.page_problems(report) + report.errors
        assert all(url.startswith(deck_browser.LOCAL_SCHEMES) for url in report.requests)
        assert not problems, f"{stem}:\n" + "\n".join(problems)
    finally:
        browser.close_page(report.session)


def test_the_browser_measurement_catches_small_code_spilled_content_and_long_prose(built, browser, tmp_path):
    """What the legibility test relies on: a slide given 12 px code, 40 lines of it and 90 words is caught."""
    page = page_of(built, "08_triton_debugging")
    start = page.index('<section', page.index('<div class="slides">'))
    second = page.index("<h2", page.index("<section", start + 10))
    code = "<pre><code style='font-size: 12px'>" + "\n".join(f"line {i}" for i in range(40)) + "</code></pre>"
    prose = "<p>" + " ".join(["word"] * 90) + "</p>"
    tampered = tmp_path / "08_tampered.html"
    tampered.write_text(page[:second] + prose + code + page[second:], encoding="utf-8")
    report = browser.open_deck(tampered)
    try:
        problems = _budget_problems(browser.measure(report), (1280, 720))
    finally:
        browser.close_page(report.session)
    assert any("slide 2: code text at 12.0 px" in p for p in problems), problems
    assert any("slide 2: the content reaches" in p for p in problems), problems
    assert any(re.search(r"slide 2: \d+ words \(at most 60\)", p) for p in problems), problems


def test_the_speaker_view_and_the_pdf_handout_work_offline(built, browser, tmp_path):
    deck = deck_of(built, "12_lora_case_study")  # a short deck: the PDF prints every slide
    report = browser.open_deck(deck.html_path)
    try:
        notes = browser.speaker_view(report, 3, SCREENSHOTS / "12_lora_case_study_speaker_view.png")
        expected = deck.slides[3].notes.split()[:6]
        assert notes.split()[:6] == expected, (notes[:120], expected)
    finally:
        browser.close_page(report.session)
    pages = browser.print_pdf(deck.html_path, tmp_path / "12.pdf")
    assert pages == len(deck.slides)
    assert (tmp_path / "12.pdf").read_bytes().startswith(b"%PDF")
