"""Accessibility curves, n_50 and the linear law n_50 = a·m (+ b): per-target capacities in, statistics out.

Used by :mod:`accessibility.cramming` (capacities of crammed targets) and by the book. Capacities are
the longest reproduced prefix of each target; accessibility(n) is the fraction of targets with
capacity at least n, and n_50 its median.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accessibility.checks import at_least


@dataclass(frozen=True)
class N50:
    """Median capacity n_50 with a distribution-free confidence interval (order statistics)."""

    estimate: float
    low: float
    high: float
    confidence: float
    n_targets: int


@dataclass(frozen=True)
class LineFit:
    """Least-squares line n_50 = slope·m (+ intercept); ``r2`` is 1 - SS_res/SS_tot (centred)."""

    slope: float
    intercept: float
    r2: float
    n_points: int


def accessibility_curve(capacities, ns) -> np.ndarray:
    """Accessibility(n): the fraction of targets whose capacity is at least n (a survival function).

    >>> accessibility_curve([3, 5, 5, 9], [1, 4, 5, 6, 10]).tolist()
    [1.0, 0.75, 0.75, 0.25, 0.0]
    """
    c = np.asarray(capacities)[:, None]
    return (c >= np.asarray(ns)[None, :]).mean(0)


def n50(capacities, confidence: float = 0.95) -> N50:
    """n_50, the median capacity, and the order-statistic interval [c_(j), c_(K+1-j)].

    j is the largest index with P(Binomial(K, 1/2) < j) <= (1 - confidence)/2, so the interval covers
    the population median with probability at least ``confidence`` whatever the distribution.

    >>> r = n50([4, 6, 5, 7, 6, 5, 8, 5, 6, 9, 4, 6, 7, 5, 6, 7])
    >>> r.estimate, r.low, r.high
    (6.0, 5.0, 7.0)
    """
    from scipy.stats import binom

    c = np.sort(np.asarray(capacities, dtype=float))
    k = len(c)
    at_least("number of targets", k, 1, integer=True)
    j = int(binom.ppf((1 - confidence) / 2, k, 0.5))       # P(B <= j - 1) <= alpha/2
    j = j if binom.cdf(j - 1, k, 0.5) <= (1 - confidence) / 2 else j - 1
    low, high = (c[j - 1], c[k - j]) if j >= 1 else (-math.inf, math.inf)
    return N50(float(np.median(c)), float(low), float(high), confidence, k)


def fit_line(m, n50s, intercept: bool = True) -> LineFit:
    """Least squares n_50 = a·m + b (or a·m through the origin), with R² on the same points.

    >>> f = fit_line([1, 2, 4], [5, 10, 20], intercept=False)
    >>> round(f.slope, 6), f.intercept, f.r2, f.n_points
    (5.0, 0.0, 1.0, 3)
    """
    x, y = np.asarray(m, float), np.asarray(n50s, float)
    A = np.stack([x, np.ones_like(x)], 1) if intercept else x[:, None]
    coef = np.linalg.lstsq(A, y, rcond=None)[0]
    res = y - A @ coef
    tot = ((y - y.mean()) ** 2).sum()
    r2 = 1 - (res ** 2).sum() / tot if tot > 0 else float("nan")
    return LineFit(float(coef[0]), float(coef[1]) if intercept else 0.0, float(r2), len(x))


def bootstrap_slope(capacities_by_m: dict, *, intercept: bool = True, n_boot: int = 2000,
                    confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the slope: resample the targets of each m, refit medians."""
    gen = np.random.default_rng(seed)
    ms = sorted(capacities_by_m)
    caps = [np.asarray(capacities_by_m[m], float) for m in ms]
    slopes = [fit_line(ms, [np.median(gen.choice(c, len(c))) for c in caps], intercept).slope
              for _ in range(n_boot)]
    alpha = (1 - confidence) / 2
    return float(np.quantile(slopes, alpha)), float(np.quantile(slopes, 1 - alpha))


def logistic_n50(ns, accessibility) -> float:
    """The published n_50: midpoint of a logistic 1/(1 + exp((n - n50)/s)) fitted to the points."""
    from scipy.optimize import curve_fit

    ns, acc = np.asarray(ns, float), np.asarray(accessibility, float)
    f = lambda n, mid, s: 1 / (1 + np.exp(np.clip((n - mid) / s, -50, 50)))  # noqa: E731
    (mid, _), _ = curve_fit(f, ns, acc, p0=[np.interp(0.5, acc[::-1], ns[::-1]), 1.0], maxfev=10000)
    return float(mid)


def summarize(capacities_by_m: dict, *, d_model: int, vocab_size: int, confidence: float = 0.95,
              n_boot: int = 2000, seed: int = 0) -> dict:
    """n_50(m) with intervals, the linear law with and without intercept, and the Corollary 4.6
    slope C = d ln(1 + 2r/ε) / ln|V| (fp16 relative precision, :func:`accessibility.bounds.slope_bound`)
    with the ratio theory / experiment."""
    from accessibility.bounds import slope_bound

    ms = sorted(capacities_by_m)
    med = {m: n50(capacities_by_m[m], confidence) for m in ms}
    out = {"m": ms, "n50": {m: med[m].estimate for m in ms}, "n50_ci": {m: [med[m].low, med[m].high] for m in ms},
           "n_targets": {m: med[m].n_targets for m in ms}, "confidence": confidence}
    theory = float(slope_bound(d_model=d_model, vocab_size=vocab_size))
    out.update(slope_theory=theory, slope=None, intercept=None, r2=None, slope_ci=None, ratio=None)
    if len(ms) >= 2:
        fit, origin = (fit_line(ms, [med[m].estimate for m in ms], i) for i in (True, False))
        out.update(slope=fit.slope, intercept=fit.intercept, r2=fit.r2, n_points=fit.n_points,
                   slope_ci=bootstrap_slope(capacities_by_m, n_boot=n_boot, seed=seed),
                   slope_origin=origin.slope, r2_origin=origin.r2,
                   slope_origin_ci=bootstrap_slope(capacities_by_m, intercept=False, n_boot=n_boot, seed=seed),
                   ratio=theory / fit.slope if fit.slope > 0 else None)
    return out
