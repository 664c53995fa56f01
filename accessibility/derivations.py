"""Symbolic derivations (SymPy) of the packing lemma, Theorem 4.5 and Corollaries 4.6 and 4.10.

Each derivation is a chain of relations ``L ≤ R`` (or ``=``) built step by step, and every step is
checked when it is made, twice: first numerically, then by SymPy. A failed check raises
:class:`DerivationError`. How a step is checked:

``identity``
    a side is rewritten; the old side minus the new one vanishes (SymPy simplifies it to zero);
``positive scale``
    both sides are multiplied by a positive factor (or ``negate``: both sides times -1, the relation
    flips);
``increasing map``
    ln (both sides positive), exp, or a constant added to both sides;
``weaker``
    the right side is replaced by a larger one (SymPy proves the difference non-negative under the
    symbols' assumptions; |V| >= 2, K > 1 and P > 1 are substituted as 2 + v and 1 + q, v >= 0, q > 0);
``monotone``
    an inequality between a function at two points, from the sign of its derivative; a ``given``
    premise (a ceiling written out) is verified at the chain's points;
``lemma``
    an instance of another derivation of this module (listed in :attr:`Derivation.uses`), whose
    substituted values must lie in the lemma's domain;
``hypothesis``
    what is assumed (the premise of an implication), not a claim;
``prose``
    a fact SymPy cannot prove (a volume, a triangle inequality between points of a normed space, a
    binomial estimate, the quantisation hypothesis). It is proved in the book, in words.
    :attr:`Derivation.prose_steps` lists them.

Numeric checks. Every symbol has a stated domain: its SymPy assumptions (positive, non-negative,
integer), |V| >= 2 and K, P > 1, narrowed per derivation where the argument needs it (a cone's
half-angle in (0, π/2], the fractional part θ of a ceiling in (0, 1]). The claim of each step (an
identity, a positive factor, a larger right side, a monotone function, a lemma's instance) is
evaluated with mpmath at :data:`SAMPLES` random points of that domain and on a grid of its edge
values. A chain also carries *points*: assignments of every symbol at which its first relation holds,
random points of the domain for an identity or a lemma, and brute-force instances
(:mod:`accessibility.evidence`: real packings, quantisers, measures) for a hypothesis or a prose
step, which must name its evidence. Every relation of the chain, prose steps included, is evaluated
at those points as it is recorded: each follows from the first, so each must hold there.

``sympy.latex`` renders each chain for the book (:meth:`Derivation.latex`);
``tests/test_derivations.py`` lambdifies every result and compares it with the numeric functions of
:mod:`accessibility.bounds` over random parameters, and with the closed forms of the paper.

>>> packing_lemma().bound
((2*r + varepsilon)/varepsilon)**d
>>> [s.check for s in packing_lemma().steps]
['prose', 'positive scale', 'identity']
"""

from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

import mpmath
import numpy as np
import sympy

from accessibility import evidence

#: Width, prompt length, output length.
d, m, n = sympy.symbols("d m n", positive=True, integer=True)
#: Support radius, precision, target fraction δ, ball-volume constant κ_d, cone half-angle φ.
r, eps, delta, kappa, phi = sympy.symbols("r varepsilon delta kappa_d varphi", positive=True)
#: Euclidean radius r_2 of the support, per-token rate h of a target distribution (nats).
r2, h = sympy.symbols("r_2 h", positive=True)
#: Vocabulary size |V| (>= 2; positivity checks substitute |V| = 2 + v).
V = sympy.Symbol("|V|", positive=True, integer=True)
#: Number of points P of a packing; for one prompt vector, P = (1 + 2r/ε)^d (> 1: checks substitute 1 + q).
P = sympy.Symbol("P", positive=True)
#: Summation index, size K of a finite set (> 1), excess q = K - 1 > 0, weight denominator Q.
k = sympy.Symbol("k", positive=True, integer=True)
K, q = sympy.symbols("K q", positive=True)
_v = sympy.Symbol("v", nonnegative=True)
_t = sympy.Symbol("t", positive=True)
_x = sympy.Symbol("x", positive=True)
#: Assumptions that SymPy's symbols cannot carry: |V| >= 2, K > 1 and P > 1 (P is a packing's size; the
#: geometric series of :func:`all_lengths` needs P > 1, the other derivations hold for any P > 0).
_ASSUMED = {V: 2 + _v, K: 1 + q, P: 1 + q}
#: |V| >= 2 and K > 1 as domains of the numeric checks.
_DOMAINS = {V: sympy.Range(2, sympy.oo), K: sympy.Interval.open(1, sympy.oo)}

IDENTITY, SCALE, INCREASING, WEAKER, MONOTONE, LEMMA, HYPOTHESIS, PROSE = (
    "identity", "positive scale", "increasing map", "weaker", "monotone", "lemma", "hypothesis", "prose")

#: Numeric checks: random points per claim, points of the edge grid (at most), working precision
#: (decimal digits), and the relative tolerance of a comparison: the brute-force evidence is computed in
#: double precision, and a triangle inequality between collinear points holds with equality.
SAMPLES = 24
GRID_POINTS = 40
DIGITS = 40
TOLERANCE = mpmath.mpf(10) ** -12
#: Random draws: an unbounded interval from 10^-2 to 10^3 above its lower end (log-uniform), an
#: integer up to 10^3 above its first value; the edge grid goes 10^-3 inside each end.
DECADES = (-2.0, 3.0)
EDGE = 1e-3
#: Seed of the numeric checks (mixed with each chain's statement, so each chain has its own points).
SEED = 2026

Point = dict  # symbol -> value (mpmath number or int)


class DerivationError(AssertionError):
    """A derivation step failed its numeric or its SymPy check."""


@dataclass(frozen=True)
class Step:
    """One relation of a derivation, why it holds, and how that was checked (see the module doc)."""

    relation: sympy.Basic
    reason: str
    check: str

    def latex(self) -> str:
        return sympy.latex(self.relation)


