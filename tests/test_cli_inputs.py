"""Bad input to any command is refused before any work: exit status 2, exactly one line that names the
flag as typed, nothing written, no model loaded; odd but valid input gives finite numbers.

Every case runs in an otherwise empty folder holding only the fixtures below, with each command's
``run`` replaced by a function that fails the test: a refusal must come from the command's ``check``.
"""

import importlib
import json
import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accessibility.cli import COMMANDS, main
from accessibility.models import cpu_has_native_bf16
from accessibility.results import save_run

#: Folders and files every case sees, relative to its working folder.
A_FILE = "a-file"                      # a plain file
GEOMETRY_RUN = "geometry-run"          # a saved run of `geometry`
CELLS_RUN = "cells-run"                # a saved run of `cells`
FOREIGN = "foreign"                    # somebody else's folder: a summary.json, no config.json
NEW = "new/run"                        # a folder no case may create
NO_BF16 = not cpu_has_native_bf16()
TINY_COPY = ["--arch", "lstm", "--d-model", "16", "--n-layers", "1", "--train-lengths", "2", "3"]


def _saves(command: str, other_run: str = GEOMETRY_RUN) -> list:
    """The --save cases: a folder that cannot be made, a file, another command's run, a foreign folder."""
    return [(command, ["--save", path], "--save") for path in ("/proc/x", A_FILE, other_run, FOREIGN)]


def _model_commands() -> list:
    """Cases every command that loads a language model shares."""
    shared = [(["--device", "cuda:99"], "--device"), (["--device", "nosuchdevice"], "--device"),
              (["--device", "meta"], "--device"), (["--threads", "0"], "--threads"),
              (["--threads", "-2"], "--threads"), (["--model", "nosuch"], "--model"),
              (["--dtype", "float8"], "--dtype"), (["--seed", "-1"], "--seed"),
              (["--seed", str(2**63)], "--seed"), (["--seed", "x"], "--seed"),
              (["--batch-size", "0"], "--batch-size"), (["--eps", "0"], "--eps"),
              (["--eps", "-1"], "--eps"), (["--eps", "nan"], "--eps"), (["--eps", "inf"], "--eps"),
              (["--precision", "fp8"], "--precision"), (["--precision", "bf16", "--eps", "0.1"], "--eps")]
    shared += [(["--dtype", "bfloat16"], "--dtype")] if NO_BF16 else []
    shared += [] if os.path.exists("/dev/nvidia0") else [(["--device", "cuda"], "--device")]
    lengths = [(["--lengths", "0"], "--lengths"), (["--lengths", "4", "5000"], "--lengths")]
    cases = []
    for command in ("geometry", "cells", "cram"):
        cases += _saves(command, CELLS_RUN if command == "geometry" else GEOMETRY_RUN)
        cases += [(command, argv, flag) for argv, flag in shared + (lengths if command != "cram" else [])]
    return cases


def _bound(cases, base=("--d-model", "8", "--vocab-size", "100")) -> list:
    return [("bound", [*base, *argv], flag) for argv, flag in cases]


