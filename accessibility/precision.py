"""Finite precision: how many distinguishable values one coordinate of a vector can take.

Theorem 4.5 counts vectors of a support of radius r that are pairwise at least ε apart; per
coordinate that is :math:`1 + 2r/\\varepsilon` levels. This module turns a *precision convention*
into that number (always as a natural log, :func:`log_levels`), so the convention is an explicit
parameter everywhere instead of a hidden ``2 ** (log2(r) - 11)``.

Conventions (the ``precision`` argument)
----------------------------------------
``"fp16"``, ``"bf16"``, ``"fp32"`` (relative)
    :math:`\\varepsilon = r\\,u` with the format's unit roundoff :math:`u = 2^{-p}` (p significand
    bits, implicit bit included): :math:`2^{-11}`, :math:`2^{-8}`, :math:`2^{-24}`. This is the
    published pipeline's choice (fp16). Then :math:`2r/\\varepsilon = 2/u` whatever r is, so the
    slope C does **not depend on r**: a relative precision is scale-free, exactly like floating
    point, where multiplying every hidden state by a power of two changes no rounding decision.
``"absolute"``
    a given :math:`\\varepsilon > 0` (``eps=``); needs r.
``"exact-fp16"``, ``"exact-bf16"``, ``"exact-fp32"``
    the exact number of finite values of the format in :math:`[-r, r]` (+0 and -0 counted once,
    subnormals included) in place of :math:`1 + 2r/\\varepsilon`; needs r. This is a rigorous count
    of the vectors the format can represent in the cube, with no packing argument. It gives a
    **larger C** than the relative convention as soon as r is a few binades above the smallest
    normal number (:math:`r \\ge 2^{e_\\min + 2}`, see :func:`float_count`): floats are not an even
    grid of step :math:`r u` but have :math:`2^{p-1}` values in *every* binade
    :math:`[2^e, 2^{e+1})`, so the many binades between the subnormals and r add values that the even
    grid does not have (fp16, r = 1: 30 721 values against 4 097).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from accessibility.checks import InputError, one_of, positive


@dataclass(frozen=True)
class FloatFormat:
    """An IEEE-754 style binary floating-point format.

    Attributes
    ----------
    name : "fp16", "bf16" or "fp32".
    precision_bits : p, significand bits including the implicit leading 1.
    min_exponent : e_min, the smallest normal number is :math:`2^{e_{\\min}}`.
    max_exponent : e_max, the largest finite number is :math:`(2 - 2^{1-p})\\,2^{e_{\\max}}`.
    """

    name: str
    precision_bits: int
    min_exponent: int
    max_exponent: int

    @property
    def unit_roundoff(self) -> float:
        """:math:`u = 2^{-p}`: the largest relative rounding error (round to nearest)."""
        return 2.0 ** -self.precision_bits

    @property
    def max_finite(self) -> float:
        return (2.0 - 2.0 ** (1 - self.precision_bits)) * 2.0 ** self.max_exponent

    @property
    def smallest_subnormal(self) -> float:
        return 2.0 ** (self.min_exponent - self.precision_bits + 1)


#: IEEE binary16 (half): 11 significand bits, unit roundoff 2^-11, largest finite value 65504.
FP16 = FloatFormat("fp16", precision_bits=11, min_exponent=-14, max_exponent=15)
#: bfloat16: fp32's exponent range with 8 significand bits, unit roundoff 2^-8.
BF16 = FloatFormat("bf16", precision_bits=8, min_exponent=-126, max_exponent=127)
#: IEEE binary32 (single): 24 significand bits, unit roundoff 2^-24.
FP32 = FloatFormat("fp32", precision_bits=24, min_exponent=-126, max_exponent=127)
FORMATS = {f.name: f for f in (FP16, BF16, FP32)}

RELATIVE = ("fp16", "bf16", "fp32")
EXACT = ("exact-fp16", "exact-bf16", "exact-fp32")
ABSOLUTE = "absolute"
PRECISIONS = RELATIVE + EXACT + (ABSOLUTE,)
#: The published pipeline's convention: ε = r · 2^-11, the fp16 unit roundoff.
DEFAULT_PRECISION = "fp16"


def as_float(x):
    """A 0-d array or numpy scalar as a Python float; arrays unchanged."""
    return float(x) if np.ndim(x) == 0 else np.asarray(x)


def float_format(name: str) -> FloatFormat:
    """The :class:`FloatFormat` of ``"fp16"``, ``"bf16"``, ``"fp32"`` (or their ``exact-`` names)."""
    return FORMATS[one_of("format", name.removeprefix("exact-"), tuple(FORMATS))]


def _positive_at_most(fmt: FloatFormat, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number of positive finite values <= x (x >= 0), and whether x itself is one of them.

    Positive values with exponent e are :math:`k\\,2^{e-p+1}` for :math:`k = 2^{p-1} .. 2^p - 1`;
    subnormals are :math:`k\\,2^{e_{\\min}-p+1}` for :math:`k = 1 .. 2^{p-1} - 1`, which is the same
    formula with e = e_min, so the count is :math:`(e - e_{\\min})\\,2^{p-1} + k` in both ranges.
    """
    p, half = fmt.precision_bits, 2.0 ** (fmt.precision_bits - 1)
    # x = mantissa * 2**exponent with mantissa in [0.5, 1): floor(log2 x) = exponent - 1
    _, exponent = np.frexp(x)
    e = np.clip(np.where(x > 0, exponent - 1, fmt.min_exponent), fmt.min_exponent, fmt.max_exponent)
    units = np.minimum(np.floor(np.ldexp(x, -(e - p + 1))), 2.0 * half - 1)  # exact: power-of-two scaling
    exact = np.ldexp(units, e - p + 1) == x
    return (e - fmt.min_exponent) * half + units, exact


