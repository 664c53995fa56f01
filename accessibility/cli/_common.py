"""What the commands share, defined once: the flags for the model, the precision convention, the
sampling of hidden states and the saved run, and the layout of text output.

The flag vocabulary:

* ``--model NAME``, ``--dtype`` (dtype of the model's **weights**), ``--device``, ``--allow-download``;
* ``--precision`` / ``--eps`` / ``--r``: one precision convention of :mod:`accessibility.precision`.
  ``--eps`` gives an absolute ε and excludes ``--precision`` (giving both is the same one-line error
  in every command); neither means the fp16 relative convention. ``--r`` is the support radius, for
  the commands that do not measure it;
* ``--save DIR`` (the run folder, default ``results/<command>/<config hash>``), ``--threads``,
  ``--progress``; ``--json`` is added to every command by :mod:`accessibility.cli`.

Defaults come from the config dataclasses, never retyped here.
"""

from __future__ import annotations

import math

#: Weight dtypes of ``--dtype`` (names of torch dtypes).
DTYPES = ("float32", "float64", "float16", "bfloat16")
#: The one message for ``--precision`` together with ``--eps``.
BOTH_PRECISIONS = "give either --eps (an absolute ε) or --precision, not both"


# --- flags ---------------------------------------------------------------------------------------


def add_model_arguments(parser, default: str) -> None:
    """--model, --dtype (weights), --device, --allow-download."""
    parser.add_argument("--model", default=default, metavar="NAME",
                        help=f"toy, smollm2-135m, gemma-3-270m, a paper model (pythia-160m, qwen2.5-0.5b, "
                        f"llama-3.2-1b, ...), a hub id or a local folder (default {default})")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="dtype of the model weights "
                        "(default %(default)s)")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda (default %(default)s)")
    parser.add_argument("--allow-download", action="store_true", help="fetch a hub model that is not on disk")


def add_precision_arguments(parser, *, radius: bool) -> None:
    """--precision, --eps and, for commands that do not measure the support, --r."""
    from accessibility.precision import ABSOLUTE, DEFAULT_PRECISION, EXACT, PRECISIONS

    parser.add_argument("--precision", choices=[p for p in PRECISIONS if p != ABSOLUTE], default=None,
                        help=f"precision convention of the bound: relative ε = r·u (u the unit roundoff; "
                        f"default {DEFAULT_PRECISION}) or {'/'.join(EXACT)}, the exact number of float "
                        f"values in [-r, r]")
    parser.add_argument("--eps", type=float, metavar="EPS",
                        help="absolute precision ε instead of --precision")
    if radius:
        parser.add_argument("--r", type=float, metavar="R", help="support radius (largest |coordinate|); "
                            "needed by --eps and the exact-* precisions, irrelevant for relative ones")


def add_save_argument(parser, *, default: str = "results/<command>/<config hash>",
                      resumable: bool = False) -> None:
    """--save DIR, the run folder."""
    again = "; running the same command again resumes from its records" if resumable else ""
    parser.add_argument("--save", metavar="DIR", help="run folder for config.json, records.jsonl and "
                        f"summary.json (default {default}){again}")


def add_run_arguments(parser, *, resumable: bool = False) -> None:
    """--save, --threads, --progress."""
    add_save_argument(parser, resumable=resumable)
    parser.add_argument("--threads", type=int, metavar="N", help="torch CPU threads while the command runs "
                        "(default torch's; 1 is often fastest on a busy machine)")
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
    parser.add_argument("--seed", type=int, default=default.seed, help="seed of the random prompts")
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
    from accessibility.checks import InputError, positive
    from accessibility.precision import ABSOLUTE, DEFAULT_PRECISION

    if args.precision is not None and args.eps is not None:
        raise InputError(BOTH_PRECISIONS)
    if args.eps is not None:
        positive("eps", args.eps)
    name = ABSOLUTE if args.eps is not None else args.precision or DEFAULT_PRECISION
    spec = {"precision": name, "eps": args.eps}
    if hasattr(args, "r"):
        if args.r is not None:
            positive("r", args.r)
        spec["r"] = args.r
    return spec


def needs_radius(spec: dict) -> None:
    """Refuse --eps or an exact-* precision without --r (in commands that do not measure r)."""
    from accessibility.checks import InputError
    from accessibility.precision import EXACT

    if spec.get("r") is None and (spec["eps"] is not None or spec["precision"] in EXACT):
        flag = "--eps (an absolute ε)" if spec["eps"] is not None else f"--precision {spec['precision']}"
        raise InputError(f"{flag} needs --r (the support radius)")


def load_model(args):
    """The model of --model/--dtype/--device/--allow-download; with ``--device cuda`` and several
    processes (``torchrun``), each takes the GPU of its ``LOCAL_RANK``."""
    import os

    import torch

    from accessibility.checks import InputError
    from accessibility.models import cpu_has_native_bf16
    from accessibility.models import load_model as load

    device = args.device
    if device == "cuda" and "LOCAL_RANK" in os.environ:
        device = f"cuda:{int(os.environ['LOCAL_RANK'])}"
    if args.dtype == "bfloat16" and torch.device(device).type == "cpu" and not cpu_has_native_bf16():
        raise InputError("--dtype bfloat16 needs a CPU with native bf16 (AVX512-BF16 or AMX); this one "
                         "emulates it, hundreds of times slower: use float32, or a GPU (--device cuda)")
    return load(args.model, dtype=getattr(torch, args.dtype), device=device,
                allow_download=args.allow_download)


def geometry_config(args, samples: int):
    """The :class:`~accessibility.geometry.GeometryConfig` of the sampling flags, ``samples`` per length."""
    from accessibility.geometry import GeometryConfig

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


# --- the saved run -------------------------------------------------------------------------------


def start_run(args, kind: str, config):
    """--save, or ``results/<kind>/<config hash>``; created with its config.json (a folder holding
    another config is refused)."""
    from accessibility.results import default_folder, save_run

    return save_run(args.save or default_folder(kind, config), {"kind": kind, "config": config})


def save(args, kind: str, config, result: dict, records=()) -> dict:
    """Save ``result`` as the summary of the run (and ``records``); add ``folder`` to the result."""
    from accessibility.results import default_folder, save_run

    folder = args.save or default_folder(kind, config)
    save_run(folder, {"kind": kind, "config": config}, records, result)
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
