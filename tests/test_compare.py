"""The theory-vs-experiment table: every model of the published table, our rows from run summaries,
the best proven bound and the ratios."""

import math

import numpy as np
import pytest

from accessibility import compare, law, published
from accessibility.checks import InputError


def test_published_rows_cover_the_shipped_table_and_use_its_slopes():
    rows = compare.published_rows()
    theory = published.theory_table()
    assert list(rows.index) == list(published.load_table().index)
    np.testing.assert_allclose(rows["ball"], theory["slope"])
    assert (rows["source"] == "paper").all() and rows["ellipsoid"].isna().all()
    assert rows.loc["Pythia-1.4b", "box"] == pytest.approx(theory.loc["Pythia-1.4b", "slope_box_published"])


def test_measured_row_and_the_ratios():
    summary = law.summarize({1: [5, 6, 7], 2: [10, 11, 12], 4: [20, 21, 22]}, d_model=64, vocab_size=16,
                            n_boot=20)
    geometry = {"d_model": 64, "vocab_size": 16, "slope_ball": 192.0, "slope_box": 150.0, "slope_cone": 192.0,
                "slope_ellipsoid": None, "slope_cone_published": 140.0}
    row = compare.measured_row("toy", geometry=geometry,
                               cells={"slope_cells": 100.0}, cram={"random tokens": summary})
    table = compare.slopes_table(compare.published_rows(), row)
    toy = table.loc["toy"]
    assert toy["best proven"] == 150.0                                  # the box, not the heuristics
    assert toy["ball / random tokens"] == pytest.approx(192.0 / summary.fit.slope)
    assert toy["best / random tokens"] == pytest.approx(150.0 / summary.fit.slope)
    assert toy["smallest ratio"] == pytest.approx(150.0 / summary.fit.slope)
    assert math.isnan(toy["text"]) and not toy["lower bound"]
    proven = [k for k, v in compare.BOUNDS.items() if v == "proven"]
    assert (table["best proven"] <= table["ball"]).all()
    assert (table["best proven"] == table[proven].min(axis=1)).all()
    assert {"cone θ/2 (published)", "cells"} == {k for k, v in compare.BOUNDS.items() if v == "heuristic"}


def test_against_published_sets_each_point_beside_the_published_row():
    records = [{"m": m, "index": i, "capacity": c, "stop": stop, "n_max": 192}
               for m, caps in {1: [10, 12, 14], 2: [20, 25, 30]}.items()
               for i, (c, stop) in enumerate(zip(caps, ["patience", "budget", "full"]))]
    summary = law.summarize(records, d_model=640, vocab_size=262144, n_boot=20)
    table = compare.against_published("Gemma-3-270m", {"text": summary})
    row = published.load_table().loc["Gemma-3-270m"]
    assert list(table["m"]) == [1, 2]
    assert list(table["published n50"]) == list(row["n50_pg19"][:2])
    assert list(table["ours n50"]) == [12, 25] and list(table["at budget"]) == [1, 1]
    np.testing.assert_allclose(table["published / ours"],
                               table["published n50"] / table["ours (logistic)"].astype(float))
    with pytest.raises(InputError, match="kind"):
        compare.against_published("Gemma-3-270m", {"random tokens": summary})


def test_overview_figure_draws_every_kind_of_slope_without_warnings():
    import warnings

    import matplotlib.pyplot as plt

    from accessibility import plots

    cram = law.summarize({1: [5, 6, 7], 2: [10, 11, 12], 3: [15, 16, 18]}, d_model=64, vocab_size=16,
                         n_boot=20)
    table = compare.slopes_table(compare.published_rows(), compare.measured_row(
        "toy", geometry={"slope_ball": 30.0, "slope_box": 25.0, "slope_cone": 29.0, "slope_ellipsoid": 24.0,
                         "slope_cone_published": 28.0}, cells={"slope_cells": 27.0},
        cram={"random tokens": cram}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = plots.plot_slopes_overview(table)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"random tokens (measured)", "ball (proven)", "cells (heuristic)"} <= set(labels)
    plt.close(fig)


def test_a_measured_row_named_like_a_paper_row_is_refused():
    with pytest.raises(InputError, match="Gemma-3-270m"):
        compare.slopes_table(compare.published_rows(),
                             compare.measured_row("Gemma-3-270m", geometry={"slope_ball": 400.0}))
