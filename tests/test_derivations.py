"""accessibility.derivations: each derived expression equals its closed form, and its lambdified
version agrees with the fast numeric function in accessibility.bounds on a grid."""

import itertools
import math

import mpmath
import numpy as np
import pytest
import sympy

from accessibility import bounds
from accessibility import derivations as D

# (d, |V|, r, eps, m, n): small enough that the SymPy expressions evaluate without overflow
GRID = list(itertools.product([1, 3, 8], [2, 16, 50304], [0.5, 3.0], [0.01, 0.7], [1, 2, 5], [1, 40]))


def test_packing_lemma_is_the_volume_ratio():
    closed = (1 + 2 * D.r / D.eps) ** D.d
    assert sympy.simplify(D.packing_lemma() - closed) == 0
    assert sympy.simplify(D.packing_volume_ratio() - closed) == 0
    assert D.kappa not in D.packing_lemma().free_symbols  # the unit-ball volume cancels (any norm)


def test_theorem_and_corollary_4_6_closed_forms():
    log_v = sympy.log(D.V)
    slope = D.d * sympy.log(1 + 2 * D.r / D.eps) / log_v
    assert sympy.simplify(D.theorem_4_5() - (1 + 2 * D.r / D.eps) ** (D.d * D.m)) == 0
    assert sympy.simplify(D.corollary_4_6_slope() - slope) == 0
    assert sympy.simplify(D.corollary_4_6_n_star() - slope * D.m) == 0
    assert sympy.simplify(D.corollary_4_6_threshold() - (slope * D.m + sympy.log(1 / D.delta) / log_v)) == 0
    frac = sympy.expand_log(sympy.log(D.corollary_4_6_fraction()), force=True)
    assert sympy.simplify(frac - (slope * D.m - D.n) * log_v) == 0
    relative = D.corollary_4_6_slope().subs(D.eps, D.r * sympy.Rational(1, 2048))  # relative ε
    assert D.r not in relative.free_symbols


def test_all_lengths_and_corollary_4_10_closed_forms():
    assert sympy.simplify(D.all_lengths_count() - D.K * (D.K**D.m - 1) / (D.K - 1)) == 0
    assert sympy.simplify(D.corollary_4_10_net_size() - (1 + 8 * D.r / D.eps) ** D.d) == 0
    expected = (1 + 8 * D.r / D.eps) ** D.d * (1 + sympy.log(1 + 4 * D.r / D.eps)) + 1
    assert sympy.simplify(D.corollary_4_10_log_packing() - expected) == 0
    assert D.m not in D.corollary_4_10_threshold().free_symbols


@pytest.mark.parametrize("dim", [2, 3, 4, 5, 6])
def test_cone_fraction_integral_matches_incomplete_beta(dim):
    """The polar-integral closed form equals ½ I_{sin²φ}((d-1)/2, ½) and the log-space numeric version."""
    closed = D.cone_fraction(dim)
    half_beta = sympy.betainc_regularized(sympy.Rational(dim - 1, 2), sympy.S.Half, 0,
                                          sympy.sin(D.phi) ** 2) / 2
    f = sympy.lambdify(D.phi, closed, "mpmath")
    phis = np.array([0.05, 0.4, 1.0, 1.5, 2.0, 3.0])
    with mpmath.workdps(40):  # the closed forms cancel badly near φ = 0 in double precision
        for value in (0.1, 0.7, 1.3, 1.5707):
            assert float(f(value)) == pytest.approx(float(half_beta.subs(D.phi, value).evalf(30)), rel=1e-12)
        reference = [float(mpmath.log(f(p))) for p in phis]
    np.testing.assert_allclose(bounds.log_cone_fraction(d_model=dim, phi=phis), reference, rtol=1e-13)


