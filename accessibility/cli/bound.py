"""Bound calculator: Theorem 4.5, Corollary 4.6 (slope C, fraction bound) and Corollary 4.10.

Give a width and a vocabulary (``--d-model``, ``--vocab-size``) or a model of the shipped table
(``--model pythia-1.4b``; its published r, r2, min cos, H and experimental slopes are then used unless
overridden, and the authors'-convention ratio is printed next to the real-config one). Counts are
printed as log10; the slope C is in tokens per prompt vector.

``slope_cone`` is the norm-consistent cone bound, proven: the smaller of the L∞ ball and the Euclidean
cone of radius r2 at the same step (r2 defaults to sqrt(d)·r, the cube's own Euclidean radius), around
the cone that the smallest pairwise cosine proves (half-angle ``phi_jung``, the spherical Jung radius).
The paper's half-angle arccos(min cos)/2 (``phi_published``) and its cone convention
(``slope_cone_published``: ball count plus the cone's volume fraction) are heuristics. ``status``
marks each bound of the output proven or heuristic; the text output marks them [P] and [H].

Examples::

    accessibility bound --d-model 2048 --vocab-size 50304 --m 4 --n 7000 --json
    accessibility bound --model qwen2.5-0.5b --precision exact-fp16
    accessibility bound --d-model 576 --vocab-size 49152 --r 30 --r2 200 --eps 0.01 --min-cos -0.2
"""

from __future__ import annotations

import math

from accessibility.cli._common import (
    add_precision_arguments, add_save_argument, aligned, as_flags, check_flags, check_folder, count,
    needs_radius, precision_of, save,
)
from accessibility.precision import EXACT

#: Columns of :func:`accessibility.published.theory_table` shown for a model of the table (their
#: theory side recomputed at this command's width, vocabulary, radius, min cos and precision).
THEORY_COLUMNS = ("slope_cells", "slope_cone_cells", "ratio_pg19", "ratio_table")
#: Published columns shown as they are, prefixed ``published_``.
PUBLISHED_COLUMNS = ("slope_pg19", "r2_pg19", "slope_random", "r2_random", "slope_table")
#: The authors' printed numbers, shown (where published) as ``published_<name without _published>``.
NOTEBOOK_COLUMNS = ("ratio_ball_published", "ratio_box_published", "slope_box_published", "theta_published")


def add_arguments(parser) -> None:
    parser.add_argument("--model", metavar="NAME", help="a model of the shipped table (case-insensitive), "
                        "e.g. pythia-160m, qwen2.5-0.5b, llama-3.2-1b, gemma-3-270m; its published r, r2 and "
                        "min cos are used unless given")
    parser.add_argument("--d-model", type=int, metavar="D", help="model width d")
    parser.add_argument("--vocab-size", type=int, metavar="V",
                        help="vocabulary size |V| (rows of the unembedding)")
    add_precision_arguments(parser, radius=True)
    parser.add_argument("--r2", type=float, metavar="R2", help="largest Euclidean norm of the support, "
                        "between r and sqrt(d)·r (with --min-cos; needs --r): the Euclidean radius of the "
                        "norm-consistent cone bound")
    parser.add_argument("--min-cos", type=float, metavar="X", help="smallest pairwise cosine: adds the "
                        "norm-consistent cone bound around the cone it proves (spherical Jung radius), and "
                        "the published cone convention at half-angle arccos(X)/2 (a heuristic)")
    parser.add_argument("--m", type=int, metavar="M", help="prompt length in vectors: adds Theorem 4.5's "
                        "count, Corollary 4.6's n* <= C·m and the bound on n_50")
    parser.add_argument("--n", type=int, metavar="N", help="output length in tokens (needs --m): adds the "
                        "log10 bound on the accessible fraction of V^n (Corollary 4.6)")
    parser.add_argument("--delta", type=float, metavar="DELTA", help="with --m: the length (tokens) past "
                        "which the accessible fraction is below DELTA, in (0, 1]")
    add_save_argument(parser, default="none: a calculation is not saved")


