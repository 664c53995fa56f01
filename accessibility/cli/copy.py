"""Train a model to copy strings and measure where copying breaks.

Trains (or loads from the package cache, ``accessibility.cache_dir()/copying``) one copy model of the
chosen architecture on string lengths in --train-lengths, evaluates exact-match string accuracy and
character accuracy at --eval-lengths, and reports copy_n50, the length where string accuracy crosses
50%, with its interval. Flags left out take the preset's values; --preset quick runs on a CPU in
minutes, --preset paper is the published Pythia-160m fine-tuning (a GPU and the model on disk, or
--allow-download). The run (config, command, summary with the training log and the full evaluation)
is saved with ``--save DIR`` (default ``results/copy/<config hash>``); the same command again reuses
the cached model.
"""

from __future__ import annotations

import argparse

from accessibility.cli._common import add_run_arguments, aligned, number, save, table

#: The choices of --arch: ``accessibility.copy_models.ARCHITECTURES``, repeated here so that
#: ``--help`` does not import torch (a test keeps the two equal).
ARCHITECTURES = ("rope", "nope", "alibi", "lstm")
#: Flags named after (and overriding) fields of CopyConfig, then of its CopyModelConfig.
CONFIG_FLAGS = ("train_lengths", "eval_lengths", "eval_strings", "max_steps", "lr", "rows", "row_tokens",
                "stop_strings", "count_eos", "seed")
MODEL_FLAGS = ("d_model", "n_layers", "n_heads", "mlp_ratio")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--arch", choices=ARCHITECTURES, default="rope",
                        help="positional encoding of the transformer (rope, nope, alibi) or the lstm "
                        "baseline")
    parser.add_argument("--preset", choices=("quick", "paper"), default="quick",
                        help="quick: width 128, 2 layers, lengths 5..20 (CPU); paper: Pythia-160m, "
                        "lengths 5..50")
    parser.add_argument("--train-lengths", type=int, nargs=2, metavar=("A", "B"),
                        help="train on string lengths uniform in [A, B]")
    parser.add_argument("--eval-lengths", type=int, nargs="+", metavar="N", help="string lengths to evaluate")
    parser.add_argument("--eval-strings", type=int, help="strings per evaluation length")
    parser.add_argument("--max-steps", type=int, help="training steps at most")
    parser.add_argument("--lr", type=float, help="peak AdamW learning rate")
    parser.add_argument("--rows", type=int, help="rows per training batch")
    parser.add_argument("--row-tokens", type=int, help="packed tokens per training row")
    parser.add_argument("--stop-strings", type=int,
                        help="held-out strings of the maximum length that must all be copied to stop")
    parser.add_argument("--count-eos", action="store_true", default=None,
                        help="exact match also requires the EOS (default: the letters only, as published)")
    parser.add_argument("--d-model", type=int, help="model width")
    parser.add_argument("--n-layers", type=int, help="transformer blocks or LSTM layers")
    parser.add_argument("--n-heads", type=int, help="attention heads")
    parser.add_argument("--mlp-ratio", type=int, help="MLP width over model width (transformers)")
    parser.add_argument("--seed", type=int, help="seed of the initialisation and of every string")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default %(default)s)")
    parser.add_argument("--allow-download", action="store_true", help="let --preset paper fetch Pythia-160m")
    parser.add_argument("--retrain", action="store_true", help="train again even if a cached model exists")
    add_run_arguments(parser)


def config_from_args(args):
    """The :class:`~accessibility.copying.CopyConfig` the flags describe."""
    from dataclasses import replace

    from accessibility.checks import InputError
    from accessibility.copying import CopyConfig

    if args.preset == "paper":
        config = CopyConfig.paper(args.arch, allow_download=args.allow_download)
    else:
        config = CopyConfig.quick(args.arch)
    model_changes = {k: getattr(args, k) for k in MODEL_FLAGS if getattr(args, k) is not None}
    if model_changes and config.model.pretrained:
        raise InputError(f"{config.model.pretrained} fixes its own shape; drop --{'/--'.join(model_changes)}")
    changes = {k: getattr(args, k) for k in CONFIG_FLAGS if getattr(args, k) is not None}
    if "train_lengths" in changes:
        changes["train_lengths"] = tuple(changes["train_lengths"])
        high = changes["train_lengths"][1]
        changes.setdefault("row_tokens", max(config.row_tokens, 2 * high + 3))
    if "eval_lengths" in changes:
        changes["eval_lengths"] = tuple(changes["eval_lengths"])
    return replace(config, model=replace(config.model, **model_changes), **changes)


def run_config(args):
    """What determines the result (the run folder's hash): the whole CopyConfig."""
    return config_from_args(args)


def run(args) -> dict:
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
    folder = save(args, "copy", config, saved_summary(result) | out)["folder"]
    return {**out, "folder": folder}


def text(result: dict) -> str:
    """Accuracy per evaluation length, then copy_n50 and the training."""
    lengths = list(result["accuracy"])
    rows = [[n, result["accuracy"][n], *result["accuracy_ci"][n], result["char_accuracy"][n]]
            for n in lengths]
    accuracy = table(["ℓ (characters)", "exact match", "95% low", "95% high", "char accuracy"], rows)
    low, high = result["copy_n50_ci"]
    low_train, high_train = result["train_lengths"]
    return "\n".join([
        f"copy, {result['arch']}, trained on ℓ in [{low_train}, {high_train}], "
        f"{result['n_strings']} strings per length",
        accuracy, "",
        aligned([("copy_n50", result["copy_n50"], f"characters (interval {number(low)} to {number(high)})"),
                 ("training steps", result["steps"], "(stopping rule met)" if result["converged"] else
                  "(budget spent before the stopping rule)"),
                 ("training time", result["train_seconds"], "s wall-clock"
                  + (", cached model" if result["cached"] else "")),
                 ("compute time", result["compute_seconds"], "s (training and evaluation)"),
                 ("saved in", result["folder"], "")])])
