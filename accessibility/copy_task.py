"""The copy task of Jelassi et al. (2024) as used by the paper: symbols, examples and packed rows.

Symbols: the 26 letters, BOS ``$``, separator ``|``, EOS ``.`` and pad ``*`` (30 ids). An example of
length ℓ is

.. math::  \\$\\; s_1 \\dots s_\\ell \\;|\\; s_1 \\dots s_\\ell \\;.

with s uniform random letters. The loss covers only the copy and the final ``.`` (ℓ + 1 targets).
Training rows pack independent examples with ℓ uniform in a range; evaluation uses one example per
row at a fixed ℓ. Everything is drawn from an explicit ``torch.Generator``.
"""

from __future__ import annotations

import string
from dataclasses import dataclass

import torch

from accessibility.checks import InputError
from accessibility.copy_models import COPY_VOCAB_SIZE

ALPHABET = string.ascii_lowercase
BOS, SEP, EOS, PAD = "$", "|", ".", "*"
#: Symbol i has id i: the letters 0..25, then BOS 26, SEP 27, EOS 28, PAD 29.
SYMBOLS = ALPHABET + BOS + SEP + EOS + PAD
BOS_ID, SEP_ID, EOS_ID, PAD_ID = (SYMBOLS.index(c) for c in (BOS, SEP, EOS, PAD))
#: Target of positions without a loss (torch's cross-entropy ignore index).
IGNORE = -100
#: Version of the data generator, part of every cache key: bump it when the strings would change.
TASK_VERSION = 2

assert len(SYMBOLS) == COPY_VOCAB_SIZE


def encode(text: str) -> torch.Tensor:
    """Ids of a text over :data:`SYMBOLS`.

    >>> encode("$ab|ab.").tolist()
    [26, 0, 1, 27, 0, 1, 28]
    """
    bad = set(text) - set(SYMBOLS)
    if bad:
        raise InputError(f"text may only use {SYMBOLS!r}; got {sorted(bad)}")
    return torch.tensor([SYMBOLS.index(c) for c in text])


def decode(ids) -> str:
    """Text of a sequence of ids (the inverse of :func:`encode`)."""
    return "".join(SYMBOLS[int(i)] for i in ids)


@dataclass
class Batch:
    """Token ids and next-token targets, both ``(rows, T)``; ``targets[:, t]`` is what position t
    must predict, :data:`IGNORE` where there is no loss."""

    ids: torch.Tensor
    targets: torch.Tensor

    def to(self, device) -> Batch:
        return Batch(self.ids.to(device), self.targets.to(device))


def random_strings(n: int, length: int, generator: torch.Generator) -> torch.Tensor:
    """``n`` uniform random letter strings of one length, ids of shape ``(n, length)``."""
    return torch.randint(len(ALPHABET), (n, length), generator=generator)


def copy_examples(strings: torch.Tensor) -> Batch:
    """One example per row, ``$ s | s .``: ids and targets of shape ``(n, 2ℓ + 3)``.

    Positions ℓ+1 (the separator) to 2ℓ+1 predict the copy and the EOS; nothing else has a loss.

    >>> b = copy_examples(encode("abc")[None])
    >>> decode(b.ids[0]), b.targets[0].tolist()
    ('$abc|abc.', [-100, -100, -100, -100, 0, 1, 2, 28, -100])
    """
    n, length = strings.shape
    column = torch.ones(n, 1, dtype=torch.long)
    ids = torch.cat([BOS_ID * column, strings, SEP_ID * column, strings, EOS_ID * column], 1)
    targets = torch.full_like(ids, IGNORE)
    targets[:, length + 1: 2 * length + 2] = ids[:, length + 2:]
    return Batch(ids, targets)


def eval_batch(length: int, n: int, generator: torch.Generator) -> Batch:
    """``n`` examples of one length, one per row (no padding)."""
    return copy_examples(random_strings(n, length, generator))


def packed_batch(rows: int, row_tokens: int, lengths: tuple[int, int], generator: torch.Generator) -> Batch:
    """Training rows of ``row_tokens`` tokens packing independent examples, ℓ uniform in ``lengths``.

    Examples are appended to a row until the next one does not fit; the rest is pad (no loss).
    """
    low, high = lengths
    if row_tokens < 2 * high + 3:
        raise InputError(f"row_tokens must hold one example of length {high} ({2 * high + 3}); "
                         f"got {row_tokens}")
    ids = torch.full((rows, row_tokens), PAD_ID)
    targets = torch.full((rows, row_tokens), IGNORE)
    for r in range(rows):
        pos = 0
        while True:
            length = int(torch.randint(low, high + 1, (1,), generator=generator))
            if pos + 2 * length + 3 > row_tokens:
                break
            example = copy_examples(random_strings(1, length, generator))
            ids[r, pos: pos + 2 * length + 3] = example.ids[0]
            targets[r, pos: pos + 2 * length + 3] = example.targets[0]
            pos += 2 * length + 3
    return Batch(ids, targets)
