"""``accessibility bound``: numbers, JSON keys, and one-line errors with exit status 2."""

import json
import math
import subprocess
import sys
import warnings

import numpy as np

import pytest

from accessibility import bounds
from accessibility.cli import main


def _json(capsys, *argv):
    assert main(["bound", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_slope_and_optional_keys(capsys):
    out = _json(capsys, "--d-model", "2048", "--vocab-size", "50304")
    assert out["slope"] == pytest.approx(2048 * math.log(4097) / math.log(50304))
    assert not {"slope_cone", "n_star_bound", "log10_fraction_bound"} & set(out)
    out = _json(capsys, "--d-model", "2048", "--vocab-size", "50304", "--min-cos", "-0.29", "--m", "4",
                "--n", "7000")
    assert out["log_cone_fraction"] == pytest.approx(bounds.log_cone_fraction(d_model=2048, min_cos=-0.29))
    assert out["slope_cone_published"] < out["slope_cone"] == out["slope"]  # consistent: the ball wins here
    assert out["r2_over_r"] == pytest.approx(math.sqrt(2048)) and out["r2"] is None
    assert out["n_star_bound"] == pytest.approx(4 * out["slope"])
    assert out["n50_bound"] == pytest.approx(4 * out["slope"] + math.log(2) / math.log(50304))
    assert out["log10_fraction_bound"] == pytest.approx(-(7000 - 4 * out["slope"]) * math.log10(50304))
    unbounded = bounds.log10_unbounded_threshold(d_model=2048, vocab_size=50304)
    assert out["log10_N_unbounded"] == pytest.approx(unbounded)
    given = _json(capsys, "--d-model", "64", "--vocab-size", "100", "--r", "1", "--r2", "1.5",
                  "--min-cos", "0.95")
    cone = float(bounds.log_cone_bound(d_model=64, r=1.0, r2=1.5, min_cos=0.95)) / math.log(100)
    assert given["slope_cone"] == pytest.approx(cone) and given["slope_cone"] < given["slope"]


def test_min_cos_over_the_whole_range_gives_the_proven_cone_slope(capsys):
    """For every X in [-1, 1] a positive finite cone slope no larger than the ball's, never a
    RuntimeWarning, continuous up to X = 1 (no jump back to the ball); where the published convention
    (a heuristic) turns non-positive, the narrowest cones, it is reported as undefined with a note, and
    the proven slope is still given."""
    undefined, near_one = 0, []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x in np.concatenate([np.linspace(-1, 1, 41), 1 - 10.0 ** -np.arange(2, 17), [1.0]]):
            argv = ["bound", "--d-model", "576", "--vocab-size", "49152", "--min-cos", repr(float(x)),
                    "--json"]
            assert main(argv) == 0, x
            out = json.loads(capsys.readouterr().out)
            assert 0 < out["slope_cone"] <= out["slope"] and math.isfinite(out["slope_cone"])
            assert out["phi_jung"] >= out["phi_published"] and out["status"]["slope_cone"] == "proven"
            near_one += [(x, out["slope_cone"])] if x > 0.99 else []
            if out["slope_cone_published"] is None:
                undefined += 1
                assert x > 0.99  # only the narrowest cones
                assert out["cone_published_note"].startswith("undefined")
            else:
                assert out["slope_cone_published"] > 0 and "cone_published_note" not in out
    assert undefined > 0
    slopes = [slope for _, slope in sorted(near_one)]  # by min cos: 0.99, ..., 1 - 1e-16, 1, 1
    assert np.all(np.diff(slopes) <= 1e-9) and slopes[-3] == slopes[-1] < slopes[0] / 10
    assert main(["bound", "--d-model", "576", "--vocab-size", "49152", "--min-cos", "1"]) == 0
    assert "undefined" in capsys.readouterr().out  # the text output says so too


def test_precision_conventions(capsys):
    base = ["--d-model", "768", "--vocab-size", "50304"]
    fp16 = _json(capsys, *base)["slope"]
    assert _json(capsys, *base, "--r", "1000")["slope"] == fp16  # relative: r does not matter
    bf16 = _json(capsys, *base, "--precision", "bf16")["slope"]
    assert bf16 == pytest.approx(768 * math.log(513) / math.log(50304))
    exact = _json(capsys, *base, "--precision", "exact-fp16", "--r", "1")
    assert exact["slope"] == pytest.approx(768 * math.log(30721) / math.log(50304)) and exact["slope"] > fp16
    assert "log10_N_unbounded" not in exact  # Corollary 4.10 needs a metric ε
    absolute = _json(capsys, *base, "--r", "2", "--eps", "0.5")
    assert absolute["slope"] == pytest.approx(768 * math.log(9) / math.log(50304))
    assert absolute["precision"] == "absolute"


def test_model_lookup_reproduces_published_ratio(capsys):
    out = _json(capsys, "--model", "PYTHIA-1.4B")
    assert out["model"] == "Pythia-1.4b" and out["d_model"] == 2048 and out["vocab_size"] == 50304
    assert round(out["slope"], 1) == 1573.6
    assert out["published_slope_table"] == 261.4 and abs(out["ratio_table"] - 6.019802) < 1e-6
    assert out["min_cos"] == -0.233 and "slope_cone" in out and "published_flag" in out
    assert out["status"] == {"slope": "proven", "phi_jung": "proven", "slope_cone": "proven",
                             "log10_N_unbounded": "proven", "phi_published": "heuristic",
                             "slope_cone_published": "heuristic", "slope_cells": "heuristic",
                             "slope_cone_cells": "heuristic"}
    assert out["phi_jung"] == math.pi / 2 and out["phi_published"] == pytest.approx(math.acos(-0.233) / 2)
    assert out["r2"] == 120 and out["slope_cone"] == out["slope"]  # the published r2: the cone does not help
    absolute = _json(capsys, "--model", "pythia-160m", "--eps", "0.01")  # the published radius is r
    assert absolute["r"] == 22.45
    assert absolute["slope"] == pytest.approx(768 * math.log1p(2 * 22.45 / 0.01) / math.log(50304))
    text_main = main(["bound", "--model", "gemma-3-270m"])
    text = capsys.readouterr().out
    assert text_main == 0 and "slope C / H (cells) [H]" in text and "slope C (Corollary 4.6) [P]" in text
    assert "tokens per vector" in text and "log10" in text and "published cone convention [H]" in text
    assert "cone half-angle arccos(min cos)/2 [H]" in text and "slope C, cone bound [P]" in text


@pytest.mark.parametrize("name, published, real", [("pythia-1.4b", 6.019802, 6.019802),
                                                   ("pythia-2.8b", 9.939214, 9.939214),
                                                   ("pythia-6.9b", 11.099110, 11.096505)])
def test_authors_convention_ratio_to_the_digit_beside_the_real_config(capsys, name, published, real):
    out = _json(capsys, "--model", name)
    assert abs(out["ratio_table_authors"] - published) < 1e-6 and out["published_ratio_ball"] == published
    assert abs(out["ratio_table"] - real) < 1e-6
    assert out["vocab_size_authors"] == 50304 and {"published_ratio_box", "published_slope_box"} <= set(out)


@pytest.mark.parametrize("argv, word", [
    (["--d-model", "8", "--vocab-size", "10", "--r", "1", "--eps", "0"], "--eps"),
    (["--d-model", "8", "--vocab-size", "10", "--r", "-1", "--eps", "0.1"], "--r must"),
    (["--d-model", "8", "--vocab-size", "1"], "--vocab-size"),
    (["--d-model", "0", "--vocab-size", "10"], "--d-model"),
    (["--d-model", "8", "--vocab-size", "10", "--m", "0"], "--m must"),
    (["--d-model", "8", "--vocab-size", "10", "--min-cos", "1.5"], "--min-cos"),
    (["--d-model", "8", "--vocab-size", "10", "--min-cos", "-1.01"], "--min-cos"),
    (["--model", "gpt-2"], "Pythia-160m"),
    (["--d-model", "8", "--vocab-size", "10", "--eps", "0.1"], "--r"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "exact-fp16"], "--r"),
    (["--d-model", "8", "--vocab-size", "10", "--n", "5"], "--m"),
    (["--vocab-size", "10"], "--d-model"),
    (["--d-model", "8", "--vocab-size", "10", "--delta", "0.1"], "--delta needs --m"),
    (["--model", "pythia-160m", "--d-model", "2048"], "not both"),
    (["--model", "pythia-160m", "--vocab-size", "100"], "not both"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "exact-fp16", "--r", "70000"], "largest finite"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "exact-fp16", "--r", "1", "--min-cos", "0.5"],
     "--min-cos"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "bf16", "--eps", "1e-3"], "not both"),
    (["--d-model", "8", "--vocab-size", "10", "--r2", "3", "--min-cos", "0.5"], "--r2 needs"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "fp8"], "precision"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, word):
    try:
        status = main(["bound", *argv])
    except SystemExit as stop:  # argparse usage errors (a --precision outside the choices)
        status = stop.code
    err = capsys.readouterr().err
    assert status == 2 and word in err and err.count("\n") == 1 and "Traceback" not in err


def test_python_dash_m_exit_status_and_no_traceback():
    """One real process (the success path is covered in-process above)."""
    bad = subprocess.run([sys.executable, "-m", "accessibility", "bound", "--d-model", "8", "--vocab-size",
                          "10", "--min-cos", "2"], capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and bad.stdout == "" and "Traceback" not in bad.stderr
    expected = "accessibility bound: error: --min-cos must lie in [-1, 1], got 2.0"
    assert bad.stderr.strip().splitlines() == [expected]
