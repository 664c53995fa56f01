"""The paper's published per-model numbers, shipped as data with their provenance.

``accessibility/data/published_models.csv`` holds one row per model: width and vocabulary size (from
the models' public ``config.json``), the support statistics of final hidden states, the decoder-cell
entropy H, the experimental cramming slopes with R² and the m range of each fit, the slopes of the
authors' theory-vs-experiment table, the n_50 lists, and a ``flag`` wherever the authors' table and
figures disagree (both numbers are kept; nothing is silently picked). Where each column comes from
is in ``published_columns.csv`` (:func:`column_provenance`).

:func:`theory_table` recomputes the paper's theory/experiment ratios from this table, offline.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

from accessibility import PUBLISHED_MODELS_FILE, bounds, data_file
from accessibility.checks import InputError
from accessibility.precision import EXACT

MODELS_FILE = PUBLISHED_MODELS_FILE
COLUMNS_FILE = "published_columns.csv"
#: Columns holding space-separated n_50 lists (m = 1, 2, ...), parsed to tuples of floats.
LIST_COLUMNS = ("n50_pg19", "n50_random")
#: Two published slopes that agree to the table's rounding differ by less than this (tokens/vector).
ROUNDING_TOLERANCE = 0.05
#: Claims of the paper's text, kept as data so the book compares against them, not retypes them:
#: theory/experiment slope ratios lie between about 4.5 and 20.4, and the refined geometries shrink
#: the gap from about 10x to about 5-6x.
PAPER_RATIO_RANGE = (4.5, 20.4)
#: The theory/experiment slope ratio the paper quotes for Pythia-1.4b (fp16 ball bound over the table slope).
PAPER_RATIO_PYTHIA_1_4B = 6.0
PAPER_GAP_BALL = 10.0
PAPER_GAP_REFINED = (5.0, 6.0)


def _parse_list(text) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split()) if isinstance(text, str) and text.strip() else ()


def load_table() -> pd.DataFrame:
    """The published per-model table, indexed by model name (as the paper writes it).

    Adds ``table_minus_figure`` = slope_table - slope_pg19 (NaN where either is missing), so the
    flagged disagreements are visible as numbers.

    >>> t = load_table()
    >>> row = t.loc["Pythia-1.4b"]
    >>> int(row["d_model"]), int(row["vocab_size"]), float(row["slope_table"])
    (2048, 50304, 261.4)
    >>> round(float(t.loc["Pythia-1b", "table_minus_figure"]), 2)
    25.98
    """
    return _table().copy()


@cache
def _table() -> pd.DataFrame:
    """The table, read from the CSV once per process (:func:`load_table` hands out copies)."""
    with data_file(MODELS_FILE).open() as fh:
        table = pd.read_csv(fh).set_index("name")
    for column in LIST_COLUMNS:
        table[column] = table[column].map(_parse_list)
    table["flag"] = table["flag"].fillna("")
    table["table_minus_figure"] = table["slope_table"] - table["slope_pg19"]
    return table


def column_provenance() -> pd.DataFrame:
    """Unit, description and source of every column of :func:`load_table`, indexed by column."""
    with data_file(COLUMNS_FILE).open() as fh:
        return pd.read_csv(fh).set_index("column")


def model_names() -> tuple[str, ...]:
    """Names of the models in the table, in the paper's order."""
    return tuple(_table().index)


def lookup(name: str) -> pd.Series:
    """The row of one model, by case-insensitive name (``pythia-160m``, ``qwen2.5-0.5b``, ...).

    >>> int(lookup("gemma-3-270M")["d_model"])
    640
    >>> lookup("gpt-2")
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: unknown model 'gpt-2'; known: Pythia-160m, Pythia-410m, ...
    """
    table = _table()
    by_key = {n.lower(): n for n in table.index}
    key = str(name).strip().lower()
    if key not in by_key:
        raise InputError(f"unknown model {name!r}; known: {', '.join(table.index)}")
    return table.loc[by_key[key]].copy()


def theory_table(*, precision: str | None = None, table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Theoretical slopes of every model next to the published experimental ones, with ratios.

    Columns: ``slope`` (Corollary 4.6's C, ball support), ``slope_cone`` (published min cos, φ =
    arccos(min cos)/2), ``slope_cells`` (ball numerator over the published H), ``slope_cone_cells``
    (both refinements), the published ``slope_pg19``, ``slope_random`` and ``slope_table``, and the
    ratios ``ratio_pg19``, ``ratio_table``, ``ratio_random``, ``ratio_refined_pg19``,
    ``ratio_refined_table`` (C or the doubly refined C over the experimental slope), and
    ``log10_N_unbounded`` (Corollary 4.10).
    NaN where an input is not published. Exact precisions use the published L∞ radius as r; for them
    Corollary 4.10 is not defined (NaN).

    >>> round(float(theory_table().loc["Pythia-1.4b", "ratio_table"]), 2)
    6.02
    """
    table = _table() if table is None else table
    out = pd.DataFrame(index=table.index)
    out["d_model"], out["vocab_size"] = table["d_model"], table["vocab_size"]
    needs_r = precision in EXACT
    has = table["linf_max"].notna() if needs_r else pd.Series(True, index=table.index)
    num = pd.Series(np.nan, index=table.index)
    num[has] = bounds.log_ball_count(d_model=table.loc[has, "d_model"].to_numpy(), precision=precision,
                                     r=table.loc[has, "linf_max"].to_numpy() if needs_r else None)
    log_f = pd.Series(np.nan, index=table.index)
    cos_known = table["min_cos"].notna()
    log_f[cos_known] = bounds.log_cone_fraction(d_model=table.loc[cos_known, "d_model"].to_numpy(),
                                                min_cos=table.loc[cos_known, "min_cos"].to_numpy())
    ln_v = np.log(table["vocab_size"].astype(float))
    out["numerator"], out["log_cone_fraction"] = num, log_f
    out["slope"] = num / ln_v
    out["slope_cone"] = (num + log_f) / ln_v
    out["slope_cells"] = num / table["cell_entropy"]
    out["slope_cone_cells"] = (num + log_f) / table["cell_entropy"]
    for column in ("slope_pg19", "slope_random", "slope_table"):
        out[column] = table[column]
    out["ratio_pg19"] = out["slope"] / table["slope_pg19"]
    out["ratio_table"] = out["slope"] / table["slope_table"]
    out["ratio_random"] = out["slope"] / table["slope_random"]
    out["ratio_refined_pg19"] = out["slope_cone_cells"] / table["slope_pg19"]
    out["ratio_refined_table"] = out["slope_cone_cells"] / table["slope_table"]
    out["log10_N_unbounded"] = np.nan if needs_r else bounds.log10_unbounded_threshold(
        d_model=table["d_model"].to_numpy(), vocab_size=table["vocab_size"].to_numpy(), precision=precision)
    out["flag"] = table["flag"]
    return out
