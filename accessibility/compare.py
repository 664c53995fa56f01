"""Theory next to experiment for every model: the paper's table and the runs of this book in one table.

For each model, :func:`slopes_table` holds the slope C of Corollary 4.6 under each support (ball, box,
norm-consistent cone, ellipsoid: **proven** bounds under the hypotheses of the ledger in the
corollaries chapter), the **heuristic** refinements (the published cone convention, at the half-angle
θ/2 = arccos(min cos)/2; the decoder-cell entropy H in place of ln|V|), the measured cramming slopes and
their ratios. :data:`BOUNDS` says which column is which. The proven cone is the one a model's support
provably lies in: for the paper's rows, the cone the published minimum cosine proves (the spherical
Jung radius, :func:`accessibility.bounds.jung_half_angle`); for ours, the measured enclosing cone. All
slopes use one precision convention, fp16 relative (ε = r·2^-11).

A measured slope is compared with C only as a heuristic comparison: C bounds uniformly random targets
(n_50(m) <= C·m + ln 2/ln|V|); a slope fitted with an intercept over a few m is not itself bounded by C,
and text or random words are not uniform targets (their own slope is C_Q, see
:func:`accessibility.bounds.target_slope`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from accessibility.checks import InputError, one_of

#: Slope columns of :func:`slopes_table` and their status (see the corollaries chapter's ledger).
BOUNDS = {"ball": "proven", "box": "proven", "cone": "proven", "ellipsoid": "proven",
          "cone θ/2 (published)": "heuristic", "cells": "heuristic"}
#: Measured-slope columns: targets of each kind. The paper's "random" targets are random words.
MEASURED = ("random tokens", "random words", "text")


def published_rows() -> pd.DataFrame:
    """One row per model of the shipped table: slopes C from the published statistics (the box from
    the authors' own box ratios where they published them; no ellipsoid) and the published slopes."""
    from accessibility.published import theory_table

    t = theory_table()
    rows = pd.DataFrame({"source": "paper", "d_model": t["d_model"], "vocab_size": t["vocab_size"],
                         "ball": t["slope"], "box": t["slope_box_published"], "cone": t["slope_cone_bound"],
                         "ellipsoid": np.nan, "cone θ/2 (published)": t["slope_cone"],
                         "cells": t["slope_cells"],
                         "random tokens": np.nan, "random words": t["slope_random"],
                         "text": t["slope_pg19"].fillna(t["slope_table"])}, index=t.index)
    rows["lower bound"] = False
    return rows


def measured_row(name: str, *, geometry: Mapping | None = None, cells: Mapping | None = None,
                 cram: Mapping[str, object] | None = None) -> pd.DataFrame:
    """One row for a model measured in this book, from run summaries: ``geometry`` (an
    ``accessibility geometry`` summary), ``cells`` (an ``accessibility cells`` summary) and ``cram``
    (target kind of :data:`MEASURED` -> :class:`~accessibility.law.CramSummary`). Missing parts are NaN;
    ``lower bound`` says that some n_50 behind a slope is only a lower bound (budget, censoring or an
    undecided capacity: :attr:`accessibility.law.MPoint.lower_bound`)."""
    g, c, cram = geometry or {}, cells or {}, cram or {}
    row = {"source": "this book", "d_model": g.get("d_model", c.get("d_model")),
           "vocab_size": g.get("vocab_size"), "ball": g.get("slope_ball"), "box": g.get("slope_box"),
           "cone": g.get("slope_cone"), "ellipsoid": g.get("slope_ellipsoid"),
           "cone θ/2 (published)": g.get("slope_cone_published"), "cells": c.get("slope_cells")}
    for kind in MEASURED:
        summary = cram.get(kind)
        row[kind] = np.nan if summary is None or summary.fit is None else summary.fit.slope
    row["lower bound"] = any(s.lower_bound for s in cram.values())
    return pd.DataFrame([row], index=[name]).astype({k: float for k in (*BOUNDS, *MEASURED)})


def slopes_table(*parts: pd.DataFrame) -> pd.DataFrame:
    """The rows of :func:`published_rows` and :func:`measured_row` together, with ``best proven`` (the
    smallest proven C), the ratio of the ball bound and of the best proven bound to each measured
    slope (``ball / <kind>``, ``best / <kind>``) and the smallest of those ratios per model.

    >>> t = slopes_table(measured_row("m", geometry={"slope_ball": 10.0, "slope_box": 8.0}))
    >>> float(t.loc["m", "best proven"])
    8.0
    """
    table = pd.concat(parts)
    clashes = sorted(set(table.index[table.index.duplicated()]))
    if clashes:
        raise InputError(f"each row needs its own name; given twice: {', '.join(clashes)} (name a measured "
                         "row after what was measured, e.g. 'Gemma-3-270m, trained')")
    proven = [k for k, status in BOUNDS.items() if status == "proven"]
    table["best proven"] = table[proven].min(axis=1)
    for kind in MEASURED:
        table[f"ball / {kind}"] = table["ball"] / table[kind]
        table[f"best / {kind}"] = table["best proven"] / table[kind]
    table["smallest ratio"] = table[[f"best / {kind}" for kind in MEASURED]].min(axis=1)
    return table


#: Published n_50 column of :func:`accessibility.published.load_table` for each kind of target.
PUBLISHED_N50 = {"text": "n50_pg19", "random words": "n50_random"}


def against_published(model: str, summaries: Mapping[str, object]) -> pd.DataFrame:
    """Our n_50 per (kind of target, m) beside the published n_50 of ``model``'s row.

    ``summaries`` maps a kind of :data:`PUBLISHED_N50` to a :class:`~accessibility.law.CramSummary`.
    Columns: our median n_50 and its interval, our logistic midpoint (the published estimator), the
    published n_50 at that m (NaN where not published), ``published / ours`` (over the logistic
    midpoints), and how many targets stopped on the step budget (their capacities are lower bounds).
    """
    from accessibility.published import load_table

    row = load_table().loc[model]
    rows = []
    for kind, summary in summaries.items():
        one_of("kind", kind, tuple(PUBLISHED_N50))
        published = row[PUBLISHED_N50[kind]]
        for p in summary.points:
            rows.append({"targets": kind, "m": p.m, "ours n50": p.n50, "low": p.low, "high": p.high,
                         "ours (logistic)": p.n50_logistic,
                         "published n50": published[p.m - 1] if p.m <= len(published) else np.nan,
                         "at budget": p.stops.get("budget", 0), "of": p.n_targets})
    table = pd.DataFrame(rows)
    if len(table):
        table["published / ours"] = table["published n50"] / table["ours (logistic)"].astype(float)
    return table
