"""Benchmark: one cramming step of a real model as a fraction of this machine's matrix-multiply rate.

    python benchmarks/cram_step_rate.py [--model smollm2-135m] [--rows 16] [--tokens 32] [--threads 1]

Measures the fp32 and bf16 rates of a square matrix product (``--size``), then times one
teacher-forced forward and backward pass of ``accessibility.cramming.teacher_forced`` (``--rows``
targets of ``--tokens`` tokens, one [mem] vector each), in fp32 and, where the CPU multiplies bf16
natively, under bf16 autocast. The step's floating-point operations are counted by
``torch.utils.flop_counter.FlopCounterMode`` (matrix products only), so the printed fractions are the
achieved rate of the step's matrix work over the machine's: how much of the hardware the engine uses.
"""

from __future__ import annotations

import argparse
import json
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from accessibility.cramming import teacher_forced
from accessibility.models import cpu_has_native_bf16, load_model


def best_of(fn, repeats: int) -> float:
    fn()                                              # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def matmul_rate(size: int, dtype: torch.dtype, repeats: int) -> float:
    """GFLOP/s of a (size x size) @ (size x size) product in ``dtype``."""
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    return 2 * size ** 3 / best_of(lambda: a @ b, repeats) / 1e9


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="smollm2-135m")
    p.add_argument("--rows", type=int, default=16)
    p.add_argument("--tokens", type=int, default=32)
    p.add_argument("--size", type=int, default=2048, help="side of the reference matrix product")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    native = cpu_has_native_bf16()
    # an emulated bf16 product is so slow that one repeat of a smaller one says enough
    bf16 = (matmul_rate(args.size, torch.bfloat16, args.repeats) if native
            else matmul_rate(512, torch.bfloat16, 1))
    fp32 = matmul_rate(args.size, torch.float32, args.repeats)
    out = {"model": args.model, "rows": args.rows, "tokens": args.tokens, "threads": args.threads,
           "native_bf16": native, "matmul_gflops": {"float32": fp32, "bfloat16": bf16}}
    lm = load_model(args.model)
    gen = torch.Generator().manual_seed(0)
    targets = torch.randint(0, lm.info.vocab_size, (args.rows, args.tokens), generator=gen)
    lengths = torch.full((args.rows,), args.tokens)
    mem = torch.randn(args.rows, 1, lm.info.d_model, generator=gen)

    def step(dtype: str):
        m = mem.clone().requires_grad_(True)
        loss, _, _ = teacher_forced(lm, m, targets, lengths, lm.info.prefix_token_id, 1, dtype)
        loss.sum().backward()

    with FlopCounterMode(display=False) as counter:
        step("float32")
    flops = counter.get_total_flops()
    out["step_gflop"] = flops / 1e9
    for dtype in ("float32", "bfloat16") if native else ("float32",):
        seconds = best_of(lambda dtype=dtype: step(dtype), args.repeats)
        rate = flops / seconds / 1e9
        out[f"step_seconds_{dtype}"] = seconds
        out[f"step_gflops_{dtype}"] = rate
        out[f"fraction_of_{dtype}_matmul"] = rate / out["matmul_gflops"][dtype]
    if not native:
        out["bfloat16_step"] = "not run: this CPU emulates bf16 (see matmul_gflops)"
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