BOUND = _bound([
    (["--r", "10", "--r2", "5", "--min-cos", "0"], "--r2"),
    (["--r", "1", "--r2", "5", "--min-cos", "0"], "--r2"),
    (["--r2", "3", "--min-cos", "0.5"], "--r2"), (["--r", "1", "--eps", "0"], "--eps"),
    (["--r", "-1", "--eps", "0.1"], "--r"), (["--r", "0", "--eps", "0.1"], "--r"), (["--eps", "0.1"], "--r"),
    (["--m", "0"], "--m"), (["--m", "4", "--n", "0"], "--n"), (["--n", "5"], "--m"),
    (["--delta", "0.1"], "--delta"), (["--m", "1", "--delta", "0"], "--delta"),
    (["--m", "1", "--delta", "2"], "--delta"), (["--m", "1", "--delta", "nan"], "--delta"),
    (["--min-cos", "1.5"], "--min-cos"), (["--min-cos", "-1.01"], "--min-cos"),
    (["--min-cos", "nan"], "--min-cos"), (["--precision", "exact-fp16"], "--r"),
    (["--precision", "exact-fp16", "--r", "70000"], "--r"),
    (["--precision", "exact-fp16", "--r", "1", "--min-cos", "0.5"], "--min-cos"),
    (["--precision", "bf16", "--eps", "1e-3"], "--eps"), (["--precision", "fp8"], "--precision"),
    (["--m", "1.5"], "--m"),
]) + _bound([
    (["--d-model", "8", "--vocab-size", "1"], "--vocab-size"),
    (["--d-model", "0", "--vocab-size", "10"], "--d-model"),
    (["--d-model", "-5", "--vocab-size", "10"], "--d-model"),
    (["--d-model", "1e3", "--vocab-size", "10"], "--d-model"),
    (["--d-model", "8", "--vocab-size", "1" + "0" * 400], "--vocab-size"),
    (["--vocab-size", "10"], "--d-model"),
    (["--d-model", "1", "--vocab-size", "10", "--min-cos", "0.5"], "--min-cos"),
    (["--model", "gpt-2"], "--model"),
    (["--model", "pythia-160m", "--d-model", "2048"], "--d-model"),
    (["--model", "pythia-160m", "--vocab-size", "100"], "--vocab-size"),
], base=()) + _saves("bound")

CELLS = [("cells", argv, flag) for argv, flag in [
    (["--samples", "1"], "--samples"), (["--samples", "0"], "--samples"), (["--chunk", "0"], "--chunk"),
    (["--geometry-samples", "0"], "--geometry-samples"),
    (["--geometry-samples", "1"], "--geometry-samples"),
    (["--top", "-1"], "--top"), (["--region", "moon"], "--region"), (["--assign", "nearest"], "--assign"),
]] + [("geometry", ["--samples", "1"], "--samples")]

PUBLISHED = ["--protocol", "published"]
CRAM = [("cram", argv, flag) for argv, flag in [
    (["--prefix", "99999"], "--prefix"), (["--prefix", "16"], "--prefix"), (["--prefix", "-3"], "--prefix"),
    (["--prefix", "foo"], "--prefix"), (["--n-grid", "2:4"], "--n-grid"),
    ([*PUBLISHED, "--n-grid", "9:3"], "--n-grid"), ([*PUBLISHED, "--n-grid", "1:5"], "--n-grid"),
    ([*PUBLISHED, "--n-grid", "5"], "--n-grid"), ([*PUBLISHED, "--n-grid", "a:b"], "--n-grid"),
    ([*PUBLISHED, "--n-start", "4"], "--n-start"), ([*PUBLISHED, "--growth", "2"], "--growth"),
    ([*PUBLISHED, "--n-max", "20"], "--n-max"), ([*PUBLISHED, "--cold-start"], "--cold-start"),
    (["--n-from", "cram-toy-paper"], "--n-from"), ([*PUBLISHED, "--n-from", "no-such-run"], "--n-from"),
    ([*PUBLISHED, "--n-from", "geometry-smollm2-135m"], "--n-from"),
    ([*PUBLISHED, "--n-from", "cram-toy-paper", "--seed", "1"], "--n-from"),
    ([*PUBLISHED, "--n-from", "cram-smollm2-135m-random-tokens"], "--n-from"),
    ([*PUBLISHED, "--n-from", "cram-toy-paper", "--n-grid", "2:4"], "--n-from"),
    (["--m", "0"], "--m"), (["--m", "1", "0"], "--m"), (["--m", "-1"], "--m"),
    (["--targets", "0"], "--targets"), (["--init-seed", "-1"], "--init-seed"),
    (["--init-seed", str(2**63)], "--init-seed"),
    (["--kind", "text"], "--kind"), (["--kind", "random-words"], "--kind"), (["--kind", "poetry"], "--kind"),
    (["--lr", "-1"], "--lr"), (["--lr", "0"], "--lr"), (["--lr", "nan"], "--lr"),
    (["--max-steps", "0"], "--max-steps"), (["--patience", "0"], "--patience"),
    (["--n-start", "1"], "--n-start"), (["--n-max", "3"], "--n-max"), (["--growth", "0.5"], "--growth"),
    (["--init-scale", "0"], "--init-scale"), (["--precision", "exact-bf16"], "--r"),
    (["--eps", "0.1"], "--r"),
    (["--r", "0"], "--r"), (["--first-token", "maybe"], "--first-token"),
    (["--prefix-position", "middle"], "--prefix-position"),
]] + ([("cram", ["--autocast-dtype", "bfloat16"], "--autocast-dtype")] if NO_BF16 else [])

