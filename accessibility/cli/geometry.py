"""Support of the final hidden states of a model: radii, box, angles, and the refined slopes.

Samples final-layer, post-norm, last-position hidden states of random prompts (real tokens, BOS where
the model expects it) at each prompt length, and prints the L∞/L2/L1 radii, the mean and minimum
pairwise cosine, the cone half-angles (radians) and the slopes C of Corollary 4.6 (tokens per prompt
vector) for the ball, box, cone and ellipsoid supports (fp16-relative precision unless
``--precision``/``--eps``); radii are in the units of the hidden states. Statistics are pooled
over all lengths; ``per_length`` shows how each grows with ℓ and ``sample_size_trend`` how the slopes
move on nested halves of the samples; ``support`` keeps the pooled per-coordinate arrays (box lows and
highs, the ellipsoid's semi-axes and half-widths), from which ``SupportStats.from_summary`` gives
the slopes again for any precision convention. For a model of the shipped table the published statistics are
printed next to ours. When every post-norm L2 norm is c·√d for one c (the fingerprint of an untrained
final norm) a ``warning`` line says so; ``norm_fingerprint`` holds the test either way. The run is
saved with ``--save DIR`` (default ``results/geometry/<config hash>``).

Examples::

    accessibility geometry --model smollm2-135m --json
    accessibility geometry --model toy --lengths 4 16 64 --precision exact-fp16
    accessibility geometry --model pythia-160m --samples 10000 --lengths 4 64 1024 --device cuda
"""

from __future__ import annotations

import time
import warnings

from accessibility.cli._common import (
    add_model_arguments, add_precision_arguments, add_run_arguments, add_sampling_arguments, aligned,
    check_folder, check_lengths, check_model, geometry_config, load_model, precision_of, published_row, save,
    table,
)

#: Statistics of the text output: (key, label, unit).
SHOWN = (("r_inf", "r_inf (largest |coordinate|)", ""), ("r_2", "r_2", ""), ("r_1", "r_1", ""),
         ("mean_cos", "mean cosine", ""), ("min_cos", "min cosine", ""),
         ("cone_angle", "enclosing cone half-angle", "rad"), ("ellipsoid_rank", "ellipsoid rank", ""))
SLOPES = ("ball", "box", "cone", "cone_published", "ellipsoid")


def add_arguments(parser) -> None:
    from accessibility.geometry import GeometryConfig

    add_model_arguments(parser, default="smollm2-135m")
    parser.add_argument("--samples", type=int, default=GeometryConfig().samples,
                        help="random prompts per length (default %(default)s)")
    add_sampling_arguments(parser)
    add_precision_arguments(parser, radius=False)
    add_run_arguments(parser)


def run_config(args) -> dict:
    """What determines the result (the run folder's hash)."""
    return {"model": args.model, "dtype": args.dtype, "geometry": geometry_config(args, args.samples),
            **precision_of(args)}


def check(args):
    """Every flag, the model (read from its config) and the run folder, before any work: the folder."""
    config = run_config(args)
    check_lengths(args, check_model(args))
    return check_folder(args, "geometry", config)


def run(args, folder) -> dict:
    from accessibility import geometry

    start = time.perf_counter()
    config = run_config(args)
    loaded = load_model(args)
    with warnings.catch_warnings():  # reported once, as the result's warning line
        warnings.simplefilter("ignore", geometry.UntrainedNormWarning)
        measured = geometry.measure_geometry(loaded, config["geometry"], progress=args.progress)
    pooled = measured.pooled
    fingerprint = pooled.norm_fingerprint()
    trend = geometry.sample_size_trend(measured, **precision_of(args))
    slopes = geometry.refined_slopes(pooled, vocab_size=loaded.info.vocab_size, **precision_of(args))
    info = loaded.info
    result = {
        **({"warning": fingerprint.message(info.name)} if fingerprint.detected else {}),
        "model": info.name, "d_model": info.d_model, "vocab_size": info.vocab_size,
        "n_real_tokens": info.n_real_tokens, "quantization": info.quantization,
        "bos_token_id": info.bos_token_id, "samples": args.samples,
        "lengths": list(config["geometry"].lengths),
        **{k: v for k, v in pooled.summary().items() if k not in ("length", "samples")},
        "precision": slopes.precision, "eps": args.eps,
        **{f"slope_{s}": getattr(slopes, s) for s in SLOPES},
        "numerators": slopes.numerators,
        "norm_fingerprint": {k: v for k, v in vars(fingerprint).items() if k != "d_model"},
        "support": pooled.arrays(),
        "per_length": [s.summary() for s in measured.per_length],
        "sample_size_trend": trend.reset_index().to_dict("records"),
        "published": published_row(info.name),
        "compute_seconds": time.perf_counter() - start,
    }
    return save(folder, "geometry", config, result)


def text(result: dict) -> str:
    """The pooled support next to the published one, the slopes, the growth with ℓ and with the samples.

    A first ``warning:`` line when the samples show the untrained-norm fingerprint.
    """
    published = result["published"] or {}
    rows = [[label, result[key], published.get(key), unit] for key, label, unit in SHOWN]
    support = table(["support (pooled)", "measured", "published", "unit"], rows)
    per_length = table(["ℓ (tokens)", "r_inf", "r_2", "min cos", "mean cos"],
                       [[s["length"], s["r_inf"], s["r_2"], s["min_cos"], s["mean_cos"]]
                        for s in result["per_length"]])
    slopes = aligned([(f"slope C, {s.replace('_', ' ')}", result[f"slope_{s}"], "tokens per vector")
                      for s in SLOPES] + [("precision", result["precision"], ""), ("ε", result["eps"], "")])
    trend = table(["pooled samples", "C box", "C cone", "C ellipsoid", "min cos"],
                  [[t["pooled_samples"], t["box"], t["cone"], t["ellipsoid"], t["min_cos"]]
                   for t in result["sample_size_trend"]])
    warning = [f"warning: {result['warning']}"] if "warning" in result else []
    return "\n".join([*warning, f"{result['model']}: d = {result['d_model']}, |V| = {result['vocab_size']}, "
                      f"{result['samples']} prompts per length", support, "", per_length, "", slopes, "",
                      trend, "",
                      aligned([("compute time", result["compute_seconds"], "s"),
                               ("saved in", result["folder"], "")])])
