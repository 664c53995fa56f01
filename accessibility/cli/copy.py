"""Train a model to copy strings and measure where copying breaks.

Trains (or loads from the package cache, ``accessibility.cache_dir()/copying``) one copy model of the
chosen architecture on string lengths in --train-lengths until it meets the stopping rule (every
check, --stop-strings fresh strings of the maximum training length copied exactly, at --stop-checks
consecutive checks) or spends --max-steps, evaluates exact-match string accuracy and character
accuracy at --eval-lengths and at every length across the fall, and reports copy_n50, the length
where string accuracy crosses 50%, with its interval. Flags left out take the preset's values;
--preset quick runs on a CPU in minutes, --preset paper is the published Pythia-160m fine-tuning
(a GPU and the model on disk, or --allow-download). The run (config, command, summary with the
training log and the full evaluation) is saved with ``--save DIR`` (default
``results/copy/<config hash>``); the same command again reuses the cached model, or resumes an
interrupted training from its last check.

Lengths ℓ are in characters (symbols of the copy task), at most 2046 (copying.MAX_LENGTH), so that an
example (BOS, ℓ symbols, separator, the copy, EOS) fits a model's 4096 positions.

Examples:

    accessibility copy --arch rope --preset quick --json
    accessibility copy --arch lstm --max-steps 2000 --eval-lengths 10 20 40 --save runs/lstm
    accessibility copy --preset paper --device cuda --allow-download
"""

from __future__ import annotations

import argparse

from accessibility.cli._common import (
    add_device_argument, add_run_arguments, aligned, as_flags, check_device, check_folder, check_model, flag,
    number, save, table,
)

#: Flags named after (and overriding) fields of CopyConfig, then of its CopyModelConfig, with their help.
CONFIG_FLAGS = {"train_lengths": "train on string lengths uniform in [A, B] characters",
                "eval_lengths": "string lengths to evaluate, in characters",
                "eval_strings": "strings per evaluation length", "max_steps": "training steps at most",
                "lr": "peak AdamW learning rate", "rows": "rows per training batch",
                "row_tokens": "packed tokens per training row",
                "stop_strings": "fresh strings of the maximum length drawn at each check of the stopping "
                                "rule; a check passes when all are copied exactly",
                "stop_checks": "consecutive passing checks that stop training",
                "count_eos": "exact match also requires the EOS (else the letters only, as published)",
                "seed": "seed of the initialisation and of every string, an integer in [0, 2^63)"}
MODEL_FLAGS = {"d_model": "model width", "n_layers": "transformer blocks or LSTM layers",
               "n_heads": "attention heads", "mlp_ratio": "MLP width over model width (transformers)"}
#: Config fields whose flag is not --<field>: the two ends of --train-lengths A B.
FIELD_FLAGS = {"train_lengths[0]": "--train-lengths A", "train_lengths[1]": "--train-lengths B"}
#: argparse settings of the config flags that are not one integer.
SHAPES = {"train_lengths": dict(type=int, nargs=2, metavar=("A", "B")),
          "eval_lengths": dict(type=int, nargs="+", metavar="N"), "lr": dict(type=float),
          "count_eos": dict(action="store_true", default=None)}


def _presets(field: str) -> str:
    """`` (quick preset: X; paper: Y)``: the values a flag left out takes."""
    from dataclasses import asdict

    from accessibility.copying import CopyConfig

    def shown(config):
        value = asdict(config.model if field in MODEL_FLAGS else config)[field]
        return " ".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)

    paper = "Pythia-160m's own" if field in MODEL_FLAGS else shown(CopyConfig.paper())
    return f" (quick preset: {shown(CopyConfig.quick())}; paper: {paper})"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from accessibility.copy_models import ARCHITECTURES

    parser.add_argument("--arch", choices=ARCHITECTURES, default="rope",
                        help="positional encoding of the transformer (rope, nope, alibi) or the lstm "
                        "baseline")
    parser.add_argument("--preset", choices=("quick", "paper"), default="quick",
                        help="quick: width 128, 2 layers, lengths 5..20 (CPU); paper: Pythia-160m, "
                        "lengths 5..50")
    for field, text in {**CONFIG_FLAGS, **MODEL_FLAGS}.items():
        parser.add_argument(flag(field), help=text + _presets(field), **SHAPES.get(field, {"type": int}))
    add_device_argument(parser)
    parser.add_argument("--allow-download", action="store_true", help="let --preset paper fetch Pythia-160m")
    parser.add_argument("--retrain", action="store_true", help="train again even if a cached model exists")
    add_run_arguments(parser, resumes="the cached model, or the training checkpoint of an interrupted run")


