"""The statistics of the linear law: n_50 intervals, accessibility curves, line fits, the logistic
midpoint, the joint bootstrap, and the typed summary (stops, censoring, the Corollary 4.6 slope at the
caller's precision, an exact JSON round trip)."""

import dataclasses
import json

import numpy as np
import pytest
from scipy.stats import binom

from accessibility import law
from accessibility.checks import InputError


def test_n50_interval_is_the_binomial_order_statistic():
    caps = np.arange(1, 17)[::-1]
    r = law.n50(caps, confidence=0.95)
    # exact: the widest symmetric pair of order statistics with two-sided error <= 5 %
    j = max(j for j in range(1, 9) if binom.cdf(j - 1, 16, 0.5) <= 0.025)
    assert (r.low, r.high, r.estimate) == (j, 17 - j, 8.5)
    assert law.n50([7] * 5).low == -np.inf   # 5 targets cannot give a 95 % interval


def test_accessibility_curve_is_a_survival_function():
    caps = np.random.default_rng(0).integers(1, 40, size=30)
    acc = law.accessibility_curve(caps, np.arange(0, 45))
    assert acc[0] == 1 and acc[-1] == 0 and (np.diff(acc) <= 0).all()
    for n in np.unique(caps):            # a target whose capacity is exactly n reaches n
        assert acc[n] == np.mean(caps >= n) > np.mean(caps > n)


def test_line_fits_and_bootstrap():
    with_b = law.fit_line([1, 2, 4, 8], [7, 12, 22, 42])
    assert (round(with_b.slope, 9), round(with_b.intercept, 9), round(with_b.r2, 9)) == (5, 2, 1)
    origin = law.fit_line([1, 2, 4, 8], [7, 12, 22, 42], intercept=False)
    assert origin.intercept == 0 and origin.r2 < 1
    lo, hi = law.bootstrap_slope({1: [5] * 8, 2: [10] * 8, 4: [20] * 8}, n_boot=50)
    assert lo == pytest.approx(5) and hi == pytest.approx(5)
    ns = np.arange(1, 30)
    assert law.logistic_n50(ns, 1 / (1 + np.exp((ns - 12.3) / 2))) == pytest.approx(12.3, abs=1e-4)


def test_summarize_uses_the_corollary_slope_at_the_callers_precision():
    from accessibility.bounds import slope_bound

    caps = {1: [5, 6, 7], 2: [10, 11, 12], 4: [20, 21, 22]}
    s = law.summarize(caps, d_model=64, vocab_size=16, n_boot=20)
    assert s.fit.slope == pytest.approx(5) and s.fit.r2 == pytest.approx(1) and s.fit.n_points == 3
    assert s.slope_theory == pytest.approx(float(slope_bound(d_model=64, vocab_size=16)))
    assert s.precision == "fp16" and s.ratio == pytest.approx(s.slope_theory / 5)
    exact = law.summarize(caps, d_model=64, vocab_size=16, n_boot=20, precision="exact-bf16", r=30.0)
    assert exact.precision == "exact-bf16" and exact.slope_theory == pytest.approx(
        float(slope_bound(d_model=64, vocab_size=16, precision="exact-bf16", r=30.0)))
    assert exact.slope_theory != s.slope_theory
    absolute = law.summarize(caps, d_model=64, vocab_size=16, n_boot=20, eps=0.1, r=1.0)
    assert absolute.precision == "absolute"
    assert absolute.slope_theory == pytest.approx(64 * np.log(21) / np.log(16))
    one = law.summarize({2: [3, 4, 5]}, d_model=64, vocab_size=16)
    assert one.fit is None and one.fit_origin is None and one.ratio is None


def _records(caps_by_m, stops_by_m, n_max=20):
    return [{"m": m, "index": i, "capacity": c, "stop": stops_by_m[m][i], "n_max": n_max, "kind": "random"}
            for m, caps in caps_by_m.items() for i, c in enumerate(caps)]


def test_stops_censoring_and_the_lower_bound_flag():
    records = _records({1: [4, 5, 6, 7, 8], 2: [9, 10, 11, 20, 20]},
                       {1: ["patience"] * 4 + ["budget"],
                        2: ["patience", "budget", "patience", "full", "n_max"]})
    s = law.summarize(records, d_model=8, vocab_size=16, n_boot=50)
    one, two = s.points
    assert one.stops == {"budget": 1, "patience": 4} and one.n_censored == 0
    assert not one.lower_bound     # the budget-stopped target is above the median: raising it changes nothing
    assert two.stops == {"budget": 1, "full": 1, "n_max": 1, "patience": 2} and two.n_censored == 2
    assert two.lower_bound and s.lower_bound   # the budget-stopped 10 sits below the median 11
    mixed = records + [{**records[0], "kind": "text"}]
    with pytest.raises(InputError, match="kind"):
        law.summarize(mixed, d_model=8, vocab_size=16)


