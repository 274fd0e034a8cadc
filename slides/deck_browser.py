"""Headless Chromium, driven through the DevTools protocol, to look at a built deck as a browser does.

    with Chromium() as browser:
        report = browser.open_deck(Path(".cache/slides/01_timing_gpu_code.html"))
        report.slides, report.errors          # slide count; JS errors, failed loads, network requests
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
            time.sleep(0.05)

    def open_deck(self, path: Path) -> DeckReport:
        """Load a built deck and report its slide count and everything that went wrong."""
        session = self.new_page()
        start = len(self._events)
        self._navigate(session, Path(path).resolve().as_uri())
        report = DeckReport(Path(path), session)
        report.slides = self.evaluate("Reveal.getTotalSlides()", session)
        report.notes = self.evaluate("document.querySelectorAll('aside.notes').length", session)
        broken = self.evaluate("Array.from(document.images).filter(i => !(i.complete && i.naturalWidth > 0))"
                               ".map(i => (i.alt || i.src).slice(0, 80))", session)
        report.errors += [f"image did not load: {b}" for b in broken]
        if not self.evaluate("Reveal.hasPlugin('notes')", session):
            report.errors.append("the speaker-notes plugin is not registered")
        # layout: every slide fits in the slide's height, and no code or output block needs a scrollbar
        report.errors += self.evaluate("""(() => {
            const height = Reveal.getConfig().height, bad = [];
            Reveal.getSlides().forEach((s, i) => {
                Reveal.slide(i);
                if (s.scrollHeight > height - 24) bad.push(`slide ${i + 1} is ${s.scrollHeight}px tall, more than fits`);
                s.querySelectorAll('pre, pre code').forEach(p => {
                    if (p.scrollWidth > p.clientWidth + 2) bad.push(`slide ${i + 1}: a code block is cut off on the right`);
                });
            });
            Reveal.slide(0);
            return bad; })()""", session)
        self.evaluate("new Promise(r => setTimeout(r, 50))", session, await_promise=True)  # late errors
        for event in self._events[start:]:
            if event.get("sessionId") != session:
                continue
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                report.errors.append("JavaScript exception: " + (details.get("exception", {}).get("description")
                                                                 or details.get("text", "")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
                report.errors.append(f"console.{params['type']}: {text}")
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                report.errors.append(f"log error ({entry.get('source')}): {entry.get('text')} {entry.get('url', '')}")
            elif method == "Network.loadingFailed":
                report.errors.append(f"failed to load: {params.get('errorText')} ({params.get('type')})")
            elif method == "Network.requestWillBeSent":
                url = params.get("request", {}).get("url", "")
                report.requests.append(url[:100])
                if not url.startswith(LOCAL_SCHEMES):
                    report.errors.append(f"a request leaves the machine: {url[:100]}")
        return report

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
            for index in range(report.slides):
                browser.screenshot(report, index, args.out / f"{deck.stem}_{index + 1:02d}.png")
            print(f"{deck}: {report.slides} slides -> {args.out}; problems: {report.errors or 'none'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
