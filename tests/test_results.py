"""Record logs survive a kill in mid-write and are parsed once; runs are saved and loaded in one layout,
and the shipped runs load by name with commands that rebuild their config."""

import importlib
import json
from pathlib import Path

import pytest

from accessibility.checks import InputError
from accessibility.results import RecordLog, check_run_folder, config_hash, load_run, save_run, shipped_runs


def test_torn_last_line_is_ignored_then_cut(tmp_path):
    log = RecordLog(tmp_path / "runs.jsonl")
    log.append({"key": "a", "n": 1})
    log.append({"key": "b", "n": 2})
    with log.path.open("a") as f:
        f.write('{"key": "c", "n": ')                       # a kill in mid-write
    assert [r["key"] for r in RecordLog(log.path)] == ["a", "b"]
    resumed = RecordLog(log.path)
    resumed.append({"key": "c", "n": 3})
    lines = log.path.read_text().splitlines()
    assert [json.loads(line)["key"] for line in lines] == ["a", "b", "c"]
    resumed.append({"key": "d", "n": 4})                    # an intact tail is left alone
    assert [r["n"] for r in RecordLog(log.path)] == [1, 2, 3, 4]


def test_record_log_parses_once_omits_and_times(tmp_path, monkeypatch):
    log = RecordLog(tmp_path / "runs.jsonl", omit=("mem",), timed=True)
    log.append({"key": "a", "mem": [1.0, 2.0]})
    first = json.loads(log.path.read_text().splitlines()[0])
    assert "mem" not in first and first["seconds"] >= 0
    reads, real_open = [], Path.open

    def counting_open(self, mode="r", *args, **kwargs):
        reads.extend([self] if mode == "r" else [])
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", counting_open)
    resumed = RecordLog(log.path)                       # a resumed run: iterate, test keys, append, read all
    assert [r["key"] for r in resumed] == ["a"] and "a" in resumed and "b" not in resumed
    resumed.append({"key": "b"})
    assert [r["key"] for r in resumed.records()] == ["a", "b"] and len(reads) == 1


def test_save_and_load_a_run(tmp_path, monkeypatch):
    import accessibility.results as results

    folder = tmp_path / "run"
    config = {"kind": "demo", "config": {"n": 3}, "command": "accessibility demo --n 3"}
    assert save_run(folder, config) == folder                      # started: config only
    with pytest.raises(InputError, match="unfinished.*accessibility demo --n 3"):
        load_run(folder)
    (folder / "records-rank1.jsonl").write_text('{"key": "b", "x": 2}\n{"key": "c"')   # a rank's log, torn
    part = load_run(folder, unfinished=True)                       # its records so far, no summary
    assert part.records == [{"key": "b", "x": 2}] and part.summary is None
    (folder / "records-rank1.jsonl").unlink()
    save_run(folder, config, records=[{"key": "a", "x": 1}], summary={"total": 1})
    run = load_run(str(folder))
    assert run.config["command"] == "accessibility demo --n 3"
    assert run.config["config_hash"] == config_hash({"n": 3})
    assert run.records == [{"key": "a", "x": 1}] and run.summary == {"total": 1}
    assert {"versions", "created", "kind"} <= set(run.config)
    with pytest.raises(InputError, match="another run"):
        save_run(folder, {"kind": "demo", "config": {"n": 4}})
    with pytest.raises(InputError, match="another run"):                # same config, another command
        save_run(folder, {"kind": "other", "config": {"n": 3}})
    earlier = "2000-01-01T00:00:00+0000"                              # a day no test runs on: a lost
    (folder / "config.json").write_text(json.dumps({**run.config, "created": earlier}))  # `created` shows
    save_run(folder, {**config, "command": "accessibility demo --n 3 --more"}, summary={"total": 2})
    again = load_run(folder)
    assert again.command == "accessibility demo --n 3 --more"
    assert again.config["created"] == earlier
    assert again.config["commands"] == ["accessibility demo --n 3", "accessibility demo --n 3 --more"]
    save_run(folder, {**config, "command": "accessibility demo --n 3 --less"})   # no summary: the folder's
    assert load_run(folder).command == "accessibility demo --n 3 --more"         # stays that of its summary
    here = results.machine()
    assert load_run(folder).config["machines"] == [here]
    monkeypatch.setattr(results, "machine", lambda: "elsewhere")                 # another machine writes
    save_run(folder, config)
    save_run(folder, config)
    assert load_run(folder).config["machines"] == [here, "elsewhere"]
    old = {k: v for k, v in load_run(folder).config.items() if k != "machines"}   # written before machines
    (folder / "config.json").write_text(json.dumps(old))
    save_run(folder, config)
    assert load_run(folder).config["machines"] == [results.UNRECORDED, "elsewhere"]
    with pytest.raises(InputError, match="no saved run 'nowhere'.*shipped"):
        load_run("nowhere")
    with pytest.raises(InputError, match="accessibility cram ... --save cram-missing"):
        load_run("cram-missing")


