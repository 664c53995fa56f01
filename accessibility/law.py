"""Accessibility curves, n_50 and the linear law n_50 = a·m (+ b): per-target capacities in, statistics out.

Used by :mod:`accessibility.cramming` (capacities of crammed targets) and by the book. Capacities are
the longest reproduced prefix of each target; accessibility(n) is the fraction of targets with
capacity at least n, and n_50 its median.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from accessibility.checks import InputError, at_least


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


def bootstrap_slope(capacities_by_m: Mapping, *, intercept: bool = True, n_boot: int = 2000,
                    confidence: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the slope of n_50 = a·m (+ b), resampling targets jointly.

    Position i of every list in ``capacities_by_m`` is target i, the same target at every m (NaN where
    a target was not run at some m). Each replicate draws one set of target positions, with
    replacement, and uses it at every m: the medians of one replicate are correlated across m as
    the data are, which resampling each m on its own would ignore (and so overstate the spread of
    the slope when capacities are positively correlated across m).

    >>> bootstrap_slope({1: [4, 9, 6], 2: [6, 11, 8], 4: [10, 15, 12]}, n_boot=200)  # shifts: slope 2
    (2.0, 2.0)
    """
    ms = np.array(sorted(capacities_by_m), dtype=float)
    table = _table(capacities_by_m)                                   # (n_m, K)
    draws = np.random.default_rng(seed).integers(table.shape[1], size=(n_boot, table.shape[1]))
    with warnings.catch_warnings():                                   # a replicate without a target at some m
        warnings.simplefilter("ignore", RuntimeWarning)
        medians = np.nanmedian(table[:, draws], axis=2)               # (n_m, n_boot)
    medians = medians[:, np.isfinite(medians).all(0)]
    x = ms[:, None] - ms.mean() if intercept else ms[:, None]
    y = medians - medians.mean(0) if intercept else medians
    slopes = (x * y).sum(0) / (x ** 2).sum()
    alpha = (1 - confidence) / 2
    return float(np.quantile(slopes, alpha)), float(np.quantile(slopes, 1 - alpha))


def _table(capacities_by_m: Mapping) -> np.ndarray:
    """Capacities as a (number of m, targets) float array, NaN-padded where an m has fewer targets."""
    rows = [np.asarray(capacities_by_m[m], float) for m in sorted(capacities_by_m)]
    out = np.full((len(rows), max(len(r) for r in rows)), np.nan)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


def logistic_n50(ns, accessibility, require_crossing: bool = True) -> float:
    """The published n_50: midpoint of a logistic 1/(1 + exp((n - n50)/s)) fitted to the points
    (asymptotes fixed at 1 and 0). With ``require_crossing`` (default), NaN when the points never
    cross 1/2, lie at one length only (no midpoint and width fit one point) or the fit fails.
    Without it, what a fit that checks nothing converges to: started at
    the first point when the points never cross, and, when at most one point lies strictly between
    0 and 1 (no finite width fits a single step from a to 0), the limit of its least squares as the
    width goes to 0: the midpoint of a logistic of width :data:`MIN_WIDTH`, within hundredths of a
    token of that point.

    >>> round(logistic_n50([4, 5, 6, 7, 8], [1.0, 0.9, 0.5, 0.1, 0.0]), 6)
    6.0
    >>> math.isnan(logistic_n50([10, 20], [0.3, 0.0])), round(logistic_n50([10, 20], [0.3, 0.0], False), 1)
    (True, 10.0)
    >>> math.isnan(logistic_n50([14], [0.5]))
    True
    """
    from scipy.optimize import OptimizeWarning, curve_fit, least_squares

    ns, acc = np.asarray(ns, float), np.asarray(accessibility, float)
    crosses = acc.max() >= 0.5 >= acc.min()
    if require_crossing and (not crosses or len(np.unique(ns)) < 2):
        return math.nan
    f = lambda n, mid, s: 1 / (1 + np.exp(np.clip((n - mid) / s, -50, 50)))
    order = np.argsort(ns)
    start = np.interp(0.5, acc[order][::-1], ns[order][::-1]) if crosses else ns.min()
    if not require_crossing and ((acc > 0) & (acc < 1)).sum() <= 1:
        inner = ns[(acc > 0) & (acc < 1)]
        start = inner[0] if len(inner) else start
        return float(least_squares(lambda p: f(ns, p[0], MIN_WIDTH) - acc, [start]).x[0])
    try:
        with warnings.catch_warnings():        # a step-like curve leaves the width undetermined
            warnings.simplefilter("ignore", OptimizeWarning)
            (mid, _), _ = curve_fit(f, ns, acc, p0=[start, 1.0], maxfev=10000)
    except RuntimeError:
        return math.nan
    return float(mid)


#: Narrowest logistic width (tokens) of an unchecked fit (:func:`logistic_n50`): a step, whose
#: midpoint is then within a few hundredths of a token of its limit.
MIN_WIDTH = 1e-2


def survival_n50(capacities) -> float:
    """n_50 under the published convention: the :func:`logistic_n50` of the accessibility curve
    P(capacity >= n) at every integer n from the smallest to one past the largest capacity. The
    median of integer capacities sits about half a token below it (P(c >= n) = 1/2 is the upper
    median), so compare this one with a published n_50.

    >>> survival_n50([5, 6, 6, 7]) > float(np.median([5, 6, 6, 7]))
    True
    """
    c = np.asarray(capacities, float)
    ns = np.arange(int(c.min()), int(c.max()) + 2)
    return logistic_n50(ns, accessibility_curve(c, ns))


