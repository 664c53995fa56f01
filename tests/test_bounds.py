"""accessibility.precision and accessibility.bounds against independent references.

References: brute-force enumeration of every fp16 / bf16 bit pattern, numpy's float32 rounding and
``nextafter``, mpmath at 40 digits for the cone fraction, exact big-integer binomials for Corollary
4.10, and the identities the bounds must satisfy.
"""

import math
import warnings

import mpmath
import numpy as np
import pytest

from accessibility import bounds
from accessibility.checks import InputError
from accessibility.precision import (
    BF16, FP16, FP32, float_count, float_count_between, log_levels, radius_over_eps, resolve_eps,
)

RNG = np.random.default_rng(12345)


def _all_values(fmt):
    """Every finite value of fp16 or bf16, sorted, +0/-0 merged (np.unique treats them as equal)."""
    bits = np.arange(2**16, dtype=np.uint32)
    if fmt is FP16:
        values = bits.astype(np.uint16).view(np.float16).astype(np.float64)
    else:  # bf16 = the top 16 bits of an fp32
        with np.errstate(invalid="ignore"):  # NaN bit patterns
            values = (bits << 16).view(np.float32).astype(np.float64)
    return np.unique(values[np.isfinite(values)])


def _radii(values):
    """Radii on, between and beyond the representable values, subnormals included."""
    pos = values[values > 0]
    picks = RNG.choice(pos, 300)
    r = np.concatenate([picks, picks * (1 + 1e-3), pos[:5], pos[-3:], [pos[0] / 2, 1.0, 3.0]])
    return r[r <= pos[-1]]  # beyond the largest finite value is an error (test_float_count_beyond_the_format)


@pytest.mark.parametrize("fmt", [FP16, BF16], ids=["fp16", "bf16"])
def test_float_count_matches_enumeration(fmt):
    values = _all_values(fmt)
    r = _radii(values)
    brute = np.searchsorted(values, r, side="right") - np.searchsorted(values, -r, side="left")
    np.testing.assert_array_equal(float_count(fmt, r), brute)
    assert fmt.max_finite == values[-1] and fmt.smallest_subnormal == values[values > 0][0]


@pytest.mark.parametrize("fmt", [FP16, BF16], ids=["fp16", "bf16"])
def test_float_count_between_matches_enumeration(fmt):
    values = _all_values(fmt)
    span = values[np.abs(values) < 1e4]
    ends = np.sort(np.stack([RNG.choice(span, 400), RNG.choice(span, 400)]), axis=0)
    ends[:, :100] *= 1 + 1e-3  # some endpoints between representable values
    ends = np.sort(ends, axis=0)
    lo, hi = ends
    brute = np.searchsorted(values, hi, side="right") - np.searchsorted(values, lo, side="left")
    np.testing.assert_array_equal(float_count_between(fmt, lo, hi), brute)


def test_float_count_beyond_the_format_is_an_error():
    assert float_count(FP16, FP16.max_finite) == 2 * 31744 - 1  # every finite fp16 value, ±0 once
    for call in (lambda: float_count(FP16, 65520.0), lambda: float_count_between(BF16, -1.0, 4e38)):
        with pytest.raises(InputError, match="largest finite"):
            call()


def test_fp32_count_matches_numpy_rounding_and_nextafter():
    r = np.concatenate([RNG.uniform(0, 100, 200), 10.0 ** RNG.uniform(-44, 38, 200), [1.0, FP32.max_finite]])
    below = r.astype(np.float32)
    below = np.where(below.astype(np.float64) > r, np.nextafter(below, np.float32(0)), below)
    # non-negative fp32 values are ordered like their bit patterns: bits(x) = number of positives <= x
    expected = 2 * below.view(np.uint32).astype(np.float64) + 1
    np.testing.assert_array_equal(float_count(FP32, r), expected)
    # step with nextafter through small ranges: subnormals near 0 and the binade above 1
    for lo, steps in ((np.float32(0), 700), (np.float32(1), 700)):
        x = lo
        for _ in range(steps):
            x = np.nextafter(x, np.float32(np.inf))
        assert float_count_between(FP32, float(lo), float(x)) == steps + 1