def config_from_args(args):
    """The :class:`~accessibility.copying.CopyConfig` the flags describe; its errors name the flags."""
    from dataclasses import replace

    from accessibility.checks import InputError
    from accessibility.copying import CopyConfig

    if args.preset == "paper":
        config = CopyConfig.paper(args.arch, allow_download=args.allow_download)
    else:
        config = CopyConfig.quick(args.arch)
    model_changes = {k: getattr(args, k) for k in MODEL_FLAGS if getattr(args, k) is not None}
    if model_changes and config.model.pretrained:
        raise InputError(f"{config.model.pretrained} fixes its own shape; drop "
                         f"{'/'.join(map(flag, model_changes))}", flag(next(iter(model_changes))))
    changes = {k: getattr(args, k) for k in CONFIG_FLAGS if getattr(args, k) is not None}
    if "train_lengths" in changes:
        changes["train_lengths"] = tuple(changes["train_lengths"])
        high = changes["train_lengths"][1]
        changes.setdefault("row_tokens", max(config.row_tokens, 2 * high + 3))
    if "eval_lengths" in changes:
        changes["eval_lengths"] = tuple(changes["eval_lengths"])
    with as_flags(FIELD_FLAGS):
        return replace(config, model=replace(config.model, **model_changes), **changes)


def run_config(args):
    """What determines the result (the run folder's hash): the whole CopyConfig."""
    return config_from_args(args)


def check(args):
    """Every flag, the device, the pretrained model of --preset paper (from its config) and the run
    folder, before any work: the folder."""
    config = run_config(args)
    if config.model.pretrained:
        check_model(args, config.model.pretrained, "--preset paper")
    else:
        check_device(args)
    return check_folder(args, "copy", config)


def run(args, folder) -> dict:
    import time

    from pathlib import Path

    from accessibility import cache_dir
    from accessibility.copying import run_copy, saved_summary
    from accessibility.results import config_hash

    config = run_config(args)
    start = time.perf_counter()
    result = run_copy(config, device=args.device, progress=args.progress, retrain=args.retrain)
    seconds = time.perf_counter() - start + (result.log.train_seconds if result.cached else 0.0)
    out = {"preset": args.preset, **result.summary(), "config_hash": config_hash(config.training_part()),
           "compute_seconds": seconds}
    # the cached model, relative to the package cache (no machine's path in a saved run); "folder" is the run
    out["model_cache"] = str(Path(out.pop("folder")).resolve().relative_to(cache_dir().resolve()))
    save(folder, "copy", config, saved_summary(result) | out)
    return {**out, "folder": str(folder)}


def text(result: dict) -> str:
    """Accuracy per evaluation length, then copy_n50 and the training."""
    lengths = list(result["accuracy"])
    rows = [[n, result["accuracy"][n], *result["accuracy_ci"][n], result["char_accuracy"][n]]
            for n in lengths]
    accuracy = table(["ℓ (characters)", "exact match", "95% low", "95% high", "char accuracy"], rows)
    low, high = result["copy_n50_ci"]
    fresh = result["fresh_at_max"]
    low_train, high_train = result["train_lengths"]
    return "\n".join([
        f"copy, {result['arch']}, trained on ℓ in [{low_train}, {high_train}], "
        f"{result['n_strings']} strings per length",
        accuracy, "",
        aligned([("copy_n50", result["copy_n50"], f"characters (interval {number(low)} to {number(high)})"),
                 ("training steps", result["steps"], "(stopping rule met)" if result["stopping_rule_met"]
                  else "(budget spent before the stopping rule)"),
                 ("stopping rule", result["stopping_rule"], ""),
                 ("lr at the stop", result["lr_fraction_at_stop"], "of its peak"),
                 (f"exact at ℓ = {fresh['length']}", fresh["accuracy"],
                  f"on {fresh['n_strings']} strings no check used (interval {number(fresh['ci'][0])} "
                  f"to {number(fresh['ci'][1])})"),
                 ("training time", result["train_seconds"], "s wall-clock"
                  + (", cached model" if result["cached"] else "")),
                 ("compute time", result["compute_seconds"], "s (training and evaluation)"),
                 ("saved in", result["folder"], "")])])