#: Stops after which a target was still improving (its search ran out of steps): its capacity is a
#: lower bound. A capacity that reached the record's ``n_max`` is censored too, whatever its stop, and
#: so is one that no failure with the full budget decided (:func:`summarize` with the run's config).
LOWER_BOUND_STOPS = ("budget",)


@dataclass(frozen=True)
class MPoint:
    """n_50 at one m, with how the searches of its targets ended.

    ``stops`` counts the records' ``stop`` values (whatever the engine writes: today ``full``,
    ``patience``, ``budget``); ``n_censored`` counts capacities that reached ``n_max``;
    ``lower_bound`` says that raising the censored, the :data:`LOWER_BOUND_STOPS` and the undecided
    capacities (no failure with the full budget above them, when the config is known) could move the
    median, so n_50 is a lower bound. ``n50_logistic`` is :func:`survival_n50`, n_50 under the
    published convention (None where the fit is undefined).
    """

    m: int
    n50: float
    low: float
    high: float
    n_targets: int
    stops: dict
    n_censored: int
    lower_bound: bool
    n50_logistic: float | None = None


@dataclass(frozen=True)
class SlopeFit:
    """The line n_50 = slope·m + intercept (intercept 0 when not fitted), its R² (None when the
    n_50 do not vary) on ``n_points`` values of m, and the joint-bootstrap interval of the slope
    (None where the protocol gives no per-target capacities to resample)."""

    slope: float
    intercept: float
    r2: float | None
    n_points: int
    low: float | None = None
    high: float | None = None


#: The fields both summaries share: the Corollary 4.6 slope, its precision convention and the model.
THEORY_FIELDS = ("slope_theory", "precision", "eps", "r", "d_model", "vocab_size")


@dataclass(frozen=True)
class _Law:
    """What :class:`CramSummary` and :class:`PointsSummary` share: two fitted lines (``fit`` with
    intercept, ``fit_origin`` through 0; None with fewer than two values of m) next to the Corollary
    4.6 slope C = d ln(1 + 2r/ε) / ln|V| (``slope_theory``) at ``precision`` (``"absolute"`` when
    ``eps`` was given; ``r`` where the convention needs one) for a model of width ``d_model`` and
    vocabulary ``vocab_size``, and their JSON form (the fits flattened to ``slope``, ``intercept``,
    ``r2``, ``n_points`` and, with an interval, ``slope_ci``; ``_origin`` for the line through 0)."""

    fit: SlopeFit | None
    fit_origin: SlopeFit | None
    slope_theory: float
    precision: str
    eps: float | None
    r: float | None
    d_model: int
    vocab_size: int

    @property
    def ratio(self) -> float | None:
        """Theory over experiment, C / slope (None without a positive fitted slope)."""
        return self.slope_theory / self.fit.slope if self.fit is not None and self.fit.slope > 0 else None

    def quoted(self) -> dict:
        """The numbers a text quotes about the law: the slope with its interval (``slope_lo``,
        ``slope_hi``), the intercept, R² and the number of m (``points``) of the line with intercept,
        the slope through 0 (``slope0``), the Corollary 4.6 slope (``theory``) and the ratio; None
        where there is no line."""
        fit, origin = self.fit or SlopeFit(*[None] * 4), self.fit_origin or SlopeFit(*[None] * 4)
        return {"slope": fit.slope, "slope_lo": fit.low, "slope_hi": fit.high, "intercept": fit.intercept,
                "r2": fit.r2, "points": fit.n_points, "slope0": origin.slope, "theory": self.slope_theory,
                "ratio": self.ratio}

    def _law_json(self, interval: bool) -> dict:
        out = {}
        for key, fit in (("", self.fit), ("_origin", self.fit_origin)):
            values = (None,) * 5 if fit is None else (fit.slope, fit.intercept, fit.r2, fit.n_points,
                                                      [fit.low, fit.high])
            names = (f"slope{key}", f"intercept{key}", f"r2{key}", f"n_points{key}", f"slope{key}_ci")
            out.update(zip(names[:5 if interval else 4], values))
        return out | {k: getattr(self, k) for k in THEORY_FIELDS} | {"ratio": self.ratio}

    @staticmethod
    def _law_fields(d: Mapping) -> dict:
        """The fits and theory fields of a mapping written by :meth:`_law_json`."""
        fits = {name: None if d[f"slope{k}"] is None else
                SlopeFit(d[f"slope{k}"], d[f"intercept{k}"], d[f"r2{k}"], d[f"n_points{k}"],
                         *(d.get(f"slope{k}_ci") or (None, None)))
                for name, k in (("fit", ""), ("fit_origin", "_origin"))}
        return fits | {k: d[k] for k in THEORY_FIELDS}


