"""accessibility.derivations: every chain is checked step by step, every result equals the paper's
closed form, agrees with the numeric functions of accessibility.bounds over random parameters, and
every step SymPy cannot check (prose) is tested numerically against a brute-force reference."""

import itertools
import math

import mpmath
import numpy as np
import pytest
import sympy
from scipy import stats

from accessibility import bounds
from accessibility import derivations as D

RNG = np.random.default_rng(2026)
# The paper's closed forms (SPEC §3), the independent reference for what SymPy derives.
ONE_VECTOR = (1 + 2 * D.r / D.eps) ** D.d
SLOPE = D.d * sympy.log(1 + 2 * D.r / D.eps) / sympy.log(D.V)

DERIVATIONS = {  # each derivation and the prose steps it may rely on (a new unchecked step fails here)
    D.containment: {"triangle inequality, |y − x| = ε/2 − s, |x − c| = r − u"},
    D.disjointness: {"triangle inequality through a common point y"},
    D.packing_lemma: {"disjoint balls inside a larger ball: volume comparison"},
    D.theorem_4_5: {"quantisation: the output is a function of Q(x), Q onto Z",
                    "disjoint balls inside a larger ball: volume comparison"},
    D.corollary_4_6_n_star: {"quantisation: the output is a function of Q(x), Q onto Z",
                             "disjoint balls inside a larger ball: volume comparison"},
    D.corollary_4_6_fraction: {"quantisation: the output is a function of Q(x), Q onto Z",
                               "disjoint balls inside a larger ball: volume comparison"},
    D.corollary_4_6_threshold: set(),
    D.n50_bound: {"half the targets accessible; union bound Q(A) ≤ |A| max Q"},
    D.all_lengths: set(),
    D.log1p_below_x: set(),
    D.corollary_4_10_net_size: {"disjoint balls inside a larger ball: volume comparison"},
    D.corollary_4_10_cover_radius: {"net move plus weight rounding, W1 ≤ r times the l1 error"},
    D.corollary_4_10_log_packing: {"packing ≤ cover at radius ε/2; stars and bars",
                                   "binomial(n, b) ≤ (e n / b) to the b"},
    D.cone_count: {"disjoint ε/2-balls inside the shifted cone sector"},
}


def _draws(count=40):
    """Random (d, |V|, r, ε, m, n, δ) with counts small enough for plain floats."""
    for _ in range(count):
        d = int(RNG.integers(1, 9))
        r = float(RNG.uniform(0.1, 5.0))
        eps = float(r * RNG.uniform(0.02, 1.5))
        yield (d, int(RNG.integers(2, 60000)), r, eps, int(RNG.integers(1, 6)), int(RNG.integers(0, 80)),
               float(RNG.uniform(1e-6, 0.99)))


def _lambdify(expr):
    return sympy.lambdify((D.d, D.V, D.r, D.eps, D.m, D.n, D.delta), expr, "mpmath")


# --- the chains ---------------------------------------------------------------------------------


@pytest.mark.parametrize("derive", list(DERIVATIONS), ids=lambda f: f.__name__)
def test_every_step_is_checked_or_a_listed_prose_step(derive):
    derivation = derive()
    assert {s.check for s in derivation.steps} <= {D.IDENTITY, D.SCALE, D.INCREASING, D.WEAKER, D.MONOTONE,
                                                   D.LEMMA, D.HYPOTHESIS, D.PROSE}
    assert {s.reason for s in derivation.prose_steps} == DERIVATIONS[derive]
    assert sum(s.check != D.PROSE for s in derivation.steps) >= 1
    assert derivation.latex().startswith(r"\begin{aligned}")  # plain-text reasons render


def test_a_wrong_step_is_refused():
    chain = D._Chain("test", D.n, D.m, "hypothesis", check=D.HYPOTHESIS)
    with pytest.raises(D.DerivationError):
        chain.equal(D.m + 1, "not an identity")
    with pytest.raises(D.DerivationError):
        chain.weaken(D.m - 1, "smaller, not larger")
    with pytest.raises(D.DerivationError):
        chain.scale(-D.m, "negative factor")
    with pytest.raises(D.DerivationError):
        chain.weaken_monotone("decreasing", g=-D.r, variable=D.r, start=D.r, end=D.r + 1)
    with pytest.raises(D.DerivationError):
        chain = D._Chain.from_lemma("test", D.log1p_below_x(), {}, "lemma")
        chain.weaken_by_lemma(D.r, D.log1p_below_x(), {}, "x")
    with pytest.raises(ValueError, match="plain text"):
        D._Chain("test", D.n, D.m, "a_b", check=D.HYPOTHESIS).done().latex()


