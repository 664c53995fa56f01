"""What every command shares: ``--save DIR`` writes one run layout that ``load_run`` reads back, the
precision flags follow one rule with one error, and Ctrl-C is one line."""

import importlib
import json

import pytest

from accessibility.checks import InputError
from accessibility.cli import main
from accessibility.results import load_run

TINY_COPY = ["--arch", "lstm", "--d-model", "16", "--n-layers", "1", "--train-lengths", "2", "3",
             "--rows", "4", "--max-steps", "2", "--eval-lengths", "2", "4", "--eval-strings", "8"]
COMMANDS = {
    "cram": ["--model", "toy", "--m", "1", "2", "--targets", "2", "--max-steps", "30", "--patience", "10",
             "--n-max", "12"],
    "geometry": ["--model", "toy", "--samples", "8", "--lengths", "4"],
    "cells": ["--model", "toy", "--samples", "2000", "--geometry-samples", "8", "--lengths", "4"],
    "copy": TINY_COPY,
}


def test_every_command_saves_a_run_that_load_run_reads(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ACCESSIBILITY_CACHE", str(tmp_path / "cache"))       # trained copy models go here
    for command, flags in COMMANDS.items():
        folder = tmp_path / command
        argv = [command, *flags, "--threads", "1", "--save", str(folder), "--json"]
        assert main(argv) == 0, command
        printed = json.loads(capsys.readouterr().out)
        run = load_run(folder)
        assert run.config["kind"] == command and run.config["command"] == "accessibility " + " ".join(argv)
        assert {"config", "config_hash", "versions", "created"} <= set(run.config)
        assert printed["folder"] == str(folder)
        assert {k: v for k, v in printed.items() if k != "folder"}.items() <= run.summary.items()
        assert run.summary["compute_seconds"] > 0
        assert (len(run.records) == 4) if command == "cram" else run.records == []
        kept = {"config.json", "summary.json"} | ({"records.jsonl"} if command == "cram" else set())
        assert {p.name for p in folder.iterdir()} == kept, command
        with pytest.raises(SystemExit):
            main([command, "--help"])
        save_help = capsys.readouterr().out.split("\n  --save DIR")[1].split("\n  --")[0]
        for name in ("records.jsonl", "summary.json"):
            assert (name in save_help) == (name in kept), (command, save_help)


@pytest.mark.parametrize("command", ["bound", "geometry", "cells", "cram"])
def test_precision_and_eps_together_is_the_same_one_line_error(command, tmp_path, capsys):
    flags = {"bound": ["--d-model", "8", "--vocab-size", "10"]}.get(command, ["--model", "toy"])
    assert main([command, *flags, "--precision", "bf16", "--eps", "1e-3", "--save", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err == f"accessibility {command}: error: give either --eps (an absolute ε) or --precision, " \
                  "not both\n"


def test_rerun_makes_the_same_run_again_elsewhere(tmp_path, capsys, monkeypatch):
    """A saved run's command run again in-process: the same config and summary (but its compute time), in
    the cache by default, the old run untouched; a command whose config changed is refused before any work."""
    from accessibility.cli import rerun
    from accessibility.results import CONFIG_FILE, SUMMARY_FILE

    monkeypatch.setenv("ACCESSIBILITY_CACHE", str(tmp_path / "cache"))
    old = tmp_path / "old"
    assert main(["cells", *COMMANDS["cells"], "--threads", "1", "--save", str(old), "--json"]) == 0
    capsys.readouterr()
    before = {name: (old / name).read_text() for name in (CONFIG_FILE, SUMMARY_FILE)}
    new = rerun(old)
    assert "cell entropy H" in capsys.readouterr().out      # the command's text summary, as in a shell
    digest = load_run(old).config["config_hash"]
    assert new.folder == tmp_path / "cache" / "runs" / f"cells-{digest}"
    assert new.config["config_hash"] == digest and new.command.endswith(f"--save {new.folder}")
    drop = lambda summary: {k: v for k, v in summary.items() if k != "compute_seconds"}
    assert drop(new.summary) == drop(load_run(old).summary)
    assert before == {name: (old / name).read_text() for name in before}
    meta = json.loads(before[CONFIG_FILE])
    meta["command"] = meta["command"].replace("--samples 2000", "--samples 3000")
    (old / CONFIG_FILE).write_text(json.dumps(meta))
    with pytest.raises(InputError, match="now makes a run of config hash"):
        rerun(old, tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("command, resumes", [("cram", True), ("copy", True), ("geometry", False),
                                              ("cells", False)])
def test_ctrl_c_is_one_line_with_exit_status_130(command, resumes, capsys, monkeypatch):
    """Interrupted in its work, a command prints one line and no traceback, and says that running it
    again resumes exactly where it does."""
    module = importlib.import_module(f"accessibility.cli.{command}")

    def interrupted(args, checked):
        raise KeyboardInterrupt

    monkeypatch.setattr(module, "check", lambda args: None)
    monkeypatch.setattr(module, "run", interrupted)
    assert main([command]) == 130
    out, err = capsys.readouterr()
    again = "; what it saved is kept, and the same command resumes it" if resumes else ""
    assert out == "" and err == f"accessibility {command}: interrupted{again}\n"