@dataclass(frozen=True)
class CramSummary(_Law):
    """n_50(m) and the linear law of one set of targets, next to the Corollary 4.6 slope.

    The fits and the theory fields are those of :class:`_Law`. ``to_json``/``from_json`` round-trip
    exactly.
    """

    points: tuple[MPoint, ...]
    confidence: float
    n_boot: int
    seed: int

    @property
    def ms(self) -> list[int]:
        return [p.m for p in self.points]

    @property
    def n50(self) -> dict[int, float]:
        return {p.m: p.n50 for p in self.points}

    @property
    def lower_bound(self) -> bool:
        """Whether any n_50 is only a lower bound (censored, budget-stopped or undecided targets)."""
        return any(p.lower_bound for p in self.points)

    def to_json(self) -> dict:
        """A JSON-ready mapping: per-m entries keyed by str(m), the two fits flattened (the keys of
        ``accessibility cram --json``); ±inf interval ends as null."""
        per_m = lambda f: {str(p.m): f(p) for p in self.points}
        out = {"m": self.ms, "n50": per_m(lambda p: p.n50), "n50_ci": per_m(lambda p: _ends(p.low, p.high)),
               "n_targets": per_m(lambda p: p.n_targets), "stops": per_m(lambda p: dict(p.stops)),
               "n_censored": per_m(lambda p: p.n_censored), "n50_lower_bound": per_m(lambda p: p.lower_bound),
               "n50_logistic": per_m(lambda p: p.n50_logistic)}
        out |= self._law_json(interval=True) | {k: getattr(self, k) for k in ("confidence", "n_boot", "seed")}
        return out | {"lower_bound": self.lower_bound}

    @classmethod
    def from_json(cls, d: Mapping) -> CramSummary:
        """Inverse of :meth:`to_json`; other keys (a command's extras, derived values) are ignored."""
        points = tuple(MPoint(m=int(m), n50=d["n50"][str(m)], low=_end(d["n50_ci"][str(m)][0], -1),
                              high=_end(d["n50_ci"][str(m)][1], 1), n_targets=d["n_targets"][str(m)],
                              stops=dict(d["stops"][str(m)]), n_censored=d["n_censored"][str(m)],
                              lower_bound=d["n50_lower_bound"][str(m)],
                              n50_logistic=d.get("n50_logistic", {}).get(str(m))) for m in d["m"])
        return cls(points=points, **cls._law_fields(d), **{k: d[k] for k in ("confidence", "n_boot", "seed")})

    def table(self):
        """One row per m (a DataFrame): n_50 with its interval, the targets and how their searches
        ended (``stops`` as ``"patience 12, budget 4"``), censored ones, whether n_50 is a lower bound,
        and the logistic midpoint."""
        import pandas as pd

        return pd.DataFrame([{**vars(p), "stops": ", ".join(f"{k} {v}" for k, v in p.stops.items())}
                             for p in self.points])


@dataclass(frozen=True)
class PointsSummary(_Law):
    """The published per-point protocol's n_50(m) and linear law, next to the Corollary 4.6 slope.

    ``accessibility[m][n]`` is the fraction of targets whose fixed-length run at length n succeeded;
    ``n50[m]`` the midpoint of a logistic fitted to those points (:func:`logistic_n50`, the published
    estimator; None where the points never cross 1/2 or the fit fails); ``fit`` and ``fit_origin`` the
    least-squares lines through the defined n_50 (None with fewer than two), without intervals (there
    are no per-target capacities to resample). The theory fields are those of :class:`CramSummary`.
    ``to_json``/``from_json`` round-trip exactly.
    """

    accessibility: dict[int, dict[int, float]]
    n50: dict[int, float | None]

    @property
    def ms(self) -> list[int]:
        return sorted(self.accessibility)

    def to_json(self) -> dict:
        """A JSON-ready mapping: m and n as str keys, the fits flattened (the keys of ``accessibility cram
        --protocol published --json``)."""
        return {"m": self.ms, "n50": {str(m): v for m, v in self.n50.items()},
                "accessibility": {str(m): {str(n): a for n, a in by_n.items()}
                                  for m, by_n in self.accessibility.items()}} | self._law_json(interval=False)

    @classmethod
    def from_json(cls, d: Mapping) -> PointsSummary:
        """Inverse of :meth:`to_json`; other keys (a command's extras, derived values) are ignored."""
        points = {int(m): {int(n): a for n, a in by_n.items()} for m, by_n in d["accessibility"].items()}
        return cls(accessibility=points, n50={int(m): v for m, v in d["n50"].items()}, **cls._law_fields(d))


def _ends(low: float, high: float) -> list:
    return [None if math.isinf(low) else low, None if math.isinf(high) else high]


def _end(value, sign: int) -> float:
    return sign * math.inf if value is None else value