# --- results against the paper's closed forms ---------------------------------------------------


def test_results_equal_the_closed_forms():
    assert sympy.simplify(D.packing_lemma().bound - ONE_VECTOR) == 0
    assert D.kappa not in D.packing_lemma().bound.free_symbols  # the unit-ball volume cancels (any norm)
    assert sympy.simplify(D.theorem_4_5().bound - ONE_VECTOR**D.m) == 0
    assert sympy.simplify(sympy.expand_log(D.corollary_4_6_n_star().bound - SLOPE * D.m, force=True)) == 0
    assert sympy.simplify(sympy.expand_log(D.corollary_4_6_slope() - SLOPE, force=True)) == 0
    fraction = D.corollary_4_6_fraction().bound
    log_fraction = sympy.log(fraction) - (SLOPE * D.m - D.n) * sympy.log(D.V)
    assert sympy.simplify(sympy.expand_log(log_fraction, force=True)) == 0
    n_delta = SLOPE * D.m + sympy.log(1 / D.delta) / sympy.log(D.V)
    assert sympy.simplify(sympy.expand_log(D.threshold_length() - n_delta, force=True)) == 0
    threshold = D.corollary_4_6_threshold().result
    assert threshold.rhs == D.delta and sympy.simplify(threshold.lhs - fraction) == 0
    uniform = D.n50_bound().bound.subs(D.h, sympy.log(D.V))
    n50 = SLOPE * D.m + sympy.log(2) / sympy.log(D.V)
    assert sympy.simplify(sympy.expand_log(uniform - n50, force=True)) == 0
    assert D.r not in D.corollary_4_6_slope().subs(D.eps, D.r / 2048).free_symbols  # relative ε: scale-free


def test_geometric_series_and_corollary_4_10_closed_forms():
    steps = D.all_lengths().steps
    assert sympy.simplify(steps[1].relation.rhs - D.P * (D.P**D.m - 1) / (D.P - 1)) == 0
    assert sympy.simplify(D.all_lengths().bound - D.P ** (D.m + 1) / (D.P - 1)) == 0
    assert sympy.simplify(D.corollary_4_10_net_size().bound - (1 + 8 * D.r / D.eps) ** D.d) == 0
    expected = D.K * (1 + sympy.log(1 + 4 * D.r / D.eps)) + 1
    assert sympy.simplify(D.corollary_4_10_log_packing().bound - expected) == 0
    assert D.corollary_4_10_cover_radius().bound == D.eps / 2
    assert D.m not in D.corollary_4_10_threshold().free_symbols
    f = sympy.Symbol("f", positive=True)
    cone = f * (1 + 2 * D.r2 / D.eps + 1 / sympy.sin(D.phi)) ** D.d
    assert sympy.simplify(D.cone_count().bound - cone) == 0


# --- results against accessibility.bounds (lambdify, random parameters) --------------------------


def test_corollary_4_6_derivations_agree_with_bounds():
    log_count = _lambdify(sympy.log(D.theorem_4_5().bound))
    one = _lambdify(D.packing_lemma().bound)
    slope = _lambdify(D.corollary_4_6_slope())
    n_star = _lambdify(D.corollary_4_6_n_star().bound)
    fraction = _lambdify(D.corollary_4_6_fraction().bound)
    threshold = _lambdify(D.threshold_length())
    for args in _draws():
        d, v, r, eps, m, n, delta = args
        c = bounds.slope_bound(d_model=d, vocab_size=v, r=r, eps=eps)
        ball = bounds.log_ball_count(d_model=d, r=r, eps=eps)
        assert float(mpmath.log(one(*args))) == pytest.approx(ball, rel=1e-12)
        theorem = bounds.log_count(d_model=d, m=m, r=r, eps=eps)
        assert float(log_count(*args)) == pytest.approx(theorem, rel=1e-12)
        assert float(slope(*args)) == pytest.approx(c, rel=1e-12)
        assert float(n_star(*args)) == pytest.approx(bounds.n_star_bound(m=m, slope=c), rel=1e-12)
        assert min(0.0, float(mpmath.log10(fraction(*args)))) == pytest.approx(
            bounds.log10_fraction_bound(n=n, m=m, slope=c, vocab_size=v), rel=1e-10, abs=1e-10)
        assert float(threshold(*args)) == pytest.approx(
            bounds.length_threshold(m=m, slope=c, vocab_size=v, delta=delta), rel=1e-12)