def test_an_undecided_capacity_below_the_median_makes_n50_a_lower_bound():
    """With the search's config, a capacity whose deciding failure ran fewer than max_steps steps is
    open-ended like a budget stop: below the median it makes n_50 a lower bound, above it does not."""
    from accessibility.cramming import CramConfig

    config = CramConfig.quick(max_steps=500, patience=150)

    def record(c, failure_steps):
        probes = [[c, True, 60, "solved", "init"], [c + 1, False, failure_steps, "patience", "warm"]]
        return {"m": 1, "index": c, "capacity": c, "capacity_teacher": c, "stop": "patience", "n_max": 64,
                "probes": probes}

    caps = [4, 5, 6, 7, 8]
    for weak, expected in ((5, True), (7, False)):
        records = [record(c, 150 if c == weak else 500) for c in caps]
        with_config = law.summarize(records, d_model=8, vocab_size=16, n_boot=20, config=config)
        assert with_config.lower_bound is expected
        assert not law.summarize(records, d_model=8, vocab_size=16, n_boot=20).lower_bound   # stops alone


def test_summary_json_round_trip_is_exact():
    records = _records({1: [4, 5, 6, 7, 8], 2: [9, 10, 11, 20, 20], 4: [19, 21, 22, 23, 20]},
                       {m: ["patience", "budget", "full", "patience", "n_max"] for m in (1, 2, 4)})
    for s in (law.summarize(records, d_model=8, vocab_size=16, n_boot=50, precision="bf16"),
              law.summarize({1: [3, 4]}, d_model=8, vocab_size=16)):     # an infinite interval, no fit
        text = json.dumps(s.to_json())
        assert law.CramSummary.from_json(json.loads(text)) == s
    assert law.summarize({1: [3, 4]}, d_model=8, vocab_size=16).points[0].low == -np.inf


def test_points_summary_json_round_trip_is_exact():
    """The published protocol's summary: logistic n_50 per m (None where the points never cross 1/2),
    the lines without intervals, the same theory fields as CramSummary."""
    points = {1: {4: 1.0, 6: 0.5, 8: 0.0}, 2: {8: 1.0, 10: 0.75, 12: 0.25, 14: 0.0}, 4: {20: 1.0, 30: 0.9}}
    s = law.summarize_points(points, d_model=8, vocab_size=16, precision="bf16")
    assert s.n50[4] is None and s.fit.n_points == 2 and s.fit.low is None and s.ms == [1, 2, 4]
    assert s.ratio == pytest.approx(s.slope_theory / s.fit.slope) and s.precision == "bf16"
    text = json.dumps(s.to_json())
    assert law.PointsSummary.from_json(json.loads(text)) == s
    assert "slope_ci" not in s.to_json() and s.to_json()["accessibility"]["2"]["10"] == 0.75


def _independent_slope_interval(caps, n_boot=400, seed=0):
    """The per-m bootstrap (each m resampled on its own): the reference the joint bootstrap must beat."""
    gen = np.random.default_rng(seed)
    ms = sorted(caps)
    slopes = [law.fit_line(ms, [np.median(gen.choice(caps[m], len(caps[m]))) for m in ms]).slope
              for _ in range(n_boot)]
    return np.quantile(slopes, 0.025), np.quantile(slopes, 0.975)


def test_joint_bootstrap_resamples_the_same_targets_at_every_m():
    """Capacities that are a per-target offset plus 3·m: every joint replicate has slope exactly 3, while
    resampling each m on its own spreads the slope."""
    base = np.random.default_rng(1).integers(0, 40, size=24)
    caps = {m: list(base + 3 * m) for m in (1, 2, 4, 8)}
    low, high = law.bootstrap_slope(caps, n_boot=400)
    assert low == pytest.approx(3) and high == pytest.approx(3)
    ind_low, ind_high = _independent_slope_interval(caps)
    assert ind_high - ind_low > 0.5
    s = law.summarize(caps, d_model=8, vocab_size=16, n_boot=400)
    assert (s.fit.low, s.fit.high) == pytest.approx((3, 3))


