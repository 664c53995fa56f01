"""Decoder cells of a model: Monte-Carlo shares, their entropy H and the refined slope.

First samples final hidden states as ``accessibility geometry`` does (``--geometry-samples`` prompts
per length) to find the region: a centred ball of the measured L2 radius, the box of measured
per-coordinate ranges (default), or the hidden states themselves (``--region hidden``: N forward
passes, slow). Then draws N points in chunks and assigns each to its argmax cell (what greedy
decoding does; default) or its Euclidean Voronoi cell (the published pipeline's choice). Prints
H = -mean ln p_v in nats, its bootstrap band, the zero-count fraction, ln N (the resolution floor), H
at N/2, N/4, ..., the published k-fold log-convolution estimate and the slope
C_cells = d ln(1 + 2r/ε) / H in tokens per prompt vector (a heuristic, not a bound).

H can exceed ln|V|, and that is no error: H = -(1/|V'|) Σ ln p_v averages over the V' cells that
received points (shares p_v > 0, summing to 1), and by Jensen's inequality that mean of -ln p_v is at
least -ln of the mean share, ln|V'|; equality holds only when every share is 1/|V'|. Unequal cells
raise H, so H >= ln|V'| always, and H > ln|V| once they outweigh the empty cells (ln|V| - ln|V'|).

The run is saved with ``--save DIR`` (default ``results/cells/<config hash>``).

Examples::

    accessibility cells --model smollm2-135m --json
    accessibility cells --model toy --region ball --assign voronoi
"""

from __future__ import annotations

import math
import time

from accessibility.cli._common import (
    add_model_arguments, add_precision_arguments, add_run_arguments, add_sampling_arguments, aligned,
    as_flags, check_flags, check_folder, check_lengths, check_model, geometry_config, load_model, number,
    precision_of, published_row, save, table,
)


def add_arguments(parser) -> None:
    from accessibility.cells import ASSIGNMENTS, REGIONS, CellsConfig
    from accessibility.geometry import GeometryConfig

    default = CellsConfig()
    add_model_arguments(parser, default="smollm2-135m")
    parser.add_argument("--samples", type=int, default=default.samples,
                        help="Monte-Carlo points N, >= 2 (default %(default)s)")
    parser.add_argument("--region", choices=REGIONS, default=default.region,
                        help="where points are drawn (default %(default)s)")
    parser.add_argument("--assign", choices=ASSIGNMENTS, default=default.assign,
                        help="cell type (default %(default)s)")
    parser.add_argument("--geometry-samples", type=int, default=GeometryConfig().samples,
                        help="random prompts per length to measure the region (default %(default)s)")
    parser.add_argument("--chunk", type=int, default=default.batch_size,
                        help="Monte-Carlo points per matrix multiply (default %(default)s)")
    parser.add_argument("--top", type=int, default=10, help="list the TOP largest cells, >= 0")
    add_sampling_arguments(parser)
    add_precision_arguments(parser, radius=False)
    add_run_arguments(parser)


def run_config(args) -> dict:
    """What determines the result (the run folder's hash)."""
    from accessibility.cells import CellsConfig

    per_length = args.geometry_samples
    if args.region == "hidden":
        per_length = max(per_length, math.ceil(args.samples / len(args.lengths)))
    geometry = geometry_config(args, per_length, "--geometry-samples")
    with as_flags({"batch_size": "--chunk"}):
        cells = CellsConfig(samples=args.samples, region=args.region, assign=args.assign, seed=args.seed,
                            batch_size=args.chunk)
    return {"model": args.model, "dtype": args.dtype, "geometry": geometry, "cells": cells,
            **precision_of(args)}


def check(args):
    """Every flag, the model (read from its config) and the run folder, before any work: the folder."""
    from accessibility.checks import at_least

    check_flags(args, {"--top": lambda name, value: at_least(name, value, 0, integer=True)})
    config = run_config(args)
    check_lengths(args, check_model(args))
    return check_folder(args, "cells", config)


def region_for(args, loaded, config):
    """The region of ``--region`` and the pooled support statistics it came from. Pairwise cosines
    (O(n²·d), never shown by this command) are not computed."""
    from accessibility import cells, geometry

    measured = geometry.measure_geometry(loaded, config, progress=args.progress, cosines=False)
    stats = measured.pooled
    if args.region == "ball":
        return cells.Region.ball(stats.d_model, stats.r_2), stats
    if args.region == "box":
        return cells.Region.box(stats.lows, stats.highs), stats
    import torch

    return cells.Region.hidden(torch.cat(list(measured.hidden.values()))), stats


def run(args, folder) -> dict:
    from accessibility import cells, geometry
    from accessibility.bounds import slope_bound

    start = time.perf_counter()
    config = run_config(args)
    precision = precision_of(args)
    loaded = load_model(args)
    region, stats = region_for(args, loaded, config["geometry"])
    shares = cells.estimate_cells(loaded.unembedding(), region, config["cells"],
                                  bias=loaded.unembedding_bias(), progress=args.progress)
    info = loaded.info
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
        "compute_seconds": time.perf_counter() - start,
    }
    return save(folder, "cells", config, result)


def text(result: dict) -> str:
    """H with its band and resolution, the slopes, the trend with N and the largest cells."""
    published = (result["published"] or {}).get("entropy_H")
    low, high = result["entropy_band"]
    summary = aligned([
        ("cell entropy H", result["entropy_H"],
         f"nats (band {low:.4g} to {high:.4g}; published {number(published)})"),
        ("H, k-fold convolution", result["entropy_convolution"], "nats"),
        ("ln |V|, ln real tokens", f"{result['log_vocab']:.4g}, {result['log_real_tokens']:.4g}", "nats"),
        ("ln |V'|, cells with points", math.log(result["vocab_size"] * (1 - result["zero_count_fraction"])),
         "nats: H >= ln |V'| always (Jensen; unequal shares raise H, so H may exceed ln |V|)"),
        ("ln N (resolution floor)", result["log_samples"], "nats"),
        ("zero-count fraction", result["zero_count_fraction"], ""),
        ("slope C, uniform cells", result["slope_uniform"], f"tokens per vector ({result['precision']})"),
        ("slope C, ball / H", result["slope_cells"], "tokens per vector"),
        ("slope C, box / H", result["slope_box_cells"], "tokens per vector"),
        ("slope C, cone / H", result["slope_cone_cells"], "tokens per vector"),
        ("compute time", result["compute_seconds"], "s"), ("saved in", result["folder"], "")])
    history = table(["N", "H (nats)", "zero-count fraction"],
                    [[h["samples"], h["entropy_H"], h["zero_count_fraction"]] for h in result["history"]])
    cells = [[c["token_id"], repr(c["token"]), c["share"], c["times_uniform"]] for c in result["top_cells"]]
    top = table(["token id", "token", "share", "share·|V|"], cells)
    title = (f"{result['model']}: {result['assign']} cells, N = {result['samples']} points in the "
             f"{result['region']} region")
    return "\n".join([title, summary, "", history, "", top])
