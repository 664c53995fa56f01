"""``accessibility cram``: the JSON keys, resumption from the run folder, --batch-size 1, the precision of
the theory slope, the text table and bad input."""

import json

import pytest
import torch

from accessibility.cli import main
from accessibility.results import load_run

ARGS = ["cram", "--model", "toy", "--m", "1", "2", "--targets", "2", "--max-steps", "50", "--patience", "20",
        "--n-max", "16", "--threads", "1"]


@pytest.fixture(autouse=True)
def two_threads():
    """Two threads around each command, so that a leaked --threads 1 shows."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _run(capsys, *extra):
    assert main([*ARGS, *extra, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_cram_json_resume_batch_size_and_precision(tmp_path, capsys):
    folder = str(tmp_path / "run")
    first = _run(capsys, "--save", folder)
    assert torch.get_num_threads() == 2                       # --threads 1 held only while it ran
    for key in ("n50", "n50_ci", "stops", "n_censored", "n50_lower_bound", "slope", "intercept", "r2",
                "slope_ci", "slope_origin", "slope_origin_ci", "slope_theory", "precision", "ratio",
                "compute_seconds"):
        assert key in first
    assert set(first["n50"]) == {"1", "2"} and first["slope"] > 0 and first["precision"] == "fp16"
    assert first["ratio"] == pytest.approx(first["slope_theory"] / first["slope"])
    assert all(sum(first["stops"][m].values()) == 2 for m in ("1", "2"))
    run = load_run(folder)
    assert len(run.records) == 4
    assert first["compute_seconds"] == pytest.approx(sum(r["seconds"] for r in run.records))
    assert all("mem" not in r for r in run.records)           # small by default (--keep-mem keeps them)
    again = _run(capsys, "--save", folder, "--batch-size", "1", "--precision", "exact-bf16", "--r", "30")
    assert len(load_run(folder).records) == 4                  # resumed: nothing recomputed
    assert again["capacities"] == first["capacities"] and again["compute_seconds"] == first["compute_seconds"]
    assert again["precision"] == "exact-bf16" and again["slope_theory"] != first["slope_theory"]
    assert "--precision exact-bf16" in load_run(folder).command   # the command that wrote this summary
    fresh = _run(capsys, "--save", str(tmp_path / "one"), "--batch-size", "1")
    assert fresh["capacities"] == first["capacities"]          # one at a time: identical results
    assert main([*ARGS, "--save", folder]) == 0                # the text table
    text = capsys.readouterr().out
    assert "n50 (tokens)" in text and "tokens per vector" in text and "Corollary 4.6" in text


@pytest.mark.parametrize("bad", [["--targets", "0"], ["--kind", "text"], ["--lr", "-1"], ["--m", "0"],
                                 ["--prefix", "foo"], ["--precision", "exact-bf16"], ["--eps", "0.1"]])
def test_bad_input_is_one_line_and_exit_2(bad, tmp_path, capsys):
    assert main([*ARGS, "--save", str(tmp_path), *bad]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