COPY = _saves("copy") + [("copy", [*TINY_COPY, *argv], flag) for argv, flag in [
    (["--seed", "-1"], "--seed"), (["--eval-lengths", "1000000"], "--eval-lengths"),
    (["--eval-lengths", "0"], "--eval-lengths"), (["--eval-strings", "0"], "--eval-strings"),
    (["--max-steps", "0"], "--max-steps"), (["--lr", "0"], "--lr"), (["--lr", "-1"], "--lr"),
    (["--rows", "0"], "--rows"), (["--row-tokens", "5"], "--row-tokens"),
    (["--row-tokens", "100000"], "--row-tokens"), (["--stop-strings", "0"], "--stop-strings"),
    (["--stop-checks", "0"], "--stop-checks"),
    (["--d-model", "0"], "--d-model"), (["--n-layers", "0"], "--n-layers"),
    (["--device", "nosuchdevice"], "--device"), (["--threads", "0"], "--threads"),
]] + [("copy", argv, flag) for argv, flag in [
    (["--train-lengths", "9", "5"], "--train-lengths"), (["--train-lengths", "0", "5"], "--train-lengths"),
    (["--train-lengths", "5", "5000"], "--train-lengths"), (["--d-model", "30"], "--d-model"),
    (["--n-heads", "0"], "--n-heads"), (["--mlp-ratio", "0"], "--mlp-ratio"),
    (["--preset", "paper", "--d-model", "64"], "--d-model"), (["--arch", "gru"], "--arch"),
]]

BAD = _model_commands() + BOUND + CELLS + CRAM + COPY


def _files(root: Path) -> dict:
    """Every path under ``root`` with its size (files) or None (folders)."""
    return {str(p.relative_to(root)): (p.stat().st_size if p.is_file() else None) for p in root.rglob("*")}


