"""The book's sources: every chapter has an up-to-date .ipynb twin and a current install cell."""

import importlib.util
import re
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("book_sync", ROOT / "book" / "sync.py")
sync = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sync)

CHAPTERS = sync.chapters()
CODE = [c for c in CHAPTERS if c.exists() and "code-cell" in c.read_text()]


def _cells(path):
    return [(c.cell_type, c.source.strip()) for c in jupytext.read(path).cells]


@pytest.mark.parametrize("md", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_exists_with_twin(md):
    assert md.exists(), f"{md} is listed in _toc.yml but missing"
    twin = md.with_suffix(".ipynb")
    assert twin.exists(), f"{twin.name} missing: run `make twins`"
    assert _cells(twin) == _cells(md), f"{twin.name} differs from {md.name}: run `make twins`"


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_install_cell_follows_config(md):
    nb = jupytext.read(md)
    first = next(c for c in nb.cells if c.cell_type == "code")
    assert first.source.strip() == sync.install_cell_source().strip(), "run `make twins`"
    assert "remove-cell" in first.metadata.get("tags", [])


@pytest.mark.parametrize("md", CODE, ids=lambda p: p.stem)
def test_chapters_define_nothing_reusable(md):
    """Chapters call the package; functions and classes belong in it, where they are tested."""
    code = "\n".join(c.source for c in jupytext.read(md).cells if c.cell_type == "code")
    assert not re.search(r"^\s*(def|class)\s", code, re.M)


def test_install_cell_uses_repository_url_and_version():
    import accessibility
    import yaml

    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    assert f"git+{url}@v{accessibility.__version__}" in sync.install_cell_source()


def test_references_to_unnumbered_statements_carry_their_text():
    """Theorems numbered as in the paper are ``:nonumber:``; a bare ``{prf:ref}`label``` to one
    renders as "Corollary " with no number, so such references must spell out their text."""
    sources = {md: md.read_text() for md in CHAPTERS if md.exists()}
    unnumbered = {label for text in sources.values()
                  for label in re.findall(r"^:label: (\S+)\n(?::[a-z]+:.*\n)*?:nonumber:", text, re.M)}
    assert "cor-46" in unnumbered                      # the pattern finds the paper's statements
    bare = [(md.name, label) for md, text in sources.items()
            for label in re.findall(r"\{prf:ref\}`([^`<>\s]+)`", text) if label in unnumbered]
    assert not bare, f"write {{prf:ref}}`Corollary 4.6 <cor-46>`-style references: {bare}"
