"""What the commands share, defined once: the flags for the model, the precision convention, the
sampling of hidden states and the saved run, the checks of flags before any work, and the layout of
text output.

The flag vocabulary:

* ``--model NAME``, ``--dtype`` (dtype of the model's **weights**), ``--device``, ``--allow-download``;
* ``--precision`` / ``--eps`` / ``--r``: one precision convention of :mod:`accessibility.precision`.
  ``--eps`` gives an absolute ε and excludes ``--precision`` (giving both is the same one-line error
  in every command); neither means the fp16 relative convention. ``--r`` is the support radius, for
  the commands that do not measure it;
* ``--save DIR`` (the run folder, default ``results/<command>/<config hash>``), ``--threads``,
  ``--progress``; ``--json`` is added to every command by :mod:`accessibility.cli`.

Defaults come from the config dataclasses, never retyped here. A config checks its own fields in
``__post_init__``; built inside :func:`as_flags`, its errors name the flag the user typed instead of
the field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import contextmanager
from pathlib import Path

from accessibility.checks import InputError, at_least

#: Weight dtypes of ``--dtype`` (names of torch dtypes).
DTYPES = ("float32", "float64", "float16", "bfloat16")
#: The one message for ``--precision`` together with ``--eps``.
BOTH_PRECISIONS = "give either --eps (an absolute ε) or --precision, not both"


# --- flags ---------------------------------------------------------------------------------------


def add_model_arguments(parser, default: str) -> None:
    """--model, --dtype (weights), --device, --allow-download."""
    parser.add_argument("--model", default=default, metavar="NAME",
                        help=f"toy, smollm2-135m, gemma-3-270m (and its variants gemma-3-270m-random, "
                        f"gemma-3-270m-dithered[-DRAW]), a paper model (pythia-160m, qwen2.5-0.5b, "
                        f"llama-3.2-1b, ...), a hub id or a local folder (default {default})")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="dtype of the model weights "
                        "(default %(default)s)")
    add_device_argument(parser)
    parser.add_argument("--allow-download", action="store_true", help="fetch a hub model that is not on disk")


def add_device_argument(parser) -> None:
    """--device."""
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:N, mps (default "
                        "%(default)s; under torchrun, cuda is each rank's LOCAL_RANK GPU)")


def add_precision_arguments(parser, *, radius: bool) -> None:
    """--precision, --eps and, for commands that do not measure the support, --r."""
    from accessibility.precision import ABSOLUTE, DEFAULT_PRECISION, EXACT, PRECISIONS

    parser.add_argument("--precision", choices=[p for p in PRECISIONS if p != ABSOLUTE], default=None,
                        help=f"precision convention of the bound: relative ε = r·u (u the unit roundoff; "
                        f"default {DEFAULT_PRECISION}) or {'/'.join(EXACT)}, the exact number of float "
                        f"values in [-r, r]")
    parser.add_argument("--eps", type=float, metavar="EPS",
                        help="absolute precision ε (same unit as the hidden states' coordinates) instead of "
                        "--precision")
    if radius:
        parser.add_argument("--r", type=float, metavar="R", help="support radius, the largest |coordinate| "
                            "of the hidden states; needed by --eps and the exact-* precisions, irrelevant "
                            "for relative ones")


def add_save_argument(parser, *, default: str = "results/<command>/<config hash>",
                      resumes: str | None = None, records: bool = False) -> None:
    """--save DIR, the run folder; ``resumes``: what the same command run again resumes from;
    ``records``: whether the command keeps a record log (records.jsonl) there."""
    again = f"; running the same command again resumes from {resumes}" if resumes else ""
    files = "config.json, records.jsonl and summary.json" if records else "config.json and summary.json"
    parser.add_argument("--save", metavar="DIR", help=f"run folder for {files} (default {default}){again}")


def add_run_arguments(parser, *, resumes: str | None = None, records: bool = False) -> None:
    """--save, --threads, --progress; ``resumes``: what the same command run again resumes from
    (None: it starts over); ``records``: whether it keeps a record log."""
    add_save_argument(parser, resumes=resumes, records=records)
    parser.set_defaults(_resumable=resumes is not None)
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads while the command runs, "
                        ">= 1 (default torch's; 1 is often fastest on a busy machine)")
    parser.add_argument("--progress", action="store_true", help="progress bars on stderr")


def add_sampling_arguments(parser) -> None:
    """--lengths, --batch-size, --seed, --no-bos: the random prompts of :mod:`accessibility.geometry`."""
    from accessibility.geometry import GeometryConfig

    default = GeometryConfig()
    parser.add_argument("--lengths", type=int, nargs="+", default=list(default.lengths), metavar="L",
                        help="prompt lengths ℓ in random tokens "
                        f"(default {' '.join(map(str, default.lengths))})")
    parser.add_argument("--batch-size", type=int, default=default.batch_size,
                        help="prompts per forward pass (default %(default)s)")
    parser.add_argument("--seed", type=int, default=default.seed, help="seed of the random prompts, an "
                        "integer in [0, 2^63)")
    parser.add_argument("--no-bos", action="store_true", help="never put the BOS token in front")


# --- reading the flags ---------------------------------------------------------------------------


def precision_of(args) -> dict:
    """``{"precision", "eps"}`` (and ``"r"`` where the command has ``--r``) for :mod:`accessibility.bounds`,
    the precision named: ``absolute`` with ``--eps``, else ``--precision`` or the default.

    >>> from types import SimpleNamespace as A
    >>> precision_of(A(precision=None, eps=0.5, r=2.0)), precision_of(A(precision=None, eps=None))
    ({'precision': 'absolute', 'eps': 0.5, 'r': 2.0}, {'precision': 'fp16', 'eps': None})
    >>> precision_of(A(precision="bf16", eps=0.5))
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: give either --eps (an absolute ε) or --precision, not both
    """
    from accessibility.checks import positive
    from accessibility.precision import ABSOLUTE, DEFAULT_PRECISION

    if args.precision is not None and args.eps is not None:
        raise InputError(BOTH_PRECISIONS)
    if args.eps is not None:
        positive("--eps", args.eps)
    name = ABSOLUTE if args.eps is not None else args.precision or DEFAULT_PRECISION
    spec = {"precision": name, "eps": args.eps}
    if hasattr(args, "r"):
        if args.r is not None:
            positive("--r", args.r)
        spec["r"] = args.r
    return spec


def needs_radius(spec: dict) -> None:
    """Refuse --eps or an exact-* precision without --r (in commands that do not measure r)."""
    from accessibility.precision import EXACT

    if spec.get("r") is None and (spec["eps"] is not None or spec["precision"] in EXACT):
        flag = "--eps (an absolute ε)" if spec["eps"] is not None else f"--precision {spec['precision']}"
        raise InputError(f"{flag} needs --r (the support radius)")


def device_of(args) -> str:
    """--device; ``cuda`` under several processes (``torchrun``) is the GPU of the rank's ``LOCAL_RANK``."""
    import os

    if args.device == "cuda" and "LOCAL_RANK" in os.environ:
        return f"cuda:{int(os.environ['LOCAL_RANK'])}"
    return args.device


