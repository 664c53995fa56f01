"""Input validation shared by every module: errors name the parameter and the allowed range.

All checks accept scalars or numpy arrays (every element is checked) and return the value as a
float or a float array, so they can sit at the top of vectorised functions.
"""

from __future__ import annotations

import numpy as np


class InputError(ValueError):
    """Bad input: the message names the parameter and the allowed range.

    ``name`` is the parameter the message starts with, where there is one: the command-line interface
    puts the flag of a config field in its place, and turns the error into one line on stderr with
    exit status 2.
    """

    def __init__(self, message: str, name: str | None = None):
        super().__init__(message)
        self.name = name


def _array(name: str, value) -> np.ndarray:
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond any float
        raise InputError(f"{name} must be a number, got {_shown(value)!r}", name) from None
    if np.isnan(arr).any():
        raise InputError(f"{name} must not be NaN, got {_shown(value)!r}", name)
    return arr


def _shown(value):
    """A value as a message shows it: an array as the list it holds."""
    return value.tolist() if isinstance(value, np.ndarray) else value


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
        raise InputError(f"{name} must be > 0 and finite, got {_shown(value)!r}", name)
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
        raise InputError(f"{name} must be {kind} >= {low:g}, got {_shown(value)!r}", name)
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
        raise InputError(f"{name} must lie in [{low:g}, {high:g}], got {_shown(value)!r}", name)
    return _out(arr)


def one_of(name: str, value, allowed):
    """``value`` is one of ``allowed``.

    >>> one_of("precision", "fp8", ("fp16", "bf16"))
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: precision must be one of fp16, bf16; got 'fp8'
    """
    if value not in allowed:
        raise InputError(f"{name} must be one of {', '.join(map(str, allowed))}; got {value!r}", name)
    return value


#: Seeds are integers in [0, 2^63): numpy's SeedSequence refuses negative ones, torch's generators
#: take at most 64 bits.
SEED_LIMIT = 2**63


def seed(name: str, value) -> int:
    """A seed: an integer in [0, 2^63).

    >>> seed("seed", 7)
    7
    >>> seed("seed", -1)
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: seed must be an integer in [0, 2^63), got -1
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value < SEED_LIMIT:
        raise InputError(f"{name} must be an integer in [0, 2^63), got {value!r}", name)
    return int(value)


def finite_tensor(name: str, x):
    """Raise if a torch tensor or numpy array holds NaN or ±inf (fp16 overflow, a broken model)."""
    bad = ~np.isfinite(x) if isinstance(x, np.ndarray) else ~x.isfinite()
    count = int(bad.sum())
    if count:
        total = x.numel() if hasattr(x, "numel") else x.size
        raise InputError(f"{name} has {count} non-finite entries of {total} (overflow? try float32)")
    return x
