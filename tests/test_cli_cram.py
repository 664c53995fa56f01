"""``accessibility cram``: the JSON keys, resumption from the run folder, --batch-size 1, the precision of
the theory slope, the text table and bad input."""

import functools
import json

import pytest
import torch

from accessibility.cli import main
from accessibility.law import PointsSummary
from accessibility.results import load_run

ARGS = ["cram", "--model", "toy", "--m", "1", "2", "--targets", "2", "--max-steps", "50", "--patience", "20",
        "--n-max", "16", "--threads", "1"]
#: The published protocol runs fixed lengths: --n-max (a flag of the search) is refused there.
PUBLISHED = [a for a in ARGS if a not in ("--n-max", "16")] + ["--protocol", "published"]


@pytest.fixture(autouse=True)
def two_threads():
    """Two threads around each command, so that a leaked --threads 1 shows."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _run(capsys, *extra, base=ARGS):
    assert main([*base, *extra, "--json"]) == 0
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
    assert len(first["capacities"]["1"]) == 2 and first["protocol"] == "search"
    assert main([*ARGS, "--save", folder]) == 0                # the text table
    text = capsys.readouterr().out
    assert "n50 (tokens)" in text and "tokens per vector" in text and "Corollary 4.6" in text


def test_init_scale_reaches_the_config_and_scales_the_initial_mem():
    """--init-scale sets CramConfig.init_scale (so a run with another init lands in another folder), and
    the [mem] a search starts from (its first in-flight snapshot) scales with it."""
    from dataclasses import replace

    from accessibility.cli import build_parser
    from accessibility.cli.cram import config_from_args, run_config
    from accessibility.cramming import cram
    from accessibility.models import load_model
    from accessibility.results import config_hash
    from accessibility.targets import make_targets

    args = build_parser("cram").parse_args([*ARGS, "--init-scale", "0.25"])
    config = config_from_args(args)
    assert config.init_scale == 0.25
    default = run_config(build_parser("cram").parse_args(ARGS))
    assert config_hash(run_config(args)) != config_hash(default)
    lm = load_model("toy")
    targets = make_targets(lm, "random-tokens", 2, config.n_max)
    start = {}
    for scale in (1.0, 0.25):
        seen = []
        cram(lm, targets, 1, replace(config, init_scale=scale, max_steps=1), on_checkpoint=seen.append,
             checkpoint_seconds=0)
        start[scale] = torch.stack([torch.as_tensor(seen[0][i]["mem"]) for i in (0, 1)])
    torch.testing.assert_close(start[0.25], 0.25 * start[1.0])


def test_init_seed_lands_in_its_own_folder_and_defaults_to_the_seed():
    """--init-seed joins the run's config only where it differs from --seed, so the runs made before the
    flag keep their folder hash."""
    from accessibility.cli import build_parser
    from accessibility.cli.cram import run_config
    from accessibility.results import config_hash

    hashed = lambda *extra: config_hash(run_config(build_parser("cram").parse_args([*ARGS, *extra])))
    assert hashed("--init-seed", "0") == hashed() != hashed("--init-seed", "1")
    assert hashed("--seed", "1", "--init-seed", "1") == hashed("--seed", "1")
    assert run_config(build_parser("cram").parse_args([*ARGS, "--init-seed", "3"]))["init_seed"] == 3


def test_batched_and_one_at_a_time_commands_agree_in_float64(tmp_path, capsys):
    """In float64 the batched engine and one-at-a-time runs give identical capacities (in float32
    they agree up to rounding, which a few hundred optimiser steps can amplify)."""
    args = ["--dtype", "float64", "--targets", "4"]
    batched = _run(capsys, "--save", str(tmp_path / "b"), *args)
    single = _run(capsys, "--save", str(tmp_path / "s"), "--batch-size", "1", *args)
    assert batched["capacities"] == single["capacities"]


def test_published_protocol_reports_points_and_the_cost_model(tmp_path, capsys):
    out = _run(capsys, "--save", str(tmp_path / "p"), "--n-grid", "2:10:4", "--m", "1", base=PUBLISHED)
    assert out["protocol"] == "published" and set(out["accessibility"]["1"]) == {"2", "6", "10"}
    assert out["accessibility"]["1"]["2"] == 1.0 and "not the published cost model" in out["cost_model"]
    assert len(load_run(str(tmp_path / "p")).records) == 2 * 3
    one = _run(capsys, "--save", str(tmp_path / "q"), "--n-grid", "2:10:4", "--m", "1", "--batch-size", "1",
               base=PUBLISHED)
    assert one["cost_model"].endswith("(published)") and one["accessibility"] == out["accessibility"]
    assert main([*PUBLISHED, "--save", str(tmp_path / "p"), "--n-grid", "2:10:4", "--m", "1"]) == 0
    assert "accessibility at n" in capsys.readouterr().out
    saved = PointsSummary.from_json(load_run(str(tmp_path / "p")).summary)   # the typed summary, as saved
    assert saved.accessibility == {1: {int(n): a for n, a in out["accessibility"]["1"].items()}}


def test_runs_at_each_targets_capacity_plus_one(tmp_path, capsys):
    """--n-from: one fixed-length run per target at its certified capacity + 1 in a search run, counted
    per m with a Wilson interval; the records are those runs."""
    search = _run(capsys, "--save", str(tmp_path / "s"))
    out = _run(capsys, "--save", str(tmp_path / "c"), "--n-from", str(tmp_path / "s"), base=PUBLISHED)
    caps = {(r["m"], r["index"]): r["capacity"] for r in load_run(str(tmp_path / "s")).records}
    records = load_run(str(tmp_path / "c")).records
    expected = sorted((m, i, c + 1) for (m, i), c in caps.items() if c < 16)
    assert sorted((r["m"], r["index"], r["n"]) for r in records) == expected
    for m in search["m"]:
        share = out["solved_at_own_length"][str(m)]
        ok = [r["solved"] for r in records if r["m"] == m]
        assert (share["solved"], share["runs"]) == (sum(ok), len(ok)) and share["low"] <= sum(ok) / len(ok)


def test_torchrun_ranks_split_the_targets_and_a_later_command_merges_them(tmp_path, capsys):
    """Two CPU processes under torchrun each write their own record log; `cram` on the same folder
    then merges them into the capacities of a single-process run (nothing is recomputed)."""
    import os
    import subprocess
    import sys

    args = [*ARGS[1:], "--dtype", "float64", "--targets", "3", "--m", "1"]
    folder = tmp_path / "ranks"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    # `-m --`: without the `--`, torchrun reads `--m` as an ambiguous abbreviation of its own flags
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    command = [*torchrun, "-m", "--", "accessibility", "cram", *args, "--save", str(folder), "--json"]
    done = subprocess.run(command,
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    logs = sorted(p.name for p in folder.glob("records*.jsonl"))
    assert logs == ["records-rank0.jsonl", "records-rank1.jsonl"]
    merged = _run(capsys, *args[2:], "--save", str(folder))
    assert sorted(p.name for p in folder.glob("records*.jsonl")) == logs    # nothing left to compute
    single = _run(capsys, *args[2:], "--save", str(tmp_path / "one"))
    assert merged["capacities"] == single["capacities"] and merged["targets_done"] == {"1": 3}


def test_only_a_complete_sweep_writes_the_summary(tmp_path, capsys, monkeypatch):
    """A rank of a split sweep that has not seen every target done writes no summary.json (rank 0
    may end before the others); the rank that ends last sees every log and writes it, as does one
    process over all the logs."""
    folder = tmp_path / "run"
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    assert _run(capsys, "--save", str(folder))["targets_done"] == {"1": 1, "2": 1}
    assert not (folder / "summary.json").exists()
    monkeypatch.setenv("RANK", "1")
    last = _run(capsys, "--save", str(folder))
    assert load_run(folder).summary["targets_done"] == last["targets_done"] == {"1": 2, "2": 2}
    assert "shard" not in load_run(folder).summary            # it covers both ranks, written by rank 1
    monkeypatch.delenv("WORLD_SIZE")
    monkeypatch.delenv("RANK")
    assert _run(capsys, "--save", str(folder))["n50"] == last["n50"]


def test_ranks_extending_records_at_once_summarise_every_rank_as_it_is_when_they_end(tmp_path, capsys,
                                                                                    monkeypatch):
    """Two ranks extending a run's records from before confirmations at the same time: rank 1, ending
    while rank 0's records still await their confirmations, leaves the summary alone; rank 0, which
    began before rank 1 extended its records and ends last, summarises every rank's records as the
    logs hold them then, not as they were when it began."""
    from accessibility import cramming

    folder = tmp_path / "run"
    with monkeypatch.context() as patch:                       # the search before confirmations
        patch.setattr(cramming, "decided", lambda *a: True)
        _run(capsys, "--save", str(folder))
    old = load_run(folder)
    config = cramming.CramConfig(**old.config["config"]["cram"])
    assert {r["index"] for r in old.records if not cramming.search_decided(r, config)} == {0, 1}
    old_summary = (folder / "summary.json").read_text()
    real_sweep = cramming.sweep

    @functools.wraps(real_sweep)
    def rank_1_meanwhile(*args, shard, **kwargs):      # rank 0 has read the logs; rank 1 runs whole
        if shard == (0, 2):
            monkeypatch.setenv("RANK", "1")
            assert main([*ARGS, "--save", str(folder)]) == 0
            capsys.readouterr()
            assert (folder / "summary.json").read_text() == old_summary
        return real_sweep(*args, shard=shard, **kwargs)

    monkeypatch.setattr(cramming, "sweep", rank_1_meanwhile)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    last = _run(capsys, "--save", str(folder))
    now = load_run(folder)
    assert all(cramming.search_decided(r, config) for r in now.records)
    assert now.summary["capacities"] == last["capacities"] == {
        str(m): caps for m, caps in cramming.capacities_by_m(now.records).items()}
    assert now.summary["compute_seconds"] == pytest.approx(sum(r["seconds"] for r in now.records))
    assert now.summary["targets_done"] == {"1": 2, "2": 2}


def test_a_narrower_resume_prints_its_view_and_keeps_the_wider_summary(tmp_path, capsys):
    """Resuming a finished --m 1 2 --targets 2 run with --m 1 --targets 1 prints the narrower view (from
    the records, nothing recomputed) and leaves the folder's summary, and the command that made it, alone."""
    folder = str(tmp_path / "run")
    wide = _run(capsys, "--save", folder)
    narrow = _run(capsys, "--save", folder, "--m", "1", "--targets", "1")
    assert narrow["m"] == [1] and narrow["targets"] == 1 and "kept" in narrow["summary_kept"]
    run = load_run(folder)
    assert run.summary["m"] == [1, 2] and run.summary["capacities"] == wide["capacities"]
    assert "--targets 1" not in run.command and len(run.records) == 4
    assert main([*ARGS, "--save", folder, "--m", "1"]) == 0            # the text says so too
    assert "summary.json kept" in capsys.readouterr().out


def test_ctrl_c_prints_one_line_and_the_same_command_resumes(tmp_path, capsys, monkeypatch):
    """Ctrl-C in mid-search: exit status 130 and one line on stderr (no traceback); the same command
    then finishes the run with the records of an uninterrupted one."""
    import signal

    from accessibility import cramming

    reference = _run(capsys, "--save", str(tmp_path / "whole"))
    passes, real_step = [], cramming._step

    def step(*args):
        passes.append(1)
        if len(passes) == 30:
            signal.raise_signal(signal.SIGINT)
        return real_step(*args)

    monkeypatch.setattr(cramming, "_step", step)
    folder = str(tmp_path / "run")
    assert main([*ARGS, "--save", folder, "--json"]) == 130
    out, err = capsys.readouterr()
    assert out == "" and err == "accessibility cram: interrupted; what it saved is kept, and the same " \
        "command resumes it\n"
    assert (tmp_path / "run" / "inflight.json").exists()
    again = _run(capsys, "--save", folder)
    assert len(passes) > 30 and again["capacities"] == reference["capacities"]
    assert len(load_run(folder).records) == len(load_run(tmp_path / "whole").records)   # none twice