def summarize(data, *, d_model: int, vocab_size: int, precision: str | None = None,
              eps: float | None = None, r: float | None = None, confidence: float = 0.95, n_boot: int = 2000,
              seed: int = 0, config=None) -> CramSummary:
    """n_50(m) with intervals and stops, the linear law with and without intercept (joint-bootstrap
    slope intervals, :func:`bootstrap_slope`) and the Corollary 4.6 slope
    C = d ln(1 + 2r/ε) / ln|V| (:func:`accessibility.bounds.slope_bound`) at the caller's precision.

    ``data`` is either the records of one kind of target (mappings with ``m``, ``index``,
    ``capacity`` and, when known, ``stop`` and ``n_max``: the lines of a cramming record log) or a
    mapping {m: [capacity of target 0, 1, ...]} (no stops known). ``precision``/``eps``/``r`` follow
    :mod:`accessibility.precision` (default fp16 relative, for which C does not depend on r).
    ``config``, the :class:`~accessibility.cramming.CramConfig` of the search that wrote the records,
    lets a point count as a lower bound on capacities that no failure with the full budget decided
    (:func:`accessibility.cramming.search_decided`); without it only stops and censoring count.

    >>> s = summarize({1: [5, 6, 7], 2: [10, 11, 12], 4: [20, 21, 22]}, d_model=64, vocab_size=16, n_boot=20)
    >>> s.n50, round(s.fit.slope, 6), s.fit.n_points, s.precision
    ({1: 6.0, 2: 11.0, 4: 21.0}, 5.0, 3, 'fp16')
    """
    records = _as_records(data)
    by_m: dict[int, dict[int, dict]] = {}
    for rec in records:
        by_m.setdefault(int(rec["m"]), {})[int(rec["index"])] = rec
    ms = sorted(by_m)
    at_least("number of values of m", len(ms), 1, integer=True)
    targets = sorted({i for recs in by_m.values() for i in recs})
    caps = {m: [by_m[m][i]["capacity"] if i in by_m[m] else math.nan for i in targets] for m in ms}
    points = tuple(_point(m, list(by_m[m].values()), confidence, config) for m in ms)
    fit, fit_origin = [_fit(ms, [p.n50 for p in points], caps, intercept, n_boot, confidence, seed)
                       if len(ms) >= 2 else None for intercept in (True, False)]
    return CramSummary(points=points, fit=fit, fit_origin=fit_origin, confidence=confidence, n_boot=n_boot,
                       seed=seed, **_theory(d_model, vocab_size, precision, eps, r))


def summarize_points(points: Mapping[int, Mapping[int, float]], *, d_model: int, vocab_size: int,
                     precision: str | None = None, eps: float | None = None, r: float | None = None
                     ) -> PointsSummary:
    """The :class:`PointsSummary` of the published protocol's points ``{m: {n: accessibility}}``
    (:func:`accessibility.cramming.points_by_m` of its records): the logistic n_50 at each m, the lines
    through them and the Corollary 4.6 slope at the caller's precision (as :func:`summarize`).

    >>> s = summarize_points({1: {4: 1.0, 6: 0.5, 8: 0.0}, 2: {8: 1.0, 11: 0.5, 14: 0.0}}, d_model=64,
    ...                      vocab_size=16)
    >>> {m: round(v, 3) for m, v in s.n50.items()}, round(s.fit.slope, 3), s.fit.r2
    ({1: 6.0, 2: 11.0}, 5.0, 1.0)
    """
    n50s = {m: logistic_n50(list(by_n), list(by_n.values())) for m, by_n in points.items()}
    n50s = {m: None if math.isnan(v) else v for m, v in n50s.items()}
    defined = [m for m in sorted(n50s) if n50s[m] is not None]
    fit, fit_origin = [_line(defined, [n50s[m] for m in defined], intercept) if len(defined) >= 2 else None
                       for intercept in (True, False)]
    return PointsSummary(accessibility={m: dict(by_n) for m, by_n in points.items()}, n50=n50s, fit=fit,
                         fit_origin=fit_origin, **_theory(d_model, vocab_size, precision, eps, r))


def _theory(d_model: int, vocab_size: int, precision: str | None, eps: float | None, r: float | None) -> dict:
    """The theory fields of a summary: the Corollary 4.6 slope C at a precision, and what it used."""
    from accessibility.bounds import slope_bound
    from accessibility.precision import ABSOLUTE, DEFAULT_PRECISION

    theory = float(slope_bound(d_model=d_model, vocab_size=vocab_size, r=r, precision=precision, eps=eps))
    name = ABSOLUTE if eps is not None else (precision or DEFAULT_PRECISION)
    return {"slope_theory": theory, "precision": name, "eps": eps, "r": r, "d_model": int(d_model),
            "vocab_size": int(vocab_size)}


def complete_points(records, targets: int) -> list[Mapping]:
    """The records of the values of m at which every target 0..``targets``-1 is done: what a finished
    run would summarise at those m, so an unfinished run's complete points can be read before the rest.

    >>> recs = [{"m": 1, "index": 0}, {"m": 1, "index": 1}, {"m": 2, "index": 1}]
    >>> [(r["m"], r["index"]) for r in complete_points(recs, 2)]
    [(1, 0), (1, 1)]
    """
    at_least("targets", targets, 1, integer=True)
    done: dict[int, set] = {}
    for r in records:
        done.setdefault(int(r["m"]), set()).add(int(r["index"]))
    full = {m for m, indices in done.items() if set(range(targets)) <= indices}
    return [r for r in records if int(r["m"]) in full and int(r["index"]) < targets]


def run_summary(run, *, targets: int, d_model: int, vocab_size: int) -> CramSummary | None:
    """A saved cramming run's summary (:func:`accessibility.results.load_run`): its ``summary.json``
    when finished, else :func:`summarize` over its :func:`complete_points` (None when no m is
    complete yet). ``targets``, ``d_model`` and ``vocab_size`` serve the unfinished case.

    >>> from accessibility.results import load_run
    >>> run_summary(load_run("cram-smollm2-135m-random-tokens"), targets=16, d_model=576, vocab_size=49152).ms
    [1, 2, 3]
    """
    if run.summary is not None:
        return CramSummary.from_json(run.summary)
    from accessibility.cramming import CramConfig

    records = complete_points(run.records, targets)
    config = CramConfig(**run.config["config"]["cram"])
    return summarize(records, d_model=d_model, vocab_size=vocab_size, config=config) if records else None


