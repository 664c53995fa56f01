"""Upper bounds on accessibility: Theorem 4.5, Corollary 4.6, Corollary 4.10 and refined supports.

Every count here is astronomically large ((1 + 2r/ε)^{dm} overflows any float), so every function
returns a natural logarithm (nats) or a quantity derived from one; :func:`to_log10` and
:func:`to_bits` convert. Functions are vectorised over numpy arrays and keyword-only.

Precision conventions (``r=``, ``precision=``, ``eps=``) are those of :mod:`accessibility.precision`;
``precision=None`` means fp16 relative (ε = r·2^-11, the published choice) unless ``eps=`` is given.
The hypothesis behind every count is *quantisation*: the model's output depends on the prompt only
through a map onto a set whose points are pairwise at least ε apart, and the numerators count such
sets. Rounding every coordinate down (floor), or to the nearest point, of the grid
-r + ε{0, ..., ⌊2r/ε⌋} is such a map, with (⌊2r/ε⌋ + 1) values per coordinate; nearest rounding on the
unbounded grid -r + εZ can leave [-r, r] and gain a value. Storing a vector in a float format maps
it onto the values the format holds, which are not ε apart at ε = r·u (floats crowd near zero): the
``exact-*`` conventions count those values instead.

Map of the module
-----------------
* numerators (ln of the number of distinguishable vectors in one support, nats), all proven bounds
  under their stated hypotheses: :func:`log_ball_count`, :func:`log_box_count`,
  :func:`log_cone_bound` (norm-consistent cone), :func:`log_ellipsoid_count`;
  :func:`log_cone_fraction` is the exact ln of the ball fraction inside a cone, and
  :func:`log_cone_count` the published (heuristic) cone convention, which is not a bound;
* cone half-angles: :func:`jung_half_angle` (proven from the smallest pairwise cosine) and
  :func:`cone_half_angle` (the published arccos(min cos)/2, a heuristic);
* the denominator of the cell-entropy heuristic: :func:`cell_entropy` (a typical-sequence heuristic);
* slopes: :func:`slope` (numerator / ln|V| or / H), :func:`slope_bound` (Corollary 4.6's C),
  :func:`target_slope` (C_Q for targets drawn from a distribution Q, with its per-token rate;
  :func:`word_rate` for uniformly drawn words) and :func:`slopes_by_precision` (C under every
  precision view side by side);
* Theorem 4.5: :func:`log_count`; Corollary 4.6: :func:`n_star_bound`, :func:`log10_fraction_bound`,
  :func:`length_threshold`, :func:`n50_bound`; Corollary 4.10: :func:`log_log_measure_packing`,
  :func:`log10_unbounded_threshold`, :func:`log10_unbounded_fraction_bound`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special

from accessibility.checks import InputError, at_least, in_range, positive
from accessibility.precision import (  # noqa: F401  (log_levels is part of this module's API)
    EXACT, FORMATS, as_float, float_count_between, log1p_ratio, log_levels, resolve_eps,
)

LN10 = math.log(10.0)
LN2 = math.log(2.0)
#: Continued fraction for ln I_x(a, b): tolerance (double precision) and an iteration cap far above
#: the O(sqrt(a)) steps it needs below its switch-over point (Numerical Recipes, 3rd ed., §6.4).
CF_TOL = 1e-15
CF_MAX_ITER = 10_000
CF_TINY = 1e-300  # modified Lentz: replaces an exact zero denominator
#: Stirling series of ln Γ(z) (coefficients of z^-1, z^-3, z^-5, z^-7), used for ln B(a, 1/2) from
#: a = 30 on, where the next term is below 1e-16; scipy's betaln loses ~1e-12 (absolute) at a ~ 2000.
STIRLING_COEFFS = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680)
STIRLING_FROM = 30.0
#: Corollary 4.10's cover of the probability measures: an η-net of the support with η = ε/4, and
#: weights rounded with ℓ1 error < ε/(4r), so each measure is within W1 < ε/2 of a cover point.
NET_RADIUS_FRACTION = 0.25
WEIGHT_ERROR_FRACTION = 0.25
#: Absolute precision of :func:`slopes_by_precision`: 2^-10, the spacing of fp16 values in [1, 2),
#: read as a fixed-point step (the same for every model, so C grows with r).
ABSOLUTE_EPS = 2.0**-10
#: n_50 is where half the targets are accessible: the fraction of Corollary 4.6 at δ = 1/2.
N50_FRACTION = 0.5


def to_log10(nats):
    """Nats to decimal digits: ``x / ln 10``."""
    return nats / LN10


def to_bits(nats):
    """Nats to bits: ``x / ln 2``."""
    return nats / LN2


def _d(d_model):
    return at_least("d_model", d_model, 1, integer=True)


def _ln_vocab(vocab_size):
    return np.log(at_least("vocab_size", vocab_size, 2, integer=True))


# --- numerators: ln of the number of distinguishable vectors of one support -------------------


def log_ball_count(*, d_model, r=None, precision: str | None = None, eps=None):
    """Packing lemma: ln of the number of ε-separated points in a ball of radius r in R^d.

    .. math:: \\ln P \\le d \\ln\\Big(1 + \\frac{2r}{\\varepsilon}\\Big)

    (disjoint ε/2-balls inside the ball of radius r + ε/2; any norm). With an ``exact-*`` precision it
    is :math:`d \\ln N_{\\text{fmt}}(r)`, the exact number of representable vectors in the cube
    :math:`[-r, r]^d`. This is the numerator of the slope C.

    >>> round(log_ball_count(d_model=2048), 1)  # Pythia-1b/1.4b, fp16 relative
    17035.2
    """
    return _d(d_model) * log_levels(r=r, precision=precision, eps=eps)


def log_box_count(*, widths=None, lows=None, highs=None, r=None, precision: str | None = None, eps=None):
    """Box support (the pipeline's "rectangle"): ln of the number of ε-separated points (L∞).

    .. math:: \\ln P \\le \\sum_{i=1}^{d} \\ln\\Big(1 + \\frac{w_i}{\\varepsilon}\\Big)

    Disjoint cubes of side ε around the points lie in the box widened by ε, so this is the packing
    lemma in the L∞ norm. It equals :func:`log_ball_count` when every :math:`w_i = 2r` and is never
    larger when every :math:`w_i \\le 2r`. Give ``widths`` (shape (..., d)), or ``lows`` and ``highs``
    (then w = highs - lows). A relative precision needs r, the L∞ radius that sets ε = r·u (with
    ``lows``/``highs`` it defaults to their largest absolute value). An ``exact-*`` precision counts the
    float values in each :math:`[\\mathrm{low}_i, \\mathrm{high}_i]` (needs ``lows`` and ``highs``).

    >>> float(log_box_count(widths=[2.0, 2.0], r=1.0)) == float(log_ball_count(d_model=2))
    True
    """
    if (widths is None) == (lows is None or highs is None):
        raise InputError("give either widths or both lows and highs")
    if widths is None:
        lows, highs = np.asarray(lows, dtype=float), np.asarray(highs, dtype=float)
        widths = highs - lows
        r = np.max(np.abs([lows, highs])) if r is None else r
    widths = at_least("widths", widths, 0)
    if precision in EXACT:
        if lows is None:
            raise InputError(f"precision={precision!r} needs lows and highs "
                             "(float counts depend on position)")
        return as_float(np.log(float_count_between(precision, lows, highs)).sum(axis=-1))
    eps = resolve_eps(r=r, precision=precision, eps=eps)
    return as_float(np.log1p(np.asarray(widths) / eps).sum(axis=-1))


def cone_half_angle(min_cos):
    """Published convention (a heuristic): half-angle φ = arccos(min cos)/2 of the cone holding the vectors.

    The smallest pairwise cosine gives the largest pairwise angle θ; the pipeline assumes the vectors
    fit in a cone of half-angle θ/2 around some axis. That is a lower bound on the true half-angle, not
    an upper bound: three vectors at mutual angle θ need a wider cone, and the vectors a minimum cosine
    allows fit in the cone of :func:`jung_half_angle`, which is wider for d >= 3. It is a *convention* of
    the paper, not a proven containment.

    >>> round(float(cone_half_angle(0.0)), 6)  # θ = π/2
    0.785398
    """
    return np.arccos(in_range("min_cos", min_cos, -1, 1)) / 2


def jung_half_angle(*, d_model, min_cos):
    """Proven: the half-angle ρ of a cone (apex at the origin) holding every vector of R^d whose pairwise
    cosines are all at least c = ``min_cos``; the spherical Jung theorem.

    .. math:: \\cos^2\\rho = c + \\frac{1 - c}{d}, \\quad\\text{that is}\\quad
              \\sin\\rho = \\sqrt{\\frac{2(d - 1)}{d}}\\,\\sin\\frac{\\theta}{2},
              \\qquad \\theta = \\arccos c,

    for c > -1/d; for c <= -1/d no cone narrower than a half-space is guaranteed (d + 1 vectors of a
    regular simplex have all cosines -1/d and sum to zero), and π/2 is returned: a cone count then
    falls back to the whole Euclidean ball. The second form is Jung's theorem on the sphere
    :math:`S^{d-1}` (Dekster, *Acta Math. Hungar.* 67, 1995). Proof: let w be the point of the convex
    hull of the unit vectors :math:`u_i` nearest the origin. It is a convex combination
    :math:`\\sum_j \\lambda_j u_j` of at most N of them (Carathéodory: N <= d + 1, and N <= d when
    w != 0, since w then lies in a supporting hyperplane), so
    :math:`|w|^2 = \\sum_{j,k} \\lambda_j\\lambda_k \\langle u_j, u_k\\rangle
    \\ge c + (1 - c)\\sum_j \\lambda_j^2 \\ge c + (1 - c)/N`. If w = 0 this gives c <= -1/d.
    Otherwise :math:`\\langle w, u_i\\rangle \\ge |w|^2` for every i (w is the projection of 0 on the
    hull), so every :math:`u_i` lies within the angle arccos |w| of w. The bound is attained by d unit
    vectors with equal pairwise cosines c (their hull's nearest point is their centroid). It is
    continuous, equals 0 at c = 1, and is never below the published θ/2 (:func:`cone_half_angle`) for
    d >= 2.

    >>> round(float(jung_half_angle(d_model=2, min_cos=0.0)), 6)  # the plane: θ/2 itself
    0.785398
    >>> round(float(jung_half_angle(d_model=3, min_cos=0.5)), 6)  # three vectors at 60°: sin ρ = sqrt(4/3)/2
    0.61548
    """
    d = at_least("d_model", d_model, 1, integer=True)
    c = in_range("min_cos", min_cos, -1, 1)
    d = np.asarray(d, dtype=float)
    sin_squared = (1 - c) * (d - 1) / d  # = 1 - cos²ρ, exact at c = 1 and at d = 1
    return as_float(np.where(c > -1 / d, np.arcsin(np.sqrt(np.minimum(sin_squared, 1.0))), np.pi / 2))


def _beta_continued_fraction(a, b, x):
    """Continued fraction of I_x(a, b) (modified Lentz), converging for x < (a + 1)/(a + b + 2)."""
    fix = lambda v: np.where(np.abs(v) < CF_TINY, CF_TINY, v)
    c = np.ones_like(x)
    d = 1.0 / fix(1.0 - (a + b) * x / (a + 1.0))
    h = d
    for k in range(1, CF_MAX_ITER + 1):
        for coef in (k * (b - k) * x / ((a + 2 * k - 1) * (a + 2 * k)),
                     -(a + k) * (a + b + k) * x / ((a + 2 * k) * (a + 2 * k + 1))):
            d = 1.0 / fix(1.0 + coef * d)
            c = fix(1.0 + coef / c)
            h = h * d * c
        if np.all(np.abs(d * c - 1.0) < CF_TOL):
            return h
    raise RuntimeError("incomplete-beta continued fraction did not converge")


def _stirling_tail(z):
    return sum(c * z ** -(2 * i + 1) for i, c in enumerate(STIRLING_COEFFS))


def _log_beta_half(a):
    """ln B(a, 1/2) = ln Γ(1/2) - ln(Γ(a + 1/2)/Γ(a)), the ratio from the Stirling series for large a."""
    a = np.asarray(a, dtype=float)
    big = np.maximum(a, STIRLING_FROM)
    log_ratio = (0.5 * np.log(big) + (big * np.log1p(0.5 / big) - 0.5)
                 + _stirling_tail(big + 0.5) - _stirling_tail(big))
    return np.where(a >= STIRLING_FROM, 0.5 * math.log(math.pi) - log_ratio, special.betaln(a, 0.5))


def _log_betainc_half(a, x, one_minus_x):
    """ln I_x(a, 1/2) without underflow; ``one_minus_x`` is passed exactly (cos² φ)."""
    a, x, y = np.broadcast_arrays(*(np.asarray(v, dtype=float) for v in (a, x, one_minus_x)))
    b = np.full(a.shape, 0.5)
    out = np.full(x.shape, -np.inf)
    small = (x > 0) & (x < (a + 1.0) / (a + b + 2.0))
    large = x >= (a + 1.0) / (a + b + 2.0)
    a_s, b_s, x_s, y_s = a[small], b[small], x[small], y[small]
    with np.errstate(divide="ignore"):  # np.where evaluates both branches; the discarded one may be ln 0
        log_x = np.where(x_s < 0.5, np.log(x_s), np.log1p(-y_s))  # ln of the small one of x, 1-x is exact
        log_y = np.where(y_s < 0.5, np.log(y_s), np.log1p(-x_s))  # enough; a·ln x amplifies any rounding by a
    out[small] = (a_s * log_x + b_s * log_y - np.log(a_s) - _log_beta_half(a_s)
                  + np.log(_beta_continued_fraction(a_s, b_s, x_s)))
    out[large] = np.log(special.betaincc(b[large], a[large], y[large]))  # I_x(a,b) = 1 - I_{1-x}(b,a)
    return out


def log_cone_fraction(*, d_model, phi=None, min_cos=None):
    """Exact ln of the fraction of a d-ball inside a circular cone of half-angle φ (apex at the centre).

    .. math:: f(\\varphi, d) = \\tfrac12\\, I_{\\sin^2\\varphi}\\big(\\tfrac{d-1}{2}, \\tfrac12\\big)
              \\ (\\varphi \\le \\pi/2), \\qquad
              f(\\varphi, d) = 1 - f(\\pi - \\varphi, d)\\ (\\varphi > \\pi/2)

    (the area fraction of a spherical cap of angular radius φ). Computed in log space: the
    incomplete beta's prefactor :math:`x^a (1-x)^b / (a B(a, b))` is taken as a log and multiplied by a
    continued fraction of order one, so it is accurate far below float underflow (thousands of nats
    below zero for d in the thousands). Give φ in radians in [0, π], or ``min_cos`` in [-1, 1] (then
    φ = arccos(min_cos)/2, the published convention, :func:`cone_half_angle`). Needs d >= 2.

    >>> round(float(np.exp(log_cone_fraction(d_model=3, phi=np.pi / 3))), 6)  # (1 - cos φ)/2
    0.25
    >>> round(float(log_cone_fraction(d_model=768, min_cos=0.890)), 1)  # Pythia-160m, published min cos
    -1116.5
    """
    d = at_least("d_model", d_model, 2, integer=True)
    if (phi is None) == (min_cos is None):
        raise InputError("give exactly one of phi (radians) and min_cos")
    phi = cone_half_angle(min_cos) if phi is None else in_range("phi", phi, 0, np.pi)
    d, phi = np.broadcast_arrays(np.asarray(d, dtype=float), np.asarray(phi, dtype=float))
    narrow = np.minimum(phi, np.pi - phi)  # half-angle of the cone or of its complement
    log_f = np.asarray(math.log(0.5)
                       + _log_betainc_half((d - 1) / 2, np.sin(narrow) ** 2, np.cos(narrow) ** 2))
    wide = phi > np.pi / 2
    log_f[wide] = np.log1p(-np.exp(log_f[wide]))
    return as_float(log_f)


def log_cone_count(*, d_model, phi=None, min_cos=None, r=None, precision: str | None = None, eps=None):
    """The published cone convention: ball numerator plus ln f(φ, d). A heuristic, **not a bound**.

    .. math:: d\\ln\\Big(1 + \\frac{2r}{\\varepsilon}\\Big) + \\ln f(\\varphi, d)

    It multiplies the count of the *cube* :math:`[-r, r]^d` (r the L∞ radius) by the volume fraction
    of a *Euclidean* ball inside the cone: the two norms do not match, and a narrow cone along a
    diagonal of the cube holds far more than the fraction f of the cube's grid points. For tiny
    half-angles the value goes negative (fewer than one vector). Kept to reproduce the paper's
    refined slopes; :func:`log_cone_bound` is the norm-consistent bound. With an ``exact-*``
    precision the float count is multiplied by the fraction, the same heuristic.

    >>> round(float(log_cone_count(d_model=768, min_cos=0.890)), 1)  # Pythia-160m: 6388.2 - 1116.5
    5271.7
    """
    log_f = log_cone_fraction(d_model=d_model, phi=phi, min_cos=min_cos)
    return log_ball_count(d_model=d_model, r=r, precision=precision, eps=eps) + log_f


def thinnest_counted_cone(*, d_model, r2, eps):
    """The half-angle φ_* below which :func:`log_euclidean_cone_count` counts the cone of half-angle φ_*.

    .. math:: \\varphi_* = \\arcsin\\min\\Big(1, \\frac{1}{(d - 1)(1 + 2r_2/\\varepsilon)}\\Big)

    The shifted-cone count
    :math:`d\\ln(1 + (1 + 2r_2/\\varepsilon)\\sin\\varphi) - d\\ln\\sin\\varphi + \\ln f` falls as φ
    shrinks until about φ_* (where its derivative, to leading order in φ, vanishes) and then rises
    again to +inf: the apex moves back by ε/(2 sin φ), which for a thin cone costs more than the cone
    saves. A cone of half-angle φ < φ_* lies inside the one of half-angle φ_*, so the count at φ_*
    bounds it.
    """
    d = np.asarray(at_least("d_model", d_model, 2, integer=True), dtype=float)
    levels = 1 + 2 * np.asarray(positive("r2", r2)) / positive("eps", eps)
    return as_float(np.arcsin(np.minimum(1.0, 1 / ((d - 1) * levels))))


def log_euclidean_cone_count(*, d_model, r2, phi=None, min_cos=None, eps):
    """Points of a Euclidean cone sector pairwise at least ε apart (Euclidean, hence also L∞).

    The support lies in the cone of half-angle φ (apex at the origin) and in the Euclidean ball of
    radius :math:`r_2`. Give φ (a cone known to hold the support, e.g. a measured enclosing cone) or the
    smallest pairwise cosine, from which the proven half-angle is :func:`jung_half_angle` (not the
    published arccos(min cos)/2). For φ < π/2 the ε/2-neighbourhood of the cone is the same cone with its
    apex moved back by :math:`t = \\varepsilon/(2\\sin\\varphi)` (parallel boundaries at distance
    :math:`t\\sin\\varphi`), so the disjoint ε/2-balls around the points lie in a cone sector of
    radius :math:`r_2 + \\varepsilon/2 + t` and

    .. math:: \\ln P \\le d\\ln\\Big(1 + \\frac{2r_2}{\\varepsilon} + \\frac{1}{\\sin\\varphi}\\Big)
              + \\ln f(\\varphi, d);

    for φ >= π/2 the Euclidean ball, :math:`d\\ln(1 + 2r_2/\\varepsilon)`. Computed as
    :math:`d\\,[\\ln(1 + (1 + 2r_2/\\varepsilon)\\sin\\varphi) - \\ln\\sin\\varphi] + \\ln f` at
    :math:`\\max(\\varphi, \\varphi_*)` (:func:`thinnest_counted_cone`: a thinner cone is counted as the
    cone of half-angle φ_* that holds it), so it is finite and continuous down to φ = 0. It is never
    negative: the sector of radius 1 contains a ball of radius :math:`\\sin\\varphi/(1 + \\sin\\varphi)`.
    """
    d = at_least("d_model", d_model, 2, integer=True)
    if (phi is None) == (min_cos is None):
        raise InputError("give exactly one of phi (radians) and min_cos")
    phi = jung_half_angle(d_model=d, min_cos=min_cos) if phi is None else in_range("phi", phi, 0, np.pi)
    phi = np.maximum(phi, thinnest_counted_cone(d_model=d, r2=r2, eps=eps))
    log_f = log_cone_fraction(d_model=d, phi=phi)
    levels = 1 + 2 * np.asarray(r2) / eps  # 1 + 2 r2/ε
    sin_phi = np.sin(np.minimum(phi, np.pi / 2))
    narrow = d * (np.log1p(levels * sin_phi) - np.log(sin_phi)) + log_f
    return as_float(np.where(phi >= np.pi / 2, d * np.log(levels), narrow))


def log_cone_bound(*, d_model, r2, phi=None, min_cos=None, r=None, precision: str | None = None, eps=None):
    """Norm-consistent cone bound: the smaller of the L∞ ball count and the Euclidean cone count.

    .. math:: \\ln P \\le \\min\\Big(d\\ln\\Big(1 + \\frac{2r}{\\varepsilon}\\Big),\\
              d\\ln\\Big(1 + \\frac{2r_2}{\\varepsilon} + \\frac{1}{\\sin\\varphi}\\Big)
              + \\ln f(\\varphi, d)\\Big)

    Hypotheses: the support lies in the cube :math:`[-r, r]^d`, in the Euclidean ball of radius
    :math:`r_2` and in a cone of half-angle φ with apex at the origin; the points are pairwise at least
    ε apart in L∞ (ε the same per-coordinate step as the ball bound, set by r for a relative
    precision). L∞ separation implies Euclidean separation, so both counts apply
    (:func:`log_euclidean_cone_count`). The cone is given (``phi``: a measured enclosing cone) or
    proven from the smallest pairwise cosine (``min_cos``: :func:`jung_half_angle`); the published
    half-angle arccos(min cos)/2 does *not* establish the cone hypothesis (:func:`cone_half_angle`).
    The result is positive, finite, never above the ball count and continuous in min cos up to 1. With
    the published statistics the Euclidean term exceeds the ball count for every model
    (:math:`r_2 \\gg r`), so the minimum is the ball: the cone does not help once norms agree. Exact
    float counts are not a metric grid: use a relative or absolute precision.

    >>> ball = float(log_ball_count(d_model=768))
    >>> float(log_cone_bound(d_model=768, r=22.45, r2=271.0, min_cos=0.890)) == ball  # Pythia-160m
    True
    >>> round(float(log_cone_bound(d_model=768, r=1.0, r2=1.0, phi=0.1)), 1)  # a narrow cone helps
    4618.5
    """
    if precision in EXACT:
        raise InputError("the cone bound is a volume argument: use a relative or absolute precision")
    ball = log_ball_count(d_model=d_model, r=r, precision=precision, eps=eps)
    step = resolve_eps(r=r, precision=precision, eps=eps)
    cone = log_euclidean_cone_count(d_model=d_model, r2=r2, phi=phi, min_cos=min_cos, eps=step)
    return as_float(np.minimum(ball, cone))


def _log_unit_ball_volume(k):
    """ln ω_k = (k/2) ln π - ln Γ(k/2 + 1): the volume of the Euclidean unit ball of R^k (ω_0 = 1)."""
    k = np.asarray(k, dtype=float)
    return 0.5 * k * math.log(math.pi) - special.gammaln(0.5 * k + 1)


def _log_elementary_symmetric(log_x):
    """ln e_k(x) for k = 0..d (e_k = sum of the products of k distinct x_i), shape (d + 1,), from ln x."""
    log_e = np.full(log_x.size + 1, -np.inf)
    log_e[0] = 0.0
    for i, value in enumerate(log_x):  # e_k <- e_k + x_i e_{k-1}, d steps of a vector update
        log_e[1:i + 2] = np.logaddexp(log_e[1:i + 2], log_e[:i + 1] + value)
    return log_e


def ellipsoid_half_widths(semi_axes, axes):
    """Half-extent of the ellipsoid along each coordinate: :math:`h_i = \\sqrt{\\sum_j a_j^2 U_{ji}^2}`.

    ``axes`` (shape (k, d)) holds the unit directions of the k semi-axes as rows (e.g. principal
    components, :func:`accessibility.geometry.ellipsoid_axes`); the ellipsoid lies in the box
    :math:`\\prod_i [c_i - h_i, c_i + h_i]` around its centre c and touches every face of it.

    >>> ellipsoid_half_widths([3.0, 1.0], [[0.6, 0.8], [-0.8, 0.6]]).round(6).tolist()
    [1.969772, 2.473863]
    """
    a = at_least("semi_axes", np.atleast_1d(np.asarray(semi_axes, dtype=float)), 0)
    u = np.asarray(axes, dtype=float)
    if u.ndim != 2 or u.shape[0] != a.size:
        raise InputError(f"axes must have shape (len(semi_axes), d) = ({a.size}, d), got {u.shape}")
    return np.sqrt(a ** 2 @ u ** 2)


def log_ellipsoid_count(*, semi_axes, half_widths=None, r=None, precision: str | None = None, eps=None):
    """Ellipsoid support: ln of the number of points of an ellipsoid E pairwise >= ε apart in L∞.

    Same separation as :func:`log_ball_count` and :func:`log_box_count` (ε is the smallest step per
    coordinate), so the four numerators are comparable. Volume argument: the open cubes of side ε
    centred at the points are disjoint and lie in :math:`E + Q`, :math:`Q = [-\\varepsilon/2,
    \\varepsilon/2]^d`. Q is a sum of d orthogonal segments of length ε, and adding a segment of length
    ε along :math:`e_i` to a convex body L adds ε times the volume of the projection of L along
    :math:`e_i` (Cavalieri), so

    .. math:: \\mathrm{vol}(E + Q) = \\sum_{T \\subseteq \\{1..d\\}} \\varepsilon^{d-|T|}\\,
              \\mathrm{vol}_{|T|}(\\pi_T E) = \\sum_{T} \\varepsilon^{d-|T|}\\, \\omega_{|T|}
              \\sqrt{\\det M_{TT}},

    with :math:`\\pi_T` the projection on the coordinates in T, :math:`M = U^\\top \\mathrm{diag}(a^2) U`
    the shape matrix of E (semi-axes a, directions U) and :math:`\\omega_k` the volume of the unit
    k-ball. Two bounds on :math:`\\det M_{TT}` give

    .. math:: P \\le \\sum_{k=0}^{d} \\binom{d}{k}\\, \\omega_k
              \\prod_{j \\le k} \\frac{a_{(j)}}{\\varepsilon}
              \\quad\\text{and}\\quad
              P \\le \\sum_{k=0}^{d} \\omega_k\\, e_k\\Big(\\frac{h}{\\varepsilon}\\Big):

    Cauchy interlacing (the eigenvalues of :math:`M_{TT}` are at most the |T| largest :math:`a_{(j)}^2`)
    for any orientation of E; Hadamard's inequality (:math:`\\det M_{TT} \\le \\prod_{i \\in T} h_i^2`,
    :math:`h_i = \\sqrt{M_{ii}}` the half-widths, :func:`ellipsoid_half_widths`), when they are given, with
    :math:`e_k` the elementary symmetric polynomial. The smaller is returned. The second is exact for an
    axis-aligned ellipsoid. As :math:`\\omega_k \\le 2^k` (the unit ball lies in the cube), the first is
    at most the ball bound :math:`d\\ln(1 + 2a_{\\max}/\\varepsilon)` and the second at most the box bound
    :math:`\\sum_i \\ln(1 + 2h_i/\\varepsilon)` of the ellipsoid's bounding box, hence at most
    :func:`log_ball_count` whenever E fits in the cube :math:`[-r, r]^d`. In one dimension both equal
    :math:`\\ln(1 + 2a/\\varepsilon)`.

    ``semi_axes`` has shape (..., d): all d semi-axes (zeros for a flat ellipsoid); ``half_widths``
    shape (d,) (then ``semi_axes`` is one ellipsoid, padded with zeros to d). A relative precision
    needs r, the radius that sets ε = r·u; exact float counts do not apply (not a grid). Below, an
    axis-aligned ellipse with semi-axes 2ε and ε: 1 + 2(2 + 1) + 2π (the ε²-cube, the two edge strips
    and the area), which is exactly vol(E + Q)/ε²; without its orientation the bound is larger.

    >>> bool(np.isclose(log_ellipsoid_count(semi_axes=[1.5], eps=1.0),
    ...                 log_ball_count(d_model=1, r=1.5, eps=1.0)))
    True
    >>> # any orientation: 1 + 2·2·2 + 2π
    >>> round(float(np.exp(log_ellipsoid_count(semi_axes=[2.0, 1.0], eps=1.0))), 4)
    15.2832
    >>> round(float(np.exp(log_ellipsoid_count(semi_axes=[2.0, 1.0], half_widths=[2.0, 1.0], eps=1.0))), 4)
    13.2832
    """
    a = at_least("semi_axes", np.atleast_1d(np.asarray(semi_axes, dtype=float)), 0)
    if precision in EXACT:
        raise InputError("the ellipsoid bound is a volume argument: use a relative or absolute precision")
    eps = resolve_eps(r=r, precision=precision, eps=eps)
    if half_widths is not None:
        h = at_least("half_widths", np.atleast_1d(np.asarray(half_widths, dtype=float)), 0)
        if a.ndim != 1 or h.ndim != 1 or a.size > h.size:
            raise InputError("half_widths needs one ellipsoid: semi_axes (k,) and half_widths (d,) "
                             "with k <= d")
        if not np.isclose(np.sum(h ** 2), np.sum(a ** 2), rtol=1e-6):  # trace of M, two ways
            raise InputError("half_widths do not belong to semi_axes (sum of squares differ)")
        a = np.concatenate([a, np.zeros(h.size - a.size)])
    d = a.shape[-1]
    k = np.arange(d + 1)
    log_binomial = special.gammaln(d + 1) - special.gammaln(k + 1) - special.gammaln(d - k + 1)
    with np.errstate(divide="ignore"):  # a zero semi-axis: ln 0 = -inf, its terms vanish
        log_a = np.log(-np.sort(-a, axis=-1) / eps)  # descending
    prefix = np.concatenate([np.zeros(a.shape[:-1] + (1,)), np.cumsum(log_a, axis=-1)], axis=-1)
    best = special.logsumexp(log_binomial + _log_unit_ball_volume(k) + prefix, axis=-1)  # interlacing
    if half_widths is not None:
        with np.errstate(divide="ignore"):
            log_e = _log_elementary_symmetric(np.log(h / eps))
        best = min(float(best), float(special.logsumexp(log_e + _log_unit_ball_volume(k))))  # Hadamard
    return as_float(best)


# --- non-uniform decoder cells ------------------------------------------------------------------


@dataclass(frozen=True)
class CellEntropy:
    """Mean log-share of the decoder cells: the denominator of the cell-entropy heuristic.

    Attributes
    ----------
    entropy : H = -(1/|V'|) Σ_{v in V'} ln p_v over tokens with p_v > 0 (nats). H >= ln|V'| (Jensen).
    n_tokens : |V|, the number of shares given.
    n_zero : tokens with a zero share (unseen by a Monte-Carlo estimate: they bias H down).
    """

    entropy: float
    n_tokens: int
    n_zero: int

    @property
    def n_nonzero(self) -> int:
        return self.n_tokens - self.n_zero

    @property
    def zero_fraction(self) -> float:
        return self.n_zero / self.n_tokens


def cell_entropy(shares) -> CellEntropy:
    """H = -mean ln p_v over the tokens with p_v > 0, and how many tokens have p_v = 0.

    ``shares`` (shape (|V|,)) are cell shares or hit counts; they are normalised to sum to 1. Replacing
    ln|V| by H gives the cell-entropy slope C_cells = numerator / H, a **typical-sequence heuristic**,
    not a bound: if every sequence of V^n is accessible then :math:`|V|^n \\le P` whatever the cell
    shares, so Corollary 4.6's denominator stays ln|V|. The heuristic reads H as the number of nats a
    uniformly drawn prompt vector "spends" per emitted token when cells are unequal; its assumptions
    (prompts spread evenly over the support, tokens decoded independently of earlier ones) are not
    those of the theorem.

    >>> c = cell_entropy([0.5, 0.25, 0.25, 0.0])
    >>> round(c.entropy, 6), c.n_zero, round(math.log(3), 6)  # H >= ln|V'| = ln 3
    (1.155245, 1, 1.098612)
    """
    p = at_least("shares", np.asarray(shares, dtype=float).ravel(), 0)
    total = p.sum()
    if total <= 0:
        raise InputError("shares must have a positive sum")
    seen = p[p > 0] / total
    return CellEntropy(entropy=float(-np.log(seen).mean()), n_tokens=p.size, n_zero=int(p.size - seen.size))


# --- slopes: Corollary 4.6 ----------------------------------------------------------------------


def slope(numerator, *, vocab_size=None, entropy=None):
    """Slope C = numerator / ln|V| (Corollary 4.6) or numerator / H (the cell-entropy heuristic).

    >>> round(float(slope(log_ball_count(d_model=2048), vocab_size=50304)), 1)
    1573.6
    """
    if (vocab_size is None) == (entropy is None):
        raise InputError("give exactly one of vocab_size and entropy")
    denominator = _ln_vocab(vocab_size) if entropy is None else positive("entropy", entropy)
    return as_float(np.asarray(numerator) / denominator)


def target_slope(numerator, *, rate):
    """C_Q = numerator / h: the slope bound for targets drawn from a distribution Q.

    The count bound constrains *uniform* targets. For targets s drawn from Q, the accessible ones
    carry probability

    .. math:: Q(A_n(m)) \\le |A_n(m)| \\max_s Q(s) \\le P^m\\, e^{-n h_\\infty},
              \\qquad h_\\infty = -\\tfrac1n \\ln \\max_{s \\in V^n} Q(s),

    so :math:`Q(A_n(m)) \\ge 1/2` forces :math:`n \\le C_Q m + \\ln 2/h_\\infty` with
    :math:`C_Q = \\ln P / h_\\infty` (:func:`n50_bound`). ``rate`` is h in nats per token: the
    min-entropy rate gives the bound; an entropy rate (or a reference LM's cross-entropy) in its place
    is a typical-sequence heuristic and must be labelled so. Uniform targets: h = ln|V|, C_Q = C.

    >>> c = float(slope_bound(d_model=576, vocab_size=49152))
    >>> float(target_slope(log_ball_count(d_model=576), rate=math.log(49152))) == c
    True
    """
    return as_float(np.asarray(numerator) / positive("rate", rate))


def word_rate(*, n_words, tokens_per_word, min_entropy: bool = False):
    """Per-token rate (nats) of targets made of words drawn uniformly from a list of W words.

    .. math:: h = \\frac{\\ln W}{\\bar t},

    with :math:`\\bar t` the mean number of tokens per word (``tokens_per_word``: one count per word of
    the list, or the mean). Each word carries ln W nats, spread over its tokens. With
    ``min_entropy=True`` the largest count :math:`t_\\max` replaces the mean,
    :math:`h_\\infty = \\ln W/t_\\max`: a string of w words has probability :math:`W^{-w}` and at most
    :math:`w\\,t_\\max` tokens. Two word strings that tokenized alike would add their probabilities and
    raise max Q; they do not when the tokenizer decodes back to the text (tokenization is then one to
    one on texts). Targets cut at exactly n tokens can end inside a word, which also raises max Q: the
    rigorous n_50 bound then gains :math:`t_\\max` tokens (:func:`n50_bound`, ``cut_tokens``).

    >>> round(float(word_rate(n_words=400_000, tokens_per_word=[1, 2, 2, 3])), 4)  # ln 400000 / 2
    6.4496
    """
    counts = at_least("tokens_per_word", np.atleast_1d(np.asarray(tokens_per_word, dtype=float)), 1)
    words = at_least("n_words", n_words, 2, integer=True)
    return float(np.log(words) / (counts.max() if min_entropy else counts.mean()))


def slope_bound(*, d_model, vocab_size, r=None, precision: str | None = None, eps=None):
    """Corollary 4.6: :math:`C = d \\ln(1 + 2r/\\varepsilon) / \\ln|V|`, so n*(m) <= C·m.

    If every sequence of length n is accessible with m prompt vectors, then
    :math:`|V|^n \\le (1 + 2r/\\varepsilon)^{dm}`. Relative conventions make C independent of r.

    >>> round(float(slope_bound(d_model=768, vocab_size=50304)), 2)  # Pythia-160m, fp16 relative
    590.1
    """
    return slope(log_ball_count(d_model=d_model, r=r, precision=precision, eps=eps), vocab_size=vocab_size)


def slopes_by_precision(*, d_model, vocab_size, r, r2=None, eps=ABSOLUTE_EPS) -> dict:
    """Corollary 4.6's C under each reading of "precision", side by side (tokens per prompt vector).

    Keys (each a proven bound under its own quantisation hypothesis):

    * ``fp16``, ``bf16``, ``fp32``: relative, ε = r·u, support the cube of L∞ radius r (``fp16`` is
      the published reading); C does not depend on r;
    * ``fp16, eps = r2 u``: the step set by the Euclidean radius instead, r2/r times coarser;
    * ``fp16, L2 ball r2``: the Euclidean ball of radius r2 at the step r·u (Euclidean packing, the
      norm in which a cone is measured), never smaller than the cube's count;
    * ``absolute``: a fixed step ``eps`` (default :data:`ABSOLUTE_EPS`) on the cube of radius r;
    * ``exact-fp16``, ``exact-bf16``, ``exact-fp32``: the exact number of values the format represents
      in [-r, r], d-th power: the literal count of representable vectors, no packing argument.

    The two r2 keys need ``r2``.

    >>> views = slopes_by_precision(d_model=768, vocab_size=50304, r=22.45, r2=271.0)  # Pythia-160m
    >>> [round(views[k], 1) for k in ("fp16", "bf16", "exact-fp16", "exact-bf16", "exact-fp32")]
    [590.1, 442.7, 751.3, 739.5, 1526.2]
    """
    c = lambda **kw: float(slope_bound(d_model=d_model, vocab_size=vocab_size, **kw))  # noqa: E731
    views = {name: c(r=r, precision=name) for name in FORMATS}
    if r2 is not None:
        views["fp16, eps = r2 u"] = c(r=r, eps=positive("r2", r2) * FORMATS["fp16"].unit_roundoff)
        views["fp16, L2 ball r2"] = c(r=r2, eps=resolve_eps(r=r, precision="fp16"))
    views["absolute"] = c(r=r, eps=eps)
    views.update({name: c(r=r, precision=name) for name in EXACT})
    return views


def _log_geometric_sum(log_k, m):
    """ln Σ_{k=1}^{m} K^k for ln K > 0: m ln K + ln(1 - K^-m) - ln(1 - K^-1)."""
    return m * log_k + np.log1p(-np.exp(-m * log_k)) - np.log1p(-np.exp(-log_k))


def log_count(*, d_model, m, r=None, precision: str | None = None, eps=None, all_lengths: bool = False):
    """Theorem 4.5: ln of the number of accessible sequences (of any length) with m prompt vectors.

    .. math:: \\ln|A(m)| \\le d\\,m \\ln(1 + 2r/\\varepsilon)

    whatever the depth, the context length or the number of generation steps. ``all_lengths`` counts
    prompts of every length 1..m: :math:`\\ln\\sum_{k=1}^m K^k` with :math:`K = (1+2r/\\varepsilon)^d`,
    which exceeds the fixed-m value by :math:`\\ln(K/(K-1)) < 1/(K-1)`.

    >>> round(to_log10(log_count(d_model=768, m=1)), 1)  # one Pythia-160m vector: 10^2774 sequences
    2774.4
    """
    m = at_least("m", m, 1, integer=True)
    log_k = log_ball_count(d_model=d_model, r=r, precision=precision, eps=eps)
    return as_float(_log_geometric_sum(log_k, m) if all_lengths else m * log_k)


def n_star_bound(*, m, slope):
    """Corollary 4.6: the longest n for which all of V^n can be accessible is at most C·m."""
    return as_float(at_least("m", m, 1, integer=True) * positive("slope", slope))


def _log_count_from_slope(m, slope, ln_v, all_lengths):
    m, slope = at_least("m", m, 1, integer=True), positive("slope", slope)
    return _log_geometric_sum(slope * ln_v, m) if all_lengths else m * slope * ln_v


def log10_fraction_bound(*, n, m, slope, vocab_size, all_lengths: bool = False):
    """Corollary 4.6 (fixed m): log10 of the bound on the accessible fraction of V^n.

    .. math:: \\frac{|A_n(m)|}{|V|^n} \\le \\min\\big(1, |V|^{-(n - C m)}\\big)

    Flat at 1 up to n = C·m, then divided by |V| per extra token. ``all_lengths`` allows every prompt
    length 1..m (:func:`log_count`). ``slope`` may come from any numerator (:func:`slope`).

    >>> float(log10_fraction_bound(n=600, m=1, slope=590.1, vocab_size=10))
    -9.9
    """
    ln_v = _ln_vocab(vocab_size)
    n = at_least("n", n, 0)
    log_frac = _log_count_from_slope(m, slope, ln_v, all_lengths) - n * ln_v
    return as_float(np.minimum(0.0, log_frac / LN10))


def _rate(vocab_size, rate):
    """ln|V| (uniform targets) or a given per-token rate h (targets from Q, :func:`target_slope`)."""
    if (vocab_size is None) == (rate is None):
        raise InputError("give exactly one of vocab_size (uniform targets) and rate (nats per token)")
    return _ln_vocab(vocab_size) if rate is None else positive("rate", rate)


def length_threshold(*, m, slope, delta, vocab_size=None, rate=None, all_lengths: bool = False):
    """Corollary 4.6: the length past which the accessible fraction (probability) is below δ.

    .. math:: n(\\delta) = C m + \\frac{\\ln(1/\\delta)}{\\ln|V|}

    With ``rate`` = h (and ``slope`` = C_Q, :func:`target_slope`) it is the same statement for targets
    drawn from Q: :math:`C_Q m + \\ln(1/\\delta)/h`.

    >>> float(length_threshold(m=2, slope=100.0, vocab_size=10, delta=0.01))
    202.0
    """
    h = _rate(vocab_size, rate)
    delta = in_range("delta", positive("delta", delta), 0, 1)
    return as_float((_log_count_from_slope(m, slope, h, all_lengths) - np.log(delta)) / h)


def n50_bound(*, m, slope, vocab_size=None, rate=None, cut_tokens=0):
    """The upper bound on the measured n_50(m): :math:`n_{50}(m) \\le C m + \\ln 2/\\ln|V|`.

    At n_50 half the targets are accessible, so the fraction (uniform targets, ``vocab_size``) or the
    probability (targets from Q, ``rate`` = h with ``slope`` = C_Q) is at least 1/2:
    :func:`length_threshold` at δ = 1/2. A line fitted to n_50 over a few m, with an intercept, is
    not bounded by C; the points are.

    ``cut_tokens``: targets made of words drawn uniformly from W words (:func:`word_rate` with
    ``min_entropy=True``, :math:`h = \\ln W/t_\\max`) and cut at exactly n tokens. An n-token target
    fixes every word before its last one, which may be cut, or may end at token n and still be the start
    of a longer word: those words cover at least :math:`n - t_\\max` tokens, so
    :math:`\\max Q \\le e^{-h (n - t_\\max)}` and :math:`n_{50} \\le C_Q m + \\ln 2/h + t_\\max`. Give
    ``cut_tokens`` = :math:`t_\\max` (most tokens per word).

    >>> round(float(n50_bound(m=1, slope=590.1, vocab_size=50304)), 3)  # 590.1 + ln 2 / ln 50304
    590.164
    """
    extra = at_least("cut_tokens", cut_tokens, 0, integer=True)
    return as_float(length_threshold(m=m, slope=slope, delta=N50_FRACTION, vocab_size=vocab_size, rate=rate)
                    + extra)


# --- Corollary 4.10: unbounded context (mean-field) ---------------------------------------------


def log_log_measure_packing(*, d_model, r=None, precision: str | None = None, eps=None):
    """Corollary 4.10: upper bound on ln ln M_∞, M_∞ = ε-packing number of measures on the support.

    Metric: Wasserstein-1 over the norm in which the support S has radius r. Hypothesis
    (quantisation): the output depends on the prompt only through a map of its empirical measure onto
    a set of measures pairwise at least ε apart in W1 (a mean-field reading: causal masking and
    positional encodings break it). Construction of a cover with radius below ε/2:
    (1) an η-net Z of S with η = ε/4 (a maximal η-separated set), of size
    :math:`K \\le (1 + 8r/\\varepsilon)^d` by the packing lemma; moving each atom to its nearest net point
    costs W1 < ε/4; (2) weights on Z rounded to multiples of 1/q, q = ⌈K/ε_w⌉, ε_w = ε/(4r), by largest
    remainders (ℓ1 error < K/q <= ε_w, hence W1 <= r·ℓ1 < ε/4). The cover has at most
    :math:`\\binom{q + K - 1}{K - 1}` points, so

    .. math:: \\ln M_\\infty \\le K\\,\\big(1 + \\ln(1 + 4r/\\varepsilon)\\big) + 1,\\qquad
              \\ln\\ln M_\\infty \\le d \\ln(1 + 8r/\\varepsilon)
              + \\ln\\big(1 + \\ln(1 + 4r/\\varepsilon)\\big) + \\ldots

    Only relative and absolute precisions (the construction needs a metric resolution ε).
    """
    spec = dict(r=r, precision=precision, eps=eps)  # ln(1 + c·r/ε) in log space: r/ε may overflow
    log_k = _d(d_model) * log1p_ratio(2 / NET_RADIUS_FRACTION, **spec)
    log_a = np.log1p(log1p_ratio(1 / WEIGHT_ERROR_FRACTION, **spec))
    return as_float(np.logaddexp(log_k + log_a, 0.0))  # ln(K·A + 1)


def log10_unbounded_threshold(*, d_model, vocab_size, r=None, precision: str | None = None, eps=None):
    """Corollary 4.10: log10 of the threshold N = ln M_∞ / ln|V|, independent of the prompt length.

    Past N the accessible fraction is at most :math:`|V|^{-(n - N)}` for every prompt length. N itself
    overflows any float (log10 N ≈ d log10(1 + 8r/ε)): a qualitative statement, unlike Corollary 4.6.

    >>> round(float(log10_unbounded_threshold(d_model=768, vocab_size=50304)))  # Pythia-160m
    3237
    """
    lnln_m = log_log_measure_packing(d_model=d_model, r=r, precision=precision, eps=eps)
    return as_float((lnln_m - np.log(_ln_vocab(vocab_size))) / LN10)


def log10_unbounded_fraction_bound(*, n, d_model, vocab_size, r=None, precision: str | None = None, eps=None):
    """Corollary 4.10: log10 of min(1, M_∞ / |V|^n), for any prompt length (0 until n passes N)."""
    ln_v = _ln_vocab(vocab_size)
    n = at_least("n", n, 0)
    lnln_m = log_log_measure_packing(d_model=d_model, r=r, precision=precision, eps=eps)
    with np.errstate(over="ignore", divide="ignore"):
        log_frac = np.exp(lnln_m) - n * ln_v  # inf - finite = inf when ln M_∞ overflows
    return as_float(np.minimum(0.0, log_frac / LN10))