def load_model(args):
    """The model of --model/--dtype/--device/--allow-download (checked by :func:`check_model`)."""
    import torch

    from accessibility.models import load_model as load

    return load(args.model, dtype=getattr(torch, args.dtype), device=device_of(args),
                allow_download=args.allow_download)


def geometry_config(args, samples: int, samples_flag: str = "--samples"):
    """The :class:`~accessibility.geometry.GeometryConfig` of the sampling flags, ``samples`` per length
    (given by ``samples_flag``, which its errors name)."""
    from accessibility.geometry import GeometryConfig

    with as_flags({"samples": samples_flag}):
        return GeometryConfig(lengths=tuple(args.lengths), samples=samples, batch_size=args.batch_size,
                              seed=args.seed, add_bos=not args.no_bos)


#: Statistics of the published table shown next to ours (our key -> table column).
PUBLISHED_KEYS = {"r_inf": "linf_max", "r_2": "l2_max", "r_1": "l1_max", "mean_cos": "mean_cos",
                  "min_cos": "min_cos", "entropy_H": "cell_entropy"}


def published_row(name: str) -> dict | None:
    """Published support statistics of a model of the shipped table, or None."""
    from accessibility import published
    from accessibility.checks import InputError

    try:
        row = published.lookup(name)
    except InputError:
        return None
    return {ours: (None if math.isnan(row[col]) else float(row[col])) for ours, col in PUBLISHED_KEYS.items()}


# --- checks before any work ----------------------------------------------------------------------


def flag(field: str) -> str:
    """The flag of a config field: ``batch_size`` -> ``--batch-size``."""
    return "--" + field.replace("_", "-")


@contextmanager
def as_flags(names: Mapping[str, str] | None = None):
    """Re-raise an :class:`InputError` of the block that names a config field (``batch_size``) naming
    the flag the user typed instead: ``names[field]``, else :func:`flag` of it.

    >>> from accessibility.cells import CellsConfig
    >>> with as_flags({"batch_size": "--chunk"}):
    ...     CellsConfig(batch_size=0)
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: --chunk must be an integer >= 1, got 0
    """
    try:
        yield
    except InputError as err:
        if err.name is None or err.name.startswith("-"):
            raise
        typed = (names or {}).get(err.name, flag(err.name))
        raise InputError(str(err).replace(err.name, typed, 1), typed) from None