@dataclass(frozen=True)
class Derivation:
    """A checked chain of relations; the last one is the result.

    ``domain`` holds the domains stated for this derivation's symbols beyond their assumptions (a
    lemma is substituted only inside them); ``points`` the assignments at which every relation was
    evaluated.
    """

    statement: str
    steps: tuple[Step, ...]
    uses: tuple[Derivation, ...] = ()
    domain: dict = field(default_factory=dict, compare=False, repr=False)
    points: tuple[Point, ...] = field(default=(), compare=False, repr=False)

    @property
    def result(self) -> sympy.Basic:
        return self.steps[-1].relation

    @property
    def bound(self) -> sympy.Expr:
        """The right side of the result (sums and products evaluated)."""
        return self.result.rhs.doit()

    @property
    def prose_steps(self) -> tuple[Step, ...]:
        """Steps SymPy did not check, here and in the lemmas used (proved in words, checked on evidence)."""
        own = tuple(s for s in self.steps if s.check == PROSE)
        return own + tuple(s for lemma in self.uses for s in lemma.prose_steps if s not in own)

    def latex(self) -> str:
        """The chain as an ``aligned`` block: each relation, then its reason in small type on a line of
        its own (side by side they are wider than a page's column)."""
        if any(c in s.reason for s in self.steps for c in "\\_^{}$"):
            raise ValueError(f"{self.statement}: a reason must be plain text (it is shown in \\text{{}})")
        lines = [rf"{_wrapped(s)} \\ & \qquad \small\text{{{s.reason} [{s.check}]}}" for s in self.steps]
        return r"\begin{aligned}" + r"\\ ".join(lines) + r"\end{aligned}"


#: LaTeX of a relation longer than this is set on two lines, split at the relation sign.
LONG_LATEX = 200
_RELATIONS = {"<=": r"\leq", "<": "<", ">=": r"\geq", ">": ">", "==": "=", "!=": r"\neq"}


def _wrapped(step: Step) -> str:
    """``& relation``, or the left side and then ``op rhs`` on a second line when it is too long."""
    rel = step.relation
    if len(step.latex()) <= LONG_LATEX or getattr(rel, "rel_op", None) not in _RELATIONS:
        return f"& {step.latex()}"
    return rf"& {sympy.latex(rel.lhs)} \\ & \qquad {_RELATIONS[rel.rel_op]} {sympy.latex(rel.rhs)}"


# --- SymPy checks -------------------------------------------------------------------------------


def _assumed(expr):
    return sympy.sympify(expr).subs(_ASSUMED)


def _is_zero(expr) -> bool:
    expr = _assumed(expr).doit()
    for form in (expr, sympy.expand_log(sympy.powsimp(expr, force=True), force=True)):
        if sympy.simplify(form) == 0:
            return True
    return False


def _sign_ok(expr, test: str) -> bool:
    expr = _assumed(expr)
    forms = (expr, sympy.expand(expr), sympy.simplify(expr), sympy.factor(sympy.simplify(expr)))
    return any(getattr(form, test) for form in forms)


def _rel(lhs, rhs, equal=False):
    if equal:
        return sympy.Eq(lhs, rhs, evaluate=False)
    return sympy.Le(lhs, rhs, evaluate=False)


# --- numeric checks -----------------------------------------------------------------------------


def _domain(symbol, stated: dict) -> sympy.Set:
    """Where ``symbol`` ranges: stated for the derivation, else |V| >= 2 and K, P > 1, else its assumptions
    (the positive integers, the positive or the non-negative reals)."""
    if symbol in stated or symbol in _DOMAINS:
        return stated.get(symbol, _DOMAINS.get(symbol))
    if symbol.is_integer:
        return sympy.Range(1 if symbol.is_positive else 0, sympy.oo)
    return sympy.Interval(0, sympy.oo, left_open=bool(symbol.is_positive))


def _mp(value):
    return mpmath.mpf(sympy.N(value, DIGITS)) if isinstance(value, sympy.Basic) else mpmath.mpf(value)


def _draw(domain: sympy.Set, rng: np.random.Generator):
    """One random value: an integer of a Range, or a real of an Interval (its open ends excluded)."""
    low = _mp(domain.inf)
    if isinstance(domain, sympy.Range):
        return int(domain.inf) + int(10 ** rng.uniform(0, DECADES[1])) - 1
    if domain.sup == sympy.oo:
        return low + mpmath.mpf(10) ** rng.uniform(*DECADES)
    return low + (_mp(domain.sup) - low) * (1 - rng.uniform(EDGE, 1 - EDGE))


def _edges(domain: sympy.Set) -> list:
    """A few values at the ends of a domain: its first integers, or its ends (10^-3 inside an open one)
    and its middle; for an unbounded one, 1 and 10^3 above its lower end."""
    low = _mp(domain.inf)
    if isinstance(domain, sympy.Range):
        return [int(domain.inf) + i for i in range(3)]
    if domain.sup == sympy.oo:
        return [low + EDGE if domain.left_open else low, low + 1, low + 1 / EDGE]
    width = _mp(domain.sup) - low
    return [low + EDGE * width if domain.left_open else low, low + width / 2,
            low + width * (1 - EDGE) if domain.right_open else low + width]


def _sample(symbols, stated: dict, rng: np.random.Generator) -> list[Point]:
    """Random points of the symbols' domains and (at most :data:`GRID_POINTS`) points of their edge grid."""
    symbols = sorted(symbols, key=str)
    points = [{s: _draw(_domain(s, stated), rng) for s in symbols} for _ in range(SAMPLES)]
    grid = list(itertools.product(*[_edges(_domain(s, stated)) for s in symbols]))
    return points + [dict(zip(symbols, grid[i])) for i in rng.permutation(len(grid))[:GRID_POINTS]]


