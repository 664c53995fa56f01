"""accessibility.published: the shipped table matches the published numbers and reproduces the paper's
ratios."""

import math

import numpy as np
import pandas as pd
import pytest

from accessibility import bounds, published
from accessibility.checks import InputError

# The paper's published numbers (model: d, |V|, PG-19 slope, R², random slope, R²), typed
# independently of the CSV so that a typo in either shows up.
PUBLISHED_SLOPES = {
    "Pythia-160m": (768, 50304, 90.37, 0.999, 44.13, 0.996),
    "Pythia-410m": (1024, 50304, 111.14, 0.999, 69.32, 1.000),
    "Pythia-1b": (2048, 50304, 261.42, 0.998, 137.22, 0.998),
    "Qwen2.5-0.5B": (896, 151936, 71.02, 0.998, 36.65, 0.998),
    "Qwen2.5-1.5B": (1536, 151936, 79.56, 0.999, 36.38, 0.995),
    "Llama-3.2-1B": (2048, 128256, 137.77, 0.992, 71.30, 0.935),
    "Gemma-3-270m": (640, 262144, 44.54, 0.987, 22.97, 0.989),
    "Gemma-3-1b-pt": (1152, 262144, 39.50, 0.993, 7.02, 0.613),
}
PUBLISHED_TABLE_SLOPES = {"Pythia-160m": 90.4, "Pythia-410m": 112.4, "Pythia-1b": 287.4, "Qwen2.5-0.5B": 71.0,
                     "Qwen2.5-1.5B": 79.6, "Llama-3.2-1B": 137.8, "Gemma-3-270m": 44.54,
                     "Pythia-1.4b": 261.4, "Pythia-2.8b": 197.9, "Pythia-6.9b": 283.55}
PUBLISHED_SUPPORT = {  # L∞ / L2 / L1 max norm, mean cos, min cos
    "Pythia-160m": (22.45, 271, 7373, 0.982, 0.890), "Pythia-410m": (43.44, 113, 2903, 0.383, -0.196),
    "Pythia-1b": (57.38, 116, 4138, 0.393, -0.290), "Qwen2.5-0.5B": (226.75, 326, 5075, 0.628, -0.224),
    "Qwen2.5-1.5B": (155.75, 237, 4078, 0.740, -0.099), "Llama-3.2-1B": (20.91, 107, 3880, 0.413, -0.051),
    "Gemma-3-270m": (9.95, 51, 1050, 0.056, -0.141), "Pythia-1.4b": (66.94, 120, 4199, 0.400, -0.233),
    "Pythia-2.8b": (41.56, 119, 4712, 0.357, -0.262), "Pythia-6.9b": (42.16, 115, 5818, 0.349, -0.295),
}
# The authors' theory notebook: ball ratio, box ratio, box slope C_rect, and their |V| for Pythia-6.9b.
PUBLISHED_NOTEBOOK = {"Pythia-1.4b": (6.019802, 4.316811, 1128.4),
                      "Pythia-2.8b": (9.939214, 7.161607, 1417.3),
                      "Pythia-6.9b": (11.099110, 7.704780, 2184.7)}
PUBLISHED_H = {"Pythia-160m": 12.87, "Pythia-410m": 14.54, "Pythia-1b": 14.71, "Qwen2.5-0.5B": 16.50,
          "Qwen2.5-1.5B": 16.87, "Llama-3.2-1B": 15.79, "Gemma-3-270m": 13.03}


@pytest.fixture(scope="module")
def table():
    return published.load_table()


def test_table_matches_spec(table):
    assert isinstance(table, pd.DataFrame) and len(table) == 11
    for name, (d, v, s_pg, r2_pg, s_rand, r2_rand) in PUBLISHED_SLOPES.items():
        row = table.loc[name]
        assert (row.d_model, row.vocab_size) == (d, v)
        fits = (row.slope_pg19, row.r2_pg19, row.slope_random, row.r2_random)
        assert fits == (s_pg, r2_pg, s_rand, r2_rand)
    for name, slope in PUBLISHED_TABLE_SLOPES.items():
        assert table.loc[name, "slope_table"] == slope
    for name, stats in PUBLISHED_SUPPORT.items():
        assert tuple(table.loc[name, ["linf_max", "l2_max", "l1_max", "mean_cos", "min_cos"]]) == stats
    assert table["cell_entropy"].dropna().to_dict() == PUBLISHED_H
    assert table.loc["Pythia-1b", "m_max_pg19"] == 4 and table.loc["Pythia-160m", "m_max_pg19"] == 5
    assert (table.loc["Pythia-6.9b", "vocab_size"], table.loc["Pythia-2.8b", "d_model"]) == (50432, 2560)
    for name, values in PUBLISHED_NOTEBOOK.items():
        columns = ["ratio_ball_published", "ratio_box_published", "slope_box_published"]
        assert tuple(table.loc[name, columns]) == values
    assert table.loc["Pythia-6.9b", "vocab_size_authors"] == 50304
    assert table.loc["Pythia-1.4b", "theta_published"] == 2.219