def float_count(fmt: str | FloatFormat, r):
    """Exact number of finite values of a float format in :math:`[-r, r]` (+0 and -0 once).

    .. math:: N(r) = 2\\,P(r) + 1,

    with P(r) the number of positive finite values <= r (subnormals included). Vectorised over r.
    For :math:`r = 2^k` in the normal range, :math:`N = (k - e_{\\min} + 1)\\,2^{p} + 1`, which
    exceeds the relative convention's :math:`1 + 2/u = 2^{p+1} + 1` once :math:`k \\ge e_{\\min} + 2`.

    >>> float_count("fp16", 1.0), float_count("fp16", 65504.0), float_count("bf16", 1.0)
    (30721.0, 63487.0, 32513.0)
    >>> float_count("fp16", 70000.0)
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: r = 70000 exceeds the largest finite fp16 value 65504: ...
    """
    fmt = float_format(fmt) if isinstance(fmt, str) else fmt
    r = np.asarray(positive("r", r), dtype=float)
    _representable("r", fmt, r)
    return as_float(2 * _positive_at_most(fmt, r)[0] + 1)


def _representable(name: str, fmt: FloatFormat, x) -> None:
    """A support beyond the largest finite value cannot be stored in the format: an error, not a clip."""
    if (np.abs(x) > fmt.max_finite).any():
        raise InputError(f"{name} = {np.max(np.abs(x)):g} exceeds the largest finite {fmt.name} value "
                         f"{fmt.max_finite:g}: such a support cannot be stored in that format", name)


def float_count_between(fmt: str | FloatFormat, low, high):
    """Exact number of finite values of a float format in :math:`[\\mathrm{low}, \\mathrm{high}]`.

    Vectorised; zero is counted once. Used by the box bound with an exact convention.

    >>> float_count_between("fp16", -1.0, 1.0) == float_count("fp16", 1.0)
    True
    >>> float_count_between("fp16", 1.0, 2.0)  # 1, 1 + 2^-10, ..., 2
    1025.0
    """
    fmt = float_format(fmt) if isinstance(fmt, str) else fmt
    low, high = np.broadcast_arrays(np.asarray(low, dtype=float), np.asarray(high, dtype=float))
    if not (np.isfinite(low).all() and np.isfinite(high).all()) or (low > high).any():
        raise InputError("need finite low <= high for every interval")
    _representable("the interval ends", fmt, np.concatenate([low.ravel(), high.ravel()]))
    p_hi, hi_exact = _positive_at_most(fmt, np.abs(high))
    p_lo, lo_exact = _positive_at_most(fmt, np.abs(low))
    straddle = p_lo + 1 + p_hi                                # low <= 0 <= high
    positive_side = p_hi - (p_lo - lo_exact)                  # 0 < low <= high
    negative_side = p_lo - (p_hi - hi_exact)                  # low <= high < 0
    return as_float(np.where(low > 0, positive_side, np.where(high < 0, negative_side, straddle)))


def _check_precision(precision: str | None, eps) -> str:
    if eps is not None:
        if precision not in (None, ABSOLUTE):
            raise InputError(f"give either eps (absolute) or precision={precision!r}, not both")
        return ABSOLUTE
    precision = DEFAULT_PRECISION if precision is None else precision
    one_of("precision", precision, PRECISIONS)
    if precision == ABSOLUTE:
        raise InputError("precision='absolute' needs eps")
    return precision


