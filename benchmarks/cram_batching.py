"""Benchmark: the same cramming targets one at a time (``batch_size=1``, the published cost model)
and batched (many targets per forward pass, continuous batching), timed in one run.

    python benchmarks/cram_batching.py [--model toy] [--m 4] [--targets 32] [--batch-size 32]

Prints one JSON object: both wall times, their ratio, how many per-target outcomes (capacity,
snapshot step, steps run, stop reason) are identical and the largest difference between the found
[mem] vectors. On one CPU thread in float32 a batch computes each row's loss and gradient bitwise
as a one-at-a-time run does (see :mod:`accessibility.cramming`), so every outcome should be identical
and the [mem] difference 0; with more threads, or in float64, they agree up to rounding.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

from accessibility.cramming import CramConfig, cram
from accessibility.models import load_model
from accessibility.targets import make_targets


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="toy")
    p.add_argument("--m", type=int, default=4)
    p.add_argument("--targets", type=int, default=32)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--preset", default="quick", choices=("quick", "paper"))
    p.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="model weights")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    lm = load_model(args.model, dtype=getattr(torch, args.dtype))
    config = CramConfig.preset(args.preset)
    targets = make_targets(lm, "random-tokens", args.targets, config.n_max, seed=args.seed)
    run = lambda b: cram(lm, targets, args.m, config, seed=args.seed, batch_size=b)
    single, t_single = timed(lambda: run(1))
    batched, t_batched = timed(lambda: run(args.batch_size))
    key = lambda r: (r.capacity, r.steps, r.stop, r.probes)
    same = [key(a) == key(b) for a, b in zip(single, batched)]
    return {
        "model": args.model, "dtype": args.dtype, "m": args.m, "targets": args.targets,
        "batch_size": args.batch_size, "threads": args.threads,
        "seconds_one_at_a_time": t_single, "seconds_batched": t_batched, "speedup": t_single / t_batched,
        "identical_outcomes": int(sum(same)), "max_abs_mem_difference":
            float(max(np.abs(a.mem - b.mem).max() for a, b in zip(single, batched))),
        "all_certified": all(r.certificate["ok"] for r in single + batched),
        "median_capacity_one_at_a_time": float(np.median([r.capacity for r in single])),
        "median_capacity_batched": float(np.median([r.capacity for r in batched])),
        "mean_abs_capacity_difference": float(np.mean([abs(a.capacity - b.capacity)
                                                       for a, b in zip(single, batched)])),
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
