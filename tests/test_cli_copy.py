"""`accessibility copy`: flags map onto the config, --json prints the documented record, the run is
saved, errors are one line."""

import json

import pytest

from accessibility.cli import main
from accessibility.copying import load_record

TINY = ["--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--train-lengths", "2", "3", "--rows", "4",
        "--max-steps", "2", "--eval-lengths", "2", "6", "--eval-strings", "8", "--threads", "1"]


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Trained models go to a fresh package cache."""
    monkeypatch.setenv("ACCESSIBILITY_CACHE", str(tmp_path / "cache"))


def test_copy_json_record(tmp_path, capsys):
    save = ["--save", str(tmp_path / "run")]
    assert main(["copy", "--arch", "lstm", "--json", *save, *TINY]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["arch"] == "lstm" and record["train_lengths"] == [2, 3]
    # the lengths asked for and the training maximum
    assert set(record["accuracy"]) == set(record["char_accuracy"]) == {"2", "3", "6"}
    for key in ("copy_n50", "copy_n50_ci", "train_seconds", "steps", "config_hash", "compute_seconds"):
        assert key in record
    assert record["steps"] == 2 and not record["cached"]
    trained = tmp_path / "cache" / "copying" / f"copy-{record['config_hash']}"
    model = json.loads((trained / "config.json").read_text())
    assert model["config"]["model"]["d_model"] == 16 and model["config"]["row_tokens"] == 128
    saved = load_record(record["folder"])
    assert saved.config.model.d_model == 16 and saved.log.steps == 2 and list(saved.eval.lengths) == [2, 3, 6]
    assert main(["copy", "--arch", "lstm", *save, *TINY]) == 0
    text = capsys.readouterr().out
    assert "cached model" in text and "copy_n50" in text and "exact match" in text
    assert "stopping rule" in text and "128 fresh strings of length 3" in text  # the rule, named
    assert not record["count_eos"] and record["max_steps"] == 2
    eos = ["--count-eos", "--save", str(tmp_path / "eos")]
    assert main(["copy", "--arch", "lstm", "--json", *eos, *TINY]) == 0
    with_eos = json.loads(capsys.readouterr().out)
    assert with_eos["count_eos"] and with_eos["config_hash"] != record["config_hash"]  # another stopping rule


def test_paper_preset_without_the_model_says_how_to_get_it(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))  # an empty hub cache: the model is not on disk
    assert main(["copy", "--preset", "paper", "--save", str(tmp_path)]) == 2
    assert "--allow-download" in capsys.readouterr().err