def _values(expr, points: list[Point]) -> list:
    """``expr`` at each point (mpmath, :data:`DIGITS` digits); None where it is undefined or not real."""
    expr = sympy.sympify(expr).doit()
    symbols = sorted(expr.free_symbols, key=str)
    f = sympy.lambdify(symbols, expr, "mpmath")
    out = []
    with mpmath.workdps(DIGITS):
        for p in points:
            try:
                value = f(*(_mp(p[s]) for s in symbols))
            except (ZeroDivisionError, ValueError, OverflowError):
                value = None
            out.append(value if isinstance(value, (mpmath.mpf, int, float)) else None)
    return out


def _compare(a, op: str, b) -> bool:
    """``a op b`` up to the relative :data:`TOLERANCE` (``<`` strictly); False where either is undefined."""
    if a is None or b is None:
        return False
    slack = TOLERANCE * (1 + abs(a) + abs(b))
    return {"<=": a <= b + slack, "==": abs(a - b) <= slack, "<": a < b}[op]


def _failure(lhs, op: str, rhs, points: list[Point]) -> Point | None:
    """The first point at which ``lhs op rhs`` is false, or None."""
    for p, a, b in zip(points, _values(lhs, points), _values(rhs, points)):
        if not _compare(a, op, b):
            return p
    return None


def _inside(value, domain: sympy.Set) -> bool:
    """Whether a number lies in a Range (as an integer) or an Interval."""
    if value is None:
        return False
    if isinstance(domain, sympy.Range):
        return abs(value - mpmath.nint(value)) <= TOLERANCE * (1 + abs(value)) and value >= _mp(domain.inf)
    low, high = _mp(domain.inf), domain.sup
    above = value > low if domain.left_open else value >= low
    return above and (high == sympy.oo or (value < _mp(high) if domain.right_open else value <= _mp(high)))


def _show(point: Point) -> str:
    return "{" + ", ".join(f"{s} = {mpmath.nstr(_mp(v), 6)}" for s, v in point.items()) + "}"


def _check_substitution(statement: str, lemma: Derivation, substitutions: dict, points: list[Point]):
    """Refuse a substitution that takes a lemma outside its domain: each value at the given points
    (numerically), then under the assumptions of its symbols (SymPy)."""
    for symbol, value in substitutions.items():
        domain, value = _domain(symbol, lemma.domain), sympy.sympify(value)
        for p, number in zip(points, _values(value, points)):
            if not _inside(number, domain):
                raise DerivationError(f"{statement}: {lemma.statement} at {symbol} = {value}: outside its "
                                      f"domain {domain} at {_show(p)} (numeric check)")
        open_low = getattr(domain, "left_open", False)  # a Range starts at an integer it contains
        above = _sign_ok(value - domain.inf, "is_positive" if open_low else "is_nonnegative")
        below = domain.sup == sympy.oo or _sign_ok(domain.sup - value,
                                                   "is_positive" if domain.right_open else "is_nonnegative")
        integer = not isinstance(domain, sympy.Range) or bool(value.is_integer)
        if not (above and below and integer):
            raise DerivationError(f"{statement}: SymPy cannot show {symbol} = {value} lies in the domain "
                                  f"{domain} of {lemma.statement}")