def check(args) -> dict:
    """Every flag and combination, and --save, before any work: width, vocabulary, radii, min cos and
    the model's row, from the flags and the shipped table."""
    from accessibility import published
    from accessibility.checks import InputError, at_least, in_range, positive
    from accessibility.precision import log_levels

    spec = precision_of(args)
    try:
        row = published.lookup(args.model) if args.model else None
    except InputError as err:
        raise InputError(f"--model {err}", "--model") from None
    for flag, value in (("--d-model", args.d_model), ("--vocab-size", args.vocab_size)):
        if row is not None and value is not None:
            raise InputError(f"give --model or {flag}, not both: the model's published statistics belong "
                             "to its own width and vocabulary")

    def known(column):
        return None if row is None or math.isnan(row[column]) else float(row[column])

    d = args.d_model if args.d_model is not None else (None if row is None else int(row["d_model"]))
    v = args.vocab_size if args.vocab_size is not None else (None if row is None else int(row["vocab_size"]))
    if d is None or v is None:
        raise InputError("give --d-model and --vocab-size, or --model NAME")
    at_least("--d-model", d, 1, integer=True), at_least("--vocab-size", v, 2, integer=True)
    check_flags(args, {"--min-cos": lambda name, x: in_range(name, x, -1, 1), "--m": count, "--n": count,
                       "--delta": lambda name, x: in_range(name, positive(name, x), 0, 1)})
    r = args.r if args.r is not None else known("linf_max")
    needs_radius({**spec, "r": r})
    if args.r2 is not None and (args.r is None or args.min_cos is None):
        raise InputError("--r2 needs --r and --min-cos (it is the Euclidean radius of the cone bound)")
    if args.r2 is not None and not args.r <= positive("--r2", args.r2) <= math.sqrt(d) * args.r:
        raise InputError(f"--r2 {args.r2:g} is impossible with --r {args.r:g}: a support whose largest "
                         f"|coordinate| is r has its largest Euclidean norm between r and sqrt(d)·r = "
                         f"{math.sqrt(d) * args.r:g}", "--r2")
    min_cos = args.min_cos if args.min_cos is not None else known("min_cos")
    if args.min_cos is not None and d < 2:
        raise InputError("--min-cos (the cone bound) needs --d-model >= 2")
    if args.min_cos is not None and args.precision in EXACT:
        raise InputError("--min-cos: the cone bound is a volume argument; use a relative precision or --eps")
    if args.n is not None and args.m is None:
        raise InputError("--n needs --m (the fraction bound is for a prompt of m vectors)")
    if args.delta is not None and args.m is None:
        raise InputError("--delta needs --m (the threshold n(delta) is for a prompt of m vectors)")
    r2 = args.r2 if args.r2 is not None else (known("l2_max") if args.r is None else None)
    with as_flags():  # an exact precision whose format cannot hold r
        log_levels(r=r, precision=args.precision, eps=args.eps)
    if args.save:
        check_folder(args, "bound", saved_flags(args))
    return {"row": row, "d": d, "v": v, "r": r, "r2": r2, "min_cos": min_cos}


def saved_flags(args) -> dict:
    """What a saved calculation is keyed by: its flags."""
    return {k: v for k, v in vars(args).items() if k not in ("command", "json", "save") and k[0] != "_"}


def _cone(d, v, numerator, r, r2, min_cos, prec) -> dict:
    """The norm-consistent cone bound and the published convention; one-line errors naming --min-cos."""
    from accessibility import bounds
    from accessibility.checks import InputError, in_range

    min_cos = in_range("min_cos", min_cos, -1, 1)
    known_r2 = r2
    r = 1.0 if r is None else r  # only for a relative precision, where the counts depend on r2/r alone
    r2 = math.sqrt(d) * r if r2 is None else r2  # the cube's own Euclidean radius: always valid
    consistent = float(bounds.log_cone_bound(d_model=d, r=r, r2=r2, min_cos=min_cos,
                                             precision=prec["precision"], eps=prec["eps"]))
    log_f = bounds.log_cone_fraction(d_model=d, min_cos=min_cos)
    if not (math.isfinite(consistent) and consistent > 0):
        raise InputError(f"--min-cos {min_cos!r}: the cone bound gives {consistent:.4g} nats, not a positive "
                         "count")
    out = {"min_cos": min_cos, "phi_jung": float(bounds.jung_half_angle(d_model=d, min_cos=min_cos)),
           "phi_published": float(bounds.cone_half_angle(min_cos)), "r2": known_r2,
           "r2_over_r": r2 / r, "log_cone_fraction": log_f, "slope_cone": consistent / math.log(v)}
    published_num = numerator + log_f
    if math.isfinite(published_num) and published_num > 0:
        return out | {"slope_cone_published": published_num / math.log(v)}
    # the heuristic adds the log of the cone's volume fraction to the ball's count; for narrow cones
    # that drives the count below one point, where it says nothing
    return out | {"slope_cone_published": None,
                  "cone_published_note": f"undefined: it gives {published_num:.4g} "
                                         "nats, not a positive count (the cone is too narrow for it)"}


