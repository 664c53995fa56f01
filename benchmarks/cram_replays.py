"""Benchmark: replay saved search records again and compare every replayed probe's steps with the
original search's and with the replay the run ships (its records' ``replays``).

    python benchmarks/cram_replays.py cram-toy-paper --m 2 --targets 0 16 --probes 3 3
    python benchmarks/cram_replays.py cram-gemma-3-270m-random-words --m 2 --targets 4 6 8 \\
        --probes 6 5 7 --batch-size 3

Each record is reopened without its [mem] and shipped replays, so its solved probes run again in
order from the target's initial [mem], as an extension of the run does (:meth:`cramming._Slots.reopen`),
with ``--batch-size`` targets per forward pass and one CPU thread. It stops once each target has
replayed ``--probes`` probes (its first solved ones). On one CPU thread in float32 the search is
deterministic and a batch is bitwise one-at-a-time (:mod:`accessibility.cramming`), so where this
code wrote a record, on the same kind of machine, every replayed probe takes the original's steps
(records of older versions replay only approximately); a shipped replay that differs from the
original while this one matches it ran elsewhere (another machine's kernels).
Prints one JSON object: per target, ``[length, original steps, shipped replay steps, steps now]`` for
each probe replayed (``None`` where the run ships no replay of it), and the machine
(:func:`accessibility.results.machine`; runs saved since record theirs in ``config.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import json

import torch

from accessibility import cramming
from accessibility.models import load_model
from accessibility.results import latest, load_run, machine
from accessibility.targets import make_targets


class _Enough(Exception):
    """Every target has replayed the probes asked for."""


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a saved search run of `accessibility cram` (a folder or a shipped name)")
    p.add_argument("--m", type=int, required=True)
    p.add_argument("--targets", type=int, nargs="+", required=True, help="target indices")
    p.add_argument("--probes", type=int, nargs="+", required=True, help="probes to replay, per target")
    p.add_argument("--batch-size", type=int, default=1)
    args = p.parse_args(argv)
    if len(args.probes) != len(args.targets):
        p.error("--probes needs one count per target")
    torch.set_num_threads(1)
    run = load_run(args.run, unfinished=True)
    spec = run.config["config"]
    config = cramming.CramConfig(**spec["cram"])
    keys = {cramming.record_key(spec["kind"], args.m, t): t for t in args.targets}
    records = {keys[r["key"]]: r.get("redone", r) for r in latest(run.records) if r["key"] in keys}
    missing = sorted(set(args.targets) - set(records))
    if missing:
        p.error(f"{args.run} has no m = {args.m} record of targets {missing}")
    reopen = {t: {k: v for k, v in r.items() if k not in ("replays", "mem")} for t, r in records.items()}
    want = dict(zip(args.targets, args.probes))
    lm = load_model(spec["model"], dtype=getattr(torch, spec["dtype"]))
    targets = torch.cat([make_targets(lm, spec["kind"], 1, config.n_max, seed=spec["seed"], start=t)
                         for t in args.targets])
    done: dict[int, list] = {}

    def check(states):           # between two passes, and as each target's search ends
        done.update({t: s["replays"] for t, s in states.items()})
        if all(len(done.get(t, [])) >= n for t, n in want.items()):
            raise _Enough

    with contextlib.suppress(_Enough):
        cramming.cram(lm, targets, args.m, config, seed=spec.get("init_seed", spec["seed"]),
                      indices=args.targets, batch_size=args.batch_size, reopen=reopen,
                      on_checkpoint=check, checkpoint_seconds=0.0,
                      on_result=lambda r: check({r.index: {"replays": r.replays}}))
    out = {}
    for t, n in want.items():
        solved = [q for q in records[t]["probes"] if q[1]][:n]
        shipped = records[t].get("replays", [])
        out[t] = [[q[0], q[2], shipped[i][2] if i < len(shipped) else None, now[2]]
                  for i, (q, now) in enumerate(zip(solved, done[t][:n]))]
    print(json.dumps({"run": args.run, "m": args.m, "batch_size": args.batch_size, "replays": out,
                      "machine": machine()}))
    return out


if __name__ == "__main__":
    main()