class _Chain:
    """Builds a :class:`Derivation` of ``lhs <= rhs`` one checked step at a time.

    ``domain`` states domains beyond the symbols' assumptions; ``evidence`` (required for a prose or a
    hypothesis start) returns the points at which the first relation holds, from a random generator.
    """

    def __init__(self, statement: str, lhs, rhs, reason: str, check: str = PROSE, equal: bool = False, *,
                 domain: dict | None = None, evidence: Callable | None = None, points=None):
        self.statement, self.domain = statement, dict(domain or {})
        self.lhs, self.rhs, self.equal_only = sympy.sympify(lhs), sympy.sympify(rhs), equal
        self.rng = np.random.default_rng([SEED, zlib.crc32(statement.encode())])
        self.steps, self.uses = [], []
        if check in (PROSE, HYPOTHESIS) and evidence is None:
            raise DerivationError(f"{statement}: a {check} step needs evidence (points where it holds)")
        first = _rel(self.lhs, self.rhs, equal=equal)
        self.points = (evidence(self.rng) if evidence else list(points) if points is not None
                       else _sample(first.free_symbols, self.domain, self.rng))
        if not self.points:
            self._refuse("no point to evaluate the relations at")
        if check == IDENTITY:
            self._identity(self.lhs, self.rhs)
        self._record(first, reason, check)

    def _refuse(self, message: str):
        raise DerivationError(f"{self.statement}: {message}")

    def _numeric(self, lhs, op: str, rhs, claim: str, points=None):
        """Refuse unless ``lhs op rhs`` at ``points`` (default: random and edge points of the domain)."""
        lhs, rhs = sympy.sympify(lhs), sympy.sympify(rhs)
        if points is None:
            points = _sample(lhs.free_symbols | rhs.free_symbols, self.domain, self.rng)
        bad = _failure(lhs, op, rhs, points)
        if bad is not None:
            self._refuse(f"{claim} is false at {_show(bad)} (numeric check)")

    def _symbolic(self, proved: bool, claim: str):
        if not proved:
            self._refuse(f"SymPy cannot show {claim}")

    def _identity(self, old, new):
        claim = f"{old} = {new}"
        self._numeric(old, "==", new, claim)
        self._symbolic(_is_zero(sympy.sympify(old) - new), claim)

    def _extend(self, symbols):
        """Give the chain's points random values of the symbols they do not assign."""
        missing = sorted(set(symbols) - set().union(*self.points), key=str)
        for p in self.points:
            p.update({s: _draw(_domain(s, self.domain), self.rng) for s in missing})
        return self.points

    def _holds_at_points(self, relation):
        """Evaluate a relation at the chain's points."""
        points = self._extend(relation.free_symbols)
        self._numeric(relation.lhs, relation.rel_op, relation.rhs, f"{relation}", points)

    def _record(self, relation, reason, check):
        self._holds_at_points(relation)
        self.steps.append(Step(relation, reason, check))

    def _push(self, reason, check, *, became_inequality=False):
        self.equal_only = self.equal_only and not became_inequality
        self._record(_rel(self.lhs, self.rhs, equal=self.equal_only), reason, check)
        return self

    def _instance(self, lemma: Derivation, substitutions: dict):
        """The lemma's two sides after substitution (:func:`_check_substitution`)."""
        symbols = set().union(*(sympy.sympify(v).free_symbols for v in substitutions.values()))
        _check_substitution(self.statement, lemma, substitutions, self._extend(symbols))
        return lemma.result.lhs.subs(substitutions), lemma.result.rhs.subs(substitutions)

    @classmethod
    def from_lemma(cls, statement: str, lemma: Derivation, substitutions: dict, reason: str):
        """Start from an instance of a checked ``<=`` derivation (at the lemma's own points when nothing
        is substituted, else at random points of the domain)."""
        rng = np.random.default_rng([SEED, zlib.crc32(statement.encode())])
        symbols = set().union(*(sympy.sympify(v).free_symbols for v in substitutions.values()))
        _check_substitution(statement, lemma, substitutions, _sample(symbols, {}, rng))
        points = None if substitutions else [dict(p) for p in lemma.points]
        chain = cls(statement, lemma.result.lhs.subs(substitutions), lemma.result.rhs.subs(substitutions),
                    reason, check=LEMMA, points=points)
        chain.uses.append(lemma)
        return chain

    def equal(self, new_rhs, reason: str):
        """Rewrite the right side; checked as an identity."""
        self._identity(self.rhs, new_rhs)
        self.rhs = sympy.sympify(new_rhs)
        return self._push(reason, IDENTITY)

    def equal_lhs(self, new_lhs, reason: str):
        self._identity(self.lhs, new_lhs)
        self.lhs = sympy.sympify(new_lhs)
        return self._push(reason, IDENTITY)

    def simplify(self, reason: str = "simplify"):
        return self.equal(sympy.powsimp(sympy.simplify(self.rhs), force=True), reason)

    def scale(self, factor, reason: str):
        """Multiply both sides by a positive factor."""
        self._numeric(0, "<", factor, f"{factor} > 0")
        self._symbolic(_sign_ok(factor, "is_positive"), f"{factor} > 0")
        self.lhs, self.rhs = self.lhs * factor, self.rhs * factor
        return self._push(reason, SCALE)

    def negate(self, reason: str = "multiply by -1 (the relation flips)"):
        self.lhs, self.rhs = -self.rhs, -self.lhs
        return self._push(reason, SCALE)

    def shift(self, term, reason: str):
        self.lhs, self.rhs = self.lhs + term, self.rhs + term
        return self._push(reason, INCREASING)

    def log(self, reason: str = "ln is increasing on positive numbers"):
        for side in (self.lhs, self.rhs):
            self._numeric(0, "<", side, f"ln needs {side} > 0", self.points)
            self._symbolic(_sign_ok(side, "is_positive"), f"{side} > 0 (ln needs both sides positive)")
        self.lhs, self.rhs = sympy.expand_log(sympy.log(self.lhs)), sympy.expand_log(sympy.log(self.rhs))
        return self._push(reason, INCREASING)

    def exp(self, reason: str = "exp is increasing"):
        self.lhs, self.rhs = sympy.exp(self.lhs), sympy.exp(self.rhs)
        return self._push(reason, INCREASING)

    def weaken(self, new_rhs, reason: str):
        """Replace the right side by a larger one: ``new_rhs - rhs >= 0``."""
        claim = f"{new_rhs} >= {self.rhs}"
        self._numeric(self.rhs, "<=", new_rhs, claim)
        self._symbolic(_sign_ok(sympy.sympify(new_rhs) - self.rhs, "is_nonnegative"), claim)
        self.rhs = sympy.sympify(new_rhs)
        return self._push(reason, WEAKER, became_inequality=True)

    def _premise(self, given: dict):
        """A ``given`` substitution {symbol: form}: at the chain's points the symbol has its true value, and
        the one symbol of the form that they do not assign, solved from symbol = form, lies in its domain."""
        for symbol, form in given.items():
            fresh = sympy.sympify(form).free_symbols - set().union(*self.points)
            solutions = sympy.solve(sympy.Eq(symbol, form), *fresh) if len(fresh) == 1 else []
            if len(solutions) != 1:
                self._refuse(f"the premise {symbol} = {form} must define one new symbol")
            (unknown,), domain = fresh, _domain(*fresh, self.domain)
            for p, value in zip(self.points, _values(solutions[0], self.points)):
                if not _inside(value, domain):
                    self._refuse(f"the premise {symbol} = {form} needs {unknown} outside {domain} "
                                 f"at {_show(p)}")

    def weaken_monotone(self, reason: str, *, g, variable, start, end, given=None):
        """The right side is ``g(start)``; replace it by ``g(end)``. Checked: ``end - start >= 0`` (under
        the premise ``given``, e.g. a ceiling written out, itself verified at the chain's points) and
        ``dg/d(variable) >= 0`` for every value of the variable's domain."""
        given = given or {}
        self._identity(self.rhs, g.subs(variable, start))
        self._premise(given)
        low, high = sympy.sympify(start).subs(given), sympy.sympify(end).subs(given)
        slope = sympy.diff(g, variable)
        self._numeric(low, "<=", high, f"{end} >= {start} (given {given})")
        self._numeric(0, "<=", slope, f"d/d{variable} of {g} >= 0")
        self._symbolic(_sign_ok(high - low, "is_nonnegative"), f"{end} >= {start} (given {given})")
        self._symbolic(_sign_ok(slope, "is_nonnegative"), f"d/d{variable} of {g} >= 0")
        self.rhs = g.subs(variable, end)
        return self._push(reason, MONOTONE, became_inequality=True)

    def weaken_by_lemma(self, term, lemma: Derivation, substitutions: dict, reason: str):
        """Replace ``term`` (a summand of the right side) by ``b``, given a lemma proving ``term <= b``."""
        if lemma.result.rel_op != "<=":
            self._refuse(f"{lemma.statement} is not an upper bound (its relation is {lemma.result.rel_op})")
        small, big = self._instance(lemma, substitutions)
        self._identity(small, term)
        self._holds_at_points(_rel(small, big))
        self.rhs = self.rhs - term + big
        self.uses.append(lemma)
        return self._push(reason, LEMMA, became_inequality=True)

    def apply_lemma(self, lemma: Derivation, substitutions: dict, reason: str):
        """The right side is the lemma's left side: continue with the lemma's right side."""
        small, big = self._instance(lemma, substitutions)
        self._identity(small, self.rhs)
        self._holds_at_points(_rel(small, big))
        self.rhs = big
        self.uses.append(lemma)
        return self._push(reason, LEMMA, became_inequality=lemma.result.rel_op != "==")

    def weaken_prose(self, new_rhs, reason: str):
        """A weakening SymPy cannot prove (proved in the book): checked numerically only, the new right
        side against the old at random and edge points of the domain."""
        self._numeric(self.rhs, "<=", new_rhs, f"{new_rhs} >= {self.rhs}")
        self.rhs = sympy.sympify(new_rhs)
        return self._push(reason, PROSE, became_inequality=True)

    def done(self) -> Derivation:
        return Derivation(self.statement, tuple(self.steps), tuple(self.uses), self.domain,
                          tuple(self.points))