def test_n50_derivation_agrees_with_bounds_for_uniform_and_distributed_targets():
    n50 = sympy.lambdify((D.d, D.r, D.eps, D.m, D.h), D.n50_bound().bound, "math")
    for d, v, r, eps, m, _, _ in _draws():
        c = bounds.slope_bound(d_model=d, vocab_size=v, r=r, eps=eps)
        uniform = bounds.n50_bound(m=m, slope=c, vocab_size=v)
        assert n50(d, r, eps, m, math.log(v)) == pytest.approx(uniform, rel=1e-12)
        rate = float(RNG.uniform(0.1, 5.0))
        c_q = bounds.target_slope(bounds.log_ball_count(d_model=d, r=r, eps=eps), rate=rate)
        distributed = bounds.n50_bound(m=m, slope=c_q, rate=rate)
        assert n50(d, r, eps, m, rate) == pytest.approx(distributed, rel=1e-12)


def test_all_lengths_and_corollary_4_10_agree_with_bounds():
    size = sympy.Symbol("size", positive=True)
    exact = sympy.lambdify((size, D.m), D.all_lengths().steps[1].relation.rhs.subs(D.P, size), "mpmath")
    bound = sympy.lambdify((size, D.m), D.all_lengths().bound.subs(D.P, size), "mpmath")
    log_packing = _lambdify(D.corollary_4_10_log_packing().bound.subs(D.K, D.corollary_4_10_net_size().bound))
    threshold = _lambdify(D.corollary_4_10_threshold())
    for args in _draws():
        d, v, r, eps, m, _, _ = args
        kk = mpmath.mpf(1 + 2 * r / eps) ** d
        ours = bounds.log_count(d_model=d, m=m, r=r, eps=eps, all_lengths=True)
        assert float(mpmath.log(exact(kk, m))) == pytest.approx(ours, rel=1e-11)
        assert float(mpmath.log(bound(kk, m))) >= ours - 1e-12
        assert float(mpmath.log(log_packing(*args))) == pytest.approx(
            bounds.log_log_measure_packing(d_model=d, r=r, eps=eps), rel=1e-12)
        assert float(mpmath.log10(threshold(*args))) == pytest.approx(
            bounds.log10_unbounded_threshold(d_model=d, vocab_size=v, r=r, eps=eps), rel=1e-12, abs=1e-12)


def test_cone_count_agrees_with_the_euclidean_cone_bound():
    f, sin = sympy.Symbol("f", positive=True), sympy.sin(D.phi)
    log_cone = sympy.lambdify((D.d, D.r2, D.eps, D.phi, f), sympy.log(D.cone_count().bound), "mpmath")
    for _ in range(40):
        d, phi = int(RNG.integers(2, 300)), float(RNG.uniform(1e-3, np.pi / 2 - 1e-3))
        r2, eps = float(RNG.uniform(0.1, 50)), float(RNG.uniform(1e-3, 1))
        log_f = bounds.log_cone_fraction(d_model=d, phi=phi)
        ours = bounds.log_euclidean_cone_count(d_model=d, r2=r2, eps=eps, phi=phi)
        assert float(log_cone(d, r2, eps, phi, mpmath.exp(log_f))) == pytest.approx(ours, rel=1e-10)
    assert sin.free_symbols == {D.phi}


# --- the prose steps, tested numerically ------------------------------------------------------


def _greedy_packing(points, eps, norm):
    """A maximal subset of ``points`` pairwise at least ``eps`` apart (greedy, in the given order)."""
    kept = []
    for p in points:
        if all(np.linalg.norm(p - k, ord=norm) >= eps for k in kept):
            kept.append(p)
    return len(kept)