# --- tables of saved runs -----------------------------------------------------------------------


def side_by_side(summaries: Mapping[str, CramSummary]):
    """n_50 with its interval per m, one set of columns per summary (``<label> n50``, ``<label> low``,
    ``<label> high``), for summaries of the same targets at the same values of m (a DataFrame)."""
    import pandas as pd

    (ms, *others) = [s.ms for s in summaries.values()]
    if any(other != ms for other in others):
        raise InputError(f"side_by_side needs the same values of m in every summary; got {[ms, *others]}")
    columns = {f"{label} {key}": [getattr(p, key) for p in s.points]
               for label, s in summaries.items() for key in ("n50", "low", "high")}
    return pd.DataFrame({"m": ms, **columns})


def share_on(records, lengths) -> dict[int, float]:
    """The fraction of each m's capacities that fall on one of ``lengths`` (the stage lengths of a
    staged search, :meth:`accessibility.cramming.CramConfig.growth_lengths`, say).

    >>> share_on([{"m": 1, "capacity": 8}, {"m": 1, "capacity": 9}, {"m": 2, "capacity": 12}], [8, 12])
    {1: 0.5, 2: 1.0}
    """
    on: dict[int, list[bool]] = {}
    for r in records:
        on.setdefault(int(r["m"]), []).append(int(r["capacity"]) in set(lengths))
    return {m: float(np.mean(hits)) for m, hits in sorted(on.items())}


def progress(records: Mapping[str, list], ms, targets: int):
    """How far unfinished sweeps are (a DataFrame indexed by label and m): how many targets ended each
    way (the records' ``stop``), the targets done and of how many. ``records`` maps a label to the
    records of one sweep so far; an empty frame when there are none."""
    import pandas as pd

    done = pd.DataFrame([{"kind": label, "m": r["m"], "ended": r["stop"]} for label, recs in records.items()
                         for r in recs], columns=["kind", "m", "ended"])
    if not len(done):
        return done
    every = pd.MultiIndex.from_product([list(records), list(ms)], names=["kind", "m"])
    counts = done.value_counts(["kind", "m", "ended"]).unstack(fill_value=0).reindex(every, fill_value=0)
    return counts.assign(**{"targets done": counts.sum(axis=1), "of": targets})


def fixed_runs(runs: Mapping, reference: str):
    """Fixed-length runs of the same targets at one n that differ in their settings (saved runs of
    ``accessibility cram --protocol published`` with one length, :func:`accessibility.results.load_run`),
    one row each (a DataFrame): the learning rate, step budget, patience, BOS placement and init scale,
    how many targets were solved, how many runs gave up on patience or spent their budget, the mean
    optimiser steps per run, and on how many targets the outcome is that of the ``reference`` run."""
    import pandas as pd

    solved = {label: {r["index"]: r["solved"] for r in run.records} for label, run in runs.items()}
    rows = []
    for label, run in runs.items():
        cfg, stops = run.config["config"]["cram"], Counter(r["stop"] for r in run.records)
        rows.append({"settings": label, "lr": f"{cfg['lr']:g}", "steps ≤": cfg["max_steps"],
                     "patience": cfg["patience"], "BOS": cfg["prefix_position"],
                     "init ×": f"{cfg['init_scale']:.3g}",
                     "solved": f"{sum(solved[label].values())} / {len(solved[label])}",
                     "stops: patience": stops["patience"], "stops: budget": stops["budget"],
                     "steps / run": float(np.mean([r["steps"] for r in run.records])),
                     f"as {reference}": sum(ok == solved[reference][i] for i, ok in solved[label].items())})
    return pd.DataFrame(rows)


def at_shared_length(runs: Mapping) -> tuple[int, dict]:
    """The one length n at which every run in ``runs`` (label -> saved run of ``accessibility cram
    --protocol published``, :func:`accessibility.results.load_run`) has records, and each run keeping
    only its records at n: fixed-length runs that differ in their settings compared where they overlap,
    when some also ran other lengths. An :class:`InputError` when ``runs`` is empty or the runs share no
    length or more than one.

    >>> from accessibility.results import load_run
    >>> n, runs = at_shared_length({"ours": load_run("cram-gemma-3-270m-text-fixed-quick"),
    ...     "published": load_run("cram-gemma-3-270m-text-fixed-paper-matrix-init-bos-after")})
    >>> n, {label: len(run.records) for label, run in runs.items()}
    (26, {'ours': 16, 'published': 16})
    """
    if not runs:
        raise InputError("runs: expected at least one run, got none")
    shared = set.intersection(*({r["n"] for r in run.records} for run in runs.values()))
    if len(shared) != 1:
        raise InputError("runs: expected exactly one length that every run has records at, got "
                         + (", ".join(map(str, sorted(shared))) or "none"))
    (n,) = shared
    return n, {label: replace(run, records=[r for r in run.records if r["n"] == n])
               for label, run in runs.items()}