def _evidence(sampler: Callable, fields: dict) -> Callable:
    """Points from a brute-force sampler of :mod:`accessibility.evidence`: each record's fields as the
    symbols they stand for (``fields`` maps a field name to its symbol)."""
    return lambda rng: [{symbol: record[name] for name, symbol in fields.items()} for record in sampler(rng)]


# --- the packing lemma and Theorem 4.5 ---------------------------------------------------------


def ball_volume(radius, dim=d, unit_volume=kappa):
    """Volume :math:`\\kappa\\,\\rho^{\\dim}` of a ball of radius ρ (any norm; κ the unit ball's)."""
    return unit_volume * radius**dim


@cache
def containment() -> Derivation:
    """Every point y of the ε/2-ball around a support point x lies in the ball of radius r + ε/2.

    With :math:`a = \\|y - x\\| < \\varepsilon/2` and :math:`b = \\|x - c\\| \\le r` written as
    :math:`a = \\varepsilon/2 - s`, :math:`b = r - u` (s > 0, u >= 0), the triangle inequality gives
    :math:`\\|y - c\\| \\le a + b \\le r + \\varepsilon/2` (evidence: random points in three norms).
    """
    s, u = sympy.Symbol("s", positive=True), sympy.Symbol("u", nonnegative=True)
    dist = sympy.Symbol(r"\|y - c\|", nonnegative=True)
    chain = _Chain("containment", dist, (eps / 2 - s) + (r - u),
                   "triangle inequality, |y − x| = ε/2 − s, |x − c| = r − u",
                   evidence=_evidence(evidence.triangle, {"dist": dist, "s": s, "u": u, "r": r, "eps": eps}))
    return chain.weaken(r + eps / 2, "s > 0, u ≥ 0").done()


@cache
def disjointness() -> Derivation:
    """Points pairwise at least ε apart have disjoint open ε/2-balls: a common point y would give
    :math:`\\|x_i - x_j\\| \\le \\|x_i - y\\| + \\|y - x_j\\| < \\varepsilon` (here ``<= ε - s - u``)."""
    s, u = sympy.symbols("s u", positive=True)
    dist = sympy.Symbol(r"\|x - x'\|", nonnegative=True)
    through_y = sympy.Add(sympy.UnevaluatedExpr(eps / 2 - s), sympy.UnevaluatedExpr(eps / 2 - u),
                          evaluate=False)
    chain = _Chain("disjointness", dist, through_y, "triangle inequality through a common point y",
                   evidence=_evidence(evidence.common_point, {"dist": dist, "s": s, "u": u, "eps": eps}))
    chain.equal(eps - s - u, "collect: less than ε")
    return chain.done()


def _packing_points(dim, precision, unit_volume) -> Callable:
    """Brute-force packings (:func:`accessibility.evidence.packings`) as points of the packing lemma
    with these dimension, precision and unit volume: the records whose space they describe."""
    fields = {"count": P, "d": d, "m": m, "r": r, "unit_volume": kappa}

    def points(rng):
        out = []
        for record in evidence.packings(rng):
            point = {symbol: record[name] for name, symbol in fields.items()}
            point[eps] = record["separation"] * eps / precision  # the base ε at which precision = separation
            space = record["d"] * record["m"], record["unit_volume"] ** record["m"]
            if (dim.subs(point), unit_volume.subs(point)) == space:
                out.append(point)
        return out
    return points


@cache
def packing_lemma(dim=d, precision=eps, unit_volume=kappa) -> Derivation:
    """Packing lemma: at most :math:`(1 + 2r/\\varepsilon)^{\\dim}` points of a radius-r ball are ε apart.

    P disjoint balls of radius ε/2 (:func:`disjointness`) inside the ball of radius r + ε/2
    (:func:`containment`):
    :math:`P\\,\\kappa(\\varepsilon/2)^{\\dim} \\le \\kappa(r + \\varepsilon/2)^{\\dim}`
    (volume is additive and monotone: the prose step, evaluated on greedy packings); divide by the small
    ball's volume.
    """
    chain = _Chain("packing lemma", P * ball_volume(precision / 2, dim, unit_volume),
                   ball_volume(r + precision / 2, dim, unit_volume),
                   "disjoint balls inside a larger ball: volume comparison",
                   evidence=_packing_points(sympy.sympify(dim), precision, sympy.sympify(unit_volume)))
    chain.scale(1 / ball_volume(precision / 2, dim, unit_volume), "divide by the volume of the small ball")
    return chain.simplify("the unit-ball volume cancels").done()