@pytest.mark.parametrize("dim", [1, 2, 3, 4])
def test_ellipsoid_cube_count_is_the_subset_sum_and_agrees_with_bounds(dim):
    """Cavalieri, derived in SymPy, equals the closed sum over coordinate subsets and the numeric
    bound for axis-aligned ellipsoids (where the half-widths are the semi-axes and it is exact)."""
    count = D.ellipsoid_cube_count(dim)
    semi = sorted(count.free_symbols - {D.eps}, key=str)
    closed = sum(D.unit_ball_volume(len(t)) * sympy.Mul(*t) / D.eps ** len(t)
                 for size in range(dim + 1) for t in itertools.combinations(semi, size))
    assert sympy.simplify(count - closed) == 0
    f = sympy.lambdify((*semi, D.eps), count, "math")
    rng = np.random.default_rng(dim)
    for _ in range(20):
        a, eps = rng.uniform(0, 5, dim), rng.uniform(0.1, 2)
        ours = bounds.log_ellipsoid_count(semi_axes=a, half_widths=a, eps=eps)
        assert ours == pytest.approx(math.log(f(*a, eps)), rel=1e-12)


def _lambdify(expr):
    return sympy.lambdify((D.d, D.V, D.r, D.eps, D.m, D.n, D.delta), expr, "math")


def test_lambdified_derivations_agree_with_bounds_on_a_grid():
    slope = _lambdify(D.corollary_4_6_slope())
    n_star = _lambdify(D.corollary_4_6_n_star())
    log10_frac = _lambdify(D.corollary_4_6_log10_fraction())
    threshold = _lambdify(D.corollary_4_6_threshold())
    log_count = _lambdify(sympy.expand_log(sympy.log(D.theorem_4_5()), force=True))
    for d, v, r, eps, m, n in GRID:
        args = (d, v, r, eps, m, n, 0.01)
        c = bounds.slope_bound(d_model=d, vocab_size=v, r=r, eps=eps)
        assert c == pytest.approx(slope(*args), rel=1e-12)
        assert bounds.n_star_bound(m=m, slope=c) == pytest.approx(n_star(*args), rel=1e-12)
        assert bounds.log_count(d_model=d, m=m, r=r, eps=eps) == pytest.approx(log_count(*args), rel=1e-12)
        assert bounds.log10_fraction_bound(n=n, m=m, slope=c, vocab_size=v) == pytest.approx(
            log10_frac(*args), rel=1e-12, abs=1e-12)
        assert bounds.length_threshold(m=m, slope=c, vocab_size=v, delta=0.01) == pytest.approx(
            threshold(*args), rel=1e-12)


def test_lambdified_all_lengths_and_corollary_4_10_agree_with_bounds():
    size = sympy.Symbol("size", positive=True)
    series = sympy.lambdify((size, D.m), D.all_lengths_count().subs(D.K, size), "math")
    log_packing = _lambdify(D.corollary_4_10_log_packing())
    for d, v, r, eps, m, n in GRID:
        if d * math.log1p(8 * r / eps) > 30:  # keep K (1 + 8r/ε)^d representable
            continue
        kk = (1 + 2 * r / eps) ** d
        assert bounds.log_count(d_model=d, m=m, r=r, eps=eps, all_lengths=True) == pytest.approx(
            math.log(series(kk, m)), rel=1e-11)
        args = (d, v, r, eps, m, n, 0.01)
        assert bounds.log_log_measure_packing(d_model=d, r=r, eps=eps) == pytest.approx(
            math.log(log_packing(*args)), rel=1e-12)
        assert bounds.log10_unbounded_threshold(d_model=d, vocab_size=v, r=r, eps=eps) == pytest.approx(
            math.log10(log_packing(*args) / math.log(v)), rel=1e-12, abs=1e-12)


def test_every_derivation_renders_to_latex():
    for fn in (D.packing_lemma, D.theorem_4_5, D.corollary_4_6_slope, D.corollary_4_6_threshold,
               D.corollary_4_10_log_packing, D.corollary_4_10_threshold):
        assert "varepsilon" in sympy.latex(fn())