def confirmations(run):
    """How a saved search run's capacities were decided (a DataFrame, one row per m): the targets, how
    many capacities a failure with the full budget decided and how many searches solved n_max instead
    (:func:`accessibility.cramming.search_decided` counts both; a capacity at n_max is censored there,
    and an undecided one is a certified lower bound of what confirming it would give), how many searches
    ran a confirming probe, how many capacities it moved up and by how many tokens at most, and n_50 (median
    and :func:`survival_n50`) before the confirmations (:func:`accessibility.cramming.unconfirmed_capacity`)
    and after. A record searched again from scratch (``redone``: its solution was not rebuilt) is
    compared with the search it replaced, and may have moved down. The undecided capacities are split
    by why: every failure at capacity + 1 stopped before
    ``max_steps`` (cut short by patience), one ran ``max_steps`` but from a solution shorter than the
    capacity (found before the one at capacity), or the replays of a record saved without its [mem]
    could not rebuild its solution (:func:`accessibility.cramming.chain_broken`; its confirming probe
    started from a shorter one). ``run`` is a :func:`accessibility.results.load_run`
    of ``accessibility cram``.

    >>> from accessibility.results import load_run
    >>> table = confirmations(load_run("cram-toy-paper"))
    >>> bool((table["decided by a full-budget failure"] + table["at n_max"] == table["targets"]).all())
    True
    """
    import pandas as pd

    from accessibility.cramming import (CramConfig, chain_broken, search_decided, shortest_failure,
                                        unconfirmed_capacity)

    config = CramConfig(**run.config["config"]["cram"])
    rows = []
    for m in sorted({int(r["m"]) for r in run.records}):
        recs = [r for r in run.records if int(r["m"]) == m]
        before = np.array([unconfirmed_capacity(r) for r in recs])
        after = np.array([r["capacity"] for r in recs])
        decided = [search_decided(r, config) for r in recs]
        at_max = [ok and shortest_failure(r["probes"], r["capacity_teacher"])[0] is None
                  for r, ok in zip(recs, decided)]      # decided by solving n_max, not by a failure
        undecided = [r for r, ok in zip(recs, decided) if not ok]
        lost = sum(map(chain_broken, undecided))
        longest = []     # per other undecided capacity, the most steps a failure at its deciding length ran
        for r in (r for r in undecided if not chain_broken(r)):
            hi, _ = shortest_failure(r["probes"], r["capacity_teacher"])
            longest.append(max(p[2] for p in r["probes"] if not p[1] and p[0] == hi))
        short = sum(steps < config.max_steps for steps in longest)
        rows.append({"m": m, "targets": len(recs),
                     "decided by a full-budget failure": sum(decided) - sum(at_max), "at n_max": sum(at_max),
                     "confirmed": sum(any(len(p) > 4 and p[4] == "confirm" for p in r["probes"])
                                      for r in recs),
                     "searched again": sum("redone" in r for r in recs),
                     "moved": int((after > before).sum()), "moved down": int((after < before).sum()),
                     "largest move": int((after - before).max()),
                     "n50 before": float(np.median(before)), "n50 after": float(np.median(after)),
                     "logistic before": survival_n50(before), "logistic after": survival_n50(after),
                     "undecided: failure cut short": short,
                     "undecided: full budget from a shorter solution": len(longest) - short,
                     "undecided: solution at capacity not rebuilt": lost})
    return pd.DataFrame(rows)


def since_summary(run) -> tuple[list[dict], list[dict]]:
    """A finished search run's records split by whether their capacity is still the one its summary
    read: ``(kept, moved)``. An extension in progress (confirmations, say) rewrites a target's record
    when its search ends, and the summary only when the whole sweep completes, so a table read from
    the summary describes ``kept`` and the targets in ``moved`` have gone on since.
    ``run`` is a finished :func:`accessibility.results.load_run` of ``accessibility cram``.

    >>> from accessibility.results import load_run
    >>> kept, moved = since_summary(load_run("cram-toy-paper"))
    >>> len(kept) > 0, moved
    (True, [])
    """
    if run.summary is None:
        raise InputError("run: since_summary needs a finished run (one with a summary.json)")
    table = {int(m): caps for m, caps in run.summary["capacities"].items()}
    kept, moved = [], []
    for r in run.records:
        (kept if table[int(r["m"])][int(r["index"])] == r["capacity"] else moved).append(r)
    return kept, moved


def replays(run) -> dict[str, int]:
    """How the replays of a saved search run rebuilt its records' [mem] (each record as first extended,
    before any search again: its ``redone`` when it has one): ``records`` replayed, ``broken`` of them
    (:func:`accessibility.cramming.chain_broken`), ``probes`` replayed and ``same`` of those that took as
    many steps as the solved probe they reran (all of them when the replay is bitwise); and of the
    ``commands`` that wrote the run, ``one_thread`` gave ``--threads 1`` (bitwise replays need it).
    ``run`` is a :func:`accessibility.results.load_run` of ``accessibility cram``.

    >>> from accessibility.results import load_run
    >>> counts = replays(load_run("cram-gemma-3-270m-random-words"))
    >>> counts["broken"], counts["records"] == 32, counts["same"] <= counts["probes"]
    (0, True, True)
    >>> counts["one_thread"] == counts["commands"] > 1
    True
    """
    from accessibility.cramming import chain_broken

    replayed = [o for r in run.records if (o := r.get("redone", r)).get("replays")]
    commands = run.config.get("commands", [run.config["command"]])
    return {"records": len(replayed), "broken": sum(map(chain_broken, replayed)),
            "probes": sum(len(r["replays"]) for r in replayed),
            "same": sum(a[2] == p[2] for r in replayed
                        for a, p in zip(r["replays"], [p for p in r["probes"] if p[1]])),
            "commands": len(commands),
            "one_thread": sum(re.search(r"--threads[ =]1(\s|$)", c) is not None for c in commands)}