@cache
def theorem_4_5() -> Derivation:
    """Theorem 4.5 in :math:`\\mathbb{R}^{dm}` with the norm :math:`\\max_j \\|x_j\\|`.

    Quantisation hypothesis: the greedy output is a function of Q(x) for a map Q onto a set Z of
    prompts pairwise at least ε apart in that norm, inside its ball of radius r, so
    :math:`|A_n(m)| \\le |Z|` (evidence: grid quantisers with random output tables). The unit ball of
    the max norm is the product of m unit balls of :math:`\\mathbb{R}^d`, volume :math:`\\kappa_d^m`:
    the packing lemma in dimension dm with that unit volume bounds |Z|, and the bound is the product
    over the m vectors of the one-vector count.
    """
    j = sympy.Symbol("j", positive=True, integer=True)
    lemma = packing_lemma(dim=d * m, unit_volume=kappa**m)
    count_z = sympy.Symbol(r"\left|Z\right|", positive=True)
    accessible = sympy.Symbol(r"\left|A_{n}(m)\right|", positive=True)
    fields = {"accessible": accessible, "grid": count_z, "d": d, "m": m, "r": r, "eps": eps}
    chain = _Chain("Theorem 4.5", accessible, count_z,
                   "quantisation: the output is a function of Q(x), Q onto Z",
                   evidence=_evidence(evidence.quantised_outputs, fields))
    chain.apply_lemma(lemma, {P: count_z},
                      "packing lemma in dimension dm, max norm, unit-ball volume κ to the m")
    one_vector = packing_lemma().bound
    return chain.equal(sympy.Product(one_vector, (j, 1, m)), "product over the m vectors").done()


# --- Corollary 4.6 ------------------------------------------------------------------------------


@cache
def corollary_4_6_n_star() -> Derivation:
    """If all of V^n is accessible, :math:`|V|^n \\le (1+2r/\\varepsilon)^{dm}`; take ln, divide by ln|V|.

    The last step checks the result against SymPy's own solution of :math:`|V|^n = (1+2r/\\varepsilon)^{dm}`.
    """
    theorem = theorem_4_5()
    count = theorem.bound
    fields = {"vocab": V, "n": n, "accessible": theorem.result.lhs, "d": d, "m": m, "r": r, "eps": eps}
    chain = _Chain("Corollary 4.6", V**n, theorem.result.lhs,
                   "hypothesis: every sequence of length n accessible", check=HYPOTHESIS, equal=True,
                   evidence=_evidence(evidence.all_accessible, fields))
    chain.apply_lemma(theorem, {}, "Theorem 4.5").equal(count, "evaluate the product")
    chain.log().scale(1 / sympy.log(V), "divide by ln|V| > 0")
    (boundary,) = sympy.solve(sympy.Eq(n * sympy.log(V), sympy.expand_log(sympy.log(count), force=True)), n)
    return chain.equal(boundary, "SymPy's solution of the boundary equation").done()


@cache
def corollary_4_6_slope():
    """The slope :math:`C = n^*(m)/m = d\\ln(1 + 2r/\\varepsilon)/\\ln|V|` (log base cancels)."""
    return sympy.simplify(sympy.expand_log(corollary_4_6_n_star().bound / m, force=True))


@cache
def corollary_4_6_fraction() -> Derivation:
    """Accessible fraction of V^n:
    :math:`|A_n(m)|/|V|^n \\le (1+2r/\\varepsilon)^{dm}/|V|^n = |V|^{-(n - Cm)}`."""
    chain = _Chain.from_lemma("Corollary 4.6, fraction", theorem_4_5(), {}, "Theorem 4.5")
    chain.equal(theorem_4_5().bound, "evaluate the product").scale(V**-n, "divide by |V| to the n")
    c = corollary_4_6_slope()
    return chain.equal(V ** (-(n - c * m)), "write the count as |V| to the Cm").done()


def _past(bound, variable, domain: dict) -> Callable:
    """Evidence of the hypothesis ``variable >= bound`` (an integer variable, a positive bound): random
    points of the other symbols' domains, the variable a few integers past the bound."""
    def points(rng):
        out = _sample(bound.free_symbols, domain, rng)
        for p, value in zip(out, _values(bound, out)):
            p[variable] = int(mpmath.ceil(value)) + int(rng.integers(3))
        return out
    return points


#: The fraction δ of Corollary 4.6's threshold lies in (0, 1].
_FRACTION = {delta: sympy.Interval.Lopen(0, 1)}


@cache
def _threshold(slope, rate_base, fraction, name) -> tuple[sympy.Expr, Derivation]:
    """n(δ) solving ``rate_base^{-(n - slope m)} = fraction``, and the derivation that n >= n(δ)
    implies ``rate_base^{-(n - slope m)} <= fraction``."""
    (n_delta,) = sympy.solve(sympy.Eq(-(n - slope * m) * sympy.log(rate_base), sympy.log(fraction)), n)
    n_delta = sympy.expand_log(sympy.simplify(n_delta), force=True)
    chain = _Chain(name, n_delta, n, "hypothesis: n ≥ n(δ)", check=HYPOTHESIS, domain=_FRACTION,
                   evidence=_past(n_delta, n, _FRACTION))
    chain.scale(sympy.log(rate_base), "multiply by ln|V| > 0").negate()
    chain.shift(slope * m * sympy.log(rate_base), "add Cm ln|V|")
    chain.equal(sympy.log(fraction), "n(δ) solves the boundary equation").exp()
    chain.equal_lhs(rate_base ** (-(n - slope * m)), "the fraction bound")
    return n_delta, chain.done()


@cache
def corollary_4_6_threshold() -> Derivation:
    """Past :math:`n(\\delta) = Cm + \\ln(1/\\delta)/\\ln|V|` the fraction bound is at most δ."""
    return _threshold(corollary_4_6_slope(), V, delta, "Corollary 4.6, threshold")[1]


