"""Cram targets into m soft-prompt vectors of a frozen model: capacities, n_50(m) and the linear law.

Each target's capacity (the longest prefix a found prompt reproduces under greedy generate) is
appended to ``records.jsonl`` in the run folder (``--save DIR``, default
``results/cram/<config hash>``) as soon as it is known, and the searches in flight are saved every
minute (``inflight.json``); running the same command again resumes where it stopped, and a later
command may add values of m or targets to the folder (a narrower one prints its own view and keeps
the wider ``summary.json``). Prints n_50 per m (tokens) with its confidence interval and how the
searches ended, the slope of n_50 = a·m + b (tokens per [mem] vector; and through 0) with R² and
joint-bootstrap intervals, the Corollary 4.6 slope C for the same model at the chosen precision
(default fp16 relative) and the ratio theory / experiment.

Examples::

    accessibility cram --model toy --m 1 2 4 8 --json
    accessibility cram --model smollm2-135m --kind text --m 1 2 --targets 16 --threads 1 --save runs/text
    accessibility cram --model toy --m 2 --protocol published --n-grid 2:20
    accessibility cram --model toy --m 1 --protocol published --n-from runs/toy --save runs/toy-check
    accessibility cram --model toy --precision exact-bf16 --r 30
"""

from __future__ import annotations

from accessibility.cli._common import (
    add_model_arguments, add_precision_arguments, add_run_arguments, aligned, as_flags, check_flags,
    check_folder, check_model, count, device_of, load_model, needs_radius, number, precision_of, start_run,
    table,
)
from accessibility.results import SUMMARY_FILE

#: Flags that map one-to-one onto CramConfig fields (None: keep the preset's value): type, help.
OVERRIDES = {
    "max_steps": (int, "optimiser steps per probe (one fixed-length run)"),
    "patience": (int, "a probe fails after this many optimiser steps without a better accuracy"),
    "lr": (float, "AdamW learning rate"),
    "n_start": (int, "first probe length in tokens (search)"),
    "growth": (float, "probe length factor while every probe succeeds (search)"),
    "n_max": (int, "longest probe length in tokens; a target that solves it is censored there (search)"),
    "init_scale": (float, "[mem] starts as N(0, 1) times this times the std of the input embeddings the "
                   "model feeds itself (the published init is the std of the raw embedding matrix: "
                   "1/sqrt(d) of it on Gemma, whose embedding module multiplies by sqrt(d))"),
}
#: Fields of a cramming record a saved run leaves out unless --keep-mem: the [mem] vectors (m × d
#: floats each, the bulk of a record).
BULKY = ("mem",)
#: The cost model of ``--protocol published`` when each run has the process to itself.
PUBLISHED_COST = "one fixed-length run at a time (published)"
#: Flags that hold no config field, checked first: flag -> rule(flag, value) of accessibility.checks.
FLAG_RULES = {"--m": count, "--targets": count, "--batch-size": count}
#: Flags that only one protocol reads (the published protocol runs fixed lengths, CramConfig.fixed).
PROTOCOL_FLAGS = {"search": ("--n-start", "--growth", "--n-max", "--cold-start"),
                  "published": ("--n-grid", "--n-from")}
#: Target kinds a model without a tokenizer cannot make.
TOKENIZER_KINDS = ("random-words", "text")


