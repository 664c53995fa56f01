"""Input validation shared by every module: errors name the parameter and the allowed range.

All checks accept scalars or numpy arrays (every element is checked) and return the value as a
float or a float array, so they can sit at the top of vectorised functions.
"""

from __future__ import annotations

import numpy as np


class InputError(ValueError):
    """Bad input: the message names the parameter and the allowed range.

    The command-line interface turns it into one line on stderr and exit status 2.
    """


def _array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputError(f"{name} must be a number, got {value!r}") from None
    if np.isnan(arr).any():
        raise InputError(f"{name} must not be NaN, got {value!r}")
    return arr


def _out(arr: np.ndarray):
    return float(arr) if arr.ndim == 0 else arr


def positive(name: str, value):
    """``value > 0`` and finite.

    >>> positive("eps", 0.5)
    0.5
    >>> positive("eps", 0)
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: eps must be > 0 and finite, got 0
    """
    arr = _array(name, value)
    if not (arr > 0).all() or not np.isfinite(arr).all():
        raise InputError(f"{name} must be > 0 and finite, got {value!r}")
    return _out(arr)


def at_least(name: str, value, low: float, *, integer: bool = False):
    """``value >= low`` and finite; with ``integer`` also a whole number.

    >>> at_least("vocab_size", 2, 2, integer=True)
    2.0
    >>> at_least("m", 0.5, 1, integer=True)
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: m must be an integer >= 1, got 0.5
    """
    arr = _array(name, value)
    bad = ~np.isfinite(arr) | (arr < low) | (integer & (arr != np.round(arr)))
    if bad.any():
        kind = "an integer" if integer else "a number"
        raise InputError(f"{name} must be {kind} >= {low:g}, got {value!r}")
    return _out(arr)


def in_range(name: str, value, low: float, high: float):
    """``low <= value <= high``.

    >>> in_range("min_cos", 1.5, -1, 1)
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: min_cos must lie in [-1, 1], got 1.5
    """
    arr = _array(name, value)
    if ((arr < low) | (arr > high)).any():
        raise InputError(f"{name} must lie in [{low:g}, {high:g}], got {value!r}")
    return _out(arr)


def one_of(name: str, value, allowed):
    """``value`` is one of ``allowed``.

    >>> one_of("precision", "fp8", ("fp16", "bf16"))
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: precision must be one of fp16, bf16; got 'fp8'
    """
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}")
    return value


def finite_tensor(name: str, x):
    """Raise if a torch tensor or numpy array holds NaN or ±inf (fp16 overflow, a broken model)."""
    bad = ~np.isfinite(x) if isinstance(x, np.ndarray) else ~x.isfinite()
    count = int(bad.sum())
    if count:
        total = x.numel() if hasattr(x, "numel") else x.size
        raise InputError(f"{name} has {count} non-finite entries of {total} (overflow? try float32)")
    return x
