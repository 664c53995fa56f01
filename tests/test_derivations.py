"""accessibility.derivations: every chain is checked step by step (numerically and by SymPy), the
checker refuses each kind of wrong step, every result equals the paper's closed form and agrees with
the numeric functions of accessibility.bounds over random parameters, and the brute-force evidence the
prose steps are evaluated at is what it claims to be."""

import itertools
import math

import mpmath
import numpy as np
import pytest
import sympy

from accessibility import bounds, evidence
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


def test_the_points_are_reproducible():
    """Each chain draws its points from a generator seeded by its statement: a rebuild evaluates the
    same relations at the same points."""
    first, second = D.packing_lemma.__wrapped__(), D.packing_lemma.__wrapped__()
    assert first.points == second.points and first.points == D.packing_lemma().points
    assert D._threshold.__wrapped__(D.corollary_4_6_slope(), D.V, D.delta, "threshold")[1].points == \
        D._threshold.__wrapped__(D.corollary_4_6_slope(), D.V, D.delta, "threshold")[1].points


def test_every_relation_holds_at_the_points_it_was_checked_at():
    """A second evaluation, in double precision: every relation of every chain at its recorded points."""
    for derive in DERIVATIONS:
        derivation = derive()
        assert derivation.points
        for step in derivation.steps:
            rel = step.relation
            f = sympy.lambdify(sorted(rel.free_symbols, key=str), rel.lhs.doit() - rel.rhs.doit(), "mpmath")
            for p in derivation.points[:8]:
                gap = f(*(p[s] for s in sorted(rel.free_symbols, key=str)))
                assert gap <= 1e-9 * (1 + abs(gap)) if rel.rel_op == "<=" else abs(gap) <= 1e-9, step


# --- the checker refuses what it cannot check: one test per hole -------------------------------

R, X = D.r, D._x


def _points(*values):
    """Evidence of a hypothesis: the given assignments."""
    return lambda rng: [dict(v) for v in values]


def _hypothesis(lhs, rhs, *values):
    return D._Chain("test", lhs, rhs, "hypothesis", check=D.HYPOTHESIS, evidence=_points(*values))


def _true_chain():
    """n <= m at points where it holds."""
    return _hypothesis(D.n, D.m, {D.n: 1, D.m: 2}, {D.n: 3, D.m: 3}, {D.n: 2, D.m: 40})


