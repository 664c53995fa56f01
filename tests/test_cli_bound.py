"""``accessibility bound``: numbers, JSON keys, and one-line errors with exit status 2."""

import json
import math
import subprocess
import sys

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
    assert out["slope_cone"] < out["slope"]
    assert out["n_star_bound"] == pytest.approx(4 * out["slope"])
    assert out["log10_fraction_bound"] == pytest.approx(-(7000 - 4 * out["slope"]) * math.log10(50304))
    unbounded = bounds.log10_unbounded_threshold(d_model=2048, vocab_size=50304)
    assert out["log10_N_unbounded"] == pytest.approx(unbounded)


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
    assert out["published_slope_table"] == 261.4 and out["ratio_table"] == pytest.approx(6.02, abs=0.01)
    assert out["min_cos"] == -0.233 and "slope_cone" in out and "published_flag" in out
    absolute = _json(capsys, "--model", "pythia-160m", "--eps", "0.01")  # the published radius is r
    assert absolute["r"] == 22.45
    assert absolute["slope"] == pytest.approx(768 * math.log1p(2 * 22.45 / 0.01) / math.log(50304))
    text_main = main(["bound", "--model", "gemma-3-270m"])
    text = capsys.readouterr().out
    assert text_main == 0 and "slope C / H (cells)" in text
    assert "tokens per vector" in text and "log10" in text


@pytest.mark.parametrize("argv, word", [
    (["--d-model", "8", "--vocab-size", "10", "--r", "1", "--eps", "0"], "eps"),
    (["--d-model", "8", "--vocab-size", "10", "--r", "-1", "--eps", "0.1"], "r must"),
    (["--d-model", "8", "--vocab-size", "1"], "vocab_size"),
    (["--d-model", "0", "--vocab-size", "10"], "d_model"),
    (["--d-model", "8", "--vocab-size", "10", "--m", "0"], "m must"),
    (["--d-model", "8", "--vocab-size", "10", "--min-cos", "1.5"], "min_cos"),
    (["--d-model", "8", "--vocab-size", "10", "--min-cos", "-1.01"], "min_cos"),
    (["--model", "gpt-2"], "Pythia-160m"),
    (["--d-model", "8", "--vocab-size", "10", "--eps", "0.1"], "--r"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "exact-fp16"], "--r"),
    (["--d-model", "8", "--vocab-size", "10", "--n", "5"], "--m"),
    (["--vocab-size", "10"], "--d-model"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "fp8"], "precision"),
    (["--d-model", "8", "--vocab-size", "10", "--precision", "bf16", "--eps", "1e-3"], "not both"),
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
    expected = "accessibility bound: error: min_cos must lie in [-1, 1], got 2.0"
    assert bad.stderr.strip().splitlines() == [expected]