def run(args, x: dict) -> dict:
    from accessibility import bounds

    d, v, r, row = x["d"], x["v"], x["r"], x["row"]
    prec = {"r": r, "precision": args.precision, "eps": args.eps}
    numerator = bounds.log_ball_count(d_model=d, **prec)
    c = bounds.slope(numerator, vocab_size=v)
    has_eps = args.precision not in EXACT and (r is not None or args.eps is not None)
    out = {"model": None if row is None else row.name, "d_model": d, "vocab_size": v,
           "precision": precision_of(args)["precision"], "r": r,
           "eps": bounds.resolve_eps(**prec) if has_eps else None,
           "log_levels": bounds.log_levels(**prec), "numerator": numerator,
           "log10_count_per_vector": bounds.to_log10(numerator), "slope": c}
    cone = None
    if x["min_cos"] is not None and args.precision not in EXACT:
        cone = _cone(d, v, numerator, r, x["r2"], x["min_cos"], prec)
        out.update(cone)
    if row is not None:
        out.update(_published(row, d, v, r, out.get("min_cos"), args.precision,
                              absolute=args.eps is not None))
    if args.m is not None:
        m = args.m
        out.update(m=m, log10_count=bounds.to_log10(bounds.log_count(d_model=d, m=m, **prec)),
                   n_star_bound=bounds.n_star_bound(m=m, slope=c),
                   n50_bound=bounds.n50_bound(m=m, slope=c, vocab_size=v))
        if args.delta is not None:
            out["n_delta"] = bounds.length_threshold(m=m, slope=c, vocab_size=v, delta=args.delta)
        if args.n is not None:
            n = args.n
            out.update(n=n, log10_fraction_bound=bounds.log10_fraction_bound(n=n, m=m, slope=c, vocab_size=v))
            if cone is not None:
                out["log10_fraction_bound_cone"] = bounds.log10_fraction_bound(
                    n=n, m=m, slope=cone["slope_cone"], vocab_size=v)
    if args.precision not in EXACT:  # Corollary 4.10 needs a metric resolution ε
        out["log10_N_unbounded"] = bounds.log10_unbounded_threshold(d_model=d, vocab_size=v, **prec)
    out["status"] = {key: status for key, status in STATUS.items() if out.get(key) is not None}
    return save(args.save, "bound", saved_flags(args), out) if args.save else out


def _published(row, d: int, v: int, r, min_cos, precision: str | None, absolute: bool) -> dict:
    """The model's published H and slopes, :func:`accessibility.published.theory_table`'s heuristic
    slopes and ratios for its row with this command's d, |V|, r and min cos, and the authors'-convention
    ratio (fp16 relative, their |V|) next to their printed numbers. The table's conventions are relative
    and exact precisions: with an ``absolute`` ε its theory columns are None."""
    import pandas as pd

    from accessibility.published import theory_table

    out = {"cell_entropy": float(row["cell_entropy"]),
           **{f"published_{c}": float(row[c]) for c in PUBLISHED_COLUMNS}}
    authors = theory_table().loc[row.name]  # the authors' convention: independent of this command's flags
    out.update(vocab_size_authors=float(row["vocab_size_authors"]),
               slope_authors=float(authors["slope_authors"]),
               ratio_table_authors=float(authors["ratio_authors"]))
    out.update({f"published_{c.removesuffix('_published')}": float(row[c]) for c in NOTEBOOK_COLUMNS
                if not math.isnan(row[c])})
    if row["flag"]:
        out["published_flag"] = row["flag"]
    columns = THEORY_COLUMNS if min_cos is not None else tuple(c for c in THEORY_COLUMNS if "cone" not in c)
    if absolute:
        return out | dict.fromkeys(columns)
    mine = row.copy()
    mine[["d_model", "vocab_size", "linf_max", "min_cos"]] = [d, v, math.nan if r is None else r,
                                                              math.nan if min_cos is None else min_cos]
    theory = theory_table(precision=precision, table=pd.DataFrame([mine])).iloc[0]
    return out | {c: float(theory[c]) for c in columns}


