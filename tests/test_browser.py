"""The built book as readers see it: every page of ``_build/html`` opened in headless Chromium.

Run after a build (``make book``; CI builds in quick mode and runs ``make browser``). Each page of
``_toc.yml`` is served from 127.0.0.1 and opened in Debian's ``chromium`` through ``chromedriver``
(selenium), with every other host unresolvable, so nothing may reach the network (MathJax comes
from the book's local copy, ``make mathjax``). A page fails on:

- a console error (or any request that leaves the local server);
- an element wider than the content column, or cut off by its own box (a display equation next to
  its number): display equations, tables, images, figures;
- TeX left untypeset (raw ``$$``, ``\\(``, ``\\[`` outside code) or a MathJax error node;
- the same figure image shown twice;
- ``Warning``, ``Traceback`` or an absolute filesystem path in a cell output;
- ``NaN`` (or ``None``, ``<NA>``) in a table cell;
- an unresolved reference: ``???``, raw MyST roles (``{numref}`` ...), docutils' problematic
  nodes, a reference that reads "Corollary " with no number, a link to a missing page or anchor.

The anchors that the intro's "How to cite" names must be on their pages and made from labels.

Without a build, Chromium or chromedriver the tests are skipped, with the reason. The checker is
itself tested on small synthetic pages (an overflowing equation, a duplicated figure, a clean page).
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import unquote, urldefrag, urlparse

import pytest
import yaml

pytestmark = pytest.mark.browser

ROOT = Path(__file__).resolve().parent.parent
#: The built book; ``BOOK_HTML`` points the test at another build.
HTML = Path(os.environ.get("BOOK_HTML", ROOT / "_build" / "html"))
MATHJAX = ROOT / ".mathjax" / "node_modules" / "mathjax" / "es5"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
#: Chromium flags: headless, no sandbox (CI runs as root), and no traffic of its own.
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,1000",
                  # every host but the local server is unresolvable: nothing reaches the network
                  "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1")
ABSOLUTE_PATH = re.compile(r"(?<![\w.~])/(?:home|root|tmp|usr|opt|var|work|srv|mnt|Users|private|nix)/"
                           r"[^\s'\"<>]*")
NOISE = re.compile(r"\b\w*(?:Warning|Traceback)\b")
MISSING = re.compile(r"^(?:nan|NaN|NaT|None|<NA>)$")
RAW_MYST = re.compile(r"\{(?:numref|eq|glue[:\w]*|prf:\w+|cite[:\w]*|doc|ref)\}")


def _toc_pages() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [f"{entry}.html" for entry in [toc["root"]] + [c["file"] for c in toc.get("chapters", [])]]


# --- the checker: JavaScript run in the page, then checks in Python ---

WAIT_FOR_MATHJAX = """
const done = arguments[arguments.length - 1];
const start = Date.now();
(function wait() {  // on a busy machine the deferred MathJax script may still be loading
  const mj = window.MathJax;
  if (mj && mj.startup && mj.startup.promise) {
    mj.startup.promise.then(() => done("typeset")).catch(e => done("error: " + e));
  } else if (mj && Date.now() - start < 20000) {
    setTimeout(wait, 100);
  } else {
    done(mj ? "MathJax configured but not loaded" : "no MathJax");
  }
})();
"""

INSPECT = r"""
const article = document.querySelector("article.bd-article") || document.querySelector("main")
  || document.body;
const style = getComputedStyle(article);
const box = article.getBoundingClientRect();
const right = box.right - parseFloat(style.paddingRight || 0);
const describe = el => {
  const text = (el.getAttribute("data-latex") || el.getAttribute("src") || el.textContent || "").trim();
  const name = el.tagName.toLowerCase() + (el.id ? "#" + el.id : "");
  return name + ": " + text.replace(/\s+/g, " ").slice(0, 80);
};
const visible = el => el.getClientRects().length > 0;
const skip = "pre, code, script, style, textarea, mjx-container, .highlight, .MathJax";

const wide = [];
const boxes = 'mjx-container[display="true"], table, img, figure, svg:not(mjx-container svg)';
for (const el of article.querySelectorAll(boxes)) {
  if (!visible(el)) continue;
  const r = el.getBoundingClientRect();
  const width = Math.max(r.width, el.scrollWidth || 0);
  if (r.left + width > right + 1) {
    const room = Math.round(right - r.left);
    wide.push(describe(el) + ` (${Math.round(width)} px, column ends ${room} px after it starts)`);
  } else if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== "visible") {
    // inside the column, but its own box (narrowed by an equation number) cuts it off or scrolls it
    wide.push(describe(el) + ` (${el.scrollWidth} px of content in a ${el.clientWidth} px box)`);
  }
}

const texts = [];
const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
while (walker.nextNode()) {
  const node = walker.currentNode;
  if (node.parentElement && !node.parentElement.closest(skip)) texts.push(node.textContent);
}

const images = [];
for (const img of article.querySelectorAll("img")) {
  if (!visible(img)) continue;
  images.push({src: img.currentSrc || img.src, loaded: img.complete && img.naturalWidth > 0});
}