def test_relative_levels_do_not_depend_on_r_and_exact_is_larger():
    r = 10.0 ** np.linspace(-3, 4, 15)
    for name, fmt in (("fp16", FP16), ("bf16", BF16), ("fp32", FP32)):
        assert np.allclose(log_levels(r=r, precision=name), math.log1p(2 / fmt.unit_roundoff))
        k = fmt.min_exponent + 1  # the exact count equals 2^(p+1) + 1 here and is larger above
        assert float_count(fmt, 2.0**k) == 2 ** (fmt.precision_bits + 1) + 1
        big = 2.0 ** np.arange(k + 1, min(fmt.max_exponent, 60))
        assert (log_levels(r=big, precision=f"exact-{name}") > log_levels(precision=name)).all()
    assert float_count(FP16, 1.0) == 30721  # fp16 values in [-1, 1]
    assert resolve_eps(r=2.0) == 2.0 * 2**-11 and radius_over_eps(precision="bf16") == 256


def test_precision_input_errors():
    with pytest.raises(InputError, match="eps"):
        log_levels(r=1.0, eps=0.0)
    with pytest.raises(InputError, match="needs r"):
        log_levels(eps=0.1)
    with pytest.raises(InputError, match="needs r"):
        log_levels(precision="exact-fp16")
    with pytest.raises(InputError, match="not both"):
        log_levels(r=1.0, precision="fp32", eps=0.1)
    with pytest.raises(InputError, match="precision must be one of"):
        log_levels(precision="fp8")
    with pytest.raises(InputError, match="r must be > 0"):
        float_count("fp16", -1.0)


def _mp_log_cone_fraction(dim, phi):
    narrow = min(phi, math.pi - phi)
    with mpmath.workdps(40):
        a, b = mpmath.mpf(dim - 1) / 2, mpmath.mpf(1) / 2
        half = mpmath.betainc(a, b, 0, mpmath.sin(narrow) ** 2, regularized=True) / 2
        return float(mpmath.log(half) if phi <= math.pi / 2 else mpmath.log1p(-half))


@pytest.mark.parametrize("dim", [2, 3, 10, 640, 2048, 4096, 8192])
def test_cone_fraction_matches_mpmath(dim):
    phis = np.array([1e-3, 0.1, 0.5, 0.9, 1.2, 1.5, 1.5707, math.pi / 2, 1.6, 2.5, 3.1])
    ours = bounds.log_cone_fraction(d_model=dim, phi=phis)
    ref = np.array([float(_mp_log_cone_fraction(dim, p)) for p in phis])
    np.testing.assert_allclose(ours, ref, rtol=5e-13, atol=1e-300)


def test_cone_fraction_far_below_underflow_and_min_cos_convention():
    deep = bounds.log_cone_fraction(d_model=4096, phi=0.5)
    assert deep < -1000 and np.isfinite(deep)  # exp(-3015) underflows a double
    assert bounds.log_cone_fraction(d_model=768, min_cos=0.89) == bounds.log_cone_fraction(
        d_model=768, phi=math.acos(0.89) / 2)
    assert bounds.log_cone_fraction(d_model=50, phi=math.pi / 2) == pytest.approx(math.log(0.5), abs=1e-15)
    assert bounds.log_cone_fraction(d_model=50, phi=math.pi) == 0.0
    assert bounds.log_cone_fraction(d_model=50, phi=0.0) == -np.inf
    d = np.array([100, 1000, 5000])
    assert (np.diff(bounds.log_cone_fraction(d_model=d, phi=1.0)) < 0).all()  # narrower share in higher d