def add_arguments(parser) -> None:
    import inspect

    from accessibility.cramming import AUTOCAST_DTYPES, PREFIX_POSITIONS, PROTOCOLS, CramConfig, sweep
    from accessibility.targets import ALIASES, KINDS

    add_model_arguments(parser, default="toy")
    batch = inspect.signature(sweep).parameters["batch_size"].default
    quick, paper = CramConfig.quick(), CramConfig.paper()
    parser.add_argument("--m", type=int, nargs="+", default=[1, 2, 4], help="numbers of [mem] vectors")
    parser.add_argument("--targets", type=int, default=16, help="targets per m (K)")
    parser.add_argument("--kind", choices=KINDS + tuple(ALIASES), default=KINDS[0],
                        help="random-tokens (uniform real tokens), random-words (uniform English words; "
                        "needs a tokenizer) or text (chunks of the shipped public-domain text; needs a "
                        "tokenizer); 'random' is a deprecated alias")
    parser.add_argument("--protocol", choices=PROTOCOLS, default=PROTOCOLS[0],
                        help="search: each target's capacity by growth then bisection; published: "
                        "one fixed-length run per target and n, n_50 the logistic midpoint")
    parser.add_argument("--n-grid", metavar="A:B[:STEP]",
                        help="with --protocol published: the lengths n = A, A+STEP, ..., B in tokens "
                        "(default: the authors' adaptive scan, 10..1000 by 100, then by 10)")
    parser.add_argument("--n-from", metavar="RUN",
                        help="with --protocol published: one fixed-length run per target at its certified "
                        "capacity + 1 in the saved search run RUN (a folder or a shipped run name) of the "
                        "same model, kind of target and seed; targets censored at its n_max are left out")
    parser.add_argument("--preset", choices=("paper", "quick"), default="quick", help="optimiser preset")
    parser.add_argument("--batch-size", type=int, default=batch,
                        help="targets per forward pass (1: one at a time)")
    parser.add_argument("--seed", type=int, default=0, help="fixes the targets and (unless --init-seed) "
                        "the initial [mem]; an integer in [0, 2^63)")
    parser.add_argument("--init-seed", type=int, default=None,
                        help="fixes the initial [mem] alone (default: --seed): the same targets from other "
                        "starts; an integer in [0, 2^63)")
    parser.add_argument("--first-token", choices=("given", "predicted"), default="given",
                        help="t_1 is an input (published protocol) or must be produced by [mem]")
    parser.add_argument("--prefix", default=CramConfig.prefix,
                        help="token next to [mem]: auto (the tokenizer's BOS, else the model's documented "
                        "choice, else none), none, or a token id below |V|")
    parser.add_argument("--prefix-position", choices=PREFIX_POSITIONS, default=CramConfig.prefix_position,
                        help="the prefix token before [mem] or after it (the published BOS layout)")
    parser.add_argument("--cold-start", action="store_true",
                        help="start every probe from the target's initial [mem] (default: from the [mem] "
                        "that solved the longest shorter length; search)")
    parser.add_argument("--autocast-dtype", choices=AUTOCAST_DTYPES, default=CramConfig.autocast_dtype,
                        help="autocast dtype of the optimisation (certification runs without; auto: "
                        "bfloat16 on a CUDA device that supports it, else float32; float16: the published "
                        "fp16 autocast without a gradient scaler, emulated on a CPU)")
    for name, (kind, help_text) in OVERRIDES.items():
        defaults = f" (default: the preset's, quick {getattr(quick, name):g}, paper {getattr(paper, name):g})"
        parser.add_argument(f"--{name.replace('_', '-')}", type=kind, default=None, help=help_text + defaults)
    add_precision_arguments(parser, radius=True)
    add_run_arguments(parser, resumes="its records and the searches in flight", records=True)
    parser.add_argument("--keep-mem", action="store_true",
                        help="keep each found [mem] (m × d floats) in its record (large; off keeps "
                        "runs small)")


def parse_grid(text: str) -> list[int]:
    """``A:B[:STEP]`` -> [A, A+STEP, ..., <= B] (STEP 1 by default); each n >= 2.

    >>> parse_grid("10:40:10"), parse_grid("3:5")
    ([10, 20, 30, 40], [3, 4, 5])
    >>> parse_grid("9:3")
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: --n-grid 9:3 is empty: A:B[:STEP] needs 2 <= A <= B and STEP >= 1
    """
    from accessibility.checks import InputError

    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError:
        parts = []
    if len(parts) not in (2, 3):
        raise InputError(f"--n-grid must be A:B or A:B:STEP with integers; got {text!r}")
    a, b, step = (*parts, 1)[:3]
    if not (2 <= a <= b and step >= 1):
        raise InputError(f"--n-grid {text} is empty: A:B[:STEP] needs 2 <= A <= B and STEP >= 1")
    return list(range(a, b + 1, step))


def config_from_args(args):
    """The :class:`~accessibility.cramming.CramConfig` of the flags; its errors name the flags."""
    from accessibility.checks import InputError
    from accessibility.cramming import CramConfig

    prefix = args.prefix
    if prefix not in ("auto", "none"):
        if not prefix.isdigit():
            raise InputError(f"--prefix must be auto, none or a token id (an integer >= 0); got {prefix!r}")
        prefix = int(prefix)
    changes = {k: getattr(args, k) for k in OVERRIDES if getattr(args, k) is not None}
    with as_flags({"warm_start": "--cold-start", "first_token_given": "--first-token"}):
        return CramConfig.preset(args.preset, first_token_given=args.first_token == "given", prefix=prefix,
                                 prefix_position=args.prefix_position, warm_start=not args.cold_start,
                                 autocast_dtype=args.autocast_dtype, **changes)