def count(name: str, value) -> None:
    """A whole number >= 1 (or every one of a list)."""
    at_least(name, value, 1, integer=True)


def check_flags(args, rules: Mapping[str, Callable]) -> None:
    """Check flags by a table ``{flag: rule}``; ``rule(flag, value)`` raises (see :mod:`accessibility.checks`)
    and is skipped where the flag holds None (not given, no default)."""
    for name, rule in rules.items():
        value = getattr(args, name.removeprefix("--").replace("-", "_"))
        if value is not None:
            rule(name, value)


def check_device(args):
    """--threads, --device and, where the command has it, --dtype: the torch device."""
    from accessibility.models import check_device as device_check
    from accessibility.models import cpu_has_native_bf16

    check_flags(args, {"--threads": count})
    device = device_check(device_of(args), "--device")
    if getattr(args, "dtype", None) == "bfloat16" and device.type == "cpu" and not cpu_has_native_bf16():
        raise InputError("--dtype bfloat16 needs a CPU with native bf16 (AVX512-BF16 or AMX); this one "
                         "emulates it, hundreds of times slower: use float32, or a GPU (--device cuda)")
    return device


def check_model(args, name: str | None = None, flag_name: str = "--model"):
    """:func:`check_device`, then the :class:`~accessibility.models.ModelFacts` of ``name`` (default
    --model) read without loading its weights; a model that cannot be loaded is refused here."""
    from accessibility.models import ModelUnavailableError, model_facts

    check_device(args)
    name = args.model if name is None else name
    try:
        return model_facts(name, allow_download=args.allow_download)
    except ModelUnavailableError as err:
        raise InputError(f"{flag_name} {name}: {err}", flag_name) from None


def check_lengths(args, facts) -> None:
    """--lengths within the model's context window (the BOS token, where the model has one, is checked
    once the model has loaded, before any work)."""
    longest = max(args.lengths)
    if facts.context_length is not None and longest > facts.context_length:
        raise InputError(f"--lengths {longest} exceeds the context window of {args.model} "
                         f"({facts.context_length} tokens)", "--lengths")


def check_folder(args, kind: str, config) -> Path:
    """The run folder, --save or ``results/<kind>/<config hash>``: new and creatable, empty, or this
    very run (:func:`accessibility.results.check_run_folder`)."""
    from accessibility.results import check_run_folder, default_folder

    return check_run_folder(args.save or default_folder(kind, config), kind, config, "--save")


# --- the saved run -------------------------------------------------------------------------------


def start_run(folder, kind: str, config) -> Path:
    """Create the run folder with its config.json (for a command that appends records while it runs)."""
    from accessibility.results import save_run

    return save_run(folder, {"kind": kind, "config": config})


def save(folder, kind: str, config, result: dict) -> dict:
    """Save ``result`` as the summary of the run; add ``folder`` to the result."""
    from accessibility.results import save_run

    save_run(folder, {"kind": kind, "config": config}, summary=result)
    return {**result, "folder": str(folder)}


# --- text output ---------------------------------------------------------------------------------


def number(value, digits: int = 4) -> str:
    """A value for a table: ``digits`` significant digits for floats, ``-`` for None or NaN (unknown).

    >>> number(3.14159), number(12345.678), number(None), number(7), number(math.inf), number(math.nan)
    ('3.142', '1.235e+04', '-', '7', 'inf', '-')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}g}"
    return str(value)


#: Values longer than this (paths, notes) are not padded: the unit column aligns on the others.
VALUE_WIDTH = 12


def aligned(rows) -> str:
    """``label  value  unit`` lines with the values aligned; rows whose value is None are left out.

    >>> print(aligned([("slope C", 12.5, "tokens per vector"), ("m", 4, ""), ("none", None, "")]))
    slope C  12.5  tokens per vector
    m        4
    """
    rows = [(label, number(value) if not isinstance(value, str) else value, unit)
            for label, value, unit in rows if value is not None]
    width = max(len(label) for label, _, _ in rows)
    value_width = min(VALUE_WIDTH, max(len(v) for _, v, _ in rows))
    return "\n".join(f"{label:<{width}}  {v:<{value_width}}  {unit}".rstrip() for label, v, unit in rows)


def table(header, rows) -> str:
    """A plain table: a header line, then one line per row; the first column left-aligned, the others
    right-aligned.

    >>> print(table(["m", "n50"], [[1, 5.0], [2, 10.5]]))
    m   n50
    1     5
    2  10.5
    """
    cells = [list(header)] + [[number(v) if not isinstance(v, str) else v for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [[row[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
             for row in cells]
    return "\n".join("  ".join(line).rstrip() for line in lines)
