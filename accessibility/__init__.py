"""How many different outputs can a transformer generate?

Companion package to Meyer, Michelessa, Chaux and Tan (ICML 2026, arXiv:2605.22223): the bounds of
Theorem 4.5 and Corollaries 4.6 / 4.10 (:mod:`accessibility.bounds`, :mod:`accessibility.derivations`),
a transformer that attains Corollary 4.6's slope (:mod:`accessibility.construction`),
measurements of real models (:mod:`accessibility.geometry`, :mod:`accessibility.cells`) and the two
experiments, cramming (:mod:`accessibility.cramming`) and copying (:mod:`accessibility.copying`).

Importing the package is cheap and has no side effects; submodules are imported explicitly.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path

__version__ = "0.1.0"

#: Environment variable that shrinks every chapter's loops (CI and ``make test`` set it to 1).
QUICK_ENV = "ACCESSIBILITY_QUICK"
#: Set to 1 by the book build (``book/_ext``): figures are then shown by the book's captioned
#: ``{glue:figure}`` and not as cell outputs, and the chapters show no progress bars.
BOOK_BUILD_ENV = "ACCESSIBILITY_BOOK_BUILD"
#: Environment variable that moves the cache of dequantized weights and trained models.
CACHE_ENV = "ACCESSIBILITY_CACHE"
#: The paper's per-model table, shipped as package data: read whole by :mod:`accessibility.published`,
#: its ``name`` and ``hf_id`` columns by :mod:`accessibility.models` (one source for both).
PUBLISHED_MODELS_FILE = "published_models.csv"


def quick_mode(environ: Mapping[str, str] | None = None) -> bool:
    """Whether quick mode is on: ``ACCESSIBILITY_QUICK`` is 1, true, yes or on.

    ``environ`` defaults to :data:`os.environ`.

    >>> quick_mode({"ACCESSIBILITY_QUICK": "yes"}), quick_mode({"ACCESSIBILITY_QUICK": "0"}), quick_mode({})
    (True, False, False)
    """
    value = (os.environ if environ is None else environ).get(QUICK_ENV, "")
    return value.strip().lower() in {"1", "true", "yes", "on"}


def progress_bars(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a chapter shows progress bars for its long loops: yes in a notebook or a terminal,
    not while the book is built (``ACCESSIBILITY_BOOK_BUILD=1``), whose pages show results.

    >>> progress_bars({}), progress_bars({"ACCESSIBILITY_BOOK_BUILD": "1"})
    (True, False)
    """
    return (os.environ if environ is None else environ).get(BOOK_BUILD_ENV) != "1"


def cache_dir() -> Path:
    """Cache folder for dequantized weights and trained models.

    ``$ACCESSIBILITY_CACHE`` when set, else ``~/.cache/accessibility``. Not created here.
    """
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "accessibility")


def data_file(*parts: str):
    """A file (or folder) shipped with the package under ``accessibility/data``, as an
    :mod:`importlib.resources` traversable (readable from a wheel, a checkout or Colab alike).

    >>> data_file(PUBLISHED_MODELS_FILE).is_file()
    True
    """
    return files("accessibility").joinpath("data", *parts)