def test_complete_points_of_an_unfinished_run_match_the_finished_summary():
    """Dropping one record at m = 2 from the shipped SmolLM2 run leaves m = 1 and 3 complete: their points,
    summarised alone, are exactly the finished run's points there, and m = 2 is left out."""
    from accessibility.results import load_run

    run = load_run("cram-smollm2-135m-random-tokens")
    finished = law.CramSummary.from_json(run.summary)
    unfinished = [r for r in run.records if r["key"] != "random-tokens/m=2/target=3"]
    from accessibility.cramming import CramConfig

    config = CramConfig(**run.config["config"]["cram"])
    part = law.summarize(law.complete_points(unfinished, 16), d_model=576, vocab_size=49152, config=config)
    assert part.ms == [1, 3] and finished.ms == [1, 2, 3]
    for m in part.ms:       # the logistic midpoint is a numerical fit: equal to its tolerance
        ours, theirs = part.points[part.ms.index(m)], finished.points[finished.ms.index(m)]
        assert ours.n50_logistic == pytest.approx(theirs.n50_logistic, rel=1e-8)
        assert dataclasses.replace(ours, n50_logistic=None) == dataclasses.replace(theirs, n50_logistic=None)
    assert law.complete_points(unfinished, 17) == []
    with pytest.raises(InputError, match="targets"):
        law.complete_points(unfinished, 0)


def test_since_summary_splits_records_an_extension_has_moved():
    """A finished run whose records all match its summary keeps them all; raising one record's capacity
    (as a confirmation in progress does) moves exactly that record, and every kept capacity is still
    the summary's at its target (read through :func:`accessibility.cramming.capacities_by_m`)."""
    from accessibility.cramming import capacities_by_m
    from accessibility.results import load_run

    run = load_run("cram-smollm2-135m-random-tokens")
    kept, moved = law.since_summary(run)
    assert moved == [] and len(kept) == len(run.records)
    assert capacities_by_m(kept) == {int(m): c for m, c in run.summary["capacities"].items()}
    bumped = [dict(r, capacity=r["capacity"] + 1) if r["key"] == "random-tokens/m=2/target=3" else r
              for r in run.records]
    kept, moved = law.since_summary(dataclasses.replace(run, records=bumped))
    assert [r["key"] for r in moved] == ["random-tokens/m=2/target=3"] and len(kept) == len(run.records) - 1
    with pytest.raises(InputError, match="summary"):
        law.since_summary(dataclasses.replace(run, summary=None))


def test_tables_of_saved_runs():
    """The chapter's tables of saved runs: progress of unfinished sweeps, fixed-length runs that differ
    in their settings, capacities on given lengths, and two summaries side by side."""
    from types import SimpleNamespace

    partial = {"text": [{"m": 1, "stop": "patience"}, {"m": 1, "stop": "budget"},
                        {"m": 2, "stop": "patience"}]}
    table = law.progress(partial, [1, 2, 4], targets=16)
    assert table.loc[("text", 1), ["budget", "patience", "targets done", "of"]].tolist() == [1, 1, 2, 16]
    assert table.loc[("text", 4), "targets done"] == 0 and law.progress({}, [1], 4).empty

    def run(lr, solved, steps):
        cram = {"lr": lr, "max_steps": 500, "patience": 150, "prefix_position": "before", "init_scale": 1.0}
        records = [{"index": i, "solved": ok, "steps": s, "stop": "solved" if ok else "patience"}
                   for i, (ok, s) in enumerate(zip(solved, steps))]
        return SimpleNamespace(config={"config": {"cram": cram}}, records=records)

    fixed = law.fixed_runs({"ours": run(0.1, [True, True, False], [10, 20, 30]),
                            "slow": run(0.01, [False, True, False], [40, 50, 60])}, reference="ours")
    assert fixed.set_index("settings").loc["slow", ["lr", "solved", "stops: patience", "steps / run",
                                                     "as ours"]].tolist() == ["0.01", "1 / 3", 2, 50.0, 2]
    assert law.share_on([{"m": 1, "capacity": c} for c in (8, 9, 12, 13)], [8, 12]) == {1: 0.5}
    a = law.summarize({1: [4, 5, 6], 2: [9, 10, 11]}, d_model=8, vocab_size=16, n_boot=10)
    b = law.summarize({1: [5, 6, 7], 2: [9, 12, 13]}, d_model=8, vocab_size=16, n_boot=10)
    both = law.side_by_side({"a": a, "b": b})
    assert both.columns.tolist() == ["m", "a n50", "a low", "a high", "b n50", "b low", "b high"]
    assert both["b n50"].tolist() == [6.0, 12.0]
    with pytest.raises(InputError, match="same values of m"):
        law.side_by_side({"a": a, "c": law.summarize({1: [3, 4]}, d_model=8, vocab_size=16)})
    one_m = law.summarize({1: [3]}, d_model=8, vocab_size=16)
    assert a.quoted()["slope"] == a.fit.slope and one_m.quoted()["r2"] is None


