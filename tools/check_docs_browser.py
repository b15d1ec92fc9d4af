r"""Load every page of the built documentation in headless Chromium, offline.

Serves the built HTML (``docs/_build/html`` or the folder given) on
127.0.0.1, opens each page in a headless Chromium that may reach nothing but
that server, and fails when a page:

- makes a request that fails (a 404, an error, or one to any other host:
  those are blocked and counted, so a CDN or font server shows up here);
- shows raw TeX: a math element (``.math``) that MathJax did not render, or
  ``$$``, ``\\frac``, ``\\sum``, ``\\begin{``, ``\\(``, ``\\[`` in the visible
  text outside code blocks and rendered math;
- logs a JavaScript error.

Needs the ``playwright`` Python package (``pip install playwright``; its own
browser download is not needed) and a Chromium: ``/usr/bin/chromium``
(Debian's ``apt-get install chromium``) or ``--chromium PATH``. Prints one
line per failing page and a summary; exits 1 on any failure.
"""

import argparse
import functools
import http.server
import re
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# raw TeX left in the visible text (code and rendered math taken out first)
RAW_TEX = re.compile(r"\$\$|\\frac|\\sum|\\begin\{|\\\(|\\\[|\\mathrm|\\log\b|\\exp\b")
# the visible text of the page without code, scripts and rendered math
VISIBLE_TEXT_JS = """() => {
  const body = document.body.cloneNode(true);
  body.querySelectorAll('pre, code, script, style, mjx-container, .highlight, noscript')
      .forEach(e => e.remove());
  return body.innerText;
}"""
# math elements Sphinx wrote, and how many of them MathJax rendered
MATH_JS = """() => {
  const all = Array.from(document.querySelectorAll('.math'));
  const raw = all.filter(e => !e.querySelector('mjx-container'));
  return [all.length, raw.map(e => e.textContent.trim().slice(0, 80))];
}"""


def pages(site):
    """Every HTML page of the site (not the _static and _sources copies)."""
    return sorted(
        p.relative_to(site).as_posix()
        for p in site.rglob("*.html")
        if not p.relative_to(site).parts[0].startswith(("_static", "_sources", "_images"))
    )


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    """A static file handler that does not log each request."""

    def log_message(self, format, *args):  # noqa: D102 (silenced)
        pass


def serve(site):
    """Serve ``site`` on 127.0.0.1 (a free port) from a thread; returns the server."""
    handler = functools.partial(QuietHandler, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def check_page(context, base, page, timeout_ms):
    """The failures of one page (empty when it is fine), and its math count."""
    failures = []
    browser_page = context.new_page()

    def on_response(response):
        if response.status >= 400:
            failures.append(f"HTTP {response.status} {response.url}")

    def on_failed(request):
        failures.append(f"request failed ({request.failure}) {request.url}")

    def on_console(message):
        if message.type == "error":
            failures.append(f"console error: {message.text[:200]}")

    browser_page.on("response", on_response)
    browser_page.on("requestfailed", on_failed)
    browser_page.on("console", on_console)
    browser_page.on("pageerror", lambda exc: failures.append(f"JavaScript error: {exc}"))
    browser_page.goto(f"{base}/{page}", wait_until="load", timeout=timeout_ms)
    n_math, raw = browser_page.evaluate(MATH_JS)
    if n_math:
        # MathJax typesets after load: wait until every math element is rendered
        deadline = time.monotonic() + timeout_ms / 1000
        while raw and time.monotonic() < deadline:
            browser_page.wait_for_timeout(100)
            n_math, raw = browser_page.evaluate(MATH_JS)
    else:
        browser_page.wait_for_load_state("networkidle", timeout=timeout_ms)
    for text in raw:
        failures.append(f"math not rendered: {text!r}")
    visible = browser_page.evaluate(VISIBLE_TEXT_JS)
    for match in RAW_TEX.finditer(visible):
        context_text = visible[max(0, match.start() - 40) : match.end() + 40].replace("\n", " ")
        failures.append(f"raw TeX in the text: ...{context_text}...")
    browser_page.close()
    return failures, n_math


def main(argv=None):
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", type=Path, default=ROOT / "docs" / "_build" / "html")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per page")
    parser.add_argument("--only", default="", help="check only the pages whose path holds this")
    args = parser.parse_args(argv)
    from playwright.sync_api import sync_playwright

    site = args.site.resolve()
    if not (site / "index.html").is_file():
        print(f"no built site at {site} (index.html missing)")
        return 1
    server = serve(site)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    todo = [p for p in pages(site) if args.only in p]
    start = time.perf_counter()
    failed, n_math_pages, n_math = {}, 0, 0
    with sync_playwright() as p, tempfile.TemporaryDirectory() as profile:
        context = p.chromium.launch_persistent_context(
            profile, executable_path=args.chromium, headless=True, args=CHROMIUM_ARGS
        )

        # nothing leaves this machine: any host but the local server is
        # blocked, and the blocked request is a failure of its page
        def route(route):
            if route.request.url.startswith(base + "/"):
                route.continue_()
            else:
                route.abort("blockedbyclient")

        context.route("**/*", route)
        for page in todo:
            try:
                failures, count = check_page(context, base, page, args.timeout * 1000)
            except Exception as exc:  # a page that does not load is a failure too
                failures, count = [f"{type(exc).__name__}: {exc}".splitlines()[0]], 0
            n_math_pages += count > 0
            n_math += count
            if failures:
                failed[page] = failures
        context.close()
    server.shutdown()
    for page, failures in failed.items():
        for failure in sorted(set(failures)):
            print(f"FAIL {page}: {failure}")
    sections = {
        "user guide": sum(p.startswith("user_guide/") for p in todo),
        "API": sum(p.startswith("generated/") or p == "api.html" for p in todo),
        "gallery": sum(p.startswith("auto_examples/") for p in todo),
        "source code": sum(p.startswith("_modules/") for p in todo),
    }
    sections["other"] = len(todo) - sum(sections.values())
    print(
        f"{len(todo)} pages checked ({', '.join(f'{k} {v}' for k, v in sections.items())}) "
        f"in {time.perf_counter() - start:.0f} s; {n_math} math elements on {n_math_pages} "
        f"pages, all rendered unless listed; {len(failed)} pages with failures"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