def test_cone_bound_is_norm_consistent_positive_and_never_above_the_ball():
    """For every min cos in [-1, 1]: finite, positive, at most the L∞ ball count, no warnings; and the
    published convention (ball + ln f) goes negative for narrow cones, which is why it is not a bound."""
    min_cos = np.concatenate([np.linspace(-1, 1, 401), 1 - 10.0 ** -np.arange(1, 17), [1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for d, r, r2 in ((576, 1.0, 3.0), (2, 1.0, 1.0), (768, 22.45, 271.0), (50, 1.0, 1.2)):
            ball = bounds.log_ball_count(d_model=d)
            cone = bounds.log_cone_bound(d_model=d, r=r, r2=r2, min_cos=min_cos)
            assert np.isfinite(cone).all() and (cone > 0).all() and (cone <= ball).all()
    published = bounds.log_cone_count(d_model=576, min_cos=0.9999999)
    assert published < 0  # the issue's -4.27 tokens per vector: the mixed-norm convention breaks down
    # Euclidean cone count ≥ one point per step along the axis, and the published models gain nothing
    assert (bounds.log_euclidean_cone_count(d_model=30, r2=5.0, eps=0.1, phi=np.linspace(1e-6, 3, 50))
            >= math.log(1 + 5.0 / 0.1)).all()
    for stats in ((768, 22.45, 271.0, 0.890), (2048, 20.91, 107.0, -0.051)):
        d, r, r2, mc = stats
        assert bounds.log_cone_bound(d_model=d, r=r, r2=r2, min_cos=mc) == bounds.log_ball_count(d_model=d)
    with pytest.raises(InputError, match="volume argument"):
        bounds.log_cone_bound(d_model=8, r=1.0, r2=2.0, min_cos=0.5, precision="exact-fp16")


def _smallest_cone(u):
    """Half-angle of the narrowest cone around any axis holding the unit rows of u: max t subject to
    <a, u_i> >= t and |a| <= 1 (a convex program, solved by SLSQP), t = cos of the half-angle."""
    from scipy.optimize import minimize

    d = u.shape[1]
    start = np.append(u.mean(0) / max(np.linalg.norm(u.mean(0)), 1e-12), 0.0)
    cons = [{"type": "ineq", "fun": lambda z: u @ z[:d] - z[d]},
            {"type": "ineq", "fun": lambda z: 1 - z[:d] @ z[:d]}]
    best = minimize(lambda z: -z[d], start, constraints=cons, method="SLSQP",
                    options={"ftol": 1e-14, "maxiter": 500})
    return math.acos(min(1.0, best.x[d]))


def _equal_cosines(d, c):
    """d unit vectors of R^d with every pairwise cosine equal to c (Gram matrix (1 - c)I + cJ)."""
    w, v = np.linalg.eigh((1 - c) * np.eye(d) + c)
    return v * np.sqrt(np.clip(w, 0, None))


def test_jung_half_angle_is_attained_by_equal_cosines_and_holds_random_sets():
    """The spherical Jung radius from the minimum cosine: d vectors with equal cosines c need exactly that
    cone, and no random set (clusters and spread-out clouds in R^2..R^5) needs more."""
    for d, c in ((2, -0.4), (3, 0.5), (3, -0.3), (5, 0.2), (5, 0.9), (4, -0.2)):
        u = _equal_cosines(d, c)
        assert np.allclose(u @ u.T, (1 - c) * np.eye(d) + c)
        proven = float(bounds.jung_half_angle(d_model=d, min_cos=c))
        assert _smallest_cone(u) == pytest.approx(proven, abs=1e-6)
    for _ in range(60):
        d = int(RNG.integers(2, 6))
        x = RNG.normal(size=(int(RNG.integers(2, 40)), d)) + RNG.uniform(0, 4) * RNG.normal(size=d)
        u = x / np.linalg.norm(x, axis=1, keepdims=True)
        c = float((u @ u.T).min())
        proven = float(bounds.jung_half_angle(d_model=d, min_cos=c))
        if c > -1 / d:
            assert _smallest_cone(u) <= proven + 1e-7 and proven < math.pi / 2
        assert proven >= math.acos(c) / 2 - 1e-12  # never below the published θ/2


def test_jung_half_angle_limits():
    """0 at min cos 1, continuous there, monotone, π/2 from -1/d down (d + 1 simplex vectors sum to 0)."""
    c = np.concatenate([np.linspace(-1, 1, 2001), 1 - 10.0 ** -np.arange(1, 17), [1.0]])
    for d in (1, 2, 3, 576):
        rho = bounds.jung_half_angle(d_model=d, min_cos=np.sort(c))
        assert (np.diff(rho) <= 1e-12).all() and rho[-1] == 0 and rho[-2] < 1e-7
        assert (rho[np.sort(c) <= -1 / d] == math.pi / 2).all()
    simplex = _equal_cosines(4, -1 / 3)  # 4 vectors of R^3 (rank 3), summing to zero: in no cone
    assert np.allclose(simplex.sum(0), 0) and bounds.jung_half_angle(d_model=3, min_cos=-1 / 3) == math.pi / 2
    assert bounds.jung_half_angle(d_model=2, min_cos=0.3) == pytest.approx(math.acos(0.3) / 2)  # the plane


def test_proven_cone_slope_is_continuous_at_min_cos_one_and_holds_thin_cones():
    """As min cos -> 1 the proven cone count converges to its value at 1 (no jump back to the ball), stays
    below the ball, and a thin cone sector's grid points never exceed it."""
    for d, r, r2 in ((576, 1.0, 3.0), (768, 22.45, 271.0), (2, 1.0, 1.0), (30, 1.0, 5.0)):
        ball = float(bounds.log_ball_count(d_model=d))
        near = bounds.log_cone_bound(d_model=d, r=r, r2=r2, min_cos=1 - 10.0 ** -np.arange(2, 17))
        at_one = float(bounds.log_cone_bound(d_model=d, r=r, r2=r2, min_cos=1.0))
        assert 0 < at_one <= ball and np.all(np.diff(near) <= 1e-9) and abs(near[-1] - at_one) < 1e-9
    for dim in (2, 3):
        for phi, r2, eps in ((0.02, 3.0, 0.3), (0.001, 5.0, 0.5), (0.3, 2.0, 0.25)):
            ticks = np.arange(-r2 - eps, r2 + eps, eps)
            grid = RNG.uniform(0, eps, dim) + np.stack(np.meshgrid(*[ticks] * dim), -1).reshape(-1, dim)
            norms = np.linalg.norm(grid, axis=1)
            inside = (norms <= r2) & (grid[:, 0] >= math.cos(phi) * norms)
            bound = bounds.log_euclidean_cone_count(d_model=dim, r2=r2, eps=eps, phi=phi)
            assert inside.sum() <= math.exp(bound)


def test_euclidean_cone_count_issue_numbers_and_half_space():
    """Done in one norm (Euclidean radius r2, step r∞·u) the cone count exceeds the L∞ ball count even at
    the published half-angle arccos(min cos)/2 (Pythia-160m 663.6 vs 590.1; Llama-3.2-1B 1676 vs 1448),
    and more so at the proven one; φ ≥ π/2 is the Euclidean ball."""
    for d, v, r, r2, mc, cone, ball in ((768, 50304, 22.45, 271.0, 0.890, 663.6, 590.1),
                                        (2048, 128256, 20.91, 107.0, -0.051, 1676.3, 1448.4)):
        eps = r * 2**-11
        published_phi = bounds.log_euclidean_cone_count(d_model=d, r2=r2, eps=eps, phi=math.acos(mc) / 2)
        assert published_phi / math.log(v) == pytest.approx(cone, abs=0.05)
        assert bounds.log_euclidean_cone_count(d_model=d, r2=r2, eps=eps, min_cos=mc) > published_phi
        assert bounds.slope_bound(d_model=d, vocab_size=v) == pytest.approx(ball, abs=0.05)
    half_space = bounds.log_euclidean_cone_count(d_model=20, r2=2.0, eps=0.5, phi=2.0)
    assert half_space == pytest.approx(20 * math.log(9))


def test_box_bound_against_ball():
    r = 3.0
    ball = bounds.log_ball_count(d_model=64, r=r)
    assert bounds.log_box_count(widths=np.full(64, 2 * r), r=r) == pytest.approx(ball, rel=1e-14)
    widths = RNG.uniform(0, 2 * r, (10, 64))
    assert (bounds.log_box_count(widths=widths, r=r) <= ball).all()
    assert bounds.log_box_count(widths=[2.0], eps=0.5) == pytest.approx(math.log(5))  # 5 grid values
    exact = bounds.log_box_count(lows=np.full(8, -r), highs=np.full(8, r), precision="exact-fp16")
    assert exact == pytest.approx(bounds.log_ball_count(d_model=8, r=r, precision="exact-fp16"))
    with pytest.raises(InputError, match="lows and highs"):
        bounds.log_box_count(widths=[1.0], r=1.0, precision="exact-fp16")


def _rotation(d, rng):
    q, r = np.linalg.qr(rng.normal(size=(d, d)))
    return q * np.sign(np.diag(r))  # a uniformly random orthogonal matrix; rows are the axes


def _grid_count(center, axes, semi, eps, offset):
    """Brute force: points of the grid offset + ε·Z^d inside the ellipsoid (axes as rows)."""
    reach = bounds.ellipsoid_half_widths(semi, axes)
    ranges = [np.arange(np.floor((c - h - o) / eps), np.ceil((c + h - o) / eps) + 1)
              for c, h, o in zip(center, reach, offset)]
    points = offset + eps * np.stack(np.meshgrid(*ranges, indexing="ij"), -1).reshape(-1, len(center))
    y = (points - center) @ axes.T / semi  # coordinates in units of the semi-axes
    return int((np.sum(y**2, axis=1) <= 1).sum())


@pytest.mark.parametrize("d, trials", [(2, 300), (3, 80)])
def test_ellipsoid_bound_never_below_a_brute_force_grid_count(d, trials):
    """Grid points are pairwise ε apart in L∞: however the ellipsoid is placed, rotated or the grid
    shifted, their number never exceeds the bound (with or without the half-widths)."""
    rng = np.random.default_rng(d)
    eps, worst = 1.0, 0.0
    for _ in range(trials):
        semi = rng.uniform(0.05, 6.0, d) * eps
        axes = _rotation(d, rng)
        center = rng.uniform(-3, 3, d)
        reach = bounds.ellipsoid_half_widths(semi, axes)
        rotation_free = bounds.log_ellipsoid_count(semi_axes=semi, eps=eps)
        oriented = bounds.log_ellipsoid_count(semi_axes=semi, half_widths=reach, eps=eps)
        assert oriented <= rotation_free + 1e-12
        count = max(_grid_count(center, axes, semi, eps, rng.uniform(0, eps, d)) for _ in range(8))
        assert count <= math.exp(oriented) * (1 + 1e-12)
        worst = max(worst, count / math.exp(oriented))
    assert worst > 0.5  # the bound is not vacuous: some placements come close to it


def test_ellipsoid_bound_is_tight_for_a_large_axis_aligned_ellipse():
    """Axis-aligned, it is exactly vol(E + Q)/ε²; the mean grid count over random shifts is vol(E)/ε²."""
    rng = np.random.default_rng(7)
    semi, eps = np.array([40.0, 25.0]), 1.0
    counts = [_grid_count(np.zeros(2), np.eye(2), semi, eps, rng.uniform(0, eps, 2)) for _ in range(100)]
    bound = math.exp(bounds.log_ellipsoid_count(semi_axes=semi, half_widths=semi, eps=eps))
    assert bound == pytest.approx(math.pi * 40 * 25 + 2 * (40 + 25) + 1, rel=1e-12)
    assert max(counts) <= bound < 1.05 * np.mean(counts)
    assert np.mean(counts) == pytest.approx(math.pi * 40 * 25, rel=0.01)


def test_ellipse_plus_square_area_from_the_support_function():
    """Independent check of the Cavalieri step in 2-D: area(E + Q) from its support function
    h_E(u) + (ε/2)|u|_1 (A = ½∮(h² - h'²)dθ) equals πa₁a₂ + 2ε(h₁ + h₂) + ε², which both bounds exceed."""
    rng = np.random.default_rng(11)
    theta = np.linspace(0, 2 * np.pi, 400_001)[:-1]
    dt = theta[1] - theta[0]
    u = np.stack([np.cos(theta), np.sin(theta)], 1)
    du = np.stack([-np.sin(theta), np.cos(theta)], 1)
    for _ in range(5):
        semi, eps, axes = rng.uniform(0.2, 3.0, 2), rng.uniform(0.2, 1.5), _rotation(2, rng)
        shape = axes.T @ np.diag(semi**2) @ axes  # M, the shape matrix
        h_e = np.sqrt(np.einsum("ni,ij,nj->n", u, shape, u))
        h = h_e + eps / 2 * np.abs(u).sum(1)
        dh = np.einsum("ni,ij,nj->n", du, shape, u) / h_e + eps / 2 * (np.sign(u) * du).sum(1)
        area = 0.5 * np.sum(h**2 - dh**2) * dt
        reach = bounds.ellipsoid_half_widths(semi, axes)
        assert area == pytest.approx(math.pi * semi.prod() + 2 * eps * reach.sum() + eps**2, rel=1e-5)
        for kw in ({}, {"half_widths": reach}):
            count = math.exp(bounds.log_ellipsoid_count(semi_axes=semi, eps=eps, **kw))
            assert count >= area / eps**2 * (1 - 1e-9)


@pytest.mark.parametrize("d", [1, 2, 5, 64, 160])
def test_ellipsoid_bound_never_above_ball_or_box_when_it_fits_in_the_cube(d):
    rng = np.random.default_rng(d)
    r = 3.0
    ball = bounds.log_ball_count(d_model=d, r=r)  # fp16 relative: ε = r·2^-11
    for scale in (1.0, 1e-3, 1e-5):  # large, medium and sub-ε ellipsoids
        semi = rng.uniform(0, 1, d) ** 3 * scale
        axes = _rotation(d, rng)
        reach = bounds.ellipsoid_half_widths(semi, axes)
        semi, reach = semi * r / reach.max(), reach * r / reach.max()  # touches the cube [-r, r]^d
        value = bounds.log_ellipsoid_count(semi_axes=semi, half_widths=reach, r=r)
        assert value <= bounds.log_box_count(widths=2 * reach, r=r) + 1e-9 <= ball + 2e-9
        longest = d * math.log1p(2 * semi.max() / (r * 2**-11))
        assert bounds.log_ellipsoid_count(semi_axes=semi, r=r) <= longest + 1e-9
    equal = bounds.log_ellipsoid_count(semi_axes=np.full(d, r), half_widths=np.full(d, r), r=r)
    if d == 1:
        assert equal == pytest.approx(ball, rel=1e-12)  # a segment: the packing lemma itself
    else:  # the inscribed Euclidean ball loses about ln(2^d/ω_d) against the cube
        gap = d * math.log(2) - float(bounds._log_unit_ball_volume(d))
        assert equal < ball and ball - equal == pytest.approx(gap, rel=0.05)


def test_ellipsoid_degenerate_cases_vectorised_and_errors():
    assert bounds.log_ellipsoid_count(semi_axes=[0.0, 0.0], eps=1.0) == 0.0  # a single point
    segment = bounds.log_ellipsoid_count(semi_axes=[1.0, 0.0], half_widths=[1.0, 0.0], eps=1.0)
    assert math.exp(segment) == pytest.approx(3.0)  # -1, 0, 1: exact for an axis-aligned flat ellipse
    batch = RNG.uniform(0, 2, (4, 7))
    np.testing.assert_allclose(bounds.log_ellipsoid_count(semi_axes=batch, eps=0.1),
                               [bounds.log_ellipsoid_count(semi_axes=row, eps=0.1) for row in batch],
                               rtol=1e-14)
    big = bounds.log_ellipsoid_count(semi_axes=np.full(4096, 50.0), r=50.0)  # no overflow in high d
    assert np.isfinite(big) and big < bounds.log_ball_count(d_model=4096)
    with pytest.raises(InputError, match="volume argument"):
        bounds.log_ellipsoid_count(semi_axes=[1.0], r=1.0, precision="exact-fp16")
    with pytest.raises(InputError, match="do not belong"):
        bounds.log_ellipsoid_count(semi_axes=[1.0, 1.0], half_widths=[3.0, 0.0], eps=1.0)


def test_cell_entropy():
    shares = RNG.lognormal(sigma=3.0, size=5000)
    shares[:100] = 0
    cells = bounds.cell_entropy(shares)
    p = shares[shares > 0] / shares.sum()
    assert cells.entropy == pytest.approx(-np.log(p).mean())
    assert cells.n_zero == 100 and cells.n_nonzero == 4900 and cells.zero_fraction == pytest.approx(0.02)
    assert cells.entropy >= math.log(cells.n_nonzero)  # Jensen
    assert bounds.cell_entropy(np.full(7, 3)).entropy == pytest.approx(math.log(7))  # counts are normalised
    with pytest.raises(InputError):
        bounds.cell_entropy([0.5, -0.1])


def _cut_target_probabilities(tokens_of, n):
    """Q of every n-token target: words drawn uniformly from the list (token tuples ``tokens_of``), joined,
    cut at exactly n tokens; enumerated word string by word string until n tokens are covered."""
    from collections import defaultdict

    q, frontier = defaultdict(float), [((), 1.0)]
    while frontier:
        done = [(t, p) for t, p in frontier if len(t) >= n]
        for tokens, p in done:
            q[tokens[:n]] += p
        frontier = [(t + w, p / len(tokens_of)) for t, p in frontier if len(t) < n for w in tokens_of]
    return q


def test_random_words_cut_at_n_tokens_need_t_max_more_tokens():
    """A brute-force check of the intercept for random-word targets: with words up to t_max tokens (one a
    token prefix of another), max Q over n-token targets can exceed e^{-h n}, h = ln W/t_max, but never
    e^{-h(n - t_max)}; n50_bound adds the t_max tokens."""
    tokens_of = [(1,), (2, 3), (2, 3, 4), (5, 6, 7)]  # (2, 3) is a word and the start of (2, 3, 4)
    t_max, h = 3, math.log(4) / 3
    assert bounds.word_rate(n_words=4, tokens_per_word=[len(t) for t in tokens_of], min_entropy=True) == h
    exceeded = False
    for n in range(1, 10):
        q = _cut_target_probabilities(tokens_of, n)
        assert sum(q.values()) == pytest.approx(1.0)
        assert max(q.values()) <= math.exp(-h * (n - t_max)) * (1 + 1e-12)
        exceeded |= max(q.values()) > math.exp(-h * n)
    assert exceeded  # without the t_max tokens the min-entropy bound would be wrong
    plain = bounds.n50_bound(m=2, slope=10.0, rate=h)
    assert bounds.n50_bound(m=2, slope=10.0, rate=h, cut_tokens=t_max) == pytest.approx(plain + t_max)
    with pytest.raises(InputError, match="cut_tokens"):
        bounds.n50_bound(m=2, slope=10.0, rate=h, cut_tokens=-1)


def test_target_slope_rates_and_n50_bound():
    """C_Q with the uniform rate ln|V| is C; a smaller rate (text) gives a larger slope;
    n_50 ≤ C m + ln 2/h."""
    num = bounds.log_ball_count(d_model=576)
    c = bounds.slope_bound(d_model=576, vocab_size=49152)
    assert bounds.target_slope(num, rate=math.log(49152)) == pytest.approx(c, rel=1e-15)
    assert bounds.target_slope(num, rate=2.0) == pytest.approx(num / 2.0)
    expected = 3 * c + math.log(2) / math.log(49152)
    assert bounds.n50_bound(m=3, slope=c, vocab_size=49152) == pytest.approx(expected)
    assert bounds.n50_bound(m=3, slope=10.0, rate=0.5) == pytest.approx(30 + 2 * math.log(2))
    assert bounds.n50_bound(m=2, slope=c, vocab_size=49152) == bounds.length_threshold(
        m=2, slope=c, vocab_size=49152, delta=0.5)
    # uniform words: W words, t tokens each on average; the min-entropy rate uses the longest word
    assert bounds.word_rate(n_words=1000, tokens_per_word=[1, 1, 2, 4]) == pytest.approx(math.log(1000) / 2)
    assert bounds.word_rate(n_words=1000, tokens_per_word=[1, 1, 2, 4], min_entropy=True) == pytest.approx(
        math.log(1000) / 4)
    for kwargs, match in (({"rate": 0.0}, "rate"), ({"vocab_size": 10, "rate": 1.0}, "exactly one")):
        with pytest.raises(InputError, match=match):
            bounds.length_threshold(m=1, slope=1.0, delta=0.5, **kwargs)


def test_slopes_by_precision_side_by_side():
    """Pythia-160m: the bf16 artefact (relative bf16 far below fp16, exact bf16 close to exact fp16),
    fp32 [mem] parameters (exact-fp32 C = 1526), and the factor r2/r∞ between the two steps."""
    views = bounds.slopes_by_precision(d_model=768, vocab_size=50304, r=22.45, r2=271.0)
    assert views["fp16"] == pytest.approx(bounds.slope_bound(d_model=768, vocab_size=50304))
    assert views["bf16"] < 0.8 * views["fp16"]
    assert (round(views["exact-bf16"], 1), round(views["exact-fp16"], 1)) == (739.5, 751.3)
    assert round(views["exact-fp32"]) == 1526
    coarse = 768 * math.log1p(2 * 22.45 / (271 * 2**-11)) / math.log(50304)
    assert views["fp16, eps = r2 u"] == pytest.approx(coarse)
    assert views["fp16, L2 ball r2"] > views["fp16"] > views["fp16, eps = r2 u"]
    assert views["absolute"] == pytest.approx(768 * math.log1p(2 * 22.45 * 2**10) / math.log(50304))
    assert "fp16, eps = r2 u" not in bounds.slopes_by_precision(d_model=8, vocab_size=10, r=1.0)


def test_slope_and_published_ratio():
    c = bounds.slope_bound(d_model=2048, vocab_size=50304)
    assert c == pytest.approx(2048 * math.log(4097) / math.log(50304))
    assert round(c, 1) == 1573.6 and abs(c / 261.4 - 6.019802) < 1e-6  # the authors' printed ratio
    h = 14.71
    cells_slope = bounds.slope(bounds.log_ball_count(d_model=2048), entropy=h)
    assert cells_slope == pytest.approx(c * math.log(50304) / h)
    # relative precision: r is irrelevant; absolute: C grows like ln(r/ε)
    assert bounds.slope_bound(d_model=8, vocab_size=10, r=1e5) == bounds.slope_bound(d_model=8, vocab_size=10)
    absolute = bounds.slope_bound(d_model=8, vocab_size=10, r=4.0, eps=1.0)
    assert absolute == pytest.approx(8 * math.log(9) / math.log(10))


def test_theorem_4_5_and_all_lengths():
    assert bounds.log_count(d_model=3, m=4, r=1.0, eps=0.5) == pytest.approx(12 * math.log(5))
    for m in (1, 2, 5):
        direct = math.log(sum(125**j for j in range(1, m + 1)))
        every = bounds.log_count(d_model=3, m=m, r=1.0, eps=0.5, all_lengths=True)
        assert every == pytest.approx(direct, rel=1e-13)
    for m in (1, 3, 10):  # K = 3: the extra term is below ln(K/(K-1)) = ln 1.5, and tends to it
        extra = (bounds.log_count(d_model=1, m=m, r=1.0, eps=1.0, all_lengths=True)
                 - bounds.log_count(d_model=1, m=m, r=1.0, eps=1.0))
        assert 0 <= extra < math.log(1.5) and (m < 10 or extra > math.log(1.5) - 1e-4)


def test_corollary_4_6_fraction_and_threshold():
    c, v, m = 12.5, 100, 3
    n = np.arange(0, 80)
    log10_frac = bounds.log10_fraction_bound(n=n, m=m, slope=c, vocab_size=v)
    assert (log10_frac[n <= c * m] == 0).all()
    past = n > c * m + 1
    np.testing.assert_allclose(log10_frac[past], -(n[past] - c * m) * 2.0)  # log10 100 = 2 per token
    assert bounds.n_star_bound(m=m, slope=c) == 37.5
    n_delta = bounds.length_threshold(m=m, slope=c, vocab_size=v, delta=1e-3)
    assert n_delta == pytest.approx(37.5 + 1.5)
    assert bounds.log10_fraction_bound(n=n_delta, m=m, slope=c, vocab_size=v) == pytest.approx(-3.0)
    # all prompt lengths <= m: less than one token more, and never less
    small = bounds.length_threshold(m=m, slope=0.3, vocab_size=v, delta=0.1, all_lengths=True)
    assert 0 < small - bounds.length_threshold(m=m, slope=0.3, vocab_size=v, delta=0.1) < 1


def test_corollary_4_10_against_exact_binomial():
    """ln C(q+K-1, K-1) (the cover size, exact big integers) <= our bound, for tiny supports."""
    for d, r, eps in ((1, 1.0, 1.0), (1, 2.0, 0.5), (2, 1.0, 1.0)):
        kk = int((1 + 8 * r / eps) ** d)
        q = math.ceil(kk / (eps / (4 * r)))
        exact = math.log(math.comb(q + kk - 1, kk - 1))
        bound = math.exp(bounds.log_log_measure_packing(d_model=d, r=r, eps=eps))
        assert exact <= bound <= 2.5 * exact
    log10_n = bounds.log10_unbounded_threshold(d_model=2048, vocab_size=50304)
    assert log10_n == pytest.approx(2048 * math.log10(1 + 8 * 2048), rel=1e-3)
    assert log10_n > math.log10(bounds.slope_bound(d_model=2048, vocab_size=50304) * 1e6)  # far beyond C·m
    assert bounds.log10_unbounded_fraction_bound(n=1e300, d_model=2048, vocab_size=50304) == 0.0
    frac = bounds.log10_unbounded_fraction_bound(n=[1, 100], d_model=1, vocab_size=50304, r=1.0, eps=1.0)
    assert frac[0] == 0.0 and frac[1] < -400
    with pytest.raises(InputError, match="no ε"):
        bounds.log_log_measure_packing(d_model=4, r=1.0, precision="exact-fp16")


def test_vectorised_shapes_and_input_errors():
    d = np.array([[768], [2048]])
    v = np.array([50304, 151936, 262144])
    assert bounds.slope_bound(d_model=d, vocab_size=v).shape == (2, 3)
    for kwargs, match in (({"d_model": 0, "vocab_size": 10}, "d_model"),
                          ({"d_model": 8, "vocab_size": 1}, "vocab_size"),
                          ({"d_model": 8, "vocab_size": 10, "r": -1.0, "eps": 0.1}, "r must"),
                          ({"d_model": 8, "vocab_size": 10, "r": 1.0, "eps": -0.1}, "eps must")):
        with pytest.raises(InputError, match=match):
            bounds.slope_bound(**kwargs)
    with pytest.raises(InputError, match="m must"):
        bounds.log_count(d_model=4, m=0)
    with pytest.raises(InputError, match="min_cos"):
        bounds.log_cone_fraction(d_model=4, min_cos=1.5)
    with pytest.raises(InputError, match="exactly one"):
        bounds.log_cone_fraction(d_model=4, phi=0.3, min_cos=0.5)
