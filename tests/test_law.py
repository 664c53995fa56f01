"""The statistics of the linear law: n_50 intervals, accessibility curves, line fits, the logistic
midpoint and the summary with the Corollary 4.6 slope."""

import numpy as np
import pytest
from scipy.stats import binom

from accessibility import law


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
    assert acc[10] == np.mean(caps >= 10)


def test_line_fits_and_bootstrap():
    with_b = law.fit_line([1, 2, 4, 8], [7, 12, 22, 42])
    assert (round(with_b.slope, 9), round(with_b.intercept, 9), round(with_b.r2, 9)) == (5, 2, 1)
    origin = law.fit_line([1, 2, 4, 8], [7, 12, 22, 42], intercept=False)
    assert origin.intercept == 0 and origin.r2 < 1
    lo, hi = law.bootstrap_slope({1: [5] * 8, 2: [10] * 8, 4: [20] * 8}, n_boot=50)
    assert lo == pytest.approx(5) and hi == pytest.approx(5)
    ns = np.arange(1, 30)
    assert law.logistic_n50(ns, 1 / (1 + np.exp((ns - 12.3) / 2))) == pytest.approx(12.3, abs=1e-4)


def test_summarize_uses_the_corollary_slope():
    from accessibility.bounds import slope_bound

    s = law.summarize({1: [5, 6, 7], 2: [10, 11, 12], 4: [20, 21, 22]}, d_model=64, vocab_size=16, n_boot=20)
    assert s["slope"] == pytest.approx(5) and s["r2"] == pytest.approx(1) and s["n_points"] == 3
    assert s["slope_theory"] == pytest.approx(float(slope_bound(d_model=64, vocab_size=16)))
    assert s["ratio"] == pytest.approx(s["slope_theory"] / 5)
