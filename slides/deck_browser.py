"""Headless Chromium, driven through the DevTools protocol, to look at a built deck as a browser does.

    with Chromium() as browser:
        report = browser.open_deck(Path(".cache/slides/01_timing_gpu_code.html"))
        report.slides, report.errors          # slide count; JS errors, failed loads, network requests
        browser.measure(report)               # per slide: text sizes, words, what spills out
        browser.screenshot(report, 0, Path("title.png"))
        browser.print_pdf(Path(".cache/slides/01_timing_gpu_code.html"), Path("01.pdf"))

Uses Debian's ``chromium`` (or ``$COURSE_CHROMIUM``) and the pinned ``websocket-client``. Every page event
of the session is kept, and `open_deck` reports as errors: uncaught JavaScript exceptions, console errors,
error log entries (a resource that failed to load shows up there and in ``Network.loadingFailed``), and
any request for something other than the page itself or inline ``data:`` (a deck must work offline).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
LOCAL_SCHEMES = ("file:", "data:", "about:", "blob:")


#: One pass over every slide of the deck in the page (see Chromium.measure).
MEASURE_JS = r"""(async () => {
  const config = Reveal.getConfig(), scale = Reveal.getScale(), out = [];
  const box = document.querySelector('.reveal .slides');
  const skip = e => e.closest('aside.notes');
  const size = e => parseFloat(getComputedStyle(e).fontSize);
  const hasText = e => Array.from(e.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
  const slides = Reveal.getSlides();
  // lay every slide out at once, as when it is shown (a slide and the stack section around it)
  const boxes = [...new Set(slides.flatMap(s => s.parentElement.tagName === 'SECTION' ? [s.parentElement, s] : [s]))];
  const shown = boxes.map(e => e.style.display);
  boxes.forEach(e => { e.style.display = 'block'; });
  document.body.offsetHeight;  // lay out, so that the fonts the slides use start loading
  await document.fonts.ready;
  const codeFont = Array.from(document.fonts).filter(f => f.family.replace(/["']/g, '') === 'Course Mono')
    .map(f => f.status);
  slides.forEach((s, i) => {
    const r = {slide: i + 1, kind: s.dataset.kind || null, code_px: null, table_px: null, figure_px: null,
               text_px: null, words: 0, bottom: 0, right: 0, problems: [], scale: scale};
    s.querySelectorAll('pre code').forEach(c => {
      if (!getComputedStyle(c).fontFamily.startsWith('"Course Mono"'))
        r.problems.push('code not set in the embedded code font');
      else if (!codeFont.includes('loaded')) r.problems.push('the embedded code font did not load');
    });
    const min = (key, v) => { r[key] = r[key] === null ? v : Math.min(r[key], v); };
    s.querySelectorAll('pre, pre *').forEach(e => { if (!skip(e) && hasText(e)) min('code_px', size(e)); });
    s.querySelectorAll('pre').forEach(p => {
      if (p.scrollWidth > p.clientWidth + 2 || p.scrollHeight > p.clientHeight + 2)
        r.problems.push('a code block is cut off');
    });
    s.querySelectorAll('table th, table td, table th *, table td *').forEach(e => {
      if (!skip(e) && hasText(e)) min('table_px', size(e));
    });
    s.querySelectorAll('figure img').forEach(img => {
      const font = parseFloat(img.dataset.minFont), native = parseFloat(img.dataset.nativeWidth);
      const shown = img.getBoundingClientRect().width / scale;
      if (!(font > 0 && native > 0)) r.problems.push('a figure whose text size is unknown');
      else min('figure_px', font * shown / native);
      if (!(img.complete && img.naturalWidth > 0)) r.problems.push('a figure that does not load');
    });
    s.querySelectorAll('h1, h2, h3, p, li, figcaption, caption').forEach(e => {
      if (!skip(e) && hasText(e)) min('text_px', size(e));
    });
    const top = box.getBoundingClientRect().top, left = box.getBoundingClientRect().left;
    s.querySelectorAll('*').forEach(e => {
      if (skip(e)) return;
      const b = e.getBoundingClientRect();
      if (b.width === 0 && b.height === 0) return;
      r.bottom = Math.max(r.bottom, (b.bottom - top) / scale);
      r.right = Math.max(r.right, (b.right - left) / scale);
    });
    if (r.bottom > config.height - 24) r.problems.push(`the content reaches ${Math.round(r.bottom)} px, into the footer or below the slide`);
    if (r.right > config.width + 1) r.problems.push(`the content reaches ${Math.round(r.right)} px, past the slide`);
    const walker = document.createTreeWalker(s, NodeFilter.SHOW_TEXT);
    let text = '';
    while (walker.nextNode()) {
      const n = walker.currentNode;
      if (n.parentElement.closest('aside, pre, table, figure, script, style, .exhibit-caption')) continue;
      text += ' ' + n.textContent;
    }
    r.words = text.split(/\s+/).filter(w => /[\p{L}\p{N}]/u.test(w)).length;
    r.bottom = Math.round(r.bottom); r.right = Math.round(r.right);
    out.push(r);
  });
  boxes.forEach((e, i) => { e.style.display = shown[i]; });
  return out;
})()"""


def find_chromium() -> str | None:
    """The Chromium binary: $COURSE_CHROMIUM, else the first of CANDIDATES on PATH."""
    chosen = os.environ.get("COURSE_CHROMIUM")
    if chosen:
        return chosen if Path(chosen).exists() or shutil.which(chosen) else None
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class ChromiumError(RuntimeError):
    pass


@dataclass
class DeckReport:
    path: Path
    session: str
    slides: int = 0
    notes: int = 0
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    first_event: int = 0


class Chromium:
    def __init__(self, binary: str | None = None, width: int = 1280, height: int = 720, timeout: float = 30.0):
        self.binary = binary or find_chromium()
        if self.binary is None:
            raise ChromiumError("no chromium binary found (apt-get install chromium)")
        self.width, self.height, self.timeout = width, height, timeout
        self._id = 0
        self._events: list[dict] = []

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "Chromium":
        import websocket

        self.profile = Path(tempfile.mkdtemp(prefix="course-chromium-"))
        self.log = self.profile / "chromium.log"
        args = [self.binary, "--headless=new", "--remote-debugging-port=0", f"--user-data-dir={self.profile}",
                "--no-first-run", "--no-default-browser-check", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-extensions", "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--mute-audio", "--hide-scrollbars", "--remote-allow-origins=*",
                f"--window-size={self.width},{self.height}", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout
        while not (port_file.exists() and len(port_file.read_text().splitlines()) >= 2):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text(errors="replace")[-2000:]
                self._stop()
                raise ChromiumError(f"{self.binary} did not start (exit {self.proc.returncode}):\n{tail}")
            time.sleep(0.05)
        port, path = port_file.read_text().splitlines()[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=self.timeout,
                                              suppress_origin=True)
        return self

    def __exit__(self, *exc) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        self._stop()

    def _stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    # -- protocol ----------------------------------------------------------------------------------
    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        self._id += 1
        message = {"id": self._id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        self.ws.send(json.dumps(message))
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._receive(deadline, f"the reply to {method}")
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._events.append(reply)

    def _receive(self, deadline: float, what: str) -> dict:
        import websocket

        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ChromiumError(f"timed out waiting for {what}")
        self.ws.settimeout(remaining)
        try:
            return json.loads(self.ws.recv())
        except websocket.WebSocketTimeoutException:
            raise ChromiumError(f"timed out waiting for {what}") from None

    def wait_event(self, method: str, session: str, timeout: float | None = None) -> dict:
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = 0
        while True:
            for event in self._events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self._events)
            self._events.append(self._receive(deadline, method))

    def evaluate(self, expression: str, session: str, await_promise: bool = False):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": await_promise}, session)
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression}: {result['exceptionDetails'].get('text')} "
                                f"{result['exceptionDetails'].get('exception', {}).get('description', '')}")
        return result["result"].get("value")

    # -- pages -------------------------------------------------------------------------------------
    def new_page(self) -> str:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session)
        self._targets = getattr(self, "_targets", {})
        self._targets[session] = target
        return session

    def close_page(self, session: str) -> None:
        self.send("Target.closeTarget", {"targetId": self._targets.pop(session)})

    def _navigate(self, session: str, url: str) -> None:
        start = len(self._events)
        self.send("Page.navigate", {"url": url}, session)
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == "Page.loadEventFired" and e.get("sessionId") == session
                      for e in self._events[start:]):
            self._events.append(self._receive(deadline, f"{url} to load"))
        deadline = time.monotonic() + self.timeout
        while not self.evaluate("typeof Reveal !== 'undefined' && Reveal.isReady()", session):
            if time.monotonic() > deadline:
                raise ChromiumError(f"reveal.js never became ready in {url}")
            time.sleep(0.01)

    def open_deck(self, path: Path, settle: float = 0.05) -> DeckReport:
        """Load a built deck and report its slide count and everything that went wrong. ``settle``: seconds
        to wait for late errors; pass 0 and call `page_problems` after working with the page instead."""
        session = self.new_page()
        start = len(self._events)
        self._navigate(session, Path(path).resolve().as_uri())
        report = DeckReport(Path(path), session)
        report.first_event = start
        report.slides = self.evaluate("Reveal.getTotalSlides()", session)
        report.notes = self.evaluate("document.querySelectorAll('aside.notes').length", session)
        broken = self.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                               ".map(i => (i.alt || i.src).slice(0, 80))", session)
        report.errors += [f"image did not load: {b}" for b in broken]
        if not self.evaluate("Reveal.hasPlugin('notes')", session):
            report.errors.append("the speaker-notes plugin is not registered")
        if settle:
            self.evaluate(f"new Promise(r => setTimeout(r, {int(settle * 1000)}))", session, await_promise=True)
        report.errors += self.page_problems(report)
        return report

    def page_problems(self, report: DeckReport) -> list[str]:
        """Every error the page reported since it was opened (JavaScript exceptions, console errors, error
        log entries, failed loads, requests that leave the machine); records the requests in the report."""
        self.evaluate("0", report.session)  # a round trip: events sent before it are in
        errors, requests = [], []
        for event in self._events[report.first_event:]:
            if event.get("sessionId") != report.session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                errors.append("JavaScript exception: " + (details.get("exception", {}).get("description")
                                                          or details.get("text", "")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                errors.append(f"console.{params['type']}: {text}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                errors.append(f"log error ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
            elif method == "Network.loadingFailed":
                errors.append(f"failed to load: {params.get('errorText')} ({params.get('type')})")
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                requests.append(url[:100])
                if not url.startswith(LOCAL_SCHEMES):
                    errors.append(f"a request leaves the machine: {url[:100]}")
        report.requests = requests
        return errors

    def set_viewport(self, report: DeckReport, width: int, height: int) -> None:
        """Resize the page (a projector of another shape) and let reveal.js lay the deck out again."""
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": False}, report.session)
        self.evaluate("Reveal.layout(); new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))",
                      report.session, await_promise=True)

    def measure(self, report: DeckReport) -> list[dict]:
        """What a person sees on each slide, in one page evaluation: the smallest computed font size of
        code, tables, figure texts (a chart's smallest text scaled to its shown width) and prose, in slide
        pixels and in screen pixels (times reveal.js's scale); the words of prose; how far the content
        reaches (bottom, right) and what spills out of the slide or a code box."""
        return self.evaluate(MEASURE_JS, report.session, await_promise=True)

    def screenshot(self, report: DeckReport, slide: int, out: Path) -> bytes:
        """Show slide ``slide`` (0-based) and save a PNG of the viewport."""
        self.evaluate(f"Reveal.slide({int(slide)}, 0)", report.session)
        shown = self.evaluate("Reveal.getIndices().h", report.session)
        if shown != slide:
            raise ChromiumError(f"asked for slide {slide}, reveal.js shows {shown}")
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))", report.session,
                      await_promise=True)
        data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"}, report.session)["data"])
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        return data

    def speaker_view(self, report: DeckReport, slide: int, out: Path | None = None) -> str:
        """Open reveal.js's speaker view (what pressing S does) on slide ``slide``; return the notes it
        shows, and save a screenshot of it to ``out``."""
        self.send("Target.setDiscoverTargets", {"discover": True})
        before = {t["targetId"] for t in self.send("Target.getTargets")["targetInfos"]}
        self.evaluate(f"Reveal.slide({int(slide)}, 0)", report.session)
        reply = self.send("Runtime.evaluate", {"expression": "Reveal.getPlugin('notes').open(); true",
                                               "userGesture": True, "returnByValue": True}, report.session)
        if "exceptionDetails" in reply:
            raise ChromiumError(f"the speaker view did not open: {reply['exceptionDetails'].get('text')}")
        deadline = time.monotonic() + self.timeout
        while True:
            new = [t for t in self.send("Target.getTargets")["targetInfos"]
                   if t["targetId"] not in before and t.get("type") == "page"]
            if new:
                break
            if time.monotonic() > deadline:
                raise ChromiumError("the speaker view opened no window")
            time.sleep(0.05)
        session = self.send("Target.attachToTarget", {"targetId": new[0]["targetId"], "flatten": True})["sessionId"]
        self._targets = getattr(self, "_targets", {})
        self._targets[session] = new[0]["targetId"]
        self.send("Runtime.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride", {"width": self.width, "height": self.height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session)
        notes = ""
        while time.monotonic() < deadline:  # the view connects to the deck by postMessage, then fills in
            notes = self.evaluate("(document.querySelector('.speaker-controls-notes .value') || "
                                  "document.querySelector('.speaker-controls-notes') || {innerText: ''}).innerText",
                                  session) or ""
            if notes.strip() and notes.strip().upper() != "NOTES":
                break
            time.sleep(0.1)
        if out is not None:
            self.evaluate("new Promise(r => setTimeout(r, 300))", session, await_promise=True)  # previews load
            data = base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"}, session)["data"])
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            Path(out).write_bytes(data)
        self.close_page(session)
        return notes.strip()

    def print_pdf(self, deck: Path, out: Path) -> int:
        """Print a deck through reveal.js's print view, one slide a page; returns the page count."""
        session = self.new_page()
        try:
            self._navigate(session, Path(deck).resolve().as_uri() + "?print-pdf")
            self.evaluate("document.fonts.ready.then(() => true)", session, await_promise=True)
            deadline = time.monotonic() + self.timeout
            while not (pages := self.evaluate("document.querySelectorAll('.pdf-page').length", session)):
                if time.monotonic() > deadline:  # reveal.js lays the print view out after it is ready
                    raise ChromiumError(f"reveal.js made no print pages for {deck}")
                time.sleep(0.05)
            data = self.send("Page.printToPDF", {"preferCSSPageSize": True, "printBackground": True},
                             session, timeout=120)["data"]
            out = Path(out)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(base64.b64decode(data))
            return pages
        finally:
            self.close_page(session)


def main(argv: list[str] | None = None) -> int:
    """python slides/deck_browser.py .cache/slides/04_*.html --out DIR: a PNG of every slide, to review."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("decks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / ".cache/slides/review")
    args = parser.parse_args(argv)
    with Chromium() as browser:
        for deck in args.decks:
            report = browser.open_deck(deck)
            problems = list(report.errors)
            for viewport in ((1280, 720), (1024, 768)):
                browser.set_viewport(report, *viewport)
                problems += [f"{viewport[0]}x{viewport[1]} slide {r['slide']}: {p}" for r in browser.measure(report)
                             for p in r["problems"]]
            browser.set_viewport(report, browser.width, browser.height)
            for index in range(report.slides):
                browser.screenshot(report, index, args.out / f"{deck.stem}_{index + 1:02d}.png")
            print(f"{deck}: {report.slides} slides -> {args.out}; problems: {problems or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
