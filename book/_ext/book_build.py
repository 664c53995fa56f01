"""The book's own Sphinx extension (``sphinx.local_extensions`` in ``_config.yml``).

- executes the chapters through an execution cache that stays correct: jupyter-cache re-executes a
  chapter whose code changed, and :func:`_execution_cache` clears the cache when anything else the
  outputs depend on changed (the package with its shipped data, ``pyproject.toml``, the installed
  versions, Python); quick mode (``ACCESSIBILITY_QUICK``) has a cache of its own. ``BOOK_EXECUTE``
  overrides ``execute.execute_notebooks`` (CI: ``force``, every chapter executed fresh).
  ``book/sync.py`` writes the notebook twins from the cache of the default mode;
- tells the chapters' kernels that they run inside the book build
  (:data:`accessibility.BOOK_BUILD_ENV`), so that :func:`accessibility.plots.glue_figure` shows
  each figure once, in its captioned ``{glue:figure}``, and the chapters show no progress bars;
- serves MathJax from the local copy that ``make mathjax`` installs (``.mathjax/``, the npm package
  ``mathjax@3``), copied into ``_static/mathjax``: the pages typeset offline and the published book
  needs no CDN. Without the copy the pages load MathJax from its CDN, as Sphinx does by default;
- prints a statement numbered as in the paper (``:nonumber:`` with a title ``4.5, finitely many
  ...``) as "Theorem 4.5 (finitely many ...)" rather than sphinx-proof's "Theorem (4.5, ...)";
- drops the repeated inline script of sphinx-thebe (a console error);
- adds ``static/book.css``: code in tables of prose may break, so that such tables fit the column;
- registers the bibliography style ``authoryear``, whose labels ("Meyer et al., 2026") are the
  in-text citations of ``bibtex_reference_style: author_year``, so text and bibliography agree.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

from docutils import nodes
from sphinx.util import logging

from accessibility import BOOK_BUILD_ENV, quick_mode  # cheap: the package's __init__ imports nothing heavy
from accessibility.results import INFLIGHT_FILE, process_files

ROOT = Path(__file__).resolve().parents[2]
#: The ``es5`` folder of the npm package ``mathjax@3`` (``make mathjax``).
MATHJAX = ROOT / ".mathjax" / "node_modules" / "mathjax" / "es5"
MATHJAX_ENTRY = "tex-mml-chtml.js"
#: Overrides ``execute.execute_notebooks`` of ``_config.yml`` (``make book EXECUTE=force``).
EXECUTE_ENV = "BOOK_EXECUTE"
PAPER_TITLE = re.compile(r"^\s*\((?P<number>\d+(?:\.\d+)*)\s*[,:]\s*(?P<title>.+)\)\s*$", re.S)

logger = logging.getLogger(__name__)


def setup(app):
    os.environ[BOOK_BUILD_ENV] = "1"  # inherited by the kernels that execute the chapters
    _register_author_year_style()
    app.connect("config-inited", _execution_cache)
    app.connect("config-inited", _use_local_mathjax)
    app.connect("config-inited", _book_css)
    app.connect("build-finished", _copy_mathjax)
    app.connect("doctree-read", _paper_numbered_titles)
    app.connect("html-page-context", _unique_scripts, priority=900)  # after the extensions that add scripts
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def inputs_key(root: Path = ROOT) -> str:
    """SHA-256 of what the chapters' outputs depend on besides their own code: every file of the
    package (its modules and shipped data), ``pyproject.toml``, the installed distributions and
    their versions, and the Python version. The in-flight state of a run going on in a shipped run's
    folder (:data:`accessibility.results.INFLIGHT_FILE`, per rank) is left out: no chapter reads it,
    and a run writes it as it goes."""
    digest = hashlib.sha256(sys.version.encode())
    files = [f for f in sorted((root / "accessibility").rglob("*"))
             if f.is_file() and "__pycache__" not in f.parts]
    inflight = {p for folder in {f.parent for f in files} for p in process_files(folder, INFLIGHT_FILE)}
    files = [f for f in files if f not in inflight]
    for file in [*files, root / "pyproject.toml"]:
        digest.update(f"\0{file.relative_to(root)}\0".encode())
        digest.update(file.read_bytes())
    versions = sorted({f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions()})
    digest.update("\n".join(versions).encode())
    return digest.hexdigest()


def _execution_cache(app, config) -> None:
    """Execution mode from ``BOOK_EXECUTE`` when set; in ``cache`` mode, one cache per mode
    (``_build/.jupyter_cache/default`` and ``.../quick``), emptied when :func:`inputs_key` differs
    from the key stored beside it (jupyter-cache alone keys a chapter on its code cells only, so it
    would keep showing the outputs of an older package: jupyter-book issue 1633)."""
    config.nb_execution_mode = os.environ.get(EXECUTE_ENV) or config.nb_execution_mode
    if config.nb_execution_mode != "cache":
        return
    cache = Path(app.outdir).parent / ".jupyter_cache" / ("quick" if quick_mode() else "default")
    stamp, key = cache.with_suffix(".key"), inputs_key()
    if cache.exists() and (not stamp.exists() or stamp.read_text().strip() != key):
        logger.info(f"the package or the environment changed: emptying the execution cache {cache}")
        shutil.rmtree(cache)
    cache.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key + "\n")
    config.nb_execution_cache_path = str(cache)


def _book_css(app, config) -> None:
    config.html_static_path.append(str(Path(__file__).parent / "static"))
    app.add_css_file("book.css")


def _use_local_mathjax(app, config) -> None:
    if (MATHJAX / MATHJAX_ENTRY).exists():
        config.mathjax_path = f"mathjax/{MATHJAX_ENTRY}"  # relative to _static
    else:
        logger.info(f"no local MathJax in {MATHJAX.relative_to(ROOT)} (`make mathjax`): "
                    "pages load it from its CDN")


def _copy_mathjax(app, exception) -> None:
    if exception is None and app.builder.format == "html" and (MATHJAX / MATHJAX_ENTRY).exists():
        shutil.copytree(MATHJAX, Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def _paper_numbered_titles(app, doctree) -> None:
    """"Theorem (4.5, title)" -> "Theorem 4.5 (title)" for unnumbered statements titled "4.5, title"."""
    from sphinx_proof.nodes import unenumerable_node

    for statement in doctree.findall(unenumerable_node):
        title = next(iter(statement.findall(nodes.title)), None)
        if title is None or not all(isinstance(child, nodes.Text) for child in title.children):
            continue
        m = PAPER_TITLE.match(title.astext())
        if m:
            title.children = []
            title += nodes.Text(f"{m['number']} ({' '.join(m['title'].split())})")


def _unique_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated scripts (same file, None or "", and attributes): sphinx-thebe's inline
    configuration is registered twice, and the second ``const THEBE_JS_URL`` is a SyntaxError in
    the browser's console."""
    seen, unique = set(), []
    for script in list(context.get("script_files", [])):
        attributes = sorted(getattr(script, "attributes", {}).items())
        key = (str(getattr(script, "filename", script) or ""), repr(attributes))
        if key not in seen:
            seen.add(key)
            unique.append(script)
    context["script_files"][:] = unique


def author_year_label(entry) -> str:
    """"Meyer et al., 2026": surnames of one or two authors, else the first one and "et al."."""
    people = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [" ".join(p.prelast_names + p.last_names).replace("{", "").replace("}", "") for p in people]
    who = names[0] if len(names) == 1 else " and ".join(names) if len(names) == 2 else f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


def _register_author_year_style() -> None:
    from pybtex.plugin import register_plugin
    from pybtex.style.formatting.unsrt import Style as Unsrt
    from pybtex.style.labels import BaseLabelStyle

    class AuthorYearLabels(BaseLabelStyle):
        def format_labels(self, sorted_entries):
            for entry in sorted_entries:
                yield author_year_label(entry)

    class AuthorYear(Unsrt):
        default_label_style = AuthorYearLabels
        default_sorting_style = "author_year_title"

    register_plugin("pybtex.style.formatting", "authoryear", AuthorYear, force=True)
