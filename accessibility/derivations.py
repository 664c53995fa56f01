"""Symbolic derivations (SymPy) of the packing lemma, Theorem 4.5 and Corollaries 4.6 and 4.10.

Each function returns a SymPy expression built from symbols with assumptions (``positive=True``,
``integer=True``), derived step by step rather than typed in: the packing lemma from a ratio of ball
volumes, Theorem 4.5 as an m-fold product, Corollary 4.6 by solving
:math:`|V|^n \\le (1+2r/\\varepsilon)^{dm}` for n, Corollary 4.10 from the size of a cover of the
probability measures, the ellipsoid's L∞ count by Cavalieri's principle. ``sympy.latex`` renders
each for the book; ``tests/test_derivations.py`` lambdifies them and compares with the fast numeric
versions in :mod:`accessibility.bounds` (one truth, two paths).

>>> sympy.simplify(theorem_4_5() - (1 + 2 * r / eps) ** (d * m))
0
"""

from __future__ import annotations

import sympy

#: Width, prompt length, output length.
d, m, n = sympy.symbols("d m n", positive=True, integer=True)
#: Support radius, precision, target fraction δ, ball-volume constant κ_d, cone half-angle φ.
r, eps, delta, kappa, phi = sympy.symbols("r varepsilon delta kappa_d varphi", positive=True)
#: Vocabulary size |V|.
V = sympy.Symbol("|V|", positive=True, integer=True)
#: Summation index, size K of a finite set, excess q = K - 1 > 0.
k = sympy.Symbol("k", positive=True, integer=True)
K, q = sympy.symbols("K q", positive=True)
_t = sympy.Symbol("t", positive=True)


def ball_volume(radius, dim=d):
    """Volume :math:`\\kappa_d\\,\\rho^d` of a ball of radius ρ (any norm; κ_d is the unit ball's)."""
    return kappa * radius**dim


def packing_volume_ratio(radius=r, precision=eps):
    """Volume of the ball of radius r + ε/2 over that of an ε/2-ball (unsimplified, for display).

    Points pairwise at least ε apart have disjoint open ε/2-balls, all inside the ball of radius
    r + ε/2, so their number is at most this ratio.
    """
    return ball_volume(radius + precision / 2) / ball_volume(precision / 2)


def packing_lemma(radius=r, precision=eps):
    """Packing lemma: at most :math:`(1 + 2r/\\varepsilon)^d` points of a radius-r ball are ε apart.

    >>> packing_lemma()
    ((2*r + varepsilon)/varepsilon)**d
    """
    return sympy.powsimp(sympy.simplify(packing_volume_ratio(radius, precision)), force=True)


def theorem_4_5():
    """Theorem 4.5: m prompt vectors give at most :math:`(1 + 2r/\\varepsilon)^{dm}` accessible sequences.

    The output of a deterministic model is a function of its (distinguishable) prompt, and a prompt is
    an m-tuple of vectors, each one of at most :math:`(1 + 2r/\\varepsilon)^d`: an m-fold product.

    >>> theorem_4_5()
    ((2*r + varepsilon)/varepsilon)**(d*m)
    """
    return sympy.powsimp(packing_lemma() ** m, force=True)


def corollary_4_6_n_star():
    """Corollary 4.6: solving :math:`|V|^n \\le (1+2r/\\varepsilon)^{dm}` for n gives n*(m) <= C·m.

    >>> sympy.simplify(corollary_4_6_n_star() - m * d * sympy.log(1 + 2 * r / eps) / sympy.log(V))
    0
    """
    log_count = sympy.expand_log(sympy.log(theorem_4_5()), force=True)
    (solution,) = sympy.solve(sympy.Eq(n * sympy.log(V), log_count), n)
    return sympy.simplify(solution)


def corollary_4_6_slope():
    """The slope :math:`C = d\\ln(1 + 2r/\\varepsilon)/\\ln|V|` (log base cancels)."""
    return sympy.simplify(sympy.expand_log(corollary_4_6_n_star() / m, force=True))


def corollary_4_6_fraction():
    """Accessible fraction of V^n, before capping at 1:
    :math:`(1+2r/\\varepsilon)^{dm}/|V|^n = |V|^{-(n - Cm)}`.

    >>> sympy.simplify(sympy.expand_log(sympy.log(corollary_4_6_fraction()), force=True)
    ...                - (corollary_4_6_slope() * m - n) * sympy.log(V))
    0
    """
    return theorem_4_5() / V**n


def corollary_4_6_log10_fraction():
    """log10 of the fraction bound, :math:`\\min(0, (Cm - n)\\log_{10}|V|)`, in log space (no overflow)."""
    log_fraction = sympy.expand_log(sympy.log(corollary_4_6_fraction()), force=True)
    return sympy.Min(0, sympy.simplify(log_fraction / sympy.log(10)))


def corollary_4_6_threshold():
    """Length past which the fraction is below δ: :math:`n(\\delta) = Cm + \\ln(1/\\delta)/\\ln|V|`.

    >>> sympy.simplify(corollary_4_6_threshold() - corollary_4_6_slope() * m
    ...                + sympy.log(delta) / sympy.log(V))
    0
    """
    (solution,) = sympy.solve(sympy.Eq(sympy.log(corollary_4_6_fraction()), sympy.log(delta)), n)
    return sympy.simplify(sympy.expand_log(solution, force=True))


