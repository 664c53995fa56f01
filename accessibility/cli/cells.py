"""Decoder cells of a model: Monte-Carlo shares, their entropy H and the refined slope.

First samples final hidden states as ``accessibility geometry`` does (``--geometry-samples`` prompts
per length) to find the region: a centred ball of the measured L2 radius, the box of measured
per-coordinate ranges (default), or the hidden states themselves (``--region hidden``: N forward
passes, slow). Then draws N points in chunks and assigns each to its argmax cell (what greedy
decoding does; default) or its Euclidean Voronoi cell (the published pipeline's choice). Prints
H = -mean ln p_v, its bootstrap band, the zero-count fraction, ln N (the resolution floor), H at
N/2, N/4, ..., the published k-fold log-convolution estimate and the slope C_cells = d ln(1 + 2r/ε) / H.

Examples::

    accessibility cells --model smollm2-135m --samples 100000 --json
    accessibility cells --model toy --region ball --assign voronoi
"""

from __future__ import annotations

import math
import time

from accessibility.cli.geometry import (
    add_model_arguments, add_sampling_arguments, geometry_config, load_from_args, precision_of, published_row,
    save,
)

#: Default Monte-Carlo points: about 100 s of argmax assignment on SmolLM2-135M (about 1000 points/s on
#: two CPU cores, benchmarks/cells_throughput.py), after a minute of geometry sampling.
DEFAULT_SAMPLES = 100_000


def add_arguments(parser) -> None:
    from accessibility.cells import ASSIGNMENTS, REGIONS

    add_model_arguments(parser)
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES, help="Monte-Carlo points N")
    parser.add_argument("--region", choices=REGIONS, default="box", help="where points are drawn (default box)")
    parser.add_argument("--assign", choices=ASSIGNMENTS, default="argmax", help="cell type (default argmax)")
    parser.add_argument("--geometry-samples", type=int, default=256, help="prompts per length to measure the region")
    parser.add_argument("--chunk", type=int, default=None, help="points per matrix multiply")
    parser.add_argument("--top", type=int, default=10, help="list the TOP largest cells")
    add_sampling_arguments(parser)


def region_for(args, loaded):
    """The region of ``--region`` and the pooled support statistics it came from."""
    from accessibility import cells, geometry

    per_length = args.geometry_samples
    if args.region == "hidden":
        per_length = max(per_length, math.ceil(args.samples / len(args.lengths)))
    config = geometry_config(args, per_length)
    measured = geometry.measure_geometry(loaded, config, progress=args.progress)
    stats = measured.pooled
    if args.region == "ball":
        return cells.Region.ball(stats.d_model, stats.r_2), stats, config
    if args.region == "box":
        return cells.Region.box(stats.lows, stats.highs), stats, config
    import torch

    return cells.Region.hidden(torch.cat(list(measured.hidden.values()))), stats, config


def run(args) -> dict:
    from accessibility import cells, geometry
    from accessibility.bounds import slope_bound

    start = time.perf_counter()
    loaded = load_from_args(args)
    region, stats, geo_config = region_for(args, loaded)
    config = cells.CellsConfig(samples=args.samples, region=args.region, assign=args.assign, seed=args.seed,
                               batch_size=args.chunk or cells.DEFAULT_BATCH)
    shares = cells.estimate_cells(loaded.unembedding(), region, config, bias=loaded.unembedding_bias(),
                                  progress=args.progress)
    info = loaded.info
    precision = precision_of(args)
    refined = geometry.refined_slopes(stats, vocab_size=info.vocab_size, entropy=shares.entropy, **precision)
    uniform = float(slope_bound(d_model=info.d_model, vocab_size=info.vocab_size, r=stats.r_inf, **precision))
    top = cells.top_cells(shares.shares, loaded.tokenizer, args.top)
    result = {
        "model": info.name, "d_model": info.d_model, **shares.summary(),
        "entropy_convolution": cells.convolution_entropy(shares.shares).entropy,
        "log_real_tokens": math.log(info.n_real_tokens),
        "r_inf": stats.r_inf, "precision": refined.precision, "eps": args.eps,
        "slope_uniform": uniform, "slope_cells": refined.ball, "slope_box_cells": refined.box,
        "slope_cone_cells": refined.cone,
        "top_cells": top.to_dict(orient="records"),
        "published": published_row(info.name),
        "seconds": time.perf_counter() - start,
    }
    run_config = {"model": info.name, "dtype": args.dtype, "geometry": geo_config, "cells": config,
                  **precision}
    return save(args, "cells", run_config, result)