const outputs = [...article.querySelectorAll(".cell_output")].map(el => el.textContent);
const cells = [...article.querySelectorAll("table td, table th")].map(el => el.textContent.trim());
const errorNodes = "mjx-merror, [data-mjx-error], .problematic, .system-message";
const errors = [...article.querySelectorAll(errorNodes)].map(describe);
const kinds = new RegExp("^\\s*(Theorem|Corollary|Lemma|Proposition|Definition|Remark|Example"
                         + "|Fig\\.|Figure|Table|Equation|Eq\\.|Section)\\s*$");
const bare = [...article.querySelectorAll("a.reference, span.xref, a .std-ref")]
  .map(el => el.textContent).filter(t => kinds.test(t));
const links = [...document.querySelectorAll("a[href]")].map(a => a.href);
const requests = performance.getEntriesByType("resource").map(e => e.name);
return {wide, text: texts.join(" "), images, outputs, cells, errors, bare, links, requests,
        math: article.querySelectorAll(".math, mjx-container").length};
"""


def _local_file(url: str, base: str, root: Path) -> Path | None:
    """The file under ``root`` that ``url`` of the local server names (None for other hosts)."""
    if not url.startswith(base):
        return None
    path = unquote(urlparse(url).path).lstrip("/")
    file = root / path
    return file / "index.html" if file.is_dir() else file


@functools.cache
def _ids(file: Path) -> frozenset[str]:
    return frozenset(re.findall(r'\bid="([^"]+)"', file.read_text(errors="replace")))


def _open(driver, url: str) -> None:
    """Show ``url`` and wait until it is the loaded document: on a busy machine ``get`` has returned
    before the new page ran its first script (a check then saw no ``window.MathJax``, which every
    page with math sets in its head)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.wait import WebDriverWait

    driver.get(url)
    WebDriverWait(driver, 60, ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script("return document.readyState === 'complete' && location.href") == url)


def check_page(driver, url: str, base: str, root: Path) -> list[str]:
    """Everything wrong with the page at ``url`` (served from ``root`` at ``base``), as sentences."""
    _open(driver, url)
    problems = []
    mathjax = driver.execute_async_script(WAIT_FOR_MATHJAX)
    page = driver.execute_script(INSPECT)
    if page["math"] and mathjax != "typeset":
        problems.append(f"MathJax did not typeset the page: {mathjax}")
    for entry in driver.get_log("browser"):
        if entry["level"] in ("SEVERE", "WARNING") or "invalid" in entry["message"].lower():
            problems.append(f"console {entry['level'].lower()}: {entry['message'][:300]}")
    problems += [f"request leaves the local server: {r}" for r in page["requests"]
                 if not r.startswith((base, "data:", "blob:"))]
    problems += [f"wider than the content column: {w}" for w in page["wide"]]
    for raw in (r"$$", r"\(", r"\[", r"\begin{"):
        if raw in page["text"]:
            at = page["text"].index(raw)
            problems.append(f"TeX left untypeset: ...{page['text'][max(0, at - 40):at + 60]}...")
    problems += [f"MathJax or docutils error node: {e}" for e in page["errors"]]
    hashes: dict[str, list[str]] = {}
    for image in page["images"]:
        file = _local_file(image["src"], base, root)
        if not image["loaded"] or file is None or not file.is_file():
            problems.append(f"image not shown: {image['src']}")
            continue
        hashes.setdefault(hashlib.sha1(file.read_bytes()).hexdigest(), []).append(image["src"])
    problems += [f"figure shown {len(srcs)} times: {srcs[0]}" for srcs in hashes.values() if len(srcs) > 1]
    for output in page["outputs"]:
        for m in list(NOISE.finditer(output)) + list(ABSOLUTE_PATH.finditer(output)):
            around = output[max(0, m.start() - 60):m.end() + 40].strip()
            problems.append(f"cell output shows {m[0]!r}: ...{around}...")
        for literal in {str(ROOT), sys.prefix}:
            if literal in output:
                problems.append(f"cell output shows the path {literal}")
    problems += [f"missing value in a table: {c!r}" for c in page["cells"] if MISSING.match(c)]
    if "???" in page["text"]:
        problems.append("unresolved reference: ???")
    problems += [f"raw MyST left in the page: {m[0]}" for m in RAW_MYST.finditer(page["text"])]
    problems += [f"reference without a number: {b!r}" for b in page["bare"]]
    for link in sorted(set(page["links"])):
        target, fragment = urldefrag(link)
        file = _local_file(target, base, root)
        if file is None:
            continue
        if not file.is_file():
            problems.append(f"link to a missing page: {link}")
        elif fragment and file.suffix == ".html" and unquote(fragment) not in _ids(file):
            problems.append(f"link to a missing anchor: {link}")
    return problems


# --- fixtures: a local server and one browser ---