def wilson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion k/n (scipy's).

    >>> [round(x, 3) for x in wilson(9, 16)]
    [0.332, 0.769]
    """
    from scipy.stats import binomtest

    ci = binomtest(int(k), int(n)).proportion_ci(confidence, method="wilson")
    return float(ci.low), float(ci.high)


def against_half(solved: int, runs: int, of: int, confidence: float = 0.95) -> str:
    """Where a share of ``of`` targets lies against one half, from ``runs`` finished runs of which
    ``solved`` succeeded: ``"above"`` or ``"below"`` when the Wilson interval excludes 1/2 however the
    ``of - runs`` unfinished runs end (the worst case: every one fails, or every one succeeds),
    ``"contains"`` when every run has finished and the interval holds 1/2, else ``"open"``.

    >>> against_half(14, 16, 16), against_half(12, 12, 16), against_half(9, 9, 16), against_half(8, 16, 16)
    ('above', 'above', 'open', 'contains')
    """
    if not 0 <= solved <= runs <= of or of < 1:
        raise InputError(f"against_half needs 0 <= solved <= runs <= of and of >= 1; got solved={solved}, "
                         f"runs={runs}, of={of}")
    low = wilson(solved, of, confidence)[0]
    high = wilson(solved + of - runs, of, confidence)[1]
    if low > 0.5:
        return "above"
    if high < 0.5:
        return "below"
    return "contains" if runs == of else "open"


def mcnemar(a: Mapping, b: Mapping) -> tuple[int, int, float]:
    """Exact McNemar test of two settings run on the same targets: ``a`` and ``b`` map each target to
    whether its run succeeded. Returns how many targets only ``a`` solves, how many only ``b`` solves,
    and the two-sided p-value of "each is as likely as the other" (a binomial test on those pairs; 1.0
    without any).

    >>> mcnemar({0: True, 1: True, 2: False, 3: True}, {0: False, 1: False, 2: False, 3: True})
    (2, 0, 0.5)
    """
    from scipy.stats import binomtest

    if set(a) != set(b):
        raise InputError(f"mcnemar needs the same targets on both sides; only in one: "
                         f"{sorted(set(a) ^ set(b))}")
    only_a = sum(bool(a[k]) and not b[k] for k in a)
    only_b = sum(bool(b[k]) and not a[k] for k in a)
    p = binomtest(min(only_a, only_b), only_a + only_b).pvalue if only_a + only_b else 1.0
    return only_a, only_b, float(p)


def against_draws(reference: Mapping, draws: Sequence[Mapping]) -> tuple[int, float, float]:
    """Exact test of "the reference is one more draw": ``reference`` and each of the K ``draws`` map the
    same targets to whether its run succeeded (the draws: networks drawn at random around the reference,
    each run from the same starts). Under that hypothesis the K + 1 outcomes at a target are
    exchangeable, so given that c of them succeed there, the reference succeeds with probability
    c / (K + 1), independently across targets. Returns the reference's count of successes, the draws'
    mean count, and the two-sided p-value of the reference's count under that Poisson-binomial law (the
    total probability of counts no more likely than the observed one, as scipy's exact binomial test
    sums it). With one draw it is the exact McNemar test (:func:`mcnemar`).

    >>> against_draws({0: True, 1: True, 2: False, 3: True}, [{0: False, 1: False, 2: False, 3: True}])
    (3, 1.0, 0.5)
    """
    if not draws:
        raise InputError("against_draws needs at least one draw")
    for draw in draws:
        if set(draw) != set(reference):
            raise InputError(f"against_draws needs the same targets in every draw; only in one: "
                             f"{sorted(set(draw) ^ set(reference))}")
    pmf = np.ones(1)                                      # distribution of the reference's count
    for target in reference:
        share = (bool(reference[target]) + sum(bool(d[target]) for d in draws)) / (len(draws) + 1)
        pmf = np.convolve(pmf, [1 - share, share])
    count = sum(bool(v) for v in reference.values())
    p = pmf[pmf <= pmf[count] * (1 + 1e-7)].sum()
    return count, sum(sum(map(bool, d.values())) for d in draws) / len(draws), float(min(1.0, p))


def solved(records, by=("m", "n"), teacher: bool = False, confidence: float = 0.95):
    """Fixed-length runs counted per group (a DataFrame, one row per value of ``by``): runs, how many
    succeeded with their Wilson interval, the mean optimiser steps, and how many runs met a non-finite
    loss (``nonfinite`` steps) and how many such steps there were. Success is the record's ``solved``
    (certified by greedy decoding in fp32), or with ``teacher`` the teacher-forced criterion of the
    optimisation itself (``capacity_teacher >= n``: what the published loop counts, under its autocast).

    >>> solved([{"m": 1, "n": 10, "solved": True, "capacity_teacher": 10, "steps": 40, "nonfinite": 0},
    ...         {"m": 1, "n": 10, "solved": False, "capacity_teacher": 10, "steps": 60, "nonfinite": 3}],
    ...        teacher=True)[["m", "n", "solved", "runs", "steps / run", "runs with non-finite loss"]]
       m   n  solved  runs  steps / run  runs with non-finite loss
    0  1  10       2     2         50.0                          1
    """
    import pandas as pd

    groups: dict[tuple, list[Mapping]] = {}
    for r in records:
        groups.setdefault(tuple(int(r[k]) for k in by), []).append(r)
    rows = []
    for key, recs in sorted(groups.items()):
        ok = [(r["capacity_teacher"] >= r["n"]) if teacher else bool(r["solved"]) for r in recs]
        low, high = wilson(sum(ok), len(ok), confidence)
        rows.append({**dict(zip(by, key)), "solved": sum(ok), "runs": len(ok), "low": low, "high": high,
                     "steps / run": float(np.mean([r["steps"] for r in recs])),
                     "runs with non-finite loss": sum(r.get("nonfinite", 0) > 0 for r in recs),
                     "non-finite steps": sum(r.get("nonfinite", 0) for r in recs)})
    return pd.DataFrame(rows)


def _as_records(data) -> list[Mapping]:
    if isinstance(data, Mapping):
        return [{"m": m, "index": i, "capacity": c} for m, caps in data.items() for i, c in enumerate(caps)]
    records = list(data)
    kinds = {r["kind"] for r in records if "kind" in r}
    if len(kinds) > 1:
        raise InputError(f"summarize one kind of target at a time; the records mix {sorted(kinds)}")
    return records


def _point(m: int, records: list[Mapping], confidence: float, config=None) -> MPoint:
    from accessibility.cramming import search_decided

    caps = np.array([r["capacity"] for r in records], float)
    med = n50(caps, confidence)
    censored = np.array([r.get("n_max") is not None and r["capacity"] >= r["n_max"] for r in records], bool)
    undecided = [config is not None and "probes" in r and not search_decided(r, config) for r in records]
    open_ended = censored | np.array([r.get("stop") in LOWER_BOUND_STOPS for r in records], bool) | undecided
    raised = float(np.median(np.where(open_ended, np.inf, caps)))     # every open-ended target unbounded
    stops = dict(sorted(Counter(r["stop"] for r in records if r.get("stop") is not None).items()))
    logistic = survival_n50(caps)
    return MPoint(m=m, n50=med.estimate, low=med.low, high=med.high, n_targets=med.n_targets, stops=stops,
                  n_censored=int(censored.sum()), lower_bound=bool(raised != med.estimate),
                  n50_logistic=None if math.isnan(logistic) else logistic)


def _line(ms, n50s, intercept: bool) -> SlopeFit:
    """:func:`fit_line` as a :class:`SlopeFit` without an interval (R² None where n_50 does not vary)."""
    line = fit_line(ms, n50s, intercept)
    return SlopeFit(line.slope, line.intercept, None if math.isnan(line.r2) else line.r2, line.n_points)


def _fit(ms, n50s, caps, intercept: bool, n_boot: int, confidence: float, seed: int) -> SlopeFit:
    low, high = bootstrap_slope(caps, intercept=intercept, n_boot=n_boot, confidence=confidence, seed=seed)
    return replace(_line(ms, n50s, intercept), low=low, high=high)


def scan_n50(capacities, scan: Mapping | None = None) -> tuple[dict[int, float], float]:
    """n_50 as the published pipeline reports it for a population whose accessibility is exactly
    that of ``capacities`` (no sampling noise): the authors' adaptive scan over n
    (:func:`accessibility.cramming.adaptive_scan`: n = 10, then steps of 100 while accessibility
    > 0.9, then steps of 10 until it falls below 0.1), then a logistic fitted to the scanned points
    (:func:`logistic_n50`, extrapolated when they never cross 1/2). Returns (points, n_50).

    >>> points, mid = scan_n50([8, 9, 10, 11, 12, 13])   # n_50 11: the scan sees 10 and 20 only
    >>> {n: round(a, 2) for n, a in points.items()}, round(mid, 1)
    ({10: 0.67, 20: 0.0}, 10.0)
    >>> round(survival_n50([8, 9, 10, 11, 12, 13]), 1)
    11.0
    """
    from accessibility.cramming import adaptive_scan

    c = np.asarray(capacities, float)
    points = adaptive_scan(lambda n: float(accessibility_curve(c, [n])[0]), dict(scan or {}))
    return points, logistic_n50(list(points), list(points.values()), require_crossing=False)


def scan_floor(capacities, shifts, scan: Mapping | None = None) -> list[dict]:
    """What the published scan reports as the true n_50 moves: for each shift k, the capacities
    moved by -k tokens, their :func:`survival_n50` (the midpoint on every integer n) and
    :func:`scan_n50`'s (the midpoint on the published grid). Near and below the grid's first point
    (n = 10) the second stays near 10 whatever the first.

    >>> [round(r["scan_n50"], 1) for r in scan_floor([8, 9, 10, 11, 12, 13], [0, 2])]
    [10.0, 9.9]
    """
    rows = []
    for k in shifts:
        shifted = np.asarray(capacities, float) - k
        points, fit = scan_n50(shifted, scan)
        rows.append({"shift": int(k), "n50": survival_n50(shifted), "points": points, "scan_n50": fit})
    return rows
