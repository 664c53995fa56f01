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