@pytest.mark.parametrize("norm", [2, np.inf])
def test_volume_comparison_against_brute_force_packings(norm):
    """Packings of random points and of grids in 2-D never exceed (1 + 2r/ε)^d, in either norm."""
    r = 1.0
    for eps in (0.3, 0.5, 0.9):
        bound = math.exp(bounds.log_ball_count(d_model=2, r=r, eps=eps))
        cloud = RNG.uniform(-r, r, (3000, 2))
        cloud = cloud[np.linalg.norm(cloud, ord=norm, axis=1) <= r]
        grid = np.stack(np.meshgrid(*[np.arange(-r, r + 1e-9, eps)] * 2), -1).reshape(-1, 2)
        grid = grid[np.linalg.norm(grid, ord=norm, axis=1) <= r + 1e-12]
        assert _greedy_packing(cloud, eps, norm) <= bound * (1 + 1e-12) and len(grid) <= bound * (1 + 1e-12)


def test_cone_sector_packing_against_brute_force():
    """Grid points (pairwise ε apart) inside a 2-D and 3-D cone sector never exceed the cone count."""
    cases = ((2, 0.3, 5.0, 0.4), (2, 1.2, 3.0, 0.5), (3, 0.5, 3.0, 0.5), (3, 0.15, 4.0, 0.3))
    for dim, phi, r2, eps in cases:
        axis = np.zeros(dim)
        axis[0] = 1.0
        for _ in range(5):
            offset = RNG.uniform(0, eps, dim)
            ticks = [np.arange(-r2, r2 + eps, eps)] * dim
            grid = offset + np.stack(np.meshgrid(*ticks), -1).reshape(-1, dim)
            norms = np.linalg.norm(grid, axis=1)
            inside = (norms <= r2) & (grid @ axis >= np.cos(phi) * norms)
            bound = bounds.log_euclidean_cone_count(d_model=dim, r2=r2, eps=eps, phi=phi)
            assert inside.sum() <= math.exp(bound)


def test_binomial_estimate_and_stars_and_bars():
    for a, b in itertools.product(range(0, 60, 7), range(1, 40, 3)):
        assert math.log(math.comb(a + b, b)) <= b * (1 + math.log((a + b) / b)) + 1e-12
    for weights, points in ((3, 2), (4, 3), (5, 4)):  # weight vectors in multiples of 1/Q that sum to 1
        count = sum(1 for w in itertools.product(range(weights + 1), repeat=points) if sum(w) == weights)
        assert count == math.comb(weights + points - 1, points - 1)


def test_cover_radius_of_the_measure_construction():
    """Random empirical measures on [-r, r]: nearest net point plus largest-remainder rounding of the
    weights moves each by less than ε/2 in W1 (scipy's 1-D Wasserstein distance)."""
    r, eps = 1.0, 0.2
    net = np.arange(-r, r + 1e-12, eps / 4)  # an ε/4-net of the segment
    k = net.size
    q = math.ceil(k / (eps / (4 * r)))
    for _ in range(50):
        atoms = RNG.uniform(-r, r, int(RNG.integers(1, 40)))
        snapped = net[np.abs(atoms[:, None] - net[None]).argmin(1)]
        weights = np.bincount(np.abs(atoms[:, None] - net[None]).argmin(1), minlength=k) / atoms.size
        units = np.floor(weights * q)
        order = np.argsort(-(weights * q - units))
        units[order[:int(q - units.sum())]] += 1  # largest remainders
        assert units.sum() == q
        moved = stats.wasserstein_distance(atoms, snapped) + stats.wasserstein_distance(
            net, net, weights, units / q)
        assert stats.wasserstein_distance(atoms, net, None, units / q) <= moved + 1e-12 < eps / 2


def test_log1p_lemma_numerically():
    x = np.concatenate([[0.0], 10.0 ** np.linspace(-12, 6, 200)])
    assert (np.log1p(x) <= x).all()
    k = 10.0 ** np.linspace(0.01, 8, 100) + 1
    assert ((k - 1) * np.log1p(1 / (k - 1)) <= 1).all()


# --- closed forms that SymPy derives outright ------------------------------------------------


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
    for _ in range(20):
        a, eps = RNG.uniform(0, 5, dim), RNG.uniform(0.1, 2)
        ours = bounds.log_ellipsoid_count(semi_axes=a, half_widths=a, eps=eps)
        assert ours == pytest.approx(math.log(f(*a, eps)), rel=1e-12)