@functools.cache
def _why_no_browser() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (the test extra)"
    if not (CHROMIUM and CHROMEDRIVER):
        return "Chromium and chromedriver are not installed: apt-get install chromium chromium-driver"
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    if why := _why_no_browser():
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(60)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _serve(root: Path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


@pytest.fixture(scope="module")
def book():
    if not (HTML / _toc_pages()[0]).exists():
        pytest.skip(f"no built book in {HTML}: run `make book` first "
                    "(CI builds it in quick mode, then runs `make browser`)")
    server, base = _serve(HTML)
    yield base
    server.shutdown()


# --- the book ---


@pytest.mark.parametrize("page", _toc_pages())
def test_page_reads_cleanly(page, book, browser):
    problems = check_page(browser, book + page, book, HTML)
    assert not problems, f"{page}:\n  " + "\n  ".join(problems)


#: An anchor that the intro's "How to cite" names: ```book/<chapter>.html#<id>```.
CITED_ANCHOR = re.compile(r"`(?P<page>book/[\w-]+\.html)#(?P<id>[\w-]+)`")


def test_how_to_cite_names_anchors_that_exist_and_stay(book):
    """Every anchor of the intro's "How to cite" is on its page, and is made from a label of the
    chapter's source (``:label: thm-45`` gives ``thm-45``, ``$$ (eq-slope)`` gives
    ``equation-eq-slope``), never from a number, so that it stays the same from build to build."""
    text = (ROOT / "book" / "intro.md").read_text()
    named = CITED_ANCHOR.findall(text[text.index("## How to cite"):])
    assert len(named) >= 5, "the pattern finds the section's anchors"
    missing = [f"{page}#{anchor}" for page, anchor in named if anchor not in _ids(HTML / page)]
    assert not missing, f"anchors named in How to cite but not in the built pages: {missing}"
    unlabelled = [f"{page}#{anchor}" for page, anchor in named
                  if not re.search(rf"^(?::label: {anchor}|\$\$ \({anchor.removeprefix('equation-')}\))$",
                                   (ROOT / page).with_suffix(".md").read_text(), re.M)]
    assert not unlabelled, f"anchors that are no label of their chapter (they would change): {unlabelled}"


# --- the checker on synthetic pages ---

PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"><link rel="icon" href="data:,">
<script>window.MathJax = {{tex: {{inlineMath: [["\\\\(", "\\\\)"]],
                                  displayMath: [["\\\\[", "\\\\]"]]}}}};</script>
<script defer src="mathjax/tex-mml-chtml.js"></script></head>
<body><main><article class="bd-article" style="width: 600px; padding: 0 10px">{body}</article></main>
</body></html>
"""


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    if not (MATHJAX / "tex-mml-chtml.js").exists():
        pytest.skip("no local MathJax: run `make mathjax`")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = tmp_path_factory.mktemp("pages")
    (root / "mathjax").symlink_to(MATHJAX, target_is_directory=True)
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([0, 1], [1, 0])
    fig.savefig(root / "figure.png")
    plt.close(fig)
    long_sum = " + ".join(f"x_{{{i}}}" for i in range(120))
    pages = {
        "clean.html": r"<p>A short equation \(a + b\):</p><div class='math'>\[ E = m c^2 \]</div>"
                      r"<img src='figure.png'><table><tr><th>n</th></tr><tr><td>2774</td></tr></table>",
        "overflow.html": rf"<p>Too long:</p><div class='math'>\[ S = {long_sum} \]</div>",
        "duplicate.html": "<div class='cell_output'><img src='figure.png'></div>"
                          "<figure><img src='figure.png'></figure>",
        "dirty.html": "<div class='cell_output'><pre>/usr/lib/python3/x.py:1: UserWarning: careful</pre>"
                      "</div>"
                      "<table><tr><td>NaN</td></tr></table>"
                      "<p>see <a class='reference' href='#x'>Corollary </a> ???</p>",
    }
    for name, body in pages.items():
        (root / name).write_text(PAGE.format(body=body))
    server, base = _serve(root)
    yield base, root
    server.shutdown()


def test_checker_passes_a_clean_page(synthetic, browser):
    base, root = synthetic
    assert check_page(browser, base + "clean.html", base, root) == []


def test_checker_fails_an_overflowing_equation(synthetic, browser):
    base, root = synthetic
    problems = check_page(browser, base + "overflow.html", base, root)
    assert len(problems) == 1, problems
    assert problems[0].startswith("wider than the content column: mjx-container")


def test_checker_fails_a_duplicated_figure(synthetic, browser):
    base, root = synthetic
    problems = check_page(browser, base + "duplicate.html", base, root)
    assert problems == [f"figure shown 2 times: {base}figure.png"]


def test_checker_fails_noise_missing_values_and_references(synthetic, browser):
    base, root = synthetic
    problems = "\n".join(check_page(browser, base + "dirty.html", base, root))
    for expected in ("'UserWarning'", "'/usr/lib/python3/x.py:1:'", "missing value in a table: 'NaN'",
                     "unresolved reference: ???", "reference without a number: 'Corollary '",
                     "link to a missing anchor"):
        assert expected in problems