def run_config(args) -> dict:
    """What determines the records (the run folder's hash): not --m, --targets, --batch-size or the
    grid, so that a later command can add values of m, targets or lengths to the same folder."""
    from accessibility.checks import seed
    from accessibility.targets import target_kind

    config = {"model": args.model, "dtype": args.dtype, "kind": target_kind(args.kind),
              "seed": seed("--seed", args.seed), "protocol": args.protocol, "cram": config_from_args(args)}
    if args.init_seed is not None and seed("--init-seed", args.init_seed) != args.seed:
        config["init_seed"] = args.init_seed   # absent by default: the runs before the flag keep their hash
    return config


def check(args):
    """Every flag and combination, the model (read from its config) and the run folder, before any
    work: the folder. The flags no config holds are checked by :data:`FLAG_RULES`, the config's by
    itself, then the combinations, the model and the folder."""
    check_flags(args, FLAG_RULES)
    _check_protocol(args)
    config = run_config(args)
    needs_radius(precision_of(args))
    _check_model(args, config, check_model(args))
    if args.n_from:
        own_lengths(args, config)
    return check_folder(args, "cram", config)


def own_lengths(args, config: dict) -> dict[int, dict[int, int]]:
    """{m: {target: capacity + 1}} from the search run of ``--n-from``, which must be a finished search
    of the same model, kind of target and seed (its targets are then these targets)."""
    from accessibility.checks import InputError
    from accessibility.cramming import lengths_after
    from accessibility.results import load_run

    try:
        run = load_run(args.n_from)
    except InputError as err:
        raise InputError(f"--n-from: {err}", "--n-from") from None
    theirs = run.config["config"]
    if run.config["kind"] != "cram" or theirs.get("protocol") != "search":
        raise InputError(f"--n-from {args.n_from} is not a saved cram search run", "--n-from")
    for key in ("model", "kind", "seed"):
        if theirs.get(key) != config[key]:
            raise InputError(f"--n-from {args.n_from} crammed {key} {theirs.get(key)!r}; this run has "
                             f"{config[key]!r}", "--n-from")
    lengths = lengths_after(run.records, sorted(set(args.m)), args.targets)
    if not any(lengths.values()):
        raise InputError(f"--n-from {args.n_from} has no capacity below its n_max at m = "
                         f"{' '.join(map(str, sorted(set(args.m))))} for the first {args.targets} targets",
                         "--n-from")
    return lengths


def _check_protocol(args) -> None:
    """Flags of the other protocol, a grid that parses, and a split adaptive scan (refused)."""
    import os

    from accessibility.checks import InputError
    from accessibility.cramming import PROTOCOLS, shard_from_env

    (other,) = set(PROTOCOLS) - {args.protocol}
    given = [f for f in PROTOCOL_FLAGS[other] if getattr(args, f[2:].replace("-", "_")) not in (None, False)]
    if given:
        raise InputError(f"{given[0]} applies to --protocol {other} only; this is --protocol {args.protocol}",
                         given[0])
    if args.n_grid:
        parse_grid(args.n_grid)
    if args.n_grid and args.n_from:
        raise InputError("give either --n-grid or --n-from, not both", "--n-from")
    _, world = shard_from_env()
    if args.protocol == "published" and not args.n_grid and world > 1:
        raise InputError(f"--protocol published without --n-grid (the adaptive scan) needs every target's "
                         f"result; give --n-grid to split it across WORLD_SIZE={os.environ['WORLD_SIZE']} "
                         "processes", "--n-grid")


def _check_model(args, config: dict, facts) -> None:
    """The combinations of flags and model: targets it can make, a prefix among its tokens, an
    autocast its device runs."""
    import torch

    from accessibility.checks import InputError
    from accessibility.cramming import resolve_autocast

    if config["kind"] in TOKENIZER_KINDS and not facts.tokenizer:
        raise InputError(f"--kind {args.kind} needs a tokenizer; --model {args.model} has none "
                         "(use random-tokens)", "--kind")
    prefix = config["cram"].prefix
    if isinstance(prefix, int) and prefix >= facts.vocab_size:
        raise InputError(f"--prefix {prefix} is not a token of {args.model}: ids run from 0 to "
                         f"{facts.vocab_size - 1}", "--prefix")
    with as_flags():
        resolve_autocast(config["cram"].autocast_dtype, torch.device(device_of(args)))


