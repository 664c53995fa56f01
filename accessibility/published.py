"""The paper's published per-model numbers, shipped as data with their provenance.

``accessibility/data/published_models.csv`` holds one row per model: width and vocabulary size (from
the models' public ``config.json``), the support statistics of final hidden states, the decoder-cell
entropy H, the experimental cramming slopes with R² and the m range of each fit, the slopes of the
authors' theory-vs-experiment table, the n_50 lists, the ratios, box slopes, vocabulary sizes and
angles printed by the authors' theory notebook, and a ``flag`` wherever the authors' numbers disagree
with each other or with the models (both numbers are kept; nothing is silently picked). Where each
column comes from is in ``published_columns.csv`` (:func:`column_provenance`).

:func:`theory_table` recomputes the paper's theory/experiment ratios from this table, offline, under
the authors' conventions (reproducing their printed ratios to the digit) and with the real configs.
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
#: The authors' convention for their theory table: fp16 relative precision (ε = r·2^-11).
AUTHORS_PRECISION = "fp16"
PAPER_GAP_BALL = 10.0
PAPER_GAP_REFINED = (5.0, 6.0)


def _parse_list(text) -> tuple[float, ...]:
    return tuple(float(v) for v in text.split()) if isinstance(text, str) and text.strip() else ()


def load_table() -> pd.DataFrame:
    """The published per-model table, indexed by model name (as the paper writes it).

    Adds ``table_minus_figure`` = slope_table - slope_pg19 (NaN where either is missing) and
    ``min_cos_from_theta`` = cos(theta_published), so the flagged disagreements are visible as numbers.

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
    table["min_cos_from_theta"] = np.cos(table["theta_published"])
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

    Proven bounds (their hypotheses: quantisation at the precision, the published support statistics
    as the support): ``slope`` (Corollary 4.6's C, ball support, real config |V|), ``slope_cone_bound``
    (the norm-consistent cone, :func:`accessibility.bounds.log_cone_bound`, with the published L∞ and
    L2 radii around the cone the published minimum cosine proves, half-angle
    :func:`accessibility.bounds.jung_half_angle`; NaN for exact precisions), and ``log10_N_unbounded``
    (Corollary 4.10; NaN for exact precisions). Heuristics, kept to reproduce the paper: ``slope_cone``
    (the published cone convention: ball count plus ``log_cone_fraction``, the log fraction of the ball
    inside a cone of half-angle arccos(min cos)/2, which no theorem gives), ``slope_cells`` (ball
    numerator over the published H) and ``slope_cone_cells`` (both). The authors' convention:
    ``slope_authors`` (fp16
    relative with ``vocab_size_authors``, whatever ``precision`` is) and ``ratio_authors`` =
    slope_authors / slope_table, equal to the printed ``ratio_ball_published`` to 1e-6; their
    ``ratio_box_published`` and ``slope_box_published`` are copied. Published experimental slopes
    ``slope_pg19``, ``slope_random``, ``slope_table`` and the ratios ``ratio_pg19``, ``ratio_table``,
    ``ratio_random``, ``ratio_refined_pg19``, ``ratio_refined_table`` (C or the doubly refined heuristic
    over the experimental slope). NaN where an input is not published. Exact precisions use the
    published L∞ radius as r.

    >>> t = theory_table()
    >>> [round(float(t.loc[name, column]), 6) for name, column in
    ...  (("Pythia-1.4b", "ratio_authors"), ("Pythia-6.9b", "ratio_authors"), ("Pythia-6.9b", "ratio_table"))]
    [6.019802, 11.09911, 11.096505]
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
    out["slope_cone_bound"] = _cone_bound(table, precision) / ln_v
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
    authors_v = table["vocab_size_authors"].fillna(table["vocab_size"]).astype(float)
    out["slope_authors"] = bounds.slope_bound(d_model=table["d_model"].to_numpy(),
                                              vocab_size=authors_v.to_numpy(), precision=AUTHORS_PRECISION)
    out["ratio_authors"] = out["slope_authors"] / table["slope_table"]
    for column in ("ratio_ball_published", "ratio_box_published", "slope_box_published"):
        out[column] = table[column]
    out["flag"] = table["flag"]
    return out


def _cone_bound(table: pd.DataFrame, precision: str | None) -> pd.Series:
    """Numerator of the norm-consistent cone bound per model, around the cone its minimum cosine proves
    (NaN without radii or minimum cosine, or with an exact precision)."""
    out = pd.Series(np.nan, index=table.index)
    known = table[["linf_max", "l2_max", "min_cos"]].notna().all(axis=1)
    if precision in EXACT or not known.any():
        return out
    rows = table.loc[known]
    out[known] = bounds.log_cone_bound(d_model=rows["d_model"].to_numpy(), r=rows["linf_max"].to_numpy(),
                                       r2=rows["l2_max"].to_numpy(), min_cos=rows["min_cos"].to_numpy(),
                                       precision=precision)
    return out


def precision_table(table: pd.DataFrame | None = None) -> pd.DataFrame:
    """Corollary 4.6's C for every model under every precision view
    (:func:`accessibility.bounds.slopes_by_precision`).

    One row per model with published radii (r = the published L∞ radius, r2 the published L2 radius),
    one column per view; the published reading is ``fp16``.

    >>> round(float(precision_table().loc["Pythia-160m", "exact-bf16"]), 1)
    739.5
    """
    table = _table() if table is None else table
    rows = table.dropna(subset=["linf_max", "l2_max"])
    views = {name: bounds.slopes_by_precision(d_model=int(row.d_model), vocab_size=int(row.vocab_size),
                                              r=float(row.linf_max), r2=float(row.l2_max))
             for name, row in rows.iterrows()}
    return pd.DataFrame(views).T
