"""`accessibility geometry` and `accessibility cells` on the toy model: keys, invariants, results folder."""

import json
import math

import pytest

from accessibility.cli import main

GEOMETRY_KEYS = {"d_model", "vocab_size", "r_inf", "r_2", "r_1", "min_cos", "mean_cos",
                 "slope_ball", "slope_box", "slope_cone"}
CELLS_KEYS = {"vocab_size", "samples", "entropy_H", "zero_count_fraction", "log_samples", "slope_cells"}


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_geometry_json(capsys, tmp_path):
    out = _json(capsys, ["geometry", "--model", "toy", "--samples", "16", "--lengths", "4", "8", "--json",
                         "--out", str(tmp_path)])
    assert GEOMETRY_KEYS <= out.keys()
    assert out["d_model"] == 64 and out["vocab_size"] == 16 and out["precision"] == "fp16"
    assert out["r_inf"] <= out["r_2"] <= out["r_1"] and -1 <= out["min_cos"] <= out["mean_cos"] <= 1
    assert out["slope_box"] <= out["slope_ball"]
    assert [row["length"] for row in out["per_length"]] == [4, 8]
    folder = tmp_path / out["results_folder"].split("/")[-1]
    assert json.loads((folder / "result.json").read_text())["r_inf"] == out["r_inf"]
    assert json.loads((folder / "config.json").read_text())["config"]["geometry"]["samples"] == 16


def test_cells_json(capsys):
    out = _json(capsys, ["cells", "--model", "toy", "--samples", "3000", "--geometry-samples", "16",
                         "--lengths", "4", "--region", "ball", "--assign", "voronoi", "--json"])
    assert CELLS_KEYS <= out.keys()
    assert out["samples"] == 3000 and out["log_samples"] == pytest.approx(math.log(3000))
    assert out["entropy_H"] >= math.log(16 * (1 - out["zero_count_fraction"])) - 1e-12
    assert out["slope_cells"] == pytest.approx(out["slope_uniform"] * math.log(16) / out["entropy_H"])
    assert abs(out["entropy_convolution"] - out["entropy_H"]) < 0.05
    assert sum(cell["share"] for cell in out["top_cells"]) <= 1 + 1e-9


def test_bad_input_is_one_line_and_exit_2(capsys):
    assert main(["geometry", "--model", "toy", "--samples", "4", "--lengths", "5000"]) == 2
    err = capsys.readouterr().err
    assert "context window" in err and len(err.strip().splitlines()) == 1