def test_log_needs_both_sides_positive():
    """The hole 'no positivity guard in log()': a side that is negative somewhere, and one SymPy cannot
    show positive."""
    with pytest.raises(D.DerivationError, match=r"ln needs n - 3 > 0 is false at .*numeric"):
        _true_chain().shift(-3, "subtract 3").log()
    chain = _hypothesis(D.n, sympy.exp(R) - R, {D.n: 1, R: 1.0})
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show -r \+ exp\(r\) > 0 \(ln needs"):
        chain.log()
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show m - 3 > 0"):  # positive at the chain's
        _hypothesis(D.n, D.m - 3, {D.n: 1, D.m: 5}, {D.n: 2, D.m: 9}).log()  # points, not everywhere
    logged = _hypothesis(D.n**2 * D.m, D.V**D.n, {D.n: 1, D.m: 1, D.V: 2}).log()
    assert logged.steps[-1].check == D.INCREASING
    written_out = (2 * sympy.log(D.n) + sympy.log(D.m), D.n * sympy.log(D.V))
    assert (logged.lhs, logged.rhs) == written_out


def test_monotone_step_checks_its_derivative_its_gap_and_its_start():
    """The holes 'no derivative and no gap checks in weaken_monotone'."""
    t = sympy.Symbol("t", positive=True)
    chain = lambda rhs: _hypothesis(-10 * D.n, rhs, {D.n: 1, R: 2.0})  # noqa: E731
    with pytest.raises(D.DerivationError, match=r"d/dt of -t >= 0 is false"):
        chain(-R).weaken_monotone("decreasing", g=-t, variable=t, start=R, end=R + 1)
    with pytest.raises(D.DerivationError, match=r"r >= r \+ 1 \(given \{\}\) is false"):
        chain(R + 1).weaken_monotone("backwards", g=t, variable=t, start=R + 1, end=R)
    with pytest.raises(D.DerivationError, match=r"r = 2\*r is false"):
        chain(R).weaken_monotone("wrong start", g=t, variable=t, start=2 * R, end=3 * R)
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show d/dt of t - sin\(t\) >= 0"):
        chain(R - sympy.sin(R)).weaken_monotone("increasing", g=t - sympy.sin(t), variable=t, start=R,
                                                end=R + 1)
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show exp\(r\) >= r \+ 1"):
        chain(R + 1).weaken_monotone("exp(r) >= 1 + r", g=t, variable=t, start=R + 1, end=sympy.exp(R))
    done = chain(R).weaken_monotone("fine", g=t, variable=t, start=R, end=R + 1).done()
    assert done.result.rhs == R + 1 and done.steps[-1].check == D.MONOTONE


def test_a_given_premise_is_verified():
    """The hole 'ceil(x) <= x passes as a monotone step': the premise Q = x - θ (θ > 0) is false for
    Q = ceil(x), which the chain's points say Q is."""
    q, theta = sympy.Symbol("Q", positive=True), sympy.Symbol("theta", positive=True)
    values = [{D.n: 1, q: math.ceil(x), R: x} for x in (0.3, 1.5, 2.0, 7.9)]
    chain = _hypothesis(D.n, q, *values)
    with pytest.raises(D.DerivationError, match=r"premise Q = r - theta needs theta outside"):
        chain.weaken_monotone("ceil(x) <= x", g=q, variable=q, start=q, end=R, given={q: R - theta})
    with pytest.raises(D.DerivationError, match="must define one new symbol"):
        _hypothesis(D.n, q, *values).weaken_monotone("no unknown", g=q, variable=q, start=q, end=R + 1,
                                                       given={q: R + 1})
    fine = _hypothesis(D.n, q, *values).weaken_monotone(
        "ceil(x) <= x + 1", g=q, variable=q, start=q, end=R + 1, given={q: R + 1 - theta},
    )
    assert fine.rhs == R + 1  # θ = x + 1 - ceil(x) lies in (0, 1] at every point


def test_a_lemma_is_substituted_only_inside_its_domain():
    """The hole 'from_lemma(log1p_below_x(), {x: -3/2}) records -log(2) + iπ <= -3/2'."""
    with pytest.raises(D.DerivationError, match=r"^test: ln\(1\+x\) <= x at x = -3/2: outside .*numeric"):
        D._Chain.from_lemma("test", D.log1p_below_x(), {X: sympy.Rational(-3, 2)}, "out of domain")
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show x = -r \+ exp\(r\) - 1 lies in"):
        D._Chain.from_lemma("test", D.log1p_below_x(), {X: sympy.exp(R) - 1 - R}, "unprovable")
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show \|V\| = m\*\(m \+ 1\)/2 \+ 2 lies"):
        D._Chain.from_lemma("test", D.corollary_4_6_threshold(), {D.V: 2 + D.m * (D.m + 1) / 2},
                            "an integer, which SymPy cannot tell")
    with pytest.raises(D.DerivationError, match=r"at \|V\| = r \+ 2: outside its domain"):
        D._Chain.from_lemma("test", D.corollary_4_6_threshold(), {D.V: R + 2}, "not an integer")
    with pytest.raises(D.DerivationError, match=r"^test: ln\(1\+x\) <= x at x = -r: outside its domain"):
        _hypothesis(D.n, D.m, {D.n: 1, D.m: 2, R: 1.0}).apply_lemma(D.log1p_below_x(), {X: -R}, "negative")
    with pytest.raises(D.DerivationError, match=r"at x = log\(-r - 1\): outside .*\(numeric check\)"):
        D._Chain.from_lemma("test", D.log1p_below_x(), {X: sympy.log(-1 - R)}, "undefined everywhere")
    chain = D._Chain.from_lemma("test", D.log1p_below_x(), {X: 1 / D.r}, "inside")
    assert chain.uses == [D.log1p_below_x()] and len(chain.points) > D.SAMPLES


def test_a_step_keeps_its_relation_when_both_sides_are_the_same():
    """A recorded step stays a relation to render and check, not SymPy's evaluated True."""
    assert isinstance(D._rel(R, R), sympy.LessThan) and isinstance(D._rel(R, R, equal=True), sympy.Equality)


def _lemma_on(symbol, domain=None):
    """A lemma ``symbol = symbol`` whose symbol ranges over ``domain`` (default: its assumptions)."""
    return D._Chain("lemma", symbol, symbol, "identity", check=D.IDENTITY, equal=True,
                    domain={symbol: domain} if domain is not None else None).done()


def test_substituted_values_respect_open_and_closed_ends_and_integers():
    """Each end of a lemma's domain as stated: open or closed, below and above, and integers for a Range;
    numerically at the points, then by SymPy under the assumptions."""
    t, u, gap = sympy.Symbol("t", positive=True), sympy.Symbol("u", nonnegative=True), (R - 2) ** 2
    accept = lambda lemma, value: D._Chain.from_lemma("test", lemma, {lemma.result.lhs: value}, "in")  # noqa: E731

    def refuse(lemma, value, match):
        with pytest.raises(D.DerivationError, match=match):
            accept(lemma, value)
    refuse(_lemma_on(t), sympy.Integer(0), r"outside its domain Interval.open\(0, oo\) .*numeric")
    refuse(_lemma_on(t), gap, r"SymPy cannot show t = \(r - 2\)\*\*2 lies in")  # positive at the points only
    accept(_lemma_on(u), sympy.Integer(0))  # a closed end holds its end point
    refuse(_lemma_on(u), sympy.Integer(-1), "outside its domain")
    refuse(_lemma_on(D.K), 1 + gap, r"SymPy cannot show K = \(r - 2\)\*\*2 \+ 1 lies")
    accept(_lemma_on(D.V), sympy.Integer(2))  # a Range holds its first integer
    refuse(_lemma_on(D.V), sympy.Rational(5, 2), r"outside its domain Range\(2, oo, 1\)")
    closed, open_ = sympy.Interval.Lopen(0, 1), sympy.Interval.open(0, 1)
    accept(_lemma_on(t, closed), sympy.Integer(1))
    refuse(_lemma_on(t, closed), sympy.Rational(3, 2), "outside its domain")
    refuse(_lemma_on(t, open_), sympy.Integer(1), r"outside its domain Interval.open\(0, 1\)")
    accept(_lemma_on(t, open_), sympy.Rational(1, 2))
    refuse(_lemma_on(t, open_), 1 - gap / (1 + gap), "SymPy cannot show")  # below 1 at the points only
    refuse(_lemma_on(t, closed), (1 + R) * sympy.exp(-R), r"SymPy cannot show t = \(r \+ 1\)\*exp\(-r\) lies")
    refuse(_lemma_on(t), sympy.log(R - 1), "outside its domain")  # undefined (complex) for r < 1


def _member(value, domain) -> bool:
    """SymPy's own membership (an independent reference for the sampler)."""
    if isinstance(domain, sympy.Range):
        return isinstance(value, int) and value in domain
    return bool(domain.contains(sympy.Float(str(value), 40)))


def test_random_and_edge_points_lie_in_the_stated_domain():
    """The points a claim is evaluated at: every random draw and every edge value inside the domain; a
    closed end is itself an edge value, an open end is not; positive integers start at 1, non-negative
    ones at 0."""
    rng, oo, interval = np.random.default_rng(0), sympy.oo, sympy.Interval
    domains = [interval.open(0, oo), interval(0, oo), interval.open(1, oo), interval.Lopen(1, 2),
               interval.Ropen(1, 2), interval(1, 3), sympy.Range(2, oo)]
    for domain in domains:
        edges = D._edges(domain)
        assert all(_member(v, domain) for v in [D._draw(domain, rng) for _ in range(2000)] + edges), domain
        for end in {domain.inf, domain.sup} - {oo}:
            assert any(v == D._mp(end) for v in edges) == (end in domain), (domain, end)
    t, j0 = sympy.Symbol("t", positive=True), sympy.Symbol("j", nonnegative=True, integer=True)
    assert D._domain(D.d, {}) == sympy.Range(1, oo) and D._domain(j0, {}) == sympy.Range(0, oo)
    assert D._domain(t, {}) == interval.open(0, oo) and D._domain(D.V, {}) == sympy.Range(2, oo)
    assert all(_member(p[t], interval.Lopen(0, 1)) for p in D._sample({t}, {t: interval.Lopen(0, 1)}, rng))


def test_every_relation_is_rendered_and_long_ones_split_at_the_relation_sign():
    for derive in DERIVATIONS:
        derivation = derive()
        text = derivation.latex()
        for step in derivation.steps:
            rel = step.relation
            if len(sympy.latex(rel)) > D.LONG_LATEX:
                sign = D._RELATIONS[rel.rel_op]
                assert rf"{sympy.latex(rel.lhs)} \\ & \qquad {sign} {sympy.latex(rel.rhs)}" in text
            else:
                assert f"& {sympy.latex(rel)}" in text
        long = sum(len(s.latex()) > D.LONG_LATEX for s in derivation.steps)
        assert text.startswith(r"\begin{aligned}") and text.endswith(r"\end{aligned}")
        assert text.count(r"\\ &") == 2 * len(derivation.steps) - 1 + long  # reasons, joins, long relations
    assert any(len(s.latex()) > D.LONG_LATEX for s in D.corollary_4_6_threshold().steps)
    assert "Xmas" in _hypothesis(D.n, D.m, {D.n: 1, D.m: 2}).equal(D.m, "Xmas").done().latex()


def test_apply_lemma_needs_the_lemma_to_start_from_the_right_side():
    """The hole 'no check in apply_lemma'."""
    with pytest.raises(D.DerivationError, match=r"log\(x \+ 1\) = m is false"):
        _true_chain().apply_lemma(D.log1p_below_x(), {}, "another start")
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show pi/2 = atan\(1/x\) \+ atan\(x\)"):
        chain = _hypothesis(D.n, sympy.atan(X) + sympy.atan(1 / X), {D.n: 1, X: 0.5})
        chain.apply_lemma(_pi_half_lemma(), {}, "unprovable identity")
    chain = _hypothesis(D.n, sympy.log(1 + X), {D.n: 0.01, X: 1.0})
    chain.apply_lemma(D.log1p_below_x(), {}, "lemma")
    assert chain.rhs == X and chain.steps[-1].relation.rel_op == "<="
    chain = D._Chain("test", sympy.pi / 2, sympy.pi / 2, "x", check=D.IDENTITY, equal=True)
    assert chain.apply_lemma(_pi_half_lemma(), {}, "an equality").steps[-1].relation.rel_op == "=="


def _pi_half_lemma():
    return D._Chain("pi/2", sympy.pi / 2, sympy.pi / 2, "identity", check=D.IDENTITY, equal=True).done()


def test_weaken_by_lemma_needs_an_upper_bound_of_the_term():
    """The hole 'no relation check in weaken_by_lemma'."""
    equality = D._Chain("equality", X, X, "x = x", check=D.IDENTITY, equal=True).done()
    chain = _hypothesis(D.n, D.m + X, {D.n: 1, D.m: 2, X: 1.0})
    with pytest.raises(D.DerivationError, match=r"equality is not an upper bound \(its relation is ==\)"):
        chain.weaken_by_lemma(X, equality, {}, "an equality")
    with pytest.raises(D.DerivationError, match=r"log\(x \+ 1\) = m is false"):
        chain.weaken_by_lemma(D.m, D.log1p_below_x(), {}, "another term")
    with pytest.raises(D.DerivationError, match=r"log\(x \+ 1\) <= x is false"):
        _hypothesis(D.n, D.m + X, {D.n: 1, D.m: 5, X: -2}).weaken_by_lemma(
            sympy.log(1 + X), D.log1p_below_x(), {}, "at a point outside the lemma")
    fine = _hypothesis(D.n, D.m + sympy.log(1 + X), {D.n: 1, D.m: 2, X: 1.0})
    assert fine.weaken_by_lemma(sympy.log(1 + X), D.log1p_below_x(), {}, "lemma").rhs == D.m + X
    equality = _points({D.n: 1, X: 1.0})
    chain = D._Chain("test", D.n + sympy.log(1 + X), D.n + sympy.log(1 + X), "x", check=D.HYPOTHESIS,
                     equal=True, evidence=equality)
    chain.weaken_by_lemma(sympy.log(1 + X), D.log1p_below_x(), {}, "lemma")
    assert chain.steps[-1].relation.rel_op == "<="


def test_prose_is_evaluated_at_its_evidence():
    """The hole 'an inserted false prose step passes': a prose weakening that is false, a prose or
    hypothesis start without evidence, or whose evidence contradicts it."""
    with pytest.raises(D.DerivationError, match=r"m/2 >= m is false .*numeric"):
        _true_chain().weaken_prose(D.m / 2, "a false prose step")
    with pytest.raises(D.DerivationError, match="a prose step needs evidence"):
        D._Chain("test", D.n, D.m, "prose")
    with pytest.raises(D.DerivationError, match="a hypothesis step needs evidence"):
        D._Chain("test", D.n, D.m, "hypothesis", check=D.HYPOTHESIS)
    with pytest.raises(D.DerivationError, match=r"n <= m is false at \{n = 3\.0, m = 2\.0\}"):
        D._Chain("test", D.n, D.m, "prose", evidence=_points({D.n: 1, D.m: 2}, {D.n: 3, D.m: 2}))
    with pytest.raises(D.DerivationError, match="^test: no point to evaluate the relations at$"):
        D._Chain("test", D.n, D.m, "prose", evidence=_points())
    chain = _true_chain().weaken_prose(D.m + 1, "true")
    assert chain.steps[-1].check == D.PROSE and chain.done().prose_steps == (chain.steps[-1],)


def test_a_weakening_turns_an_equality_chain_into_an_inequality():
    chain = D._Chain("test", D.n, D.n, "n = n", check=D.IDENTITY, equal=True)
    chain.equal(D.n * 1, "same").scale(D.m, "times m").shift(1, "add 1").log().exp().negate()
    assert {s.relation.rel_op for s in chain.steps} == {"=="}
    t = sympy.Symbol("t", positive=True)
    for weaken in (lambda c: c.weaken(D.n + 1, "larger"), lambda c: c.weaken_prose(D.n + 1, "larger"),
                   lambda c: c.weaken_monotone("larger", g=t, variable=t, start=D.n, end=D.n + 1)):
        chain = weaken(D._Chain("test", D.n, D.n, "n = n", check=D.IDENTITY, equal=True))
        assert [s.relation.rel_op for s in chain.steps] == ["==", "<="]


def test_identities_factors_and_weakenings_are_checked_twice():
    """Each claim is evaluated numerically, then proved by SymPy: a false one fails the first check, a
    true one SymPy cannot prove the second."""
    with pytest.raises(D.DerivationError, match=r"m = m \+ 1 is false .*numeric"):
        _true_chain().equal(D.m + 1, "not an identity")
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show m = m \+ atan"):
        _true_chain().equal(D.m + sympy.atan(R) + sympy.atan(1 / R) - sympy.pi / 2, "unprovable")
    with pytest.raises(D.DerivationError, match=r"n = n \+ 1 is false"):
        _true_chain().equal_lhs(D.n + 1, "not an identity")
    with pytest.raises(D.DerivationError, match=r"-m > 0 is false"):
        _true_chain().scale(-D.m, "negative factor")
    with pytest.raises(D.DerivationError, match=r"^test: 0 > 0 is false .*numeric"):
        _true_chain().scale(0, "zero factor")
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show -r \+ exp\(r\) - 1 > 0"):
        _true_chain().scale(sympy.exp(R) - 1 - R, "unprovable")
    with pytest.raises(D.DerivationError, match=r"m - 1 >= m is false"):
        _true_chain().weaken(D.m - 1, "smaller, not larger")
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show m - r \+ exp\(r\) - 1 >= m"):
        _true_chain().weaken(D.m + sympy.exp(R) - 1 - R, "unprovable")
    with pytest.raises(D.DerivationError, match=r"r = r \+ 1 is false"):
        D._Chain("test", R, R + 1, "not an identity", check=D.IDENTITY)
    y, z = sympy.symbols("y z")  # no sign assumed: the identities below hold on the stated domain y, z > 0
    positive = {y: sympy.Interval.open(0, sympy.oo), z: sympy.Interval.open(0, sympy.oo)}
    D._Chain("test", sympy.log(y * z), sympy.log(y) + sympy.log(z), "ln of a product", check=D.IDENTITY,
             domain=positive)  # proved by expanding the logarithm with force
    D._Chain("test", (y * z) ** R, y**R * z**R, "power of a product", check=D.IDENTITY, domain=positive)
    with pytest.raises(D.DerivationError, match=r"SymPy cannot show atan\(1/r\) \+ atan\(r\) = pi/2"):
        D._Chain("test", sympy.atan(R) + sympy.atan(1 / R), sympy.pi / 2, "unprovable", check=D.IDENTITY)
    with pytest.raises(ValueError, match="plain text"):
        _hypothesis(D.n, D.m, {D.n: 1, D.m: 2}).equal(D.m, "a_b").done().latex()
    chain = _true_chain().negate().shift(D.m, "add m").exp()
    assert [s.check for s in chain.steps] == [D.HYPOTHESIS, D.SCALE, D.INCREASING, D.INCREASING]
    assert chain.steps[-1].relation == sympy.Le(sympy.exp(D.m - D.m), sympy.exp(D.m - D.n), evaluate=False)


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
    """The geometric series, its bound, the net size, the cover radius, ln M_∞ and N against the numeric
    functions of accessibility.bounds at random parameters."""
    size = sympy.Symbol("size", positive=True)
    exact = sympy.lambdify((size, D.m), D.all_lengths().steps[1].relation.rhs.subs(D.P, size), "mpmath")
    bound = sympy.lambdify((size, D.m), D.all_lengths().bound.subs(D.P, size), "mpmath")
    net = _lambdify(D.corollary_4_10_net_size().bound)
    cover = sympy.lambdify(D.eps, D.corollary_4_10_cover_radius().bound, "mpmath")
    log_packing = _lambdify(D.corollary_4_10_log_packing().bound.subs(D.K, D.corollary_4_10_net_size().bound))
    threshold = _lambdify(D.corollary_4_10_threshold())
    for args in _draws():
        d, v, r, eps, m, _, _ = args
        one = bounds.log_ball_count(d_model=d, r=r, eps=eps)
        kk = mpmath.exp(mpmath.mpf(one))
        ours = bounds.log_count(d_model=d, m=m, r=r, eps=eps, all_lengths=True)
        assert float(mpmath.log(exact(kk, m))) == pytest.approx(ours, rel=1e-11)
        excess = float(mpmath.log(bound(kk, m))) - bounds.log_count(d_model=d, m=m, r=r, eps=eps)
        assert ours - 1e-12 <= float(mpmath.log(bound(kk, m))) and excess <= 1 / float(kk - 1) + 1e-12
        quarter = eps * bounds.NET_RADIUS_FRACTION  # the net's radius
        net_size = bounds.log_ball_count(d_model=d, r=r, eps=quarter)
        assert float(mpmath.log(net(*args))) == pytest.approx(net_size, rel=1e-12)
        moves = (bounds.NET_RADIUS_FRACTION + bounds.WEIGHT_ERROR_FRACTION) * eps
        assert float(cover(eps)) == pytest.approx(moves, rel=1e-15) and moves <= eps / 2
        assert float(mpmath.log(log_packing(*args))) == pytest.approx(
            bounds.log_log_measure_packing(d_model=d, r=r, eps=eps), rel=1e-12)
        assert float(mpmath.log10(threshold(*args))) == pytest.approx(
            bounds.log10_unbounded_threshold(d_model=d, vocab_size=v, r=r, eps=eps), rel=1e-12, abs=1e-12)
    assert D.m not in D.corollary_4_10_threshold().free_symbols


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


# --- the evidence the prose steps are evaluated at -----------------------------------------------


def test_packings_reach_the_grid_count_and_the_bound_is_tight_in_one_dimension():
    """A greedy packing of the ε-grid of [-r, r] keeps all ⌊2r/ε⌋ + 1 points (the grid count), which
    is the packing bound when 2r/ε is an integer; the random packings are non-trivial."""
    for r, eps in ((1.0, 0.5), (2.0, 0.25), (1.5, 0.375)):  # steps exact in binary: the grid is exact
        grid = np.arange(-r, r + 1e-9, eps)[:, None]
        assert evidence.greedy_packing(grid, eps, np.inf) == math.floor(2 * r / eps) + 1
    assert evidence.greedy_packing(np.linspace(-1, 1, 5)[:, None], 0.5, 2) == 5 == 1 + 2 * 1 / 0.5
    records = evidence.packings(np.random.default_rng(0))
    assert {(rec["d"], rec["m"]) for rec in records} == {(1, 1), (2, 1), (1, 2), (1, 3)}
    assert all(rec["count"] >= 2 for rec in records)
    # each packing lemma is evaluated on the packings of its own space: one vector, or m under max_j
    assert {p[D.m] for p in D.packing_lemma(dim=D.d * D.m, unit_volume=D.kappa**D.m).points} == {1, 2, 3}
    assert {p[D.d] for p in D.packing_lemma().points} == {1, 2}


def test_stars_and_bars_and_the_ceiling_of_the_evidence():
    for rec in evidence.stars_and_bars(np.random.default_rng(1)):
        assert rec["count"] == math.comb(rec["Q"] + rec["K"] - 1, rec["K"] - 1)
        assert math.ceil(4 * rec["r"] * rec["K"] / rec["eps"] - 1e-12) == rec["Q"]


def test_evidence_is_tight_where_the_claims_are():
    """The triangle records include collinear points (equality up to rounding), the cover moves stay
    below ε/2, the union-bound records have a rate, and the quantiser's outputs fit the grid."""
    rng = np.random.default_rng(2)
    gaps = [rec["s"] + rec["u"] - rec["eps"] / 2 - rec["r"] + rec["dist"] for rec in evidence.triangle(rng)]
    assert max(gaps) <= 1e-12 and min(abs(g) for g in gaps) < 1e-12  # ‖y - c‖ <= ε/2 - s + r - u, tight
    assert all(rec["w1"] < rec["eps"] / 2 for rec in evidence.cover_moves(rng))
    assert all(0 < rec["rate"] for rec in evidence.union_bound(rng))
    assert all(rec["accessible"] <= rec["grid"] for rec in evidence.quantised_outputs(rng))
    assert all(rec["accessible"] == rec["vocab"] ** rec["n"] for rec in evidence.all_accessible(rng))
    cones = evidence.cone_sector_packings(rng)
    assert {rec["d"] for rec in cones} == {2, 3} and all(rec["count"] >= 1 for rec in cones)


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
