"""Support of the final hidden states of a model: radii, box, angles, and the refined slopes.

Samples final-layer, post-norm, last-position hidden states of random prompts (real tokens, BOS where
the model expects it) at each prompt length, and prints the L∞/L2/L1 radii, the mean and minimum
pairwise cosine, the cone half-angles and the slopes C of Corollary 4.6 for the ball, box, cone and
ellipsoid supports (fp16-relative precision unless ``--precision``/``--eps``). Statistics are pooled
over all lengths; ``per_length`` shows how each grows with ℓ. For a model of the shipped table the
published statistics are printed next to ours.

Examples::

    accessibility geometry --model smollm2-135m --samples 256 --json
    accessibility geometry --model toy --lengths 4 16 64 --precision exact-fp16
    accessibility geometry --model pythia-160m --samples 10000 --lengths 4 64 1024 --device cuda --out results
"""

from __future__ import annotations

import time

from accessibility.precision import PRECISIONS

#: Precisions offered by ``--precision`` (``absolute`` is chosen by giving ``--eps``).
PRECISION_CHOICES = tuple(p for p in PRECISIONS if p != "absolute")
DTYPES = ("float32", "float16", "bfloat16")
#: Statistics of the published table shown next to ours (our key -> table column).
PUBLISHED_KEYS = {"r_inf": "linf_max", "r_2": "l2_max", "r_1": "l1_max", "mean_cos": "mean_cos",
                  "min_cos": "min_cos", "entropy_H": "cell_entropy"}


def add_model_arguments(parser) -> None:
    """--model, --dtype, --device, --allow-download (shared with ``accessibility cells``)."""
    parser.add_argument("--model", default="smollm2-135m", metavar="NAME",
                        help="toy, smollm2-135m (default), gemma-3-270m, a paper model (pythia-160m, "
                        "qwen2.5-0.5b, llama-3.2-1b, ...), a hub id or a local folder")
    parser.add_argument("--dtype", choices=DTYPES, default="float32", help="weights and activations")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")
    parser.add_argument("--allow-download", action="store_true", help="fetch a hub model that is not on disk")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (1 is faster on a busy machine)")


def add_sampling_arguments(parser) -> None:
    from accessibility.geometry import DEFAULT_LENGTHS

    parser.add_argument("--lengths", type=int, nargs="+", default=list(DEFAULT_LENGTHS), metavar="L",
                        help=f"prompt lengths ℓ in random tokens (default {' '.join(map(str, DEFAULT_LENGTHS))})")
    parser.add_argument("--batch-size", type=int, default=32, help="prompts per forward pass")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random prompts")
    parser.add_argument("--no-bos", action="store_true", help="never put the BOS token in front")
    parser.add_argument("--precision", choices=PRECISION_CHOICES, default="fp16",
                        help="precision convention of the bound (default fp16: ε = r·2^-11)")
    parser.add_argument("--eps", type=float, help="absolute precision ε instead of --precision")
    parser.add_argument("--out", metavar="DIR", help="write result.json into DIR/<kind>-<config hash>/ "
                        "next to config.json (the config, the command, the versions)")
    parser.add_argument("--progress", action="store_true", help="progress bars on stderr")


def add_arguments(parser) -> None:
    add_model_arguments(parser)
    parser.add_argument("--samples", type=int, default=256, help="random prompts per length (default 256)")
    add_sampling_arguments(parser)


def load_from_args(args):
    import torch

    from accessibility.models import load_model

    return load_model(args.model, dtype=getattr(torch, args.dtype), device=args.device,
                      allow_download=args.allow_download)


def geometry_config(args, samples: int):
    """The :class:`~accessibility.geometry.GeometryConfig` of the sampling flags, ``samples`` per length."""
    from accessibility.geometry import GeometryConfig

    return GeometryConfig(lengths=tuple(args.lengths), samples=samples, batch_size=args.batch_size,
                          seed=args.seed, add_bos=not args.no_bos)


def precision_of(args) -> dict:
    return {"precision": "absolute", "eps": args.eps} if args.eps is not None else {"precision": args.precision}


def published_row(name: str) -> dict | None:
    """Published support statistics of a model of the shipped table, or None."""
    import math

    from accessibility import published
    from accessibility.checks import InputError

    try:
        row = published.lookup(name)
    except InputError:
        return None
    return {ours: (None if math.isnan(row[col]) else float(row[col])) for ours, col in PUBLISHED_KEYS.items()}


def save(args, kind: str, config: dict, result: dict) -> dict:
    """With ``--out``, write result.json into the run folder and add its path to the result."""
    if args.out:
        from accessibility.results import run_folder, write_json

        folder = run_folder(args.out, kind, config)
        result["results_folder"] = str(write_json(folder / "result.json", result).parent)
    return result


def run(args) -> dict:
    from accessibility import geometry

    start = time.perf_counter()
    loaded = load_from_args(args)
    config = geometry_config(args, args.samples)
    measured = geometry.measure_geometry(loaded, config, progress=args.progress)
    pooled = measured.pooled
    slopes = geometry.refined_slopes(pooled, vocab_size=loaded.info.vocab_size, **precision_of(args))
    info = loaded.info
    result = {
        "model": info.name, "d_model": info.d_model, "vocab_size": info.vocab_size,
        "n_real_tokens": info.n_real_tokens, "quantization": info.quantization,
        "bos_token_id": info.bos_token_id, "samples": args.samples, "lengths": list(config.lengths),
        **{k: v for k, v in pooled.summary().items() if k not in ("length", "samples")},
        "precision": slopes.precision, "eps": args.eps,
        "slope_ball": slopes.ball, "slope_box": slopes.box, "slope_cone": slopes.cone,
        "slope_cone_published": slopes.cone_published, "slope_ellipsoid": slopes.ellipsoid,
        "numerators": slopes.numerators,
        "per_length": [s.summary() for s in measured.per_length],
        "published": published_row(info.name),
        "seconds": time.perf_counter() - start,
    }
    run_config = {"model": info.name, "dtype": args.dtype, "geometry": config, **precision_of(args)}
    return save(args, "geometry", run_config, result)
