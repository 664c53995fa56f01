"""Bound calculator: Theorem 4.5, Corollary 4.6 (slope C, fraction bound) and Corollary 4.10.

Give a width and a vocabulary (``--d-model``, ``--vocab-size``) or a model of the shipped table
(``--model pythia-1.4b``; its published r, min cos, H and experimental slopes are then used unless
overridden). Counts are printed as log10; the slope C is in tokens per prompt vector.

Examples::

    accessibility bound --d-model 2048 --vocab-size 50304 --m 4 --n 7000 --json
    accessibility bound --model qwen2.5-0.5b --precision exact-fp16
    accessibility bound --d-model 576 --vocab-size 49152 --r 30 --eps 0.01 --min-cos -0.2
"""

from __future__ import annotations

import math

from accessibility.precision import EXACT, PRECISIONS

#: Precisions offered by ``--precision`` (``absolute`` is chosen by giving ``--eps``).
CHOICES = tuple(p for p in PRECISIONS if p != "absolute")


def add_arguments(parser) -> None:
    parser.add_argument("--model", metavar="NAME", help="a model of the shipped table (case-insensitive), "
                        "e.g. pythia-160m, qwen2.5-0.5b, llama-3.2-1b, gemma-3-270m")
    parser.add_argument("--d-model", type=int, metavar="D", help="model width d")
    parser.add_argument("--vocab-size", type=int, metavar="V", help="vocabulary size |V| (rows of the unembedding)")
    parser.add_argument("--r", type=float, metavar="R", help="support radius (largest |coordinate|); "
                        "needed by --eps and exact-* precisions; relative precisions do not depend on it")
    parser.add_argument("--precision", choices=CHOICES, default=None,
                        help="fp16|bf16|fp32: relative ε = r·u (unit roundoff; default fp16); exact-*: the exact "
                        "number of float values in [-r, r]")
    parser.add_argument("--eps", type=float, metavar="EPS", help="absolute precision ε (needs --r, or --model "
                        "for its published radius)")
    parser.add_argument("--min-cos", type=float, metavar="X", help="smallest pairwise cosine: adds the cone "
                        "refinement with half-angle arccos(X)/2 (published convention)")
    parser.add_argument("--m", type=int, metavar="M", help="prompt length in vectors: adds Theorem 4.5's count "
                        "and Corollary 4.6's n* <= C·m")
    parser.add_argument("--n", type=int, metavar="N", help="output length (needs --m): adds the log10 bound on "
                        "the accessible fraction of V^n (Corollary 4.6)")
    parser.add_argument("--delta", type=float, metavar="DELTA", help="with --m: the length past which the "
                        "accessible fraction is below DELTA")


def _inputs(args) -> dict:
    """Width, vocabulary, r, min cos and the model's row, from the flags and the shipped table."""
    from accessibility import published
    from accessibility.checks import InputError

    row = published.lookup(args.model) if args.model else None
    known = lambda column: None if row is None or math.isnan(row[column]) else float(row[column])  # noqa: E731
    d = args.d_model if args.d_model is not None else (None if row is None else int(row["d_model"]))
    v = args.vocab_size if args.vocab_size is not None else (None if row is None else int(row["vocab_size"]))
    if d is None or v is None:
        raise InputError("give --d-model and --vocab-size, or --model NAME")
    if args.eps is not None and args.precision is not None:
        raise InputError("give either --eps (absolute ε) or --precision, not both")
    r = args.r if args.r is not None else known("linf_max")
    if args.eps is not None and not args.eps > 0:
        raise InputError(f"eps must be > 0, got {args.eps!r}")
    if args.eps is not None and r is None:
        raise InputError("--eps (an absolute ε) needs --r (the support radius) or a --model with a published one")
    if args.precision in EXACT and r is None:
        raise InputError(f"--precision {args.precision} counts float values in [-r, r] and needs --r")
    min_cos = args.min_cos if args.min_cos is not None else known("min_cos")
    if args.min_cos is not None and d < 2:
        raise InputError("--min-cos (the cone refinement) needs --d-model >= 2")
    if args.n is not None and args.m is None:
        raise InputError("--n needs --m (the fraction bound is for a prompt of m vectors)")
    return {"row": row, "d": d, "v": v, "r": r, "min_cos": min_cos}


def run(args) -> dict:
    from accessibility import bounds
    from accessibility.checks import at_least, in_range, positive

    x = _inputs(args)
    d, v, r, row = x["d"], x["v"], x["r"], x["row"]
    at_least("d_model", d, 1, integer=True), at_least("vocab_size", v, 2, integer=True)
    if r is not None:
        positive("r", r)
    prec = {"r": r, "precision": args.precision, "eps": args.eps}
    numerator = bounds.log_ball_count(d_model=d, **prec)
    c = bounds.slope(numerator, vocab_size=v)
    has_eps = args.precision not in EXACT and (r is not None or args.eps is not None)
    out = {"model": None if row is None else row.name, "d_model": d, "vocab_size": v,
           "precision": args.precision or ("absolute" if args.eps is not None else "fp16"), "r": r,
           "eps": bounds.resolve_eps(**prec) if has_eps else None,
           "log_levels": bounds.log_levels(**prec), "numerator": numerator,
           "log10_count_per_vector": bounds.to_log10(numerator), "slope": c}
    c_cone = None
    if x["min_cos"] is not None:
        min_cos = in_range("min_cos", x["min_cos"], -1, 1)
        log_f = bounds.log_cone_fraction(d_model=d, min_cos=min_cos)
        c_cone = bounds.slope(numerator + log_f, vocab_size=v)
        out.update(min_cos=min_cos, phi=float(bounds.cone_half_angle(min_cos)), log_cone_fraction=log_f,
                   slope_cone=c_cone)
    if row is not None:
        out.update(_published(row, numerator, out.get("log_cone_fraction"), c))
    if args.m is not None:
        m = int(at_least("m", args.m, 1, integer=True))
        out.update(m=m, log10_count=bounds.to_log10(bounds.log_count(d_model=d, m=m, **prec)),
                   n_star_bound=bounds.n_star_bound(m=m, slope=c))
        if args.delta is not None:
            out["n_delta"] = bounds.length_threshold(m=m, slope=c, vocab_size=v, delta=args.delta)
        if args.n is not None:
            n = int(at_least("n", args.n, 1, integer=True))
            out.update(n=n, log10_fraction_bound=bounds.log10_fraction_bound(n=n, m=m, slope=c, vocab_size=v))
            if c_cone is not None:
                out["log10_fraction_bound_cone"] = bounds.log10_fraction_bound(n=n, m=m, slope=c_cone, vocab_size=v)
    if args.precision not in EXACT:  # Corollary 4.10 needs a metric resolution ε
        out["log10_N_unbounded"] = bounds.log10_unbounded_threshold(d_model=d, vocab_size=v, **prec)
    return out


def _published(row, numerator, log_f, c) -> dict:
    """The model's published H and slopes, the refined slopes and the theory/experiment ratios."""
    h = row["cell_entropy"]
    out = {"cell_entropy": h, "slope_cells": numerator / h}
    if log_f is not None:
        out["slope_cone_cells"] = (numerator + log_f) / h
    for column in ("slope_pg19", "r2_pg19", "slope_random", "r2_random", "slope_table"):
        out[f"published_{column}"] = float(row[column])
    out["ratio_pg19"] = c / row["slope_pg19"]
    out["ratio_table"] = c / row["slope_table"]
    if row["flag"]:
        out["published_flag"] = row["flag"]
    return out