def test_published_slopes_are_the_fits_of_the_published_n50():
    """Least-squares slope of n_50 on m = 1..5 reproduces the figures' slopes and R² (rounding)."""
    table = published.load_table()
    for name, column, slope_col, r2_col in (("Pythia-160m", "n50_pg19", "slope_pg19", "r2_pg19"),
                                            ("Qwen2.5-0.5B", "n50_pg19", "slope_pg19", "r2_pg19"),
                                            ("Gemma-3-270m", "n50_pg19", "slope_pg19", "r2_pg19"),
                                            ("Pythia-160m", "n50_random", "slope_random", "r2_random"),
                                            ("Gemma-3-270m", "n50_random", "slope_random", "r2_random")):
        n50 = np.array(table.loc[name, column])
        m = np.arange(1, len(n50) + 1)
        slope, intercept = np.polyfit(m, n50, 1)
        r2 = 1 - ((n50 - slope * m - intercept) ** 2).sum() / ((n50 - n50.mean()) ** 2).sum()
        assert slope == pytest.approx(table.loc[name, slope_col], abs=0.02)
        assert r2 == pytest.approx(table.loc[name, r2_col], abs=0.0015)


def test_disagreements_are_flagged_not_resolved(table):
    assert table.loc["Pythia-410m", "slope_table"] == 112.4
    assert table.loc["Pythia-410m", "slope_pg19"] == 111.14
    assert "112.4" in table.loc["Pythia-410m", "flag"] and "111.14" in table.loc["Pythia-410m", "flag"]
    assert "287.4" in table.loc["Pythia-1b", "flag"] and "Pythia-1.4b" in table.loc["Pythia-1b", "flag"]
    assert "261.4" in table.loc["Pythia-1.4b", "flag"]
    differs = table["table_minus_figure"].abs() > published.ROUNDING_TOLERANCE
    assert set(table.index[differs]) == {"Pythia-410m", "Pythia-1b"}
    assert (table.loc[differs.index[differs], "flag"] != "").all()


def test_provenance_covers_every_column(table):
    prov = published.column_provenance()
    shipped = set(table.columns) - {"table_minus_figure", "min_cos_from_theta"} | {"name"}
    assert shipped == set(prov.index)
    assert "config.json" in prov.loc["d_model", "source"]
    assert "config.json" in prov.loc["vocab_size", "source"]
    assert prov["source"].notna().all()


def test_lookup_is_case_insensitive_and_errors_list_known_names():
    assert published.lookup("PYTHIA-160M").name == "Pythia-160m"
    assert published.lookup(" qwen2.5-0.5b ").name == "Qwen2.5-0.5B"
    assert published.lookup("llama-3.2-1b")["vocab_size"] == 128256
    with pytest.raises(InputError) as err:
        published.lookup("gpt-2")
    assert all(name in str(err.value) for name in published.model_names())


def test_theory_table_reproduces_paper_ratios():
    theory = published.theory_table()
    c = 2048 * math.log(4097) / math.log(50304)
    assert theory.loc["Pythia-1.4b", "slope"] == pytest.approx(c) and round(c, 1) == 1573.6
    ratios = theory["ratio_table"].dropna()
    assert len(ratios) == 10 and 4.5 < ratios.min() and ratios.max() < 20.4  # inside the paper's range
    refined = theory["ratio_refined_table"].dropna()
    assert (refined < theory.loc[refined.index, "ratio_table"]).all()  # the cone and cells heuristics
    assert theory.loc["Pythia-160m", "slope_cone"] < theory.loc["Pythia-160m", "slope"]
    exact = published.theory_table(precision="exact-fp16")
    assert (exact["slope"].dropna() > theory.loc[exact["slope"].dropna().index, "slope"]).all()
    assert exact["log10_N_unbounded"].isna().all() and theory["log10_N_unbounded"].notna().all()
    assert exact["slope_cone_bound"].isna().all()


def test_the_table_is_read_once_and_handed_out_as_copies(monkeypatch):
    reads = []
    real = pd.read_csv
    monkeypatch.setattr(pd, "read_csv", lambda *a, **k: reads.append(1) or real(*a, **k))
    published._table.cache_clear()
    for name in ("pythia-160m", "Qwen2.5-0.5B", "gemma-3-270m"):
        published.lookup(name)
    published.theory_table()
    mine = published.load_table()
    mine.loc["Pythia-160m", "d_model"] = 1
    assert len(reads) == 1 and published.lookup("pythia-160m")["d_model"] == 768


