"""Monte-Carlo throughput of decoder-cell assignment, as a fraction of the machine's matmul rate.

Each Monte-Carlo point costs one row of ``x @ W_U.T`` (2·|V|·d flops) plus drawing the point, an
argmax and a bincount. The limit is the rate of that matrix multiply alone, measured here on the same
shapes, before and after the Monte-Carlo run (the machine may be shared: both are reported).

    python benchmarks/cells_throughput.py                      # SmolLM2-135M, argmax, box region
    python benchmarks/cells_throughput.py --model toy --samples 200000 --json
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from accessibility import cells
from accessibility.models import load_model

#: Repetitions of the bare matmul when measuring its rate (the median is reported).
MATMUL_REPEATS = 9


def matmul_rate(W: torch.Tensor, batch: int, repeats: int = MATMUL_REPEATS) -> float:
    """Median GFLOP/s of ``x @ W.T`` for x of shape (batch, d): the ceiling of the assignment."""
    x = torch.randn(batch, W.shape[1])
    x @ W.T  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        x @ W.T
        times.append(time.perf_counter() - start)
    times.sort()
    return 2 * batch * W.shape[0] * W.shape[1] / times[len(times) // 2] / 1e9


def measure(model: str, samples: int, batch: int, assign: str, threads: int | None) -> dict:
    if threads:
        torch.set_num_threads(threads)
    loaded = load_model(model)
    W = loaded.unembedding().detach().float()  # (V, d)
    V, d = W.shape
    region = cells.Region.box(-torch.ones(d), torch.ones(d))
    config = cells.CellsConfig(samples=samples, region="box", assign=assign, batch_size=batch)
    before = matmul_rate(W, batch)
    start = time.perf_counter()
    cells.estimate_cells(W, region, config)
    seconds = time.perf_counter() - start
    after = matmul_rate(W, batch)
    per_second = samples / seconds
    achieved = per_second * 2 * V * d / 1e9
    return {"model": model, "vocab_size": V, "d_model": d, "assign": assign, "samples": samples,
            "batch": batch,
            "threads": torch.get_num_threads(), "seconds": seconds, "samples_per_second": per_second,
            "achieved_gflops": achieved, "matmul_gflops_before": before, "matmul_gflops_after": after,
            "fraction_of_matmul": achieved / max(before, after)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=cells.DEFAULT_BATCH)
    parser.add_argument("--assign", choices=cells.ASSIGNMENTS, default="argmax")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.model, args.samples, args.batch, args.assign, args.threads)
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
