"""Cram targets into m soft-prompt vectors of a frozen model: capacities, n_50(m) and the linear law.

Each target's capacity (the longest prefix a found prompt reproduces under greedy generate) is
written to ``OUT/cram-<config hash>/records.jsonl`` as soon as it is known; running the same command
again resumes where it stopped. Prints n_50 per m with a confidence interval, the slope of
n_50 = a·m + b with R² and a bootstrap interval, the Corollary 4.6 slope for the same model
(fp16 relative precision) and the ratio theory / experiment.
"""

from __future__ import annotations

import time

#: Flags that map one-to-one onto CramConfig fields (None: keep the preset's value).
OVERRIDES = {
    "max_steps": (int, "optimiser steps per target, all stages together"),
    "patience": (int, "a stage fails after this many steps without progress"),
    "lr": (float, "AdamW learning rate"),
    "n_start": (int, "first stage length in tokens"),
    "growth": (float, "stage length factor after each solved stage (1: fixed length)"),
    "n_max": (int, "longest target length in tokens"),
}


def add_arguments(parser) -> None:
    parser.add_argument("--model", default="toy", help="toy, smollm2-135m, a paper model, a folder or a hub id")
    parser.add_argument("--m", type=int, nargs="+", default=[1, 2, 4], help="numbers of [mem] vectors")
    parser.add_argument("--targets", type=int, default=16, help="targets per m (K)")
    parser.add_argument("--kind", choices=("random", "text"), default="random",
                        help="uniform random real tokens, or chunks of the shipped public-domain text")
    parser.add_argument("--preset", choices=("paper", "quick"), default="quick", help="optimiser preset")
    parser.add_argument("--batch-size", type=int, default=16, help="targets per forward pass (1: one at a time)")
    parser.add_argument("--seed", type=int, default=0, help="fixes the targets and the initial [mem]")
    parser.add_argument("--out", default="results/cramming", help="folder of run folders (resumable; default %(default)s)")
    parser.add_argument("--first-token", choices=("given", "predicted"), default="given",
                        help="t_1 is an input (published protocol) or must be produced by [mem]")
    parser.add_argument("--prefix", default="auto",
                        help="token before [mem]: auto (the model's default), none, or a token id")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="autocast dtype")
    parser.add_argument("--model-dtype", choices=("float32", "float64"), default="float32",
                        help="dtype of the model weights (float64 for numerical checks)")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    parser.add_argument("--progress", action="store_true", help="show a progress bar over targets")
    parser.add_argument("--export", default=None,
                        help="also write a small copy (records without [mem], config with the command, summary) here")
    for name, (kind, help_text) in OVERRIDES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=help_text)


def config_from_args(args):
    from accessibility.checks import InputError
    from accessibility.cramming import CramConfig

    prefix = args.prefix
    if prefix not in ("auto", "none"):
        if not prefix.isdigit():
            raise InputError(f"--prefix must be auto, none or a token id (an integer >= 0); got {prefix!r}")
        prefix = int(prefix)
    changes = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    return CramConfig.preset(args.preset, first_token_given=args.first_token == "given", prefix=prefix,
                             dtype=args.dtype, **changes)


def run(args) -> dict:
    import torch

    from accessibility.checks import at_least
    from accessibility.cramming import sweep
    from accessibility.law import summarize
    from accessibility.models import load_model
    from accessibility.results import RecordLog, config_hash, run_folder, write_json

    start = time.perf_counter()
    at_least("--targets", args.targets, 1, integer=True)
    at_least("--m", args.m, 1, integer=True)
    cfg = config_from_args(args)
    # The folder depends on what determines the results, not on --m, --targets or --batch-size.
    config = {"model": args.model, "model_dtype": args.model_dtype, "kind": args.kind, "seed": args.seed,
              "cram": cfg}
    folder = run_folder(args.out, "cram", config)
    lm = load_model(args.model, dtype=getattr(torch, args.model_dtype))
    caps = sweep(lm, args.kind, sorted(set(args.m)), args.targets, cfg, seed=args.seed,
                 log=RecordLog(folder / "records.jsonl"), batch_size=args.batch_size,
                 progress=args.progress, extra={"config_hash": config_hash(config)})
    out = summarize(caps, d_model=lm.info.d_model, vocab_size=lm.info.vocab_size, seed=args.seed)
    out.update(model=lm.info.name, d_model=lm.info.d_model, vocab_size=lm.info.vocab_size,
               kind=args.kind, capacities=caps, folder=str(folder),
               config_hash=config_hash(config), wall_seconds=time.perf_counter() - start)
    write_json(folder / f"summary-m{'-'.join(map(str, out['m']))}-K{args.targets}.json", out)
    if args.export:
        export(folder, args.export, out)
    return out


def export(folder, dest, summary: dict) -> None:
    """Copy this command's part of a run, small enough to commit: its records without the [mem]
    vectors, the run's config and the summary. The config's ``command`` becomes this command, which
    regenerates exactly the exported part; the one that created the run folder stays as
    ``run_command`` when it differs."""
    from pathlib import Path

    from accessibility.cramming import record_key
    from accessibility.results import RecordLog, command_line, read_json, to_json, write_json

    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    keys = {record_key(summary["kind"], m, i) for m in summary["m"] for i in range(summary["n_targets"][m])}
    lines = [to_json({k: v for k, v in r.items() if k != "mem"}, sort_keys=True)
             for r in RecordLog(folder / "records.jsonl") if r["key"] in keys]
    (dest / "records.jsonl").write_text("".join(line + "\n" for line in lines))
    meta = read_json(folder / "config.json")
    if meta["command"] != command_line():
        meta = {**meta, "command": command_line(), "run_command": meta["command"]}
    write_json(dest / "config.json", meta)
    write_json(dest / "summary.json", {k: v for k, v in summary.items() if k not in ("folder",)})