def test_paper_models_are_the_tables_hub_ids():
    from accessibility.models import PAPER_MODELS

    table = published.load_table()
    assert PAPER_MODELS == {name.lower(): hf_id for name, hf_id in table["hf_id"].items()}


def test_authors_ratios_to_the_digit_and_the_real_config_beside_them():
    """fp16 relative ball bound with the authors' |V| over their table slope reproduces their printed
    ratios to 1e-6; Pythia-6.9b with its real |V| = 50432 differs in the third decimal (flagged)."""
    theory = published.theory_table(precision="bf16")  # the authors' columns ignore the precision asked for
    for name, (ball, box, c_rect) in PUBLISHED_NOTEBOOK.items():
        assert abs(theory.loc[name, "ratio_authors"] - ball) < 1e-6
        assert round(box * theory.loc[name, "slope_table"], 1) == c_rect  # box ratio and C_rect agree
    real = published.theory_table()
    assert abs(real.loc["Pythia-6.9b", "ratio_table"] - 11.096505) < 1e-6
    assert abs(real.loc["Pythia-6.9b", "ratio_table"] - real.loc["Pythia-6.9b", "ratio_authors"]) > 1e-3
    assert "50304" in real.loc["Pythia-6.9b", "flag"] and "50432" in real.loc["Pythia-6.9b", "flag"]
    assert (real["ratio_authors"] == real["ratio_table"]).drop(["Pythia-6.9b", "Gemma-3-1b-pt"]).all()


def test_notebook_angle_disagreement_and_gemma_flag_are_shipped():
    table = published.load_table()
    assert table.loc["Pythia-1.4b", "min_cos_from_theta"] == pytest.approx(-0.604, abs=5e-4)
    assert abs(table.loc["Pythia-1.4b", "min_cos_from_theta"] - table.loc["Pythia-1.4b", "min_cos"]) > 0.3
    assert "2.219" in table.loc["Pythia-1.4b", "flag"] and "-0.604" in table.loc["Pythia-1.4b", "flag"]
    gemma = table.loc["Gemma-3-270m", "flag"]
    assert "randomly initialised" in gemma and "geometry chapter" in gemma
    assert 2 * math.sqrt(640) == pytest.approx(table.loc["Gemma-3-270m", "l2_max"], abs=0.5)
    prov = published.column_provenance()
    assert "convolution" in prov.loc["cell_entropy", "source"]
    assert "notebook" in prov.loc["ratio_box_published", "source"]


def test_cone_bound_column_is_the_ball_and_the_precision_table():
    """With the published L2 radii the norm-consistent cone never beats the ball; the precision table
    holds every view for every model with radii."""
    theory = published.theory_table()
    known = theory["slope_cone_bound"].notna()
    assert known.sum() == 10 and (theory.loc[known, "slope_cone_bound"] == theory.loc[known, "slope"]).all()
    views = published.precision_table()
    assert len(views) == 10 and {"fp16", "bf16", "exact-fp32", "fp16, eps = r2 u"} <= set(views.columns)
    assert (views["fp16"] == theory.loc[views.index, "slope"]).all()
    assert (views["exact-bf16"] > views["bf16"]).all() and (views["exact-fp16"] > views["fp16"]).all()


def test_cone_bound_column_uses_the_cone_the_minimum_cosine_proves():
    """With a support where the cone matters (r2 = r, a small angle), the proven column is the cone of the
    spherical Jung radius, wider than the published arccos(min cos)/2, and the published cone column is
    the heuristic at that narrower angle."""
    table = published.load_table().loc[["Pythia-160m"]].copy()
    table[["l2_max", "min_cos"]] = [table["linf_max"].iloc[0], 0.999]
    row, theory = table.iloc[0], published.theory_table(table=table).iloc[0]
    d, r, ln_v = int(row.d_model), float(row.linf_max), math.log(row.vocab_size)
    jung = bounds.jung_half_angle(d_model=d, min_cos=0.999)
    proven = bounds.log_cone_bound(d_model=d, r=r, r2=r, phi=jung) / ln_v
    half = math.acos(0.999) / 2  # the published half-angle
    narrower = bounds.log_cone_bound(d_model=d, r=r, r2=r, phi=half) / ln_v
    assert theory["slope_cone_bound"] == pytest.approx(proven, rel=1e-12)
    assert narrower < proven < theory["slope"]
    assert theory["log_cone_fraction"] == pytest.approx(bounds.log_cone_fraction(d_model=d, phi=half))
