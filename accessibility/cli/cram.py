"""Cram targets into m soft-prompt vectors of a frozen model: capacities, n_50(m) and the linear law.

Each target's capacity (the longest prefix a found prompt reproduces under greedy generate) is
appended to ``records.jsonl`` in the run folder (``--save DIR``, default
``results/cram/<config hash>``) as soon as it is known; running the same command again resumes
where it stopped. Prints n_50 per m with its confidence interval and how the searches ended, the
slope of n_50 = a·m + b (and through 0) with R² and joint-bootstrap intervals, the Corollary 4.6
slope C for the same model at the chosen precision (default fp16 relative) and the ratio
theory / experiment.

Examples::

    accessibility cram --model toy --m 1 2 4 8 --json
    accessibility cram --model smollm2-135m --kind text --m 1 2 --targets 16 --threads 1 --save runs/text
    accessibility cram --model toy --precision exact-bf16 --r 30
"""

from __future__ import annotations

from accessibility.cli._common import (
    add_model_arguments, add_precision_arguments, add_run_arguments, aligned, load_model, needs_radius,
    number, precision_of, start_run, table,
)

#: Flags that map one-to-one onto CramConfig fields (None: keep the preset's value).
OVERRIDES = {
    "max_steps": (int, "optimiser steps per target, all stages together"),
    "patience": (int, "a stage fails after this many steps without progress"),
    "lr": (float, "AdamW learning rate"),
    "n_start": (int, "first stage length in tokens"),
    "growth": (float, "stage length factor after each solved stage (1: fixed length)"),
    "n_max": (int, "longest target length in tokens"),
}
#: Fields of a cramming record a saved run leaves out unless --keep-mem: the [mem] vectors (m × d
#: floats each, the bulk of a record).
BULKY = ("mem",)


def add_arguments(parser) -> None:
    import inspect

    from accessibility.cramming import DTYPES, CramConfig, sweep
    from accessibility.targets import KINDS

    add_model_arguments(parser, default="toy")
    batch = inspect.signature(sweep).parameters["batch_size"].default
    parser.add_argument("--m", type=int, nargs="+", default=[1, 2, 4], help="numbers of [mem] vectors")
    parser.add_argument("--targets", type=int, default=16, help="targets per m (K)")
    parser.add_argument("--kind", choices=KINDS, default=KINDS[0],
                        help="uniform random real tokens, or chunks of the shipped public-domain text")
    parser.add_argument("--preset", choices=("paper", "quick"), default="quick", help="optimiser preset")
    parser.add_argument("--batch-size", type=int, default=batch,
                        help="targets per forward pass (1: one at a time; default %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="fixes the targets and the initial [mem]")
    parser.add_argument("--first-token", choices=("given", "predicted"), default="given",
                        help="t_1 is an input (published protocol) or must be produced by [mem]")
    parser.add_argument("--prefix", default=CramConfig.prefix,
                        help="token before [mem]: auto (the model's default), none, or a token id")
    parser.add_argument("--autocast-dtype", choices=DTYPES, default=CramConfig.dtype,
                        help="autocast dtype of the optimisation (certification runs without; "
                        "default %(default)s)")
    for name, (kind, help_text) in OVERRIDES.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=help_text)
    add_precision_arguments(parser, radius=True)
    add_run_arguments(parser, resumable=True)
    parser.add_argument("--keep-mem", action="store_true",
                        help="keep each found [mem] (m × d floats) in its record (large; off keeps "
                        "runs small)")


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
                             dtype=args.autocast_dtype, **changes)


def run_config(args) -> dict:
    """What determines the records (the run folder's hash): not --m, --targets or --batch-size, so
    that a later command can add values of m or targets to the same folder."""
    return {"model": args.model, "dtype": args.dtype, "kind": args.kind, "seed": args.seed,
            "cram": config_from_args(args)}


def run(args) -> dict:
    from accessibility.checks import at_least
    from accessibility.cramming import sweep
    from accessibility.law import summarize
    from accessibility.results import RECORDS_FILE, RecordLog, config_hash, save_run

    at_least("--targets", args.targets, 1, integer=True)
    at_least("--m", args.m, 1, integer=True)
    precision = precision_of(args)
    needs_radius(precision)
    config = run_config(args)
    folder = start_run(args, "cram", config)
    lm = load_model(args)
    ms = sorted(set(args.m))
    log = RecordLog(folder / RECORDS_FILE, omit=() if args.keep_mem else BULKY, timed=True)
    caps = sweep(lm, args.kind, ms, args.targets, config["cram"], seed=args.seed, log=log,
                 batch_size=args.batch_size, progress=args.progress)
    mine = [r for r in log.records() if r["kind"] == args.kind and r["m"] in ms and r["index"] < args.targets]
    law = summarize(mine, d_model=lm.info.d_model, vocab_size=lm.info.vocab_size, seed=args.seed, **precision)
    seconds = [r.get("seconds") for r in mine]
    summary = {**law.to_json(), "model": lm.info.name, "kind": args.kind, "capacities": caps,
               "compute_seconds": None if None in seconds else sum(seconds),
               "config_hash": config_hash(config)}
    save_run(folder, {"kind": "cram", "config": config}, summary=summary)
    return {**summary, "folder": str(folder)}


def text(result: dict) -> str:
    """n_50 per m with its interval and stops, then the fits, the bound and the run."""
    ms = [str(m) for m in result["m"]]
    stops = sorted({s for m in ms for s in result["stops"][m]})
    rows = [[m, result["n50"][m], *result["n50_ci"][m], result["n_targets"][m],
             *[result["stops"][m].get(s, 0) for s in stops], result["n_censored"][m],
             "lower bound" if result["n50_lower_bound"][m] else ""] for m in ms]
    level = f"{result['confidence']:.0%}"
    header = ["m", "n50 (tokens)", f"{level} low", f"{level} high", "targets", *stops, "at n_max", ""]
    fits = [(f"slope{' through 0' if key else ''}",
             f"{number(result[f'slope{key}'])} [{', '.join(map(number, result[f'slope{key}_ci']))}]",
             f"tokens per vector, R² {number(result[f'r2{key}'])} on {result[f'n_points{key}']} values of m"
             + (f", intercept {number(result['intercept'])} tokens" if not key else ""))
            for key in ("", "_origin") if result[f"slope{key}"] is not None]
    return "\n".join([
        f"{result['model']}, {result['kind']} targets", table(header, rows), "",
        aligned([*fits,
                 ("Corollary 4.6 slope C", result["slope_theory"],
                  f"tokens per vector ({result['precision']})"),
                 ("ratio C / slope", result["ratio"], ""),
                 ("compute time", result["compute_seconds"], "s"),
                 ("saved in", result["folder"], "")])])