def run(args, folder) -> dict:
    from accessibility.cramming import shard_from_env, sweep, target_length
    from accessibility.results import Inflight, RecordLog, config_hash, read_records, records_file
    from accessibility.targets import make_targets

    precision = precision_of(args)
    grid = parse_grid(args.n_grid) if args.n_grid else None
    config = run_config(args)
    lengths = own_lengths(args, config) if args.n_from else None
    if lengths is not None:
        grid = sorted({n for per in lengths.values() for n in per.values()})
    kind = config["kind"]
    shard = shard_from_env()
    lm = load_model(args)
    # the targets can be made (text: enough of it) before the folder is
    make_targets(lm, kind, args.targets, target_length(config["cram"], args.protocol, grid), seed=args.seed)
    start_run(folder, "cram", config)
    ms = sorted(set(args.m))
    log = RecordLog(records_file(folder, *shard), omit=() if args.keep_mem else BULKY, timed=True)
    # every rank's records so far: this rank's log and the others' (a run split across processes),
    # and the searches that were in flight when an earlier command stopped
    records = sweep(lm, kind, ms, args.targets, config["cram"], protocol=args.protocol, grid=grid,
                    seed=args.seed, log=log, known=read_records(folder), batch_size=args.batch_size,
                    progress=args.progress, shard=shard, inflight=Inflight(folder, *shard, log=log),
                    lengths=lengths, init_seed=config.get("init_seed"))
    if args.protocol == "search":
        records = current_records(folder, kind, ms, args.targets)
    if lengths is not None:
        summary = summarize_own_lengths(records, ms, args.targets, args.n_from, lengths)
    else:
        summary = summarize_protocol(args.protocol, records, lm.info, ms, args.targets, seed=args.seed,
                                     grid=grid, batch_size=args.batch_size, config=config["cram"],
                                     **precision)
    seconds = [r.get("seconds") for r in records]
    summary.update(model=lm.info.name, kind=kind, protocol=args.protocol,
                   compute_seconds=None if None in seconds else sum(seconds), config_hash=config_hash(config))
    return {**summary, **_save_summary(folder, config, summary), "folder": str(folder)}


def current_records(folder, kind: str, ms, count: int) -> list[dict]:
    """The search records of targets 0..count-1 at each m as the folder's logs hold them now, in the
    order of a sweep. A rank of a split sweep began from the other ranks' records as they were then,
    and those ranks may have extended theirs since (confirmations), so its summary reads them again."""
    from accessibility.cramming import record_key
    from accessibility.results import read_records

    found = {r["key"]: r for r in read_records(folder)}
    return [found[k] for m in ms for i in range(count) if (k := record_key(kind, m, i)) in found]


def _save_summary(folder, config: dict, summary: dict) -> dict:
    """Write the summary of a finished run, unless the folder's summary reports more (a wider
    request); then say it was kept. Nothing for a rank of a split sweep that has not seen every target
    done (rank 0 may end before the others; one process over all the logs then writes it). It covers
    every rank, so it names none (each rank's record log is named by its rank)."""
    from accessibility.results import read_json, save_run

    path = folder / SUMMARY_FILE
    saved = read_json(path) if path.is_file() else None
    if not complete(summary):
        return {}
    if saved is not None and not covers(summary, saved):
        ms = " ".join(map(str, saved["m"]))
        return {"summary_kept": f"{SUMMARY_FILE} kept: it reports more (m = {ms}, {saved.get('targets')} "
                                "targets) than this request"}
    save_run(folder, {"kind": "cram", "config": config}, summary=summary)
    return {}


def complete(result: dict) -> bool:
    """Whether a summary covers every target at every m (a rank of a split sweep may not)."""
    return all(n == result["targets"] for n in result["targets_done"].values())


def covers(new: dict, old: dict) -> bool:
    """Whether summary ``new`` reports all that ``old`` does: every m of ``old``, at least as many
    targets and (published protocol) every length of its grid.

    >>> covers({"m": [1, 2], "targets": 4}, {"m": [1], "targets": 4}), covers({"m": [1], "targets": 2},
    ...                                                                     {"m": [1, 2], "targets": 4})
    (True, False)
    """
    grid, old_grid = new.get("grid"), old.get("grid")
    lists = isinstance(grid, list) and isinstance(old_grid, list)
    wider = grid == old_grid or (lists and set(old_grid) <= set(grid))
    return set(old["m"]) <= set(new["m"]) and new["targets"] >= old.get("targets", 0) and wider