@cache
def threshold_length():
    """:math:`n(\\delta)`, solved by SymPy from :math:`|V|^{-(n - Cm)} = \\delta`."""
    return _threshold(corollary_4_6_slope(), V, delta, "Corollary 4.6, threshold")[0]


@cache
def n50_bound() -> Derivation:
    """Targets from Q with per-token rate h: :math:`Q(A) \\ge 1/2` forces :math:`n \\le C_Q m + \\ln 2/h`.

    :math:`Q(A_n(m)) \\le |A_n(m)| \\max_s Q(s) \\le P^m e^{-nh}` (union bound, prose; evidence: random
    distributions over short sequences) with :math:`\\ln P = d\\ln(1 + 2r/\\varepsilon)`; at n_50 the left
    side is at least 1/2. Uniform targets: h = ln|V|, :math:`C_Q = C`.
    """
    log_p = sympy.expand_log(sympy.log(packing_lemma().bound), force=True)
    fields = {"rate": h, "n": n, "d": d, "m": m, "r": r, "eps": eps}
    chain = _Chain("n_50 bound", sympy.Rational(1, 2), sympy.exp(m * log_p - n * h),
                   "half the targets accessible; union bound Q(A) ≤ |A| max Q",
                   evidence=_evidence(evidence.union_bound, fields))
    chain.log().shift(n * h, "add n h").scale(1 / h, "divide by h > 0")
    chain.equal_lhs(n + sympy.log(sympy.Rational(1, 2)) / h, "expand")
    return chain.shift(sympy.log(2) / h, "add ln 2 / h").done()


@cache
def all_lengths() -> Derivation:
    """Prompts of every length 1..m: :math:`\\sum_{k=1}^m P^k \\le P^m\\cdot P/(P-1)`, less than one token.

    P is the one-vector count. The series is summed by SymPy with P = 1 + q (no degenerate branch);
    the excess :math:`\\ln(P/(P-1))/\\ln|V|` is at most :math:`1/((P-1)\\ln|V|)` since
    :math:`\\ln(1 + x) \\le x` (:func:`log1p_below_x`).
    """
    series = sympy.summation((1 + q) ** k, (k, 1, m)).subs(q, P - 1)
    chain = _Chain("all prompt lengths", sympy.Sum(P**k, (k, 1, m)), series, "geometric series (SymPy)",
                   check=IDENTITY, equal=True, domain={P: sympy.Interval.open(1, sympy.oo)})
    chain.equal(P * (P**m - 1) / (P - 1), "simplify")
    return chain.weaken(P**m * P / (P - 1), "drop the −P/(P − 1)").done()


@cache
def log1p_below_x() -> Derivation:
    """:math:`\\ln(1 + x) \\le x` for x >= 0: :math:`g(x) = x - \\ln(1+x)` is 0 at 0 and
    :math:`g' = x/(1+x) \\ge 0`."""
    g = _x - sympy.log(1 + _x)
    chain = _Chain("ln(1+x) <= x", sympy.Integer(0), sympy.Integer(0), "g(0) = 0", check=IDENTITY)
    chain.weaken_monotone("g′ = x/(1 + x) ≥ 0", g=g, variable=_x, start=0, end=_x)
    return chain.shift(sympy.log(1 + _x), "add ln(1 + x)").done()


# --- Corollary 4.10 ------------------------------------------------------------------------------


@cache
def corollary_4_10_net_size() -> Derivation:
    """Size K of an ε/4-net of the support: the packing lemma at η = ε/4, :math:`(1 + 8r/\\varepsilon)^d`."""
    return packing_lemma(precision=eps / 4)


@cache
def corollary_4_10_cover_radius() -> Derivation:
    """Cover radius: atoms moved less than ε/4, weights with ℓ1 error below ε/(4r), and
    :math:`W_1 \\le r\\,\\ell_1`: the two moves sum to less than ε/2, so each cover point holds at most
    one of a set of measures pairwise ε apart (evidence: random measures, scipy's W1)."""
    w1 = sympy.Symbol("W_1", positive=True)
    moves = sympy.Add(eps / 4, sympy.Mul(r, sympy.UnevaluatedExpr(eps / (4 * r))), evaluate=False)
    chain = _Chain("cover radius", w1, moves, "net move plus weight rounding, W1 ≤ r times the l1 error",
                   evidence=_evidence(evidence.cover_moves, {"w1": w1, "r": r, "eps": eps}))
    return chain.equal(eps / 2, "the two moves add up to ε/2").done()


@cache
def corollary_4_10_log_packing() -> Derivation:
    """:math:`\\ln M_\\infty \\le K(1 + \\ln(1 + 4r/\\varepsilon)) + 1` with K the net size.

    Cover: weights on K net points in multiples of 1/Q, Q = ⌈K/ε_w⌉, ε_w = ε/(4r) — at most
    :math:`\\binom{Q + K - 1}{K - 1}` points (stars and bars, counted one by one as evidence), and
    :math:`\\ln\\binom{a + b}{b} \\le b(1 + \\ln\\frac{a+b}{b})` (from :math:`\\binom{n}{b} \\le (en/b)^b`):
    the two prose steps. Then Q <= K/ε_w + 1 (monotone step, given Q = K/ε_w + 1 - θ with θ in (0, 1],
    verified at the evidence), ln of a product (identity),
    :math:`(K-1)\\ln\\frac{K}{K-1} \\le 1` (:func:`log1p_below_x` at x = 1/(K-1)) and K - 1 <= K.
    """
    weights, theta = sympy.Symbol("Q", positive=True), sympy.Symbol("theta", positive=True)
    inv_w = 4 * r / eps  # 1/ε_w
    b = K - 1
    log_m = sympy.Symbol(r"\ln M_\infty", positive=True)

    def cover_sizes(rng):
        fields = {"K": K, "Q": weights, "r": r, "eps": eps}
        return [{log_m: mpmath.log(rec["count"])} | {symbol: rec[name] for name, symbol in fields.items()}
                for rec in evidence.stars_and_bars(rng)]
    chain = _Chain("Corollary 4.10", log_m, sympy.log(sympy.binomial(weights + b, b)),
                   "packing ≤ cover at radius ε/2; stars and bars",
                   domain={theta: sympy.Interval.Lopen(0, 1)}, evidence=cover_sizes)
    chain.weaken_prose(b * (1 + sympy.log((weights + b) / b)), "binomial(n, b) ≤ (e n / b) to the b")
    chain.weaken_monotone("Q = ceil(4rK/ε) ≤ 4rK/ε + 1", g=chain.rhs, variable=weights, start=weights,
                          end=K * inv_w + 1, given={weights: K * inv_w + 1 - theta})
    chain.equal(b * (1 + sympy.log(1 + inv_w)) + b * sympy.log(K / b), "ln of a product")
    chain.weaken_by_lemma(b * sympy.log(K / b), _k_log_bound(), {}, "(K − 1) ln(K/(K − 1)) ≤ 1")
    return chain.weaken(K * (1 + sympy.log(1 + inv_w)) + 1, "K − 1 ≤ K").done()


