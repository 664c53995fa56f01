"""``accessibility cram``: the JSON keys, resumption, --batch-size 1, the export and bad input."""

import json

import pytest
import torch

from accessibility.cli import main

ARGS = ["cram", "--model", "toy", "--m", "1", "2", "--targets", "2", "--max-steps", "50", "--patience", "20",
        "--n-max", "16", "--threads", "1", "--json"]


@pytest.fixture(autouse=True)
def two_threads():
    """Two threads around each command, so that a leaked --threads 1 shows."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _run(capsys, *extra):
    assert main(ARGS + list(extra)) == 0
    return json.loads(capsys.readouterr().out)


def test_cram_json_resume_batch_size_and_export(tmp_path, capsys):
    out = str(tmp_path / "runs")
    first = _run(capsys, "--out", out)
    assert torch.get_num_threads() == 2                       # --threads 1 held only while it ran
    for key in ("n50", "n50_ci", "slope", "intercept", "r2", "slope_theory", "ratio", "wall_seconds"):
        assert key in first
    assert set(first["n50"]) == {"1", "2"} and first["slope"] > 0
    assert first["ratio"] == pytest.approx(first["slope_theory"] / first["slope"])
    records = tmp_path / "runs" / f"cram-{first['config_hash']}" / "records.jsonl"
    assert len(records.read_text().splitlines()) == 4
    again = _run(capsys, "--out", out, "--batch-size", "1",
                 "--export", str(tmp_path / "small"))
    assert len(records.read_text().splitlines()) == 4          # resumed: nothing recomputed
    assert again["capacities"] == first["capacities"]
    fresh = _run(capsys, "--out", str(tmp_path / "one"), "--batch-size", "1")
    assert fresh["capacities"] == first["capacities"]          # one at a time: identical results
    small = [json.loads(line) for line in (tmp_path / "small" / "records.jsonl").read_text().splitlines()]
    assert len(small) == 4 and all("mem" not in r and r["certificate"]["ok"] for r in small)
    meta = json.loads((tmp_path / "small" / "config.json").read_text())
    assert "--batch-size 1 --export" in meta["command"]      # the command that exported this part
    assert "--export" not in meta["run_command"]              # the one that created the run folder


@pytest.mark.parametrize("bad", [["--targets", "0"], ["--kind", "text"], ["--lr", "-1"], ["--m", "0"],
                                 ["--prefix", "foo"]])
def test_bad_input_is_one_line_and_exit_2(bad, tmp_path, capsys):
    assert main(ARGS + ["--out", str(tmp_path)] + bad) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error" in err
