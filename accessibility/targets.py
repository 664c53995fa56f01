"""Target sequences for cramming, fixed by a seed and independent of the order they are visited in.

Three kinds (:data:`KINDS`):

``random-tokens``
    Uniform random sequences over the model's *real* tokens (padding rows of W_U excluded): the
    setting of the theory, where every sequence of V^n is equally likely. (Formerly ``random``,
    still accepted with a deprecation warning.)
``random-words``
    Whole English words drawn uniformly and independently from the 10,000 most frequent ones
    (``accessibility/data/words_en.txt``, from wordfreq, CC BY-SA 4.0), joined by spaces, tokenized
    and cut to n tokens: the analogue of the published random GloVe-word targets (whose word list
    was larger), random but made of real words.
``text``
    Consecutive chunks of natural English text. The text is the opening chapters of Jane Austen's
    *Pride and Prejudice* (1813), public domain, shipped with the package as
    ``accessibility/data/text_pride_and_prejudice.txt`` (provenance and licence in
    ``text_pride_and_prejudice.LICENSE``): it installs with the package, so no dataset hub is needed.
    The published protocol used PG-19 validation chunks (also Project Gutenberg books).

Target ``i`` depends only on ``(seed, i)`` (and, for text, on the tokenizer), never on how many
targets are drawn or which are computed first, so a sweep can be resumed, split or re-batched.
"""

from __future__ import annotations

import numpy as np
import torch

from accessibility import data_file
from accessibility.checks import InputError, at_least, one_of
from accessibility.results import rng

#: Target kinds understood by :func:`make_targets`.
KINDS = ("random-tokens", "random-words", "text")
#: Old names still accepted (with a DeprecationWarning) -> their kind.
ALIASES = {"random": "random-tokens"}
#: Package-data file holding the public-domain text used for ``text`` targets.
TEXT_FILE = "text_pride_and_prejudice.txt"
#: Package-data file of the word list of ``random-words`` targets (one word per line).
WORDS_FILE = "words_en.txt"
#: Separate random streams (:func:`accessibility.results.rng`, first key) so targets and inits never
#: share draws.
TARGET_STREAM = 1
INIT_STREAM = 2


def random_targets(real_token_ids, count: int, n: int, seed: int = 0, start: int = 0) -> torch.Tensor:
    """``count`` uniform random sequences of length ``n`` over ``real_token_ids``, shape (count, n).

    Row ``j`` is target ``start + j``, drawn from its own stream, so any subset is reproducible alone.

    >>> t = random_targets(range(16), 3, 5, seed=0)
    >>> t.shape, bool((random_targets(range(16), 1, 5, seed=0, start=2) == t[2]).all())
    (torch.Size([3, 5]), True)
    """
    at_least("count", count, 0, integer=True)
    at_least("n", n, 1, integer=True)
    ids = np.asarray(list(real_token_ids), dtype=np.int64)
    rows = [ids[rng(seed, TARGET_STREAM, i).integers(len(ids), size=n)] for i in range(start, start + count)]
    return torch.as_tensor(np.stack(rows) if rows else np.zeros((0, n), np.int64))


def load_text() -> str:
    """The shipped public-domain text (Pride and Prejudice, chapters 1-3), whitespace normalised."""
    raw = data_file(TEXT_FILE).read_text(encoding="utf-8")
    return " ".join(raw.split())


def text_targets(tokenizer, count: int, n: int, seed: int = 0, start: int = 0,
                 text: str | None = None) -> torch.Tensor:
    """``count`` chunks of ``n`` consecutive tokens of the text, shape (count, n).

    The text is tokenized once (no special tokens) and cut into non-overlapping chunks of ``n``
    tokens; target ``i`` is chunk ``perm[i]`` of a permutation fixed by ``seed``.
    """
    if tokenizer is None:
        raise InputError("text targets need a tokenizer; this model has none (use kind='random')")
    ids = tokenizer(text if text is not None else load_text(), add_special_tokens=False)["input_ids"]
    chunks = len(ids) // n
    if start + count > chunks:
        raise InputError(f"the text holds {chunks} chunks of n={n} tokens, asked for targets "
                         f"{start}..{start + count - 1}; lower --targets or --n-max")
    order = rng(seed, TARGET_STREAM).permutation(chunks)[start:start + count]
    chunks = np.array([ids[c * n:(c + 1) * n] for c in order], dtype=np.int64)
    return torch.as_tensor(chunks.reshape(count, n))


def load_words() -> tuple[str, ...]:
    """The word list of ``random-words`` targets, most frequent first."""
    return tuple(data_file(WORDS_FILE).read_text(encoding="utf-8").split())


def word_targets(tokenizer, count: int, n: int, seed: int = 0, start: int = 0,
                 words: tuple[str, ...] | None = None) -> torch.Tensor:
    """``count`` sequences of n tokens of uniformly random words, shape (count, n).

    Target ``i`` draws n words (each at least one token) from its own stream, joins them with
    spaces, tokenizes without special tokens and keeps the first n tokens (the last word may be cut).
    """
    if tokenizer is None:
        raise InputError("random-words targets need a tokenizer; this model has none (use random-tokens)")
    at_least("n", n, 1, integer=True)
    words = load_words() if words is None else words
    rows = []
    for i in range(start, start + count):
        picks = rng(seed, TARGET_STREAM, i).integers(len(words), size=n)
        rows.append(tokenizer(" ".join(words[j] for j in picks), add_special_tokens=False)["input_ids"][:n])
    return torch.as_tensor(np.array(rows, dtype=np.int64).reshape(count, n))


def target_kind(kind: str) -> str:
    """The kind ``kind`` names: one of :data:`KINDS`, or an old alias (with a DeprecationWarning)."""
    if kind in ALIASES:
        import warnings

        warnings.warn(f"target kind {kind!r} is deprecated; use {ALIASES[kind]!r}", DeprecationWarning,
                      stacklevel=3)
        return ALIASES[kind]
    return one_of("kind", kind, KINDS)


def make_targets(lm, kind: str, count: int, n: int, seed: int = 0, start: int = 0) -> torch.Tensor:
    """Targets of ``kind`` (one of :data:`KINDS`) for a loaded model, shape (count, n)."""
    kind = target_kind(kind)
    if kind == "random-tokens":
        return random_targets(lm.info.real_token_ids, count, n, seed=seed, start=start)
    if kind == "random-words":
        return word_targets(lm.tokenizer, count, n, seed=seed, start=start)
    return text_targets(lm.tokenizer, count, n, seed=seed, start=start)
