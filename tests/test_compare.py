"""The theory-vs-experiment table: every model of the published table, our rows from run summaries,
the best proven bound and the ratios."""

import math

import numpy as np
import pytest

from accessibility import compare, law, published


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
    assert {"cone (published)", "cells"} == {k for k, v in compare.BOUNDS.items() if v == "heuristic"}