def all_lengths_count(size=None):
    """Prompts of every length 1..m: :math:`\\sum_{k=1}^m K^k = K(K^m - 1)/(K - 1)`, K the one-vector count.

    Derived with K = 1 + q, q > 0 (so the geometric series has no degenerate branch). It is at most
    :math:`K^m \\cdot K/(K-1)`: less than one extra token once K > |V|.

    >>> sympy.simplify(all_lengths_count() - K * (K**m - 1) / (K - 1))
    0
    """
    series = sympy.summation((1 + q) ** k, (k, 1, m))
    return sympy.simplify(series.subs(q, (K if size is None else size) - 1))


def corollary_4_10_net_size():
    """Size of an ε/4-net of the support: the packing lemma at η = ε/4, :math:`(1 + 8r/\\varepsilon)^d`.

    >>> sympy.simplify(corollary_4_10_net_size() - (1 + 8 * r / eps) ** d)
    0
    """
    return packing_lemma(precision=eps / 4)


def corollary_4_10_log_packing():
    """Upper bound on ln M_∞, the ε-packing number of measures on the support (Wasserstein-1).

    Cover: atoms moved to an ε/4-net (K points, W1 < ε/4), weights rounded to multiples of 1/q with
    q = ⌈K/ε_w⌉, ε_w = ε/(4r) (W1 <= r·ℓ1 < ε/4). The cover has :math:`\\binom{q+K-1}{K-1}` points and
    :math:`\\ln\\binom{q+K-1}{K-1} \\le (K-1)(1 + \\ln\\frac{q+K-1}{K-1})
    \\le K(1 + \\ln(1 + 1/\\varepsilon_w)) + 1`.
    """
    inverse_weight_resolution = 4 * r / eps  # 1/ε_w
    return corollary_4_10_net_size() * (1 + sympy.log(1 + inverse_weight_resolution)) + 1


def corollary_4_10_threshold():
    """Corollary 4.10: :math:`N = \\ln M_\\infty / \\ln|V|`, independent of the prompt length m.

    >>> m in corollary_4_10_threshold().free_symbols
    False
    """
    return corollary_4_10_log_packing() / sympy.log(V)


def cone_fraction(dim: int):
    """Fraction of a dim-ball inside a cone of half-angle φ, from the polar integral (small dim only).

    :math:`f = \\int_0^\\varphi \\sin^{d-2} t\\,dt / \\int_0^\\pi \\sin^{d-2} t\\,dt`; a closed form to check
    :func:`accessibility.bounds.log_cone_fraction` against.

    >>> cone_fraction(3)
    1/2 - cos(varphi)/2
    """
    integrand = sympy.sin(_t) ** (dim - 2)
    whole = sympy.integrate(integrand, (_t, 0, sympy.pi))
    return sympy.simplify(sympy.integrate(integrand, (_t, 0, phi)) / whole)


def unit_ball_volume(dim):
    """Volume :math:`\\omega_k = \\pi^{k/2}/\\Gamma(k/2 + 1)` of the Euclidean unit ball of R^k.

    >>> [unit_ball_volume(k) for k in range(4)]
    [1, 2, pi, 4*pi/3]
    """
    half = sympy.Rational(dim, 2)
    return sympy.pi**half / sympy.gamma(half + 1)


def _with_segments(semi_axes, segments):
    """Volume of an axis-aligned ellipsoid plus segments [0, ε] along the coordinates ``segments``.

    Cavalieri: adding a segment of length ε along coordinate j adds ε times the volume of the
    projection along j, which is the ellipsoid without axis j plus the remaining segments.
    """
    if not segments:
        return unit_ball_volume(len(semi_axes)) * sympy.Mul(*semi_axes)
    j, rest = segments[0], segments[1:]
    return _with_segments(semi_axes, rest) + eps * _with_segments(
        [x for x in semi_axes if x != j], [x for x in rest if x != j])


def ellipsoid_cube_count(dim: int):
    """:math:`\\mathrm{vol}(E + [-\\varepsilon/2, \\varepsilon/2]^d)/\\varepsilon^d` for an axis-aligned
    ellipsoid E.

    The L∞ packing count of the ellipsoid (:func:`accessibility.bounds.log_ellipsoid_count`), derived by
    adding the cube one segment at a time; semi-axes ``a_1 .. a_dim``. Equals
    :math:`\\sum_T \\omega_{|T|} \\prod_{i \\in T} a_i/\\varepsilon`; in one dimension it is the
    packing lemma, and with :math:`\\omega_k` replaced by its bounding cube's volume :math:`2^k` it is
    the box count.

    >>> ellipsoid_cube_count(1)
    2*a_1/varepsilon + 1
    >>> sympy.expand(ellipsoid_cube_count(2) * eps**2)
    pi*a_1*a_2 + 2*a_1*varepsilon + 2*a_2*varepsilon + varepsilon**2
    """
    semi = list(sympy.symbols(f"a_1:{dim + 1}", positive=True))
    return sympy.expand(_with_segments(semi, semi) / eps**dim)