def test_at_shared_length_keeps_the_one_common_length():
    """law.at_shared_length against runs written by hand: the records at the one length every run has
    are kept, in order, and no shared length, several, or no runs at all are refused by name."""
    from accessibility.results import Run

    def run(*ns):
        records = [{"n": n, "index": i} for i, n in enumerate(ns)]
        return Run(folder=None, config={}, records=records, summary=None)

    n, kept = law.at_shared_length({"a": run(17, 26, 17, 26), "b": run(26, 26)})
    assert n == 26 and [r["index"] for r in kept["a"].records] == [1, 3] and len(kept["b"].records) == 2
    for runs, got in (({"a": run(17), "b": run(26)}, "got none"), ({"a": run(17, 26)}, "got 17, 26"),
                      ({}, "got none")):
        with pytest.raises(InputError, match=f"runs: expected .*{got}"):
            law.at_shared_length(runs)


def test_confirmations_count_what_moved_and_what_is_decided():
    """law.confirmations against records written by hand: a capacity moved by a confirming probe, one
    decided by a full-budget failure without moving, one decided only by a patience failure, and one
    at n_max (decided, but by no failure)."""
    from types import SimpleNamespace

    from accessibility.cramming import CramConfig

    cram = dict(vars(CramConfig.quick(max_steps=500, patience=150)))
    moved = {"m": 1, "capacity": 12, "capacity_teacher": 12, "probes": [
        [8, True, 90, "solved", "init"], [9, False, 150, "patience", "warm"],
        [9, True, 300, "solved", "confirm"], [12, True, 80, "solved", "warm"],
        [13, False, 500, "budget", "confirm"]]}
    held = {"m": 1, "capacity": 8, "capacity_teacher": 8, "probes": [
        [8, True, 90, "solved", "init"], [9, False, 500, "patience", "confirm"]]}
    weak = {"m": 1, "capacity": 8, "capacity_teacher": 8, "probes": [
        [8, True, 90, "solved", "init"], [12, False, 100, "patience", "warm"],
        [9, False, 150, "patience", "warm"]]}
    run = SimpleNamespace(config={"config": {"cram": cram}}, records=[moved, held, weak])
    row = law.confirmations(run).iloc[0]
    counted = ["targets", "decided by a full-budget failure", "confirmed", "moved", "largest move"]
    assert row[counted].tolist() == [3, 2, 2, 1, 4]
    assert (row["n50 before"], row["n50 after"]) == (8.0, 8.0)
    assert row["logistic after"] > row["logistic before"]
    # weak's deciding failure is the one at 9 (150 steps), not the longer one at 12; early's ran the full
    # budget, but from the solution at 8, before the one at capacity 10 was found
    early = {"m": 1, "capacity": 10, "capacity_teacher": 10, "probes": [
        [8, True, 90, "solved", "init"], [12, False, 500, "budget", "warm"],
        [11, False, 500, "budget", "warm"], [10, True, 200, "solved", "warm"]]}
    row = law.confirmations(SimpleNamespace(config=run.config, records=[moved, held, weak, early])).iloc[0]
    why = ["undecided: failure cut short", "undecided: full budget from a shorter solution"]
    assert row[why].tolist() == [1, 1]
    # redone: searched again (its old solution at 11 was not rebuilt), it certifies 9 against the 11 of
    # the search it replaced: compared with that one, it moved down by 2
    redone = {"m": 1, "capacity": 9, "capacity_teacher": 9, "replays": [], "probes": [
        [8, True, 90, "solved", "init"], [12, False, 100, "patience", "warm"],
        [10, False, 150, "patience", "warm"], [9, True, 60, "solved", "warm"],
        [10, False, 500, "patience", "confirm"]],
        "redone": {**early, "capacity": 11, "capacity_teacher": 11, "replays": [[8, True, 90, "solved"]]}}
    row = law.confirmations(SimpleNamespace(config=run.config, records=[moved, held, redone])).iloc[0]
    counted = ["decided by a full-budget failure", "searched again", "moved", "moved down", "largest move"]
    assert row[counted].tolist() == [3, 1, 1, 1, 4] and row["n50 before"] == 8.0 and row["n50 after"] == 9.0
    # full: solved n_max = 16 after a patience failure at 13 that a confirming probe then solved
    full = {"m": 1, "capacity": 16, "capacity_teacher": 16, "probes": [
        [8, True, 90, "solved", "init"], [12, True, 100, "solved", "warm"],
        [13, False, 150, "patience", "warm"], [13, True, 400, "solved", "confirm"],
        [16, True, 70, "solved", "warm"]]}
    row = law.confirmations(SimpleNamespace(config=run.config, records=[moved, held, weak, full])).iloc[0]
    counted = ["targets", "decided by a full-budget failure", "at n_max", "moved", "largest move"]
    assert row[counted].tolist() == [4, 2, 1, 2, 4] and row["undecided: failure cut short"] == 1