@pytest.fixture
def world(tmp_path, monkeypatch):
    """A working folder with the fixtures, every command's ``run`` refusing to start, and the model
    loader refusing to load."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ACCESSIBILITY_CACHE", str(tmp_path / "cache"))
    (tmp_path / A_FILE).write_text("not a run\n")
    for folder, kind in ((GEOMETRY_RUN, "geometry"), (CELLS_RUN, "cells")):
        save_run(tmp_path / folder, {"kind": kind, "config": {"n": 1}, "command": f"accessibility {kind}"})
    (tmp_path / FOREIGN).mkdir()
    (tmp_path / FOREIGN / "summary.json").write_text('{"mine": true}\n')

    def started(*args, **kwargs):
        raise AssertionError("work started on bad input")

    for command in COMMANDS:
        monkeypatch.setattr(importlib.import_module(f"accessibility.cli.{command}"), "run", started)
    monkeypatch.setattr("accessibility.models.load_model", started)
    return tmp_path


def _argv(command: str, argv: list) -> list:
    """A case's command line: bound with a width and vocabulary to save, the toy model where a command
    loads one, and --save NEW where the case names no folder (so that a default one would show)."""
    base = {"bound": ["--d-model", "8", "--vocab-size", "100"] if "--save" in argv else []}
    model = [] if command in ("bound", "copy") or "--model" in argv else ["--model", "toy"]
    save = [] if command == "bound" or "--save" in argv else ["--save", NEW]
    return [command, *base.get(command, []), *model, *argv, *save]


def _status(argv) -> int:
    try:
        return main(argv)
    except SystemExit as stop:         # argparse: a value of the wrong type or outside the choices
        return stop.code


def test_the_table_has_each_row_of_the_issue_and_over_a_hundred_cases():
    assert len(BAD) >= 100
    rows = [("cram", ["--prefix", "99999"], "--prefix"), ("cram", ["--seed", "-1"], "--seed"),
            ("copy", [*TINY_COPY, "--seed", "-1"], "--seed"), ("cells", ["--top", "-1"], "--top"),
            ("cram", ["--n-grid", "2:4"], "--n-grid"), ("cells", ["--chunk", "0"], "--chunk"),
            ("cells", ["--geometry-samples", "0"], "--geometry-samples"),
            ("cells", ["--samples", "1"], "--samples"),
            ("copy", [*TINY_COPY, "--eval-lengths", "1000000"], "--eval-lengths"),
            ("geometry", ["--device", "nosuchdevice"], "--device"),
            ("cram", ["--model", "nosuch"], "--model"),
            ("cram", ["--batch-size", "0"], "--batch-size"), ("cram", ["--kind", "text"], "--kind"),
            ("cells", ["--save", GEOMETRY_RUN], "--save"), ("copy", ["--save", GEOMETRY_RUN], "--save"),
            ("bound", ["--save", FOREIGN], "--save"), ("bound", ["--save", A_FILE], "--save"),
            ("geometry", ["--save", "/proc/x"], "--save"), ("copy", ["--save", "/proc/x"], "--save"),
            ("bound", ["--d-model", "8", "--vocab-size", "100", "--r", "10", "--r2", "5", "--min-cos", "0"],
             "--r2")]
    assert not [row for row in rows if row not in BAD]


@pytest.mark.parametrize("command, argv, flag", BAD, ids=[f"{c} {' '.join(a)}" for c, a, _ in BAD])
def test_bad_input_is_refused_before_any_work(world, capsys, command, argv, flag):
    before = _files(world)
    status = _status(_argv(command, argv))
    out, err = capsys.readouterr()
    assert status == 2 and out == "" and err.count("\n") == 1 and err.endswith("\n"), err
    assert flag in err and "Traceback" not in err, err
    assert _files(world) == before                      # nothing written, nothing removed


def test_odd_but_valid_bound_input_gives_finite_numbers(capsys):
    """Overflowing ratios 2r/ε are handled in log space; a negative value in any notation is a value."""
    for argv, slope in [(["--r", "1", "--eps", "1e-320"], 1281.2),
                        (["--eps", "1e-300", "--r", "1e300"], None),
                        (["--min-cos", "-1e-12"], None), (["--min-cos", "-.5e-3"], None)]:
        assert main(["bound", "--d-model", "8", "--vocab-size", "100", *argv, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert math.isfinite(out["slope"]) and out["log10_N_unbounded"] is not None
        assert slope is None or round(out["slope"], 1) == slope
        if "--min-cos" in argv:
            assert out["min_cos"] == float(argv[1])


NUMBERS = st.one_of(st.integers(-10**6, 10**6).map(str), st.floats(allow_nan=True).map(repr),
                    st.sampled_from(["0", "-0", "1e-320", "1e308", "-1e-12", "inf", "-inf", "nan", "x",
                                     "1" * 400]))
BOUND_FLAGS = ["--d-model", "--vocab-size", "--r", "--eps", "--r2", "--min-cos", "--m", "--n", "--delta"]


@settings(max_examples=150, deadline=None, derandomize=True, database=None,  # the same cases every run
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.dictionaries(st.sampled_from(BOUND_FLAGS), NUMBERS, max_size=6))
def test_bound_never_shows_a_traceback(capsys, values):
    """Any numbers for bound's flags: a result (exit 0, finite slope) or one line naming a flag (exit 2)."""
    argv = ["bound", "--d-model", "8", "--vocab-size", "100"] + [x for kv in values.items() for x in kv]
    status = _status([*argv, "--json"])
    out, err = capsys.readouterr()
    if status == 0:
        assert math.isfinite(json.loads(out)["slope"]) and err == ""
    else:
        assert status == 2 and err.count("\n") == 1 and "--" in err and out == "", err
