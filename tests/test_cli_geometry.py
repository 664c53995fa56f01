"""`accessibility geometry` and `accessibility cells` on the toy model: keys, invariants, the saved run."""

import json
import math

import pytest

from accessibility.cli import main
from accessibility.results import load_run

GEOMETRY_KEYS = {"d_model", "vocab_size", "r_inf", "r_2", "r_1", "min_cos", "mean_cos",
                 "slope_ball", "slope_box", "slope_cone"}
CELLS_KEYS = {"vocab_size", "samples", "entropy_H", "zero_count_fraction", "log_samples", "slope_cells"}


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_geometry_json(capsys, tmp_path):
    out = _json(capsys, ["geometry", "--model", "toy", "--samples", "16", "--lengths", "4", "8", "--json",
                         "--save", str(tmp_path)])
    assert GEOMETRY_KEYS <= out.keys()
    assert out["d_model"] == 64 and out["vocab_size"] == 16 and out["precision"] == "fp16"
    assert out["r_inf"] <= out["r_2"] <= out["r_1"] and -1 <= out["min_cos"] <= out["mean_cos"] <= 1
    assert out["slope_box"] <= out["slope_ball"]
    assert [row["length"] for row in out["per_length"]] == [4, 8]
    run = load_run(out["folder"])
    assert run.summary["r_inf"] == out["r_inf"] and run.config["config"]["geometry"]["samples"] == 16
    argv = ["geometry", "--model", "toy", "--samples", "16", "--lengths", "4", "8", "--save", str(tmp_path)]
    assert main(argv) == 0
    text = capsys.readouterr().out                       # the same run again, as a text table
    assert "tokens per vector" in text and "r_inf" in text and "ℓ (tokens)" in text


def test_cells_json(capsys, tmp_path):
    out = _json(capsys, ["cells", "--model", "toy", "--samples", "3000", "--geometry-samples", "16",
                         "--lengths", "4", "--region", "ball", "--assign", "voronoi", "--json",
                         "--save", str(tmp_path)])
    assert CELLS_KEYS <= out.keys()
    assert out["samples"] == 3000 and out["log_samples"] == pytest.approx(math.log(3000))
    assert out["entropy_H"] >= math.log(16 * (1 - out["zero_count_fraction"])) - 1e-12
    assert out["slope_cells"] == pytest.approx(out["slope_uniform"] * math.log(16) / out["entropy_H"])
    assert abs(out["entropy_convolution"] - out["entropy_H"]) < 0.05
    assert sum(cell["share"] for cell in out["top_cells"]) <= 1 + 1e-9


def test_hidden_region_skips_the_pairwise_cosines(capsys, tmp_path, monkeypatch):
    """--region hidden samples N hidden states; their O(N²·d) pairwise cosines are never shown, so never
    computed."""
    from accessibility import geometry

    def refuse(*args, **kwargs):
        raise AssertionError("pairwise cosines computed")

    monkeypatch.setattr(geometry, "pairwise_cosines", refuse)
    out = _json(capsys, ["cells", "--model", "toy", "--samples", "64", "--lengths", "4", "--region", "hidden",
                         "--json", "--save", str(tmp_path)])
    assert out["samples"] == 64 and out["slope_cone_cells"] > 0


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path):
    assert main(["geometry", "--model", "toy", "--samples", "4", "--lengths", "5000",
                 "--save", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "context window" in err and len(err.strip().splitlines()) == 1