def test_a_run_folder_is_written_only_by_its_own_run(tmp_path):
    """check_run_folder takes a new, empty or same-run folder and leaves no trace; it refuses a file, an
    unwritable place, another run and a folder of someone else's files, as save_run does."""
    config = {"kind": "demo", "config": {"n": 3}, "command": "accessibility demo"}
    new = tmp_path / "a" / "b"
    assert check_run_folder(new, "demo", {"n": 3}) == new and not (tmp_path / "a").exists()
    (tmp_path / "empty").mkdir()
    check_run_folder(tmp_path / "empty", "demo", {"n": 3})
    save_run(tmp_path / "run", config)
    check_run_folder(tmp_path / "run", "demo", {"n": 3})
    (tmp_path / "file").write_text("x")
    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "summary.json").write_text("{}")
    for folder, kind, words in [(tmp_path / "file", "demo", "is a file"),
                                (tmp_path / "file" / "x", "demo", "file"),
                                ("/proc/x", "demo", "cannot be written"),
                                (tmp_path / "run", "other", "another run"),
                                (tmp_path / "theirs", "demo", "no config.json")]:
        with pytest.raises(InputError, match=words):
            check_run_folder(folder, kind, {"n": 3}, "--save")
    with pytest.raises(InputError, match="no config.json"):
        save_run(tmp_path / "theirs", config, summary={"total": 1})
    assert [p.name for p in (tmp_path / "theirs").iterdir()] == ["summary.json"]


def test_shipped_runs_load_by_name_and_their_commands_rebuild_their_config():
    """Each shipped run's command parses with today's flags and hashes to the config it records, so running
    it regenerates (or resumes) that very folder."""
    import shlex

    from accessibility.cli import build_parser

    names = shipped_runs()
    assert {"geometry-smollm2-135m", "copy-rope", "cram-smollm2-135m-random-tokens"} <= set(names)
    unfinished = shipped_runs(unfinished=True)                     # their commands resume them
    assert not set(names) & set(unfinished)
    for name in (*names, *unfinished):
        run = load_run(name, unfinished=name in unfinished)
        if "superseded" in run.config:      # a record of an earlier version's result, said so
            assert "does not reproduce" in run.config["superseded"]
            continue
        argv = shlex.split(run.command)[1:]
        assert argv[0] == run.config["kind"] and f"accessibility/data/runs/{name}" in argv
        module = importlib.import_module(f"accessibility.cli.{argv[0]}")
        rebuilt = module.run_config(build_parser(argv[0]).parse_args(argv))
        assert config_hash(rebuilt) == run.config["config_hash"]
        assert all("mem" not in r for r in run.records)
        if name in unfinished:
            # the capacity of a record is what greedy decoding reproduced (given + matched), whether or
            # not that reaches the teacher-forced length (under fp16 autocast it may not)
            given = int(run.config["config"]["cram"]["first_token_given"])
            assert run.config["kind"] == "cram" and all(
                r["capacity"] == given + r["certificate"]["matched"]
                and r["certificate"]["ok"] == (r["capacity"] == r["capacity_teacher"]) for r in run.records)
            continue
        assert run.summary["compute_seconds"] is None or run.summary["compute_seconds"] > 0


def test_package_data_ships_every_data_file():
    """The wheel's package-data patterns (setuptools globs, no recursion) cover every file under
    accessibility/data, the shipped runs' nested folders included."""
    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parent.parent
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    package = root / "accessibility"
    shipped = {p for pattern in patterns["accessibility"] for p in package.glob(pattern)}
    files = {p for p in (package / "data").rglob("*") if p.is_file()}
    assert files and files <= shipped