def summarize_protocol(protocol: str, records, info, ms, count: int, *, seed: int, grid, batch_size: int,
                       config=None, **precision) -> dict:
    """The summary of one protocol's records: the search's :class:`~accessibility.law.CramSummary`
    (with each target's capacity; ``config``, the search's CramConfig, flags undecided capacities),
    or the published protocol's :class:`~accessibility.law.PointsSummary` (with the grid and the cost
    model), as JSON; both say how many targets per m are complete (a sweep split across processes is
    complete once every rank has run; a search target once its record is decided, not one that a sweep
    would still extend, as another rank may be doing)."""
    from accessibility.cramming import capacities_by_m, points_by_m, search_decided
    from accessibility.law import summarize, summarize_points

    model = {"d_model": info.d_model, "vocab_size": info.vocab_size, **precision}
    finished = lambda r: protocol != "search" or config is None or search_decided(r, config)
    done = {"targets_done": {str(m): len({r["index"] for r in records if r["m"] == m and finished(r)})
                             for m in ms},
            "targets": count}
    if protocol == "search":
        law = summarize(records, seed=seed, config=config, **model)
        return {**law.to_json(), "capacities": capacities_by_m(records), **done}
    cost = PUBLISHED_COST if batch_size == 1 else \
        f"batched ({batch_size} runs per forward pass): not the published cost model"
    return {**summarize_points(points_by_m(records), **model).to_json(), **done, "grid": grid or "adaptive",
            "cost_model": cost}


def summarize_own_lengths(records, ms, count: int, source: str, lengths) -> dict:
    """The summary of fixed-length runs at each target's own length (``--n-from``): per m, how many
    runs there were and how many succeeded, with the Wilson interval of the share."""
    from accessibility.law import solved

    table = solved(records, by=("m",)).set_index("m")
    per_m = {str(m): {k: table.loc[m, k].item() for k in ("solved", "runs", "low", "high", "steps / run")}
             for m in ms if m in table.index}
    done = {str(m): len({r["index"] for r in records if r["m"] == m}) for m in ms}
    return {"m": list(ms), "n_from": source, "solved_at_own_length": per_m,
            "targets_done": {str(m): done[str(m)] + count - len(lengths.get(m, {})) for m in ms},
            "targets": count, "grid": f"capacity + 1 in {source}"}


def text(result: dict) -> str:
    """n_50 per m with its interval and stops (search) or the accessibility points (published), then
    the fits, the bound and the run."""
    ms = [str(m) for m in result["m"]]
    head = f"{result['model']}, {result['kind']} targets, protocol {result['protocol']}"
    if "n_from" in result:
        share = result["solved_at_own_length"]
        keys = ("solved", "runs", "low", "high", "steps / run")
        rows = [[m, *(share[m][k] for k in keys)] for m in ms if m in share]
        return "\n".join([f"{head}, one run per target at its capacity + 1 in {result['n_from']}",
                           table(["m", "solved", "runs", "95% low", "95% high", "steps / run"], rows), "",
                           aligned([("compute time", result["compute_seconds"], "s"),
                                    ("saved in", result["folder"], "")])])
    if result["protocol"] == "search":
        stops = sorted({s for m in ms for s in result["stops"][m]})
        rows = [[m, result["n50"][m], *result["n50_ci"][m], result["n50_logistic"][m], result["n_targets"][m],
                 *[result["stops"][m].get(s, 0) for s in stops], result["n_censored"][m],
                 "lower bound" if result["n50_lower_bound"][m] else ""] for m in ms]
        level = f"{result['confidence']:.0%}"
        header = ["m", "n50 (tokens)", f"{level} low", f"{level} high", "logistic", "targets", *stops,
                  "at n_max", ""]
    else:
        rows = [[m, result["n50"].get(m), result["targets_done"][m],
                 " ".join(f"{n}:{a:.2f}" for n, a in result["accessibility"].get(m, {}).items())] for m in ms]
        header = ["m", "n50 (tokens, logistic)", "targets", "accessibility at n (n:fraction)"]
    fits = [(f"slope{' through 0' if key else ''}",
             number(result[f"slope{key}"]) + (f" [{', '.join(map(number, result[f'slope{key}_ci']))}]"
                                               if result.get(f"slope{key}_ci") else ""),
             f"tokens per vector, R² {number(result[f'r2{key}'])} on {result[f'n_points{key}']} values of m"
             + (f", intercept {number(result['intercept'])} tokens" if not key else ""))
            for key in ("", "_origin") if result[f"slope{key}"] is not None]
    extra = [("cost model", result["cost_model"], "")] if "cost_model" in result else []
    done = result["targets_done"]
    if not complete(result):
        extra.append(("targets done", " ".join(f"m={m}: {done[m]}/{result['targets']}" for m in ms),
                      "partial: run the same command again (one process) to finish or merge the ranks"))
    return "\n".join([
        head, table(header, rows), "",
        aligned([*fits,
                 ("Corollary 4.6 slope C", result["slope_theory"],
                  f"tokens per vector ({result['precision']})"),
                 ("ratio C / slope", result["ratio"], ""),
                 *extra,
                 ("saved summary", result.get("summary_kept"), ""),
                 ("compute time", result["compute_seconds"], "s"),
                 ("saved in", result["folder"], "")])])