def radius_over_eps(*, r=None, precision: str | None = None, eps=None):
    """:math:`r/\\varepsilon` for a relative or absolute convention.

    Relative: :math:`1/u` (r is not needed, and not used). Absolute: ``r / eps`` (both needed).

    >>> radius_over_eps(precision="fp16"), radius_over_eps(r=2.0, eps=0.5)
    (2048.0, 4.0)
    """
    precision = _metric(precision, eps)
    if r is not None:
        r = positive("r", r)
    if precision in RELATIVE:
        return 1.0 / FORMATS[precision].unit_roundoff
    if r is None:
        raise InputError("an absolute eps needs r (the support radius)")
    return r / positive("eps", eps)


def _metric(precision: str | None, eps) -> str:
    """The convention of ``precision``/``eps``, refused when it is an exact count (no ε)."""
    precision = _check_precision(precision, eps)
    if precision in EXACT:
        raise InputError(f"{precision} counts float values and has no ε; "
                         "use a relative or absolute precision")
    return precision


def log_radius_over_eps(*, r=None, precision: str | None = None, eps=None):
    """:math:`\\ln(r/\\varepsilon)`, computed as :math:`\\ln r - \\ln\\varepsilon`: finite where r/ε itself
    overflows (ε = 1e-320, r = 1) or underflows.

    >>> round(log_radius_over_eps(r=1.0, eps=1e-320), 2), round(log_radius_over_eps(), 4)  # ln 2^11
    (736.83, 7.6246)
    """
    if _metric(precision, eps) in RELATIVE:
        return as_float(np.log(radius_over_eps(precision=precision)))
    if r is None:
        raise InputError("an absolute eps needs r (the support radius)")
    return as_float(np.log(positive("r", r)) - np.log(positive("eps", eps)))


def resolve_eps(*, r=None, precision: str | None = None, eps=None):
    """The ε of a relative or absolute convention: :math:`r\\,u`, or the given ``eps`` (then r is not needed).

    >>> resolve_eps(r=1.0), resolve_eps(r=8.0, precision="bf16"), resolve_eps(eps=0.1)
    (0.00048828125, 0.03125, 0.1)
    """
    precision = _metric(precision, eps)
    if precision == ABSOLUTE:
        return positive("eps", eps)
    if r is None:
        raise InputError(f"precision={precision!r} sets ε = r·u and needs r (the support radius)")
    return positive("r", r) * FORMATS[precision].unit_roundoff


def log_levels(*, r=None, precision: str | None = None, eps=None):
    """Natural log of the number of distinguishable values of one coordinate in :math:`[-r, r]`.

    .. math:: \\ln L = \\ln(1 + 2r/\\varepsilon)\\quad\\text{or}\\quad
              \\ln N_{\\text{fmt}}(r)\\ \\text{(exact)}

    This is the per-coordinate factor of the packing lemma / Theorem 4.5: a vector of width d has at
    most :math:`L^d` distinguishable values. Relative conventions give :math:`\\ln(1 + 2/u)`
    independent of r; ``eps=`` gives the absolute convention; ``"exact-*"`` counts float values (needs r).
    Vectorised over r and eps.

    >>> round(log_levels(), 4)  # fp16 relative: ln 4097
    8.318
    >>> bool(log_levels(r=1.0, precision="exact-fp16") > log_levels())
    True
    """
    precision = _check_precision(precision, eps)
    if precision in EXACT:
        if r is None:
            raise InputError(f"precision={precision!r} needs r (the support radius)")
        return as_float(np.log(float_count(precision, r)))
    levels = log1p_ratio(2.0, r=r, precision=precision, eps=eps)
    return as_float(levels + np.zeros(np.shape(r)))  # shaped like r even where r drops out


def log1p_ratio(factor: float, *, r=None, precision: str | None = None, eps=None):
    """:math:`\\ln(1 + c\\,r/\\varepsilon)` for a factor c > 0, finite where :math:`c\\,r/\\varepsilon`
    overflows a float: there it is :math:`\\ln c + \\ln(r/\\varepsilon)` (the 1 lies far below the rounding).

    >>> round(log1p_ratio(2.0, r=1.0, eps=1e-320), 4), float(log1p_ratio(2.0, r=2.0, eps=0.5)) == math.log(9)
    (737.5204, True)
    """
    with np.errstate(over="ignore"):
        scaled = factor * np.asarray(radius_over_eps(r=r, precision=precision, eps=eps), dtype=float)
    finite = np.isfinite(scaled)
    if finite.all():
        return as_float(np.log1p(scaled))
    big = math.log(factor) + np.asarray(log_radius_over_eps(r=r, precision=precision, eps=eps))
    return as_float(np.where(finite, np.log1p(np.where(finite, scaled, 0.0)), big))
