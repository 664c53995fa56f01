"""`accessibility geometry` and `accessibility cells` on the toy model: keys, invariants, the saved run."""

import json
import math
import warnings

import numpy as np
import pytest

from accessibility.checks import InputError
from accessibility.cli import main
from accessibility.geometry import UntrainedNormWarning
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
    assert "pooled samples" in text                      # the slopes on nested halves of the samples
    trend = out["sample_size_trend"]                     # nested halves: 2 lengths × 8 and × 16 samples
    assert [row["pooled_samples"] for row in trend] == [16, 32]
    assert trend[-1]["box"] == pytest.approx(out["slope_box"]) and trend[0]["ellipsoid"] is None


def test_geometry_warns_on_an_untrained_norm(capsys, monkeypatch, tmp_path):
    """The toy's final LayerNorm has its initial gains (all 1, bias 0): every ‖h‖ is √64."""
    import dataclasses

    from accessibility.cli import geometry as cli_geometry
    from accessibility.models import load_model

    argv = ["geometry", "--model", "toy", "--samples", "8", "--lengths", "4", "--save", str(tmp_path)]
    out = _json(capsys, [*argv, "--json"])
    fingerprint = out["norm_fingerprint"]
    assert fingerprint["detected"] and fingerprint["gain"] == pytest.approx(1.0, rel=1e-5)
    assert fingerprint["spread"] <= fingerprint["rtol"] and "1.000·√64" in out["warning"]

    def checkpoint(args):  # the same random weights, as if read from a file that did not hold trained ones
        toy = load_model("toy")
        return dataclasses.replace(toy, info=dataclasses.replace(toy.info, source="/a/checkpoint"))

    monkeypatch.setattr(cli_geometry, "load_model", checkpoint)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(argv) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("warning: toy: every post-norm L2 norm is 1.000·√64") and "untrained" in first
    # one line in the output, not also the library's Python warning
    assert not [w for w in caught if issubclass(w.category, UntrainedNormWarning)]


def test_geometry_does_not_warn_on_trained_looking_gains(capsys, monkeypatch, tmp_path):
    import torch

    from accessibility.cli import geometry as cli_geometry
    from accessibility.models import load_model

    def toy_with_gains(args):
        toy = load_model("toy")
        gains = toy.model.gpt_neox.final_layer_norm.weight
        with torch.no_grad():  # per-coordinate gains, as training leaves them
            gains.uniform_(0.2, 3.0, generator=torch.Generator().manual_seed(0))
        return toy

    monkeypatch.setattr(cli_geometry, "load_model", toy_with_gains)
    out = _json(capsys, ["geometry", "--model", "toy", "--samples", "8", "--lengths", "4", "--json",
                         "--save", str(tmp_path)])
    assert "warning" not in out and not out["norm_fingerprint"]["detected"]
    assert out["norm_fingerprint"]["spread"] > out["norm_fingerprint"]["rtol"]


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


def test_a_saved_geometry_run_gives_its_statistics_and_slopes_again(capsys, tmp_path):
    """The saved per-coordinate arrays are exact: the run's slopes come back to the last bit, in any
    precision convention as from the live measurement, and so does the table of growth with ℓ."""
    import pandas as pd

    from accessibility import geometry, models

    argv = ["geometry", "--model", "toy", "--samples", "40", "--lengths", "4", "16", "--save", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    capsys.readouterr()
    summary = load_run(tmp_path).summary
    saved = geometry.SupportStats.from_summary(summary)
    config = geometry.GeometryConfig(lengths=(4, 16), samples=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UntrainedNormWarning)
        live = geometry.measure_geometry(models.load_model("toy"), config)
    assert saved.samples == 80 > saved.d_model                   # the ellipsoid is defined
    supports = ("ball", "box", "cone", "cone_published", "ellipsoid")
    for precision in ("fp16", "bf16", "fp32", "exact-fp16"):
        again = geometry.refined_slopes(saved, vocab_size=summary["vocab_size"], precision=precision)
        assert again == geometry.refined_slopes(live.pooled, vocab_size=16, precision=precision), precision
        if precision == "fp16":
            assert {k: getattr(again, k) for k in supports} == {k: summary[f"slope_{k}"] for k in supports}
    assert np.array_equal(saved.widths, live.pooled.widths)
    assert saved.ellipsoid_rank == live.pooled.ellipsoid_rank
    pd.testing.assert_frame_equal(geometry.growth_table(summary["per_length"], summary), live.table())
    with pytest.raises(InputError, match="keeps no per-coordinate arrays"):
        geometry.SupportStats.from_summary({k: v for k, v in summary.items() if k != "support"})