def test_mcnemar_is_the_exact_binomial_sum_over_discordant_pairs():
    """p = min(1, 2·Σ_{k<=min} C(n, k)/2^n) over the n discordant targets, against math.comb."""
    from math import comb

    for only_a, only_b, both, neither in [(8, 1, 5, 2), (3, 3, 0, 10), (0, 4, 1, 1), (0, 0, 6, 6)]:
        flags = [(1, 0)] * only_a + [(0, 1)] * only_b + [(1, 1)] * both + [(0, 0)] * neither
        a, b = ({i: bool(f[j]) for i, f in enumerate(flags)} for j in (0, 1))
        n, k = only_a + only_b, min(only_a, only_b)
        expected = min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2**n) if n else 1.0
        assert law.mcnemar(a, b) == (only_a, only_b, pytest.approx(expected, rel=1e-12))
    with pytest.raises(InputError, match="same targets"):
        law.mcnemar({0: True}, {1: True})


def test_against_draws_is_mcnemar_for_one_draw_and_a_label_permutation_test_for_several():
    """One draw: the McNemar p-value. Several: the p-value of a brute-force permutation test that
    shuffles which of the K + 1 networks is the reference at each target independently (every
    assignment equally likely), summing the probability of the counts no more likely than the observed."""
    from collections import Counter
    from itertools import product

    rng = np.random.default_rng(7)
    for _ in range(20):
        a, b = ({t: bool(x) for t, x in enumerate(rng.integers(0, 2, 9))} for _ in range(2))
        assert law.against_draws(a, [b])[2] == pytest.approx(law.mcnemar(a, b)[2], rel=1e-9)
    for _ in range(10):
        targets, k = 5, 2
        outcomes = rng.integers(0, 2, (k + 1, targets)).astype(bool)    # row 0: the reference
        reference, *draws = ({t: bool(x) for t, x in enumerate(row)} for row in outcomes)
        counts = Counter(sum(outcomes[pick[t], t] for t in range(targets))
                         for pick in product(range(k + 1), repeat=targets))
        total = sum(counts.values())
        observed = counts[int(outcomes[0].sum())]
        expected = sum(c for c in counts.values() if c <= observed) / total
        count, mean, p = law.against_draws(reference, draws)
        assert count == outcomes[0].sum() and mean == outcomes[1:].sum() / k
        assert p == pytest.approx(expected, rel=1e-9)
    with pytest.raises(InputError, match="same targets"):
        law.against_draws({0: True}, [{0: True}, {1: True}])
    with pytest.raises(InputError, match="at least one draw"):
        law.against_draws({0: True}, [])


def test_a_verdict_against_one_half_holds_for_every_way_the_unfinished_runs_can_end():
    of = 16
    for runs in range(of + 1):
        for solved in range(runs + 1):
            ends = [law.wilson(solved + extra, of) for extra in range(of - runs + 1)]   # every ending
            expected = ("above" if all(low > 0.5 for low, _ in ends) else
                        "below" if all(high < 0.5 for _, high in ends) else
                        "contains" if runs == of else "open")
            assert law.against_half(solved, runs, of) == expected, (solved, runs)
    with pytest.raises(InputError, match="solved <= runs <= of"):
        law.against_half(5, 4, 16)


def test_wilson_interval_is_the_closed_form():
    """scipy's Wilson interval against the formula (p + z²/2n ± z√(p(1-p)/n + z²/4n²)) / (1 + z²/n)."""
    from scipy.stats import norm

    z = norm.ppf(0.975)
    for k, n in [(0, 16), (9, 16), (13, 16), (16, 16), (3, 20)]:
        p = k / n
        centre, half = p + z * z / (2 * n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        expected = ((centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n))
        np.testing.assert_allclose(law.wilson(k, n), expected, rtol=1e-9, atol=1e-12)