#: Each bound and cone of the output: proven (under its stated hypotheses) or heuristic. The JSON output
#: carries this as ``status``; the text output marks the rows [P] and [H].
STATUS = {"slope": "proven", "phi_jung": "proven", "slope_cone": "proven", "n_star_bound": "proven",
          "n50_bound": "proven", "n_delta": "proven", "log10_fraction_bound": "proven",
          "log10_fraction_bound_cone": "proven", "log10_N_unbounded": "proven",
          "phi_published": "heuristic", "slope_cone_published": "heuristic", "slope_cells": "heuristic",
          "slope_cone_cells": "heuristic"}

#: The text output: (key, label, unit), in order; keys a run does not have are left out.
TEXT_ROWS = (
    ("model", "model", ""), ("d_model", "width d", ""), ("vocab_size", "vocabulary |V|", "tokens"),
    ("precision", "precision", ""), ("r", "support radius r", ""), ("eps", "ε", "(per coordinate)"),
    ("log_levels", "ln levels per coordinate", "nats"),
    ("log10_count_per_vector", "count per vector", "log10"),
    ("slope", "slope C (Corollary 4.6)", "tokens per vector"), ("min_cos", "min cos", ""),
    ("phi_jung", "cone half-angle, spherical Jung", "rad"),
    ("phi_published", "cone half-angle arccos(min cos)/2", "rad"),
    ("r2", "Euclidean radius r2", ""), ("r2_over_r", "r2 / r", ""),
    ("slope_cone", "slope C, cone bound", "tokens per vector"),
    ("slope_cone_published", "published cone convention", "tokens per vector"),
    ("cone_published_note", "published cone convention", ""),
    ("m", "m", "vectors"), ("log10_count", "accessible sequences (Theorem 4.5)", "log10"),
    ("n_star_bound", "n* <= C·m", "tokens"), ("n50_bound", "n_50 <= C·m + ln 2/ln|V|", "tokens"),
    ("n_delta", "n past which the fraction < δ", "tokens"),
    ("n", "n", "tokens"), ("log10_fraction_bound", "accessible fraction of V^n", "log10"),
    ("log10_fraction_bound_cone", "accessible fraction, cone bound", "log10"),
    ("log10_N_unbounded", "N unbounded (Corollary 4.10)", "log10 tokens"),
    ("cell_entropy", "published cell entropy H", "nats"),
    ("slope_cells", "slope C / H (cells)", "tokens per vector"),
    ("slope_cone_cells", "published cone / H", "tokens per vector"),
    ("published_slope_pg19", "published slope, PG-19", "tokens per vector"),
    ("published_slope_random", "published slope, random", "tokens per vector"),
    ("published_slope_table", "published slope, table", "tokens per vector"),
    ("ratio_pg19", "ratio C / PG-19 slope", ""), ("ratio_table", "ratio C / table slope", ""),
    ("vocab_size_authors", "authors' |V|", "tokens"),
    ("slope_authors", "slope C, authors' convention", "tokens per vector"),
    ("ratio_table_authors", "ratio, authors' convention", ""),
    ("published_ratio_ball", "published ratio, ball", ""),
    ("published_ratio_box", "published ratio, box", ""),
    ("published_slope_box", "published slope, box", "tokens per vector"),
    ("published_theta", "published largest angle θ", "rad"),
    ("published_flag", "published flag", ""), ("folder", "saved in", ""),
)


#: Marks of the text output, and the line that explains them.
MARKS = {"proven": "[P]", "heuristic": "[H]"}
LEGEND = ("[P] / [H]", "proven under the stated hypotheses / heuristic, not a bound", "")


def text(result: dict) -> str:
    """The inputs, then each bound with its unit, marked [P] (proven) or [H] (heuristic)."""
    status = {**STATUS, "cone_published_note": "heuristic"}
    rows = [(f"{label} {MARKS[status[key]]}" if key in status else label, result.get(key), unit)
            for key, label, unit in TEXT_ROWS]
    return aligned(rows + [LEGEND])