@cache
def _k_log_bound() -> Derivation:
    """:math:`(K-1)\\ln\\frac{K}{K-1} \\le 1`: :func:`log1p_below_x` at x = 1/(K-1), times K - 1."""
    chain = _Chain.from_lemma("(K − 1) ln(K/(K − 1)) ≤ 1", log1p_below_x(), {_x: 1 / (K - 1)},
                              "ln(1 + x) ≤ x at x = 1/(K − 1)")
    chain.scale(K - 1, "multiply by K − 1 > 0").equal(sympy.Integer(1), "simplify")
    return chain.equal_lhs((K - 1) * sympy.log(K / (K - 1)), "1 + 1/(K − 1) = K/(K − 1)").done()


@cache
def corollary_4_10_threshold():
    """Corollary 4.10: :math:`N = \\ln M_\\infty / \\ln|V|` with K the net size, independent of m.

    >>> m in corollary_4_10_threshold().free_symbols
    False
    """
    return corollary_4_10_log_packing().bound.subs(K, corollary_4_10_net_size().bound) / sympy.log(V)


# --- the norm-consistent cone --------------------------------------------------------------------


@cache
def cone_count() -> Derivation:
    """Euclidean cone sector: :math:`P \\le f(\\varphi, d)\\,(1 + 2r_2/\\varepsilon + 1/\\sin\\varphi)^d`.

    The ε/2-neighbourhood of a cone of half-angle φ <= π/2 is the cone with its apex moved back by t,
    where the boundaries are :math:`t\\sin\\varphi = \\varepsilon/2` apart (solved by SymPy). The
    ε/2-balls around the points lie in that cone within radius :math:`R = r_2 + \\varepsilon/2 + t` of its
    apex, a sector of volume :math:`f\\,\\kappa R^d` (prose: cone sectors scale like balls; evidence: grid
    points in cone sectors of R^2 and R^3).
    """
    f = sympy.Symbol("f", positive=True)
    (shift,) = sympy.solve(sympy.Eq(_t * sympy.sin(phi), eps / 2), _t)
    radius = r2 + eps / 2 + shift
    fields = {"count": P, "d": d, "r2": r2, "eps": eps, "phi": phi, "fraction": f, "unit_volume": kappa}
    chain = _Chain("cone count", P * ball_volume(eps / 2), f * ball_volume(radius),
                   "disjoint ε/2-balls inside the shifted cone sector",
                   domain={phi: sympy.Interval.Lopen(0, sympy.pi / 2)},
                   evidence=_evidence(evidence.cone_sector_packings, fields))
    chain.scale(1 / ball_volume(eps / 2), "divide by the volume of the small ball")
    return chain.equal(f * (1 + 2 * r2 / eps + 1 / sympy.sin(phi)) ** d, "simplify").done()


@cache
def cone_fraction(dim: int):
    """Fraction of a dim-ball inside a cone of half-angle φ, from the polar integral (small dim only).

    :math:`f = \\int_0^\\varphi \\sin^{d-2} t\\,dt / \\int_0^\\pi \\sin^{d-2} t\\,dt`; a closed form to check
    :func:`accessibility.bounds.log_cone_fraction` against.

    >>> cone_fraction(3)
    1/2 - cos(varphi)/2
    """
    integrand = sympy.sin(_t) ** (dim - 2)
    cap = sympy.integrate(integrand, (_t, 0, phi))
    return sympy.simplify(cap / sympy.integrate(integrand, (_t, 0, sympy.pi)))


# --- the ellipsoid (Cavalieri) -------------------------------------------------------------------


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


@cache
def ellipsoid_cube_count(dim: int):
    """:math:`\\mathrm{vol}(E + [-\\varepsilon/2, \\varepsilon/2]^d)/\\varepsilon^d` for an axis-aligned
    ellipsoid E.

    The L∞ packing count of the ellipsoid (:func:`accessibility.bounds.log_ellipsoid_count`), derived by
    adding the cube one segment at a time; semi-axes ``a_1 .. a_dim``. Equals
    :math:`\\sum_T \\omega_{|T|} \\prod_{i \\in T} a_i/\\varepsilon`; in one dimension it is the packing
    lemma,
    and with :math:`\\omega_k` replaced by its bounding cube's volume :math:`2^k` it is the box count.

    >>> ellipsoid_cube_count(1)
    2*a_1/varepsilon + 1
    >>> sympy.expand(ellipsoid_cube_count(2) * eps**2)
    pi*a_1*a_2 + 2*a_1*varepsilon + 2*a_2*varepsilon + varepsilon**2
    """
    semi = list(sympy.symbols(f"a_1:{dim + 1}", positive=True))
    return sympy.expand(_with_segments(semi, semi) / eps**dim)
