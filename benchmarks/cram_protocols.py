"""Benchmark: the capacity search against the published per-point protocol, on the same targets, in
one process.

    python benchmarks/cram_protocols.py [--model toy] [--m 1 2 4] [--targets 20] [--preset quick]

For each m, runs (1) the search (growth then bisection, each probe a fixed-length run with its own
budget and patience; warm-started probes and, with ``--cold``, cold-started ones too) and (2) the
published protocol: one fixed-length run per target and n on the authors' adaptive scan (coarse
steps while accessibility > 0.9, then fine steps until it falls below 0.1; ``--coarse``/``--fine``
scale it to the model), n_50 the logistic midpoint. The published protocol runs one target at a
time (``--published-batch-size 1``, its own cost model) unless told otherwise; the search runs
batched (``--batch-size``). Prints one JSON object per m and a total: both n_50 (the search's median
with its 95 % order-statistic interval, and its logistic midpoint under the published convention),
whether they agree (within the interval or one token), and the wall-time ratio published / search.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import numpy as np
import torch

from accessibility import law
from accessibility.cramming import CramConfig, cram, published_points
from accessibility.models import load_model
from accessibility.targets import make_targets


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def compare(lm, targets, m: int, config: CramConfig, args) -> dict:
    """Both protocols on the same targets at one m."""
    out = {"m": m}
    variants = [("search", config)]
    if args.cold:
        variants.append(("search_cold", replace(config, warm_start=False)))
    for name, cfg in variants:
        results, seconds = timed(lambda cfg=cfg: cram(lm, targets, m, cfg, seed=args.seed,
                                                      batch_size=args.batch_size))
        caps = [r.capacity for r in results]
        med = law.n50(caps)
        out[name] = {"n50": med.estimate, "n50_ci": [med.low, med.high],
                     "n50_logistic": law.survival_n50(caps), "capacities": caps,
                     "steps": int(sum(r.steps for r in results)),
                     "stops": {s: [r.stop for r in results].count(s) for s in {r.stop for r in results}},
                     "certified": all(r.certificate["ok"] for r in results), "seconds": seconds}
    scan = {"n_min": args.n_min, "coarse": args.coarse, "fine": args.fine, "n_max": config.n_max}
    points, seconds = timed(lambda: published_points(lm, targets, m, config, scan=scan, seed=args.seed,
                                                     batch_size=args.published_batch_size))
    out["published"] = {"n50": law.logistic_n50(list(points), list(points.values())),
                        "accessibility": points, "batch_size": args.published_batch_size, "seconds": seconds}
    search, pub = out["search"], out["published"]["n50"]
    low, high = search["n50_ci"]
    out["agree"] = bool(low <= pub <= high or abs(search["n50"] - pub) <= 1)
    out["time_ratio"] = out["published"]["seconds"] / search["seconds"]
    return out


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="toy")
    p.add_argument("--m", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--targets", type=int, default=20)
    p.add_argument("--kind", default="random-tokens")
    p.add_argument("--preset", default="quick", choices=("quick", "paper"))
    p.add_argument("--batch-size", type=int, default=20, help="targets per forward pass of the search")
    p.add_argument("--published-batch-size", type=int, default=1,
                   help="runs per forward pass of the published protocol (1: its own cost model)")
    p.add_argument("--cold", action="store_true", help="also run the search with cold-started probes")
    p.add_argument("--n-min", type=int, default=2, help="first n of the published scan")
    p.add_argument("--coarse", type=int, default=8, help="coarse step of the published scan (published: 100)")
    p.add_argument("--fine", type=int, default=1, help="fine step of the published scan (published: 10)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    lm = load_model(args.model)
    config = CramConfig.preset(args.preset)
    targets = make_targets(lm, args.kind, args.targets, config.n_max, seed=args.seed)
    rows = []
    for m in args.m:
        rows.append(compare(lm, targets, m, config, args))
        print(json.dumps(rows[-1]), flush=True)
    total = {k: sum(r[k]["seconds"] for r in rows) for k in ("search", "published")}
    return {"model": args.model, "kind": args.kind, "preset": args.preset, "targets": args.targets,
            "threads": args.threads, "agree_at_every_m": all(r["agree"] for r in rows),
            "seconds": total, "time_ratio": total["published"] / total["search"],
            "n50": {r["m"]: {"search": r["search"]["n50"], "search_logistic": r["search"]["n50_logistic"],
                             "published": r["published"]["n50"]} for r in rows},
            "mean_steps_per_target": {r["m"]: r["search"]["steps"] / args.targets for r in rows},
            "stops": {r["m"]: r["search"]["stops"] for r in rows}}


if __name__ == "__main__":
    result = main()
    print(json.dumps(result, indent=2, default=lambda x: float(np.asarray(x))))
