"""Cramming: how long a sequence fits in m trainable prompt vectors (Kuratov et al. 2025).

A frozen causal LM reads ``[prefix] [mem]_1..[mem]_m t_1 .. t_{L-1}``; only the m vectors [mem]
(shape (m, d_model)) are trained, so that the teacher-forced argmax reproduces the target. Greedy
decoding from ``[prefix] [mem] t_1`` then emits t_2..t_L exactly when every teacher-forced argmax is
right, so one forward pass tells whether a length-L run has succeeded.

**What a capacity means.** The published protocol runs one fixed-length optimisation per target
and length n (its own initialisation, step budget and patience) and counts the fraction that
succeed. A target's *capacity* here is the longest length at which such a fixed-length run succeeds,
found per target by a search of **probes**, each probe a fixed-length run with its own budget
(``max_steps``) and ``patience``: a growth phase (n_start, n_start·growth, ... up to n_max) until a
probe fails, then a bisection between the longest solved and the shortest failed length, down to
one token. Success is assumed monotone in the length (up to optimisation noise), which is what makes
bisection valid; a probe may start from the [mem] that solved the longest shorter length
(``warm_start``) or from the target's own initial [mem]. Capacities are therefore not tied to any
grid. A capacity is decided only by a failure that had the full budget: when the bisection closes on
(capacity, capacity + 1) and the failed probe at capacity + 1 did not run ``max_steps`` steps after
the solution at capacity was found, a **confirming** probe at capacity + 1 runs from that solution
(from the initial [mem] without warm starts) for ``max_steps`` steps whatever its patience; if it
succeeds, the search goes on upward (bisecting up to the next failed length, or growing). The
capacity is thus the longest length this optimiser certifies: a lower bound on what the model can
reach, raised by warm starts and full budgets above what cold per-point runs find. The reported
capacity is certified by a real greedy ``generate`` from the snapshot that solved
it, without autocast (fp32 weights by default).

**Batching.** Many targets run in one forward pass, each with its own [mem] rows, AdamW state
(:func:`adamw_step`, element-wise and per row), probe length and step count; rows are right-padded to
a multiple of :data:`PAD_MULTIPLE` tokens, one forward pass per padded length (causal attention makes
padding invisible to earlier positions), and only the positions that predict a target token reach
the unembedding. A row's padded length depends on its own length only, never on the batch, and the
unembedding never multiplies fewer than :data:`MIN_GEMM_ROWS` rows; on one CPU thread in float32 a
batch therefore computes, row by row, bitwise the losses and gradients of one-at-a-time runs, and
gives identical probes, capacities and [mem] (tests check both). Elsewhere (several CPU threads, which
split products by shape; float64; GPU kernels, also chosen by shape) they agree up to floating-point
rounding, which an optimisation step on a near tie can amplify (measured on the toy model, m = 4,
32 targets: identical on one thread, mean |capacity difference| 0.84 tokens on two). A target
leaves the batch when its search ends and a waiting target takes its slot.

:func:`published_points` runs the published per-point protocol (one fixed-length run per target and
n, optionally on the authors' adaptive grid), and :func:`sweep` runs either protocol over several m
with a resumable record log, split across processes by rank. :mod:`accessibility.law` turns
capacities and points into accessibility curves, n_50(m) and the linear law.
"""

from __future__ import annotations

import copy
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm  # not tqdm.auto: in a notebook without ipywidgets it warns on import

from accessibility.autocast import autocast
from accessibility.checks import InputError, at_least, in_range, one_of, positive
from accessibility.models import cpu_has_native_bf16
from accessibility.results import held_signals, torch_generator
from accessibility.targets import INIT_STREAM

#: Autocast dtypes for the optimisation (certification always runs without autocast). ``auto``:
#: bfloat16 on a CUDA device that supports it, float32 elsewhere (see :func:`resolve_autocast`).
#: ``float16`` is the published setting, fp16 autocast without a gradient scaler: CUDA's own on a
#: CUDA device, emulated elsewhere (:func:`accessibility.autocast.fp16_autocast`); a non-finite loss
#: then goes on through AdamW as in the published loop (``CramResult.nonfinite`` counts them).
AUTOCAST_DTYPES = ("auto", "float32", "bfloat16", "float16")
#: How a target's search ended: ``full`` it solved n_max (the capacity is censored at n_max);
#: otherwise how the probe just above the capacity failed: ``patience`` (no better accuracy in its
#: last ``patience`` steps) or ``budget`` (``max_steps`` spent while still improving: the capacity is
#: then a lower bound of what a longer run could reach).
STOPS = ("full", "patience", "budget")
#: How a probe started (the fifth field of each entry of ``CramResult.probes``): from the target's
#: initial [mem] (``init``), from the [mem] that solved the longest shorter length (``warm``), or as
#: the confirming probe at capacity + 1 (``confirm``: from that [mem], or from the initial one without
#: warm starts, for ``max_steps`` steps whatever its patience). Records written before confirmations
#: existed hold four fields; :func:`upgrade_probes` adds the fifth.
PROBE_STARTS = ("init", "warm", "confirm")
#: Starts whose probe ignores ``patience`` and ends only when solved or after ``max_steps`` steps:
#: the confirming probe, and the ``replay`` of a solved probe that rebuilds the [mem] of a record saved
#: without it (:meth:`_Slots.reopen`).
FULL_BUDGET = ("confirm", "replay")
#: What a record searched again keeps of the record it replaced (its ``redone`` field: :func:`sweep`).
REDONE = ("capacity", "capacity_teacher", "certificate", "probes", "replays", "steps")
#: Where the prefix token goes: ``before`` [mem] (default; position 0 is an attention sink in
#: Llama-style models) or ``after`` it, between [mem] and t_1 (the published layout for BOS).
PREFIX_POSITIONS = ("before", "after")
#: The two protocols of :func:`sweep`.
PROTOCOLS = ("search", "published")
#: The padded length of a batch is rounded up to a multiple of this many tokens, so that the
#: forward pass sees few distinct shapes (fewer kernel choices and allocations) at < 16 tokens a row.
PAD_MULTIPLE = 16
#: Fewest rows a matrix product of the unembedding gets. CPU BLAS computes products of 1-3 rows with
#: other kernels than larger ones, and their rounding differs; a target whose pass had so few predicted
#: positions would then get other logits alone than in a batch. With at least this many rows (zero rows
#: added), each row's logits are bitwise those of a large product on one thread (checked by a test).
MIN_GEMM_ROWS = 4
#: Forward passes between updates of the progress bar's pass counter.
PROGRESS_EVERY = 10
#: Wall-clock seconds between two saves of the in-flight searches (:func:`cram`'s ``on_checkpoint``):
#: an interrupted search loses at most this much work; a save of a few [mem]-sized arrays costs
#: milliseconds.
CHECKPOINT_SECONDS = 60.0
#: The published adaptive scan over n: coarse steps while accessibility > 0.9, then fine steps
#: until it falls below 0.1, n in [10, 1000] (tokens).
PUBLISHED_SCAN = {"n_min": 10, "n_max": 1000, "coarse": 100, "fine": 10, "high": 0.9, "low": 0.1}


@dataclass(frozen=True)
class CramConfig:
    """How [mem] vectors are optimised and how each target's capacity is searched.

    Attributes
    ----------
    lr, betas, weight_decay, adam_eps : AdamW hyper-parameters (decoupled weight decay, no schedule).
    max_steps : optimiser steps per probe (one fixed-length run), as the published per-run budget.
    patience : a probe fails after this many steps without a better teacher-forced accuracy.
    n_start, growth, n_max : probe lengths of the growth phase, n_start, ceil(n_start*growth), ...
        capped at n_max (tokens, the given first token included). A target that solves n_max is
        censored there (stop ``full``).
    bisect : after the first failed probe, bisect between the longest solved and the shortest failed
        length (True), or stop (False: with ``n_start == n_max`` this is one fixed-length run).
    warm_start : a probe starts from the [mem] that solved the longest shorter length (fresh AdamW
        state), or, when False, from the target's initial [mem] like an independent run.
    first_token_given : t_1 is fed as input and only t_2..t_n are predicted (published protocol), or
        [mem] must also produce t_1.
    prefix : ``"auto"`` (the tokenizer's BOS when it has one, as Llama-3 and Gemma-3; otherwise the
        model's documented choice, ``info.prefix_token_id``, e.g. SmolLM2's ``<|endoftext|>``; else
        none), ``"none"`` or a token id.
    prefix_position : ``"before"`` [mem] (default) or ``"after"`` it (the published layout, where
        the BOS lands between [mem] and t_1 and [mem] takes position 0).
    init_scale : [mem] starts as N(0, 1) times this times the std of the input embeddings of the real
        tokens (as the model's embedding module returns them; Gemma scales by sqrt(d)).
    autocast_dtype : autocast dtype of the optimisation, one of :data:`AUTOCAST_DTYPES`.
    """

    lr: float = 1e-2
    betas: tuple[float, float] = (0.9, 0.9)
    weight_decay: float = 0.01
    adam_eps: float = 1e-8
    max_steps: int = 3000
    patience: int = 500
    n_start: int = 16
    growth: float = 1.5
    n_max: int = 1024
    bisect: bool = True
    warm_start: bool = True
    first_token_given: bool = True
    prefix: str | int = "auto"
    prefix_position: str = "before"
    init_scale: float = 1.0
    autocast_dtype: str = "auto"

    def __post_init__(self):
        positive("lr", self.lr)
        for b in self.betas:
            in_range("betas", b, 0, 0.999999)
        at_least("weight_decay", self.weight_decay, 0)
        positive("adam_eps", self.adam_eps)
        at_least("max_steps", self.max_steps, 1, integer=True)
        at_least("patience", self.patience, 1, integer=True)
        at_least("n_start", self.n_start, 2 if self.first_token_given else 1, integer=True)
        at_least("n_max", self.n_max, self.n_start, integer=True)
        at_least("growth", self.growth, 1)
        positive("init_scale", self.init_scale)
        one_of("autocast_dtype", self.autocast_dtype, AUTOCAST_DTYPES)
        one_of("prefix_position", self.prefix_position, PREFIX_POSITIONS)
        if not (self.prefix in ("auto", "none") or (isinstance(self.prefix, int) and self.prefix >= 0)):
            raise InputError(f"prefix must be 'auto', 'none' or a token id >= 0; got {self.prefix!r}")

    @classmethod
    def paper(cls, **changes) -> CramConfig:
        """The published optimiser per run: AdamW lr 1e-2, betas (0.9, 0.9), wd 0.01, at most 3000
        steps and patience 500 per fixed-length run; lengths up to n_max = 1024 (the published scan
        reaches n = 1000).

        Published quirks not copied: fp16 autocast without a gradient scaler (we use fp32, or bf16
        where supported, and certify in fp32); BOS after [mem] (``prefix_position="after"`` gives it);
        the init from the std of the raw embedding matrix, which differs from the embeddings the model
        feeds itself where its embedding module rescales them (``init_scale=1/sqrt(d)`` gives it on
        Gemma-3). The published learning rate suits the published init: on Gemma-3 pass both.
        """
        return replace(cls(), **changes)

    @classmethod
    def quick(cls, **changes) -> CramConfig:
        """What converges in minutes on a CPU: lr 0.1, at most 300 steps and patience 100 per probe."""
        base = cls(lr=0.1, max_steps=300, patience=100, n_start=4, growth=1.5, n_max=128)
        return replace(base, **changes)

    @classmethod
    def preset(cls, name: str, **changes) -> CramConfig:
        one_of("preset", name, ("paper", "quick"))
        return getattr(cls, name)(**changes)

    def fixed(self, n: int) -> CramConfig:
        """One fixed-length run at length n with these optimiser settings (the published unit)."""
        return replace(self, n_start=int(n), n_max=int(n), growth=1.0, bisect=False)

    def growth_lengths(self) -> list[int]:
        """The probe lengths of the growth phase while every probe succeeds (:func:`next_length`):
        n_start, then ×growth, up to n_max.

        >>> CramConfig.quick(n_start=8, growth=1.5, n_max=60).growth_lengths()
        [8, 12, 18, 27, 41, 60]
        """
        lengths = [self.n_start]
        while (n := next_length(lengths[-1], None, lengths[-1], self)) is not None:
            lengths.append(n)
        return lengths


@dataclass
class CramResult:
    """One target crammed into m vectors.

    ``capacity`` is the certified length (tokens reproduced by greedy ``generate``, the given first
    token included); ``capacity_teacher`` the longest length a probe solved (equal to it unless
    generate and the training forward disagree on a near tie). ``stop`` is one of :data:`STOPS`.
    ``probes`` lists each probe as ``[length, solved, steps, end, start]`` with ``end`` "solved",
    "patience" (no better accuracy in its last ``patience`` steps) or "budget", and ``start`` one of
    :data:`PROBE_STARTS`. ``replays`` lists, as ``[length, solved, steps, end]``, the solved probes
    run again to rebuild the [mem] of a record saved without it before its search was extended
    (:meth:`_Slots.reopen`; empty otherwise). ``steps`` counts the optimiser steps of all probes and
    replays; ``nonfinite`` the steps whose loss was not finite. ``mem`` (m, d_model) is the snapshot
    that solved ``capacity_teacher`` (the initial [mem] if none did; the longest solution rebuilt when
    the replays failed to rebuild it, :func:`chain_broken`).
    """

    index: int
    m: int
    capacity: int
    capacity_teacher: int
    n_max: int
    steps: int
    stop: str
    probes: list = field(default_factory=list)
    replays: list = field(default_factory=list)
    nonfinite: int = 0
    mem: np.ndarray = field(default=None, repr=False)
    certificate: dict = field(default_factory=dict, repr=False)

    def record(self, with_mem: bool = True) -> dict:
        """A JSON-friendly dict ([mem] as a float32 list unless ``with_mem`` is False)."""
        out = {k: getattr(self, k) for k in ("index", "m", "capacity", "capacity_teacher", "n_max",
                                             "steps", "stop", "probes", "replays", "nonfinite",
                                             "certificate")}
        if with_mem:
            out["mem"] = self.mem.astype(np.float32).tolist()
        return out


def adamw_step(p, grad, exp_avg, exp_avg_sq, step, *, lr, betas, weight_decay, eps) -> None:
    """One AdamW update of each row in place, with its own step count (as ``torch.optim.AdamW``).

    .. math::
        p \\leftarrow p(1 - \\eta\\lambda) - \\frac{\\eta}{1-\\beta_1^t}\\,
        \\frac{m_t}{\\sqrt{v_t}/\\sqrt{1-\\beta_2^t} + \\epsilon}

    Shapes: ``p, grad, exp_avg, exp_avg_sq`` (rows, ...); ``step`` (rows,), the 1-based count of
    this update for each row.
    """
    b1, b2 = betas
    shape = (-1,) + (1,) * (p.dim() - 1)
    t = step.to(torch.float64)
    bc1 = (1 - b1 ** t).to(p.dtype).view(shape)
    bc2_sqrt = (1 - b2 ** t).sqrt().to(p.dtype).view(shape)
    p.mul_(1 - lr * weight_decay)
    exp_avg.lerp_(grad, 1 - b1)
    exp_avg_sq.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    denom = (exp_avg_sq.sqrt() / bc2_sqrt).add_(eps)
    p.sub_(exp_avg / denom * (lr / bc1))


# --- precision and layout ---------------------------------------------------------------------


def resolve_autocast(dtype: str, device) -> str:
    """The autocast dtype actually used on ``device``: ``auto`` is bfloat16 on a CUDA device with
    bf16 support and float32 elsewhere (on a CPU, bf16 agreement with fp32 has not been checked on
    native hardware, so it is opt-in). ``bfloat16`` on a CPU without native support is an error.

    >>> resolve_autocast("auto", torch.device("cpu"))
    'float32'
    """
    one_of("autocast_dtype", dtype, AUTOCAST_DTYPES)
    device = torch.device(device)
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
    else:
        supported = device.type == "cpu" and cpu_has_native_bf16()
    if dtype == "auto":
        return "bfloat16" if supported and device.type == "cuda" else "float32"
    if dtype == "bfloat16" and not supported:
        raise InputError(f"autocast_dtype bfloat16 needs native bf16 on {device.type} (this one emulates "
                         "it, hundreds of times slower); use float32 or auto", "autocast_dtype")
    return dtype


def prefix_token(lm, config: CramConfig) -> int | None:
    """The fixed token placed next to [mem], or None: under ``auto`` the tokenizer's BOS, else the
    model's documented choice (``info.prefix_token_id``), else none."""
    if config.prefix == "auto":
        bos = lm.info.bos_token_id
        return bos if bos is not None else lm.info.prefix_token_id
    return None if config.prefix == "none" else int(config.prefix)


def embedding_std(lm) -> float:
    """Std of all entries of the input embeddings of the real tokens, as the model embeds them."""
    ids = torch.as_tensor(lm.info.real_token_ids, device=lm.device)
    with torch.no_grad():
        return float(lm.embed(ids).float().std())


def build_inputs(lm, mem, tokens, prefix: int | None, position: str = "before") -> torch.Tensor:
    """``[prefix] mem tokens`` (or ``mem [prefix] tokens``) as input embeddings,
    shape (rows, [1] + m + tokens.shape[1], d)."""
    parts = [mem.to(lm.input_embeddings().dtype), lm.embed(tokens)]
    if prefix is not None:
        pre = lm.embed(torch.tensor([[prefix]], device=tokens.device)).expand(mem.shape[0], 1, -1)
        parts.insert(0 if position == "before" else 1, pre)
    return torch.cat(parts, dim=1)


def _head(lm, hidden: torch.Tensor) -> torch.Tensor:
    """Logits of final hidden states (..., d) -> (..., V), as the model's own forward computes them
    (the unembedding, its bias, and the final logit soft-capping of models that have one)."""
    logits = lm.model.get_output_embeddings()(hidden)
    cap = getattr(lm.model.config, "final_logit_softcapping", None)
    return torch.tanh(logits / cap) * cap if cap else logits


def teacher_forced(lm, mem, targets, lengths, prefix, given: int, dtype: str = "float32",
                   pad_to: int | None = None, position: str = "before"):
    """Per-row loss, correct count and longest correct prefix of one teacher-forced pass.

    ``mem`` (rows, m, d); ``targets`` (rows, >= pad_to); ``lengths`` (rows,) tokens per row. Rows
    are right-padded to ``pad_to`` tokens (default: the longest row); causal attention makes the
    padding invisible to earlier positions. Only the positions that predict one of a row's own
    target tokens go through the unembedding. Returns ``loss`` (rows,), mean cross-entropy over each
    row's predicted tokens; ``correct`` (rows,); ``prefix_len`` (rows,), the given first token
    included.
    """
    L = int(pad_to or lengths.max())
    tokens = targets[:, :L]                                   # (rows, L)
    inputs = build_inputs(lm, mem, tokens[:, :L - 1], prefix, position)
    keep = L - given                                          # positions predicting t_{1+given}..t_L
    gold = tokens[:, given:]                                  # (rows, keep)
    valid = torch.arange(keep, device=gold.device) < (lengths - given)[:, None]
    with autocast(dtype, inputs.device):
        hidden = lm.model.base_model(inputs_embeds=inputs, use_cache=False).last_hidden_state
        picked = hidden[:, -keep:][valid]                     # (valid positions, d)
        count = len(picked)
        if count < MIN_GEMM_ROWS:
            picked = torch.cat([picked, picked.new_zeros(MIN_GEMM_ROWS - count, picked.shape[1])])
        logits = _head(lm, picked)[:count]                    # (valid positions, V)
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))
    rows = valid.nonzero()[:, 0]
    ce = F.cross_entropy(logits, gold[valid], reduction="none")
    loss = torch.zeros(len(mem), dtype=ce.dtype, device=ce.device).index_add_(0, rows, ce) / valid.sum(1)
    ok = torch.zeros_like(valid)
    ok[valid] = logits.argmax(-1) == gold[valid]
    prefix_len = given + ok.long().cumprod(1).sum(1)
    return loss, ok.sum(1), prefix_len


def padded_length(lengths: torch.Tensor) -> torch.Tensor:
    """Lengths rounded up to a multiple of :data:`PAD_MULTIPLE`."""
    return (lengths + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE


@torch.no_grad()
def certify(lm, mem, target, capacity: int, prefix, given: int, position: str = "before") -> dict:
    """Greedy ``generate`` (no autocast) from ``[prefix] mem [t_1]``: tokens emitted and how many match.

    Returns ``{"generated": ids, "matched": k, "ok": k == capacity - given}``; the certified length
    is ``given + matched``.
    """
    from transformers import GenerationConfig

    want = capacity - given
    if want <= 0:
        return {"generated": [], "matched": 0, "ok": True}
    lead = target[None, :given]                               # (1, given)
    inputs = build_inputs(lm, mem[None], lead, prefix, position)
    gen = GenerationConfig(do_sample=False, max_new_tokens=want, min_new_tokens=0, eos_token_id=None,
                           pad_token_id=0, bos_token_id=None)
    mask = torch.ones(inputs.shape[:2], dtype=torch.long, device=inputs.device)
    out = lm.model.generate(inputs_embeds=inputs, attention_mask=mask, generation_config=gen)
    out = out[0, -want:].tolist()
    expect = target[given:capacity].tolist()
    matched = next((i for i, (a, b) in enumerate(zip(out, expect)) if a != b), len(out))
    return {"generated": out, "matched": matched, "ok": matched == want}


# --- the search engine ------------------------------------------------------------------------


def next_length(lo: int, hi: int | None, length: int, config: CramConfig) -> int | None:
    """The probe length after a probe of ``length``, or None when the search is over. ``lo`` is
    the longest solved length so far and ``hi`` the shortest failed one (None: none yet), both
    already updated with this probe. Growth while nothing failed, then bisection of (lo, hi).

    >>> cfg = CramConfig.quick(n_start=4, growth=1.5, n_max=20)
    >>> next_length(4, None, 4, cfg), next_length(9, 14, 14, cfg), next_length(9, 10, 9, cfg)
    (6, 11, None)
    >>> next_length(20, None, 20, cfg) is None
    True
    """
    if hi is None:                    # every probe so far was solved
        if length >= config.n_max:
            return None
        return min(max(math.ceil(length * config.growth), length + 1), config.n_max)
    if not config.bisect or hi - lo <= 1:
        return None
    return (lo + hi) // 2


class _Slots:
    """Optimisation state of the targets in the batch, one row per slot."""

    def __init__(self, size: int, m: int, d: int, n_max: int, device, dtype):
        z = lambda *s, dt=dtype: torch.zeros(*s, dtype=dt, device=device)  # noqa: E731
        self.mem, self.exp_avg, self.exp_avg_sq = (z(size, m, d) for _ in range(3))
        self.lo_mem, self.init_mem = z(size, m, d), z(size, m, d)
        width = int(padded_length(torch.tensor(n_max)))
        self.targets = torch.zeros(size, width, dtype=torch.long, device=device)
        counts = (z(size, dt=torch.long) for _ in range(5))
        self.step, self.length, self.best, self.since, self.nonfinite = counts
        self.owner: list[int | None] = [None] * size   # position in the caller's target list
        self.lo = [0] * size                           # longest solved length
        self.hi: list[int | None] = [None] * size      # shortest failed length
        self.hi_end: list[str | None] = [None] * size  # how that probe ended
        self.total = [0] * size                        # optimiser steps of all probes
        self.probes: list[list] = [[] for _ in range(size)]
        self.start = ["init"] * size                   # how the current probe started
        self.has_mem = [False] * size                  # lo_mem is a solution (not the initial [mem])
        self.replay: list[list] = [[] for _ in range(size)]   # lengths still to replay (reopen)
        self.replays: list[list] = [[] for _ in range(size)]  # replays done

    def fill(self, s: int, owner: int, target, mem0, config: CramConfig, given: int):
        self.owner[s] = owner
        self.targets[s] = 0
        self.targets[s, :len(target)] = target
        self.init_mem[s], self.lo_mem[s] = mem0, mem0
        self.lo[s], self.hi[s], self.hi_end[s], self.total[s], self.probes[s] = given, None, None, 0, []
        self.has_mem[s], self.replay[s], self.replays[s], self.nonfinite[s] = False, [], [], 0
        self.start_probe(s, config.n_start, "init", config)

    #: Per-slot tensors and lists that :meth:`snapshot` saves (the targets and the initial [mem] are
    #: rebuilt from the target's index by :meth:`fill`). States saved before a field existed restore
    #: it from :data:`DEFAULTS`.
    TENSORS = ("mem", "exp_avg", "exp_avg_sq", "lo_mem")
    COUNTS = ("step", "length", "best", "since", "nonfinite")
    LISTS = ("lo", "hi", "hi_end", "total", "probes", "start", "has_mem", "replay", "replays")
    DEFAULTS = {"nonfinite": 0, "replay": [], "replays": []}

    def snapshot(self, s: int) -> dict:
        """The search state of slot ``s`` between two passes: [mem], AdamW moments, the probe's
        counters and the search so far (numpy arrays and plain values); ``progress`` counts its
        optimiser steps."""
        state = {k: getattr(self, k)[s].cpu().numpy().copy() for k in self.TENSORS}
        state.update({k: int(getattr(self, k)[s]) for k in self.COUNTS})
        state.update({k: copy.deepcopy(getattr(self, k)[s]) for k in self.LISTS})
        return {**state, "progress": self.total[s] + int(self.step[s])}

    def restore(self, s: int, state: dict, config: CramConfig):
        """Continue slot ``s`` (already :meth:`fill`-ed with its target) from a :meth:`snapshot`."""
        for k in self.TENSORS:
            value = torch.as_tensor(state[k])
            if value.shape != self.mem.shape[1:] or value.dtype != self.mem.dtype:
                want = f"{tuple(self.mem.shape[1:])} {self.mem.dtype}"
                raise InputError(f"saved cramming state has {k} of shape {tuple(value.shape)} and dtype "
                                 f"{value.dtype}; this run needs {want}")
            getattr(self, k)[s] = value
        for k in self.COUNTS:
            getattr(self, k)[s] = int(state.get(k, self.DEFAULTS.get(k)))
        for k in self.LISTS:
            getattr(self, k)[s] = copy.deepcopy(state.get(k, self.DEFAULTS.get(k)))
        if "start" not in state:     # a state saved before probes recorded how they started
            self.probes[s] = upgrade_probes(self.probes[s], config.warm_start)
            self.has_mem[s] = any(p[1] for p in self.probes[s])
            self.start[s] = "warm" if config.warm_start and self.has_mem[s] else "init"

    def reopen(self, s: int, record: Mapping, config: CramConfig):
        """Extend slot ``s`` (already :meth:`fill`-ed with its target) from a finished search record
        whose deciding failure lacked the full budget (:func:`search_decided` False). With the
        record's [mem] the confirming probe starts at once; without it, the solved probes are first
        run again in order (``replay``, each from the previous one's solution as in the search, for
        the full budget), which on one CPU thread in float32 rebuilds that [mem] bitwise when this
        version's batching wrote the record on the same kind of CPU (tested on one machine; another
        CPU may take other kernels). Older records are rebuilt only approximately: a
        replay may fail where the original solved (:func:`chain_broken`), and the search then goes on
        from the longest solution rebuilt while the record keeps its certified capacity."""
        self.probes[s] = upgrade_probes(record["probes"], config.warm_start)
        self.total[s], self.lo[s] = int(record["steps"]), int(record["capacity_teacher"])
        self.hi[s], self.hi_end[s] = shortest_failure(self.probes[s], self.lo[s])
        self.replays[s], self.nonfinite[s] = list(record.get("replays", [])), int(record.get("nonfinite", 0))
        if record.get("mem") is not None:
            self.lo_mem[s] = torch.as_tensor(np.asarray(record["mem"]), dtype=self.mem.dtype)
            self.has_mem[s] = True
            if _next_probe(self, s, config):
                raise InputError(f"record of target {record['index']} is already decided; nothing to extend")
            return
        solved = [p[0] for p in self.probes[s] if p[1]]
        self.replay[s] = solved if config.warm_start else solved[-1:]
        if not self.replay[s]:       # nothing was solved: the solution at capacity is the initial [mem]
            if _next_probe(self, s, config):
                raise InputError(f"record of target {record['index']} is already decided; nothing to extend")
            return
        self.start_probe(s, self.replay[s].pop(0), "replay", config)

    def start_probe(self, s: int, length: int, start: str, config: CramConfig):
        """A fresh fixed-length run of ``length`` tokens: new AdamW state, step 0, from the target's
        initial [mem] (``init``, and every start without warm starts) or from the [mem] that solved the
        longest length so far (``warm``, ``confirm``, ``replay``)."""
        warm = config.warm_start and start != "init"
        self.mem[s] = self.lo_mem[s] if warm else self.init_mem[s]
        for t in (self.exp_avg, self.exp_avg_sq):
            t[s] = 0
        for t, v in ((self.step, 0), (self.length, length), (self.best, -1), (self.since, 0)):
            t[s] = v
        self.start[s] = start


def initial_mem(index: int, m: int, d: int, std: float, seed: int) -> torch.Tensor:
    """[mem] of target ``index`` before training: N(0, 1) * std, shape (m, d), from its own stream."""
    return torch.randn(m, d, generator=torch_generator(seed, INIT_STREAM, index, m)) * std


def cram(lm, targets: torch.Tensor, m: int, config: CramConfig, *, seed: int = 0,
         indices: Sequence[int] | None = None, batch_size: int = 16, progress: bool = False,
         on_result: Callable[[CramResult], None] | None = None, resume: Mapping[int, dict] | None = None,
         on_checkpoint: Callable[[dict[int, dict]], None] | None = None,
         checkpoint_seconds: float | None = None,
         reopen: Mapping[int, Mapping] | None = None) -> list[CramResult]:
    """Cram each target into m vectors and find its capacity; results in the order of ``targets``.

    ``targets`` (K, >= n_max) token ids; ``indices`` (default 0..K-1) name the targets for their
    random initialisation, so a target's result does not depend on the batch it runs in.
    ``on_result`` is called as each target finishes (to write it to a log at once).
    ``on_checkpoint`` is called, at most every ``checkpoint_seconds`` of wall time (default
    :data:`CHECKPOINT_SECONDS`) and between two passes, with ``{index: state}`` of the targets in
    flight; ``resume`` ({index: state}) continues targets from such states, so that an interrupted
    search loses at most the passes since its last checkpoint, and (on one CPU thread in float32)
    ends exactly as an uninterrupted one. ``reopen`` ({index: record}) extends finished search
    records whose deciding failure lacked the full budget (:meth:`_Slots.reopen`); a state in
    ``resume`` takes precedence (it is the later one). Ctrl-C or SIGTERM stops the searches between
    two passes, after ``on_checkpoint`` has saved them, with KeyboardInterrupt (a second one stops
    at once).
    """
    at_least("m", m, 1, integer=True)
    at_least("batch_size", batch_size, 1, integer=True)
    targets = torch.as_tensor(targets)
    if targets.dim() != 2 or targets.shape[1] < config.n_max:
        raise InputError(f"targets must have shape (K, >= n_max={config.n_max}); got {tuple(targets.shape)}")
    indices = list(range(len(targets))) if indices is None else list(indices)
    device, d = lm.device, lm.info.d_model
    dtype = resolve_autocast(config.autocast_dtype, device)
    std = embedding_std(lm) * config.init_scale
    prefix, given = prefix_token(lm, config), int(config.first_token_given)
    state_dtype = torch.promote_types(lm.input_embeddings().dtype, torch.float32)  # never below fp32
    slots = _Slots(min(batch_size, len(targets)), m, d, config.n_max, device, state_dtype)
    pending, results = list(range(len(targets))), [None] * len(targets)
    resume, reopen = resume or {}, reopen or {}
    every = CHECKPOINT_SECONDS if checkpoint_seconds is None else checkpoint_seconds
    passes, saved = 0, time.monotonic()
    with tqdm(total=len(targets), desc=f"cram m={m}", disable=not progress, leave=False) as bar, \
            held_signals() as held:
        while pending or any(o is not None for o in slots.owner):
            for s in range(len(slots.owner)):
                if slots.owner[s] is None and pending:
                    k = pending.pop(0)
                    mem0 = initial_mem(indices[k], m, d, std, seed).to(device)
                    slots.fill(s, k, targets[k, :config.n_max].to(device), mem0, config, given)
                    if indices[k] in resume:
                        slots.restore(s, resume[indices[k]], config)
                    elif indices[k] in reopen:
                        slots.reopen(s, reopen[indices[k]], config)
            stop = held.signal is not None
            if on_checkpoint is not None and (stop or time.monotonic() - saved >= every):
                on_checkpoint({indices[o]: slots.snapshot(s)
                               for s, o in enumerate(slots.owner) if o is not None})
                saved = time.monotonic()
            if stop:                      # held before the save above, so the save holds every pass
                held.stop()
            passes += 1
            if progress and passes % PROGRESS_EVERY == 0:
                bar.set_postfix(passes=passes, longest_probe=int(slots.length.max()))
            for s in _step(lm, slots, config, prefix, given, dtype):
                k = slots.owner[s]
                results[k] = _finish(lm, slots, s, indices[k], m, config, prefix, given,
                                     reopen.get(indices[k]))
                slots.owner[s] = None
                bar.update(1)
                if on_result is not None:
                    on_result(results[k])
    return results


def _step(lm, slots: _Slots, config: CramConfig, prefix, given: int, dtype: str) -> list[int]:
    """One forward/backward pass over the active slots; updates them and returns the slots whose
    search is over."""
    act = torch.tensor([s for s, o in enumerate(slots.owner) if o is not None], device=slots.mem.device)
    mem = slots.mem[act].clone().requires_grad_(True)                       # (b, m, d)
    length = slots.length[act]
    correct, plen = torch.zeros_like(length), torch.zeros_like(length)
    finite = torch.ones_like(length, dtype=torch.bool)
    bucket = padded_length(length).clamp(max=slots.targets.shape[1])
    for pad in bucket.unique().tolist():
        rows = (bucket == pad).nonzero()[:, 0]
        loss, correct[rows], plen[rows] = teacher_forced(
            lm, mem[rows], slots.targets[act[rows]], length[rows], prefix, given, dtype, pad_to=pad,
            position=config.prefix_position)
        finite[rows] = torch.isfinite(loss.detach())
        loss.sum().backward()        # rows are independent: each row's gradient is its own loss's
    with torch.no_grad():
        slots.nonfinite[act] += (~finite).long()
        solved = plen >= length
        gain = correct > slots.best[act]
        slots.best[act] = torch.maximum(correct, slots.best[act])
        since = torch.where(gain, 0, slots.since[act] + 1)
        slots.since[act] = since
        full = torch.tensor([slots.start[s] in FULL_BUDGET for s in act.tolist()], device=act.device)
        stuck = ~solved & ~full & (since >= config.patience)
        spent = ~solved & ~stuck & (slots.step[act] >= config.max_steps)
        ended = solved | stuck | spent
        live = ~ended
        rows = act[live]
        p, ea, eas = mem.detach()[live], slots.exp_avg[rows], slots.exp_avg_sq[rows]
        step = slots.step[rows] + 1
        adamw_step(p, mem.grad[live], ea, eas, step, lr=config.lr, betas=config.betas,
                   weight_decay=config.weight_decay, eps=config.adam_eps)
        slots.mem[rows], slots.exp_avg[rows], slots.exp_avg_sq[rows], slots.step[rows] = p, ea, eas, step
        done = []
        for i in ended.nonzero()[:, 0].tolist():
            s = int(act[i])
            end = "solved" if solved[i] else ("patience" if since[i] >= config.patience else "budget")
            if _end_probe(slots, s, mem[i].detach(), end, config):
                done.append(s)
    return done


def _end_probe(slots: _Slots, s: int, mem, end: str, config: CramConfig) -> bool:
    """Book the probe (or replay) of slot ``s`` that just ended (``end``) and start the next; True
    when the search of this target is over."""
    length, steps, start = int(slots.length[s]), int(slots.step[s]), slots.start[s]
    slots.total[s] += steps
    if start == "replay":
        slots.replays[s].append([length, end == "solved", steps, end])
        if end == "solved":
            slots.lo_mem[s], slots.has_mem[s] = mem, True
        else:                        # the chain is broken (chain_broken): go on from the longest
            slots.replay[s] = []     # solution rebuilt; the record keeps its certified capacity
        if slots.replay[s]:
            slots.start_probe(s, slots.replay[s].pop(0), "replay", config)
            return False
        return _next_probe(slots, s, config)
    slots.probes[s].append([length, end == "solved", steps, end, start])
    if end == "solved":
        slots.lo[s], slots.lo_mem[s], slots.has_mem[s] = length, mem, True
        if start == "confirm":       # the search goes on upward, to the next failed length if any
            slots.hi[s], slots.hi_end[s] = shortest_failure(slots.probes[s], length)
    else:
        slots.hi[s], slots.hi_end[s] = length, end
    return _next_probe(slots, s, config)


def _next_probe(slots: _Slots, s: int, config: CramConfig) -> bool:
    """Start the next probe of slot ``s`` (growth, bisection, or the confirming probe at capacity + 1);
    True when its search is over."""
    lo, hi = slots.lo[s], slots.hi[s]
    nxt = next_length(lo, hi, slots.probes[s][-1][0], config)
    if nxt is not None:
        slots.start_probe(s, nxt, "warm" if config.warm_start and slots.has_mem[s] else "init", config)
        return False
    if not decided(slots.probes[s], lo, hi, config):
        slots.start_probe(s, hi, "confirm", config)
        return False
    return True


def shortest_failure(probes, above: int) -> tuple[int | None, str | None]:
    """(length, end) of the shortest failed probe longer than ``above``, or (None, None).

    >>> probes = [[8, True, 9, "solved"], [12, False, 150, "patience"], [10, False, 150, "budget"]]
    >>> shortest_failure(probes, 9)
    (10, 'budget')
    """
    failed = sorted((p[0], p[3]) for p in probes if not p[1] and p[0] > above)
    return failed[0] if failed else (None, None)


def decided(probes, lo: int, hi: int | None, config: CramConfig) -> bool:
    """Whether a search that closed on (``lo``, ``hi``) is over: it solved n_max (``hi`` None), it
    neither bisects nor confirms (a fixed-length run, a growth-only search), or a probe at ``hi``
    failed after running ``max_steps`` steps later than the probe that solved ``lo`` (so from that
    solution, with warm starts): the failure had the full budget.

    >>> cfg = CramConfig.quick(max_steps=500)
    >>> probes = [[8, True, 90, "solved", "init"], [9, False, 150, "patience", "warm"]]
    >>> decided(probes, 8, 9, cfg), decided(probes + [[9, False, 500, "patience", "confirm"]], 8, 9, cfg)
    (False, True)
    """
    if hi is None or not config.bisect:
        return True
    solved_lo = [i for i, p in enumerate(probes) if p[1] and p[0] == lo]
    after = solved_lo[-1] + 1 if solved_lo else 0
    return any(p[0] == hi and not p[1] and p[2] >= config.max_steps for p in probes[after:])


def upgrade_probes(probes, warm_start: bool = True) -> list[list]:
    """Probes of a record written before confirmations (``[length, solved, steps, end]``) with the
    fifth field, how each started (:data:`PROBE_STARTS`): ``warm`` once a shorter length was solved
    under warm starts, else ``init``. Five-field probes are returned as they are.

    >>> upgrade_probes([[8, False, 150, "patience"], [4, True, 60, "solved"], [6, True, 40, "solved"]])
    [[8, False, 150, 'patience', 'init'], [4, True, 60, 'solved', 'init'], [6, True, 40, 'solved', 'warm']]
    """
    out, solution = [], False
    for p in probes:
        out.append(list(p) if len(p) == 5 else [*p, "warm" if warm_start and solution else "init"])
        solution = solution or bool(p[1])
    return out


def unconfirmed_capacity(record: Mapping) -> int:
    """The capacity a search record had before its first confirming probe (the longest length solved
    before it: that probe ran at capacity + 1); the record's capacity when none ran. For a record
    searched again (``redone``: the search it replaced), that of the search it replaced.

    >>> unconfirmed_capacity({"capacity": 9, "probes": [[8, True, 90, "solved", "init"],
    ...     [9, False, 150, "patience", "warm"], [9, True, 310, "solved", "confirm"],
    ...     [10, False, 500, "patience", "confirm"]]})
    8
    """
    if "redone" in record:
        return unconfirmed_capacity(record["redone"])
    first = next((p for p in record["probes"] if len(p) > 4 and p[4] == "confirm"), None)
    return int(record["capacity"]) if first is None else int(first[0]) - 1


def chain_broken(record: Mapping) -> bool:
    """Whether the replays of an extended record failed to rebuild its solution at capacity (a replay
    ran ``max_steps`` steps without solving a length the record had solved): its confirming probe then
    started from a shorter solution, and unless it solved (:func:`search_decided`) :func:`sweep`
    searches the target again from its initial [mem] (a record with ``redone``).

    >>> chain_broken({"replays": [[8, True, 57, "solved"], [15, False, 500, "patience"]]})
    True
    """
    return any(not r[1] for r in record.get("replays", []))


def search_decided(record: Mapping, config: CramConfig) -> bool:
    """Whether a saved search record's capacity is decided under ``config`` (:func:`decided`): records
    of a search that closed on a failure without the full budget are extended by :func:`sweep`. A
    record whose replays broke (:func:`chain_broken`) is decided only once a confirming probe solved
    beyond its capacity (a solution longer than the one lost, from which the search went on).

    >>> cfg = CramConfig.quick(max_steps=500)
    >>> probes = [[8, True, 90, "solved", "init"], [9, False, 150, "patience", "warm"],
    ...           [9, False, 500, "patience", "confirm"]]
    >>> record = {"probes": probes, "capacity_teacher": 8, "replays": [[8, True, 88, "solved"]]}
    >>> search_decided(record, cfg), search_decided({**record, "replays": [[8, False, 500, "budget"]]}, cfg)
    (True, False)
    """
    probes = upgrade_probes(record["probes"], config.warm_start)
    if chain_broken(record) and not any(p[1] and p[4] == "confirm" for p in probes):
        return False
    lo = int(record["capacity_teacher"])
    return decided(probes, lo, shortest_failure(probes, lo)[0], config)


def _finish(lm, slots: _Slots, s: int, index: int, m: int, config: CramConfig, prefix, given,
            extended: Mapping | None = None) -> CramResult:
    """The search of slot ``s`` as a certified result. A search that ``extended`` a saved record keeps
    that record's capacity and certificate where they are longer than what its own [mem] generates
    (the replays could not rebuild the record's solution: :func:`chain_broken`)."""
    teacher = slots.lo[s]
    cert = certify(lm, slots.lo_mem[s], slots.targets[s], teacher, prefix, given, config.prefix_position)
    capacity = given + cert["matched"]
    if extended is not None and int(extended["capacity"]) > capacity:
        capacity, cert = int(extended["capacity"]), extended["certificate"]
    stop = "full" if slots.hi[s] is None else slots.hi_end[s]
    return CramResult(index=index, m=m, capacity=capacity, capacity_teacher=teacher,
                      n_max=config.n_max, steps=slots.total[s], stop=stop, probes=slots.probes[s],
                      replays=slots.replays[s], nonfinite=int(slots.nonfinite[s]),
                      mem=slots.lo_mem[s].cpu().numpy().copy(), certificate=cert)


# --- the published per-point protocol, records and resumable sweeps ---------------------------


def adaptive_scan(point: Callable[[int], float], scan: dict | None = None) -> dict[int, float]:
    """The published scan over n, as we read it: accessibility ``point(n)`` at n_min, n_min +
    coarse, ... while it stays above ``high``; then every ``fine`` tokens from the last coarse point
    above ``high`` until it falls below ``low`` (or n reaches n_max). Returns {n: accessibility}.

    >>> sorted(adaptive_scan(lambda n: float(n < 235), dict(PUBLISHED_SCAN, n_max=400)).items())[-4:]
    [(220, 1.0), (230, 1.0), (240, 0.0), (310, 0.0)]
    """
    s = dict(PUBLISHED_SCAN, **(scan or {}))
    acc: dict[int, float] = {}
    n = s["n_min"]
    while n <= s["n_max"]:
        acc[n] = point(n)
        if acc[n] <= s["high"]:
            break
        n += s["coarse"]
    above = [k for k, a in acc.items() if a > s["high"]]
    n = max(above) + s["fine"] if above else s["n_min"]
    while n <= s["n_max"]:
        if n not in acc:
            acc[n] = point(n)
        if acc[n] < s["low"]:
            break
        n += s["fine"]
    return dict(sorted(acc.items()))


def published_points(lm, targets: torch.Tensor, m: int, config: CramConfig, grid: Sequence[int] | None = None,
                     scan: dict | None = None, **kwargs) -> dict[int, float]:
    """The published per-point protocol: for each n (of ``grid``, or of the :func:`adaptive_scan`),
    one fixed-length run per target with ``config``'s optimiser (:meth:`CramConfig.fixed`);
    accessibility(n) is the fraction reproduced exactly. ``kwargs`` go to :func:`cram`."""
    def point(n: int) -> float:
        results = cram(lm, targets[:, :n], m, config.fixed(n), **kwargs)
        return float(np.mean([r.capacity >= n for r in results]))

    if grid is None:
        return adaptive_scan(point, scan)
    return {int(n): point(int(n)) for n in grid}


def record_key(kind: str, m: int, index: int, n: int | None = None) -> str:
    """Key of one result in a :class:`~accessibility.results.RecordLog`: a search result of target
    ``index`` at m, or (with ``n``) one fixed-length run of the published protocol."""
    return f"{kind}/m={m}/target={index}" if n is None else f"{kind}/m={m}/n={n}/target={index}"


def capacities_by_m(records) -> dict[int, list[int]]:
    """{m: [capacity of each target, in target order]} from search records of one kind.

    >>> capacities_by_m([{"m": 2, "index": 1, "capacity": 9}, {"m": 1, "index": 0, "capacity": 5},
    ...                  {"m": 2, "index": 0, "capacity": 8}])
    {1: [5], 2: [8, 9]}
    """
    by_m: dict[int, list[int]] = {}
    for r in sorted((r for r in records if "n" not in r), key=lambda r: (r["m"], r["index"])):
        by_m.setdefault(int(r["m"]), []).append(int(r["capacity"]))
    return by_m


def points_by_m(records) -> dict[int, dict[int, float]]:
    """{m: {n: accessibility}} from published-protocol records (fraction of targets solved at n).

    >>> points_by_m([{"m": 1, "n": 5, "index": 0, "solved": True},
    ...              {"m": 1, "n": 5, "index": 1, "solved": False}])
    {1: {5: 0.5}}
    """
    runs: dict[int, dict[int, list[bool]]] = {}
    for r in records:
        if "n" in r:
            runs.setdefault(int(r["m"]), {}).setdefault(int(r["n"]), []).append(bool(r["solved"]))
    return {m: {n: float(np.mean(v)) for n, v in sorted(by_n.items())} for m, by_n in sorted(runs.items())}


def lengths_after(records, ms: Sequence[int], count: int, offset: int = 1) -> dict[int, dict[int, int]]:
    """{m: {target index: capacity + offset}} from the search records of a run, for fixed-length runs
    just beyond each certified capacity (:func:`sweep`'s ``lengths``). Targets censored at n_max
    (capacity >= n_max: nothing is known beyond it) are left out.

    >>> lengths_after([{"m": 1, "index": 0, "capacity": 7, "n_max": 9}, {"m": 1, "index": 1, "capacity": 9,
    ...                "n_max": 9}, {"m": 2, "index": 0, "capacity": 12, "n_max": 9}], [1], 2)
    {1: {0: 8}}
    """
    out: dict[int, dict[int, int]] = {int(m): {} for m in ms}
    for r in records:
        if "n" in r or int(r["m"]) not in out or int(r["index"]) >= count:
            continue
        if r.get("n_max") is None or r["capacity"] < r["n_max"]:
            out[int(r["m"])][int(r["index"])] = int(r["capacity"]) + offset
    return {m: dict(sorted(v.items())) for m, v in out.items()}


def shard_from_env(environ=None) -> tuple[int, int]:
    """(rank, world size) of this process under ``torchrun``/``accelerate launch`` (the ``RANK`` and
    ``WORLD_SIZE`` variables), else (0, 1).

    >>> shard_from_env({"RANK": "1", "WORLD_SIZE": "2"}), shard_from_env({})
    ((1, 2), (0, 1))
    """
    env = os.environ if environ is None else environ
    rank, world = int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1))
    if not 0 <= rank < world:
        raise InputError(f"RANK must be in [0, WORLD_SIZE={world}); got {rank}")
    return rank, world


def target_length(config: CramConfig, protocol: str = "search", grid: Sequence[int] | None = None) -> int:
    """Tokens of each target a :func:`sweep` needs: the search's n_max, else the longest n of the grid
    (of the published scan without one).

    >>> target_length(CramConfig.quick()), target_length(CramConfig.quick(), "published", [4, 9])
    (128, 9)
    """
    return config.n_max if protocol == "search" else max(grid or [PUBLISHED_SCAN["n_max"]])


def sweep(lm, kind: str, ms: Sequence[int], count: int, config: CramConfig, *, protocol: str = "search",
          grid: Sequence[int] | None = None, scan: dict | None = None, seed: int = 0, log=None, known=(),
          batch_size: int = 16, progress: bool = False, shard: tuple[int, int] = (0, 1),
          inflight=None, lengths: Mapping[int, Mapping[int, int]] | None = None,
          init_seed: int | None = None) -> list[dict]:
    """Run targets 0..count-1 of ``kind`` at each m under ``protocol``; returns the records.

    ``search``: one record per (m, target) with its certified capacity (:func:`cram`).
    ``published``: one record per (m, n, target) with ``solved`` (a fixed-length run at n), n on
    ``grid`` or on the authors' :func:`adaptive_scan` (``scan`` overrides its constants), or, with
    ``lengths`` ({m: {target index: n}}), at each target's own length (e.g. its capacity + 1 in a
    search run: :func:`lengths_after`), for the targets it names.
    Each result is appended to ``log`` (a :class:`~accessibility.results.RecordLog`) as it comes;
    results already in ``log`` or in ``known`` (records of other logs of the same run, e.g. other
    ranks) are not recomputed, so a killed sweep resumes without losing or repeating work. A search
    record whose deciding failure lacked the full budget (:func:`search_decided`; records written
    before confirmations existed) is extended instead: its confirming probe runs, the search goes on
    if it succeeds, and the extended record replaces it in the log (which keeps both lines; its
    ``seconds`` include the first record's). A record whose replays could not rebuild its solution
    and which stayed undecided (:func:`chain_broken`) is searched again from its target's initial
    [mem], as a new search: the new record replaces it whatever its capacity (which may be shorter
    than the certified capacity of the lost solution), keeps it under ``redone`` ({capacity,
    capacity_teacher, certificate, probes, replays, steps}), and counts its ``steps`` and ``seconds``
    as well.
    ``shard=(rank, world)`` keeps the targets with ``index % world == rank`` (no communication
    between ranks: each writes its own log; a later sweep over all logs merges them).
    ``inflight`` (an :class:`~accessibility.results.Inflight`) keeps the state of the searches in
    flight, so that a killed sweep also resumes its unfinished targets where they were; it is cleared
    when the sweep ends.
    ``seed`` fixes the targets and, unless ``init_seed`` is given, each target's initial [mem]; another
    ``init_seed`` keeps the targets and draws other starts (the control for how far the optimiser's start
    alone moves a result).
    """
    from accessibility.results import latest
    from accessibility.targets import make_targets, target_kind

    one_of("protocol", protocol, PROTOCOLS)
    kind = target_kind(kind)
    rank, world = shard
    if protocol == "published" and grid is None and world > 1:
        raise InputError("the adaptive scan of the published protocol needs every target's result; "
                         "give an explicit --n-grid to split it across processes")
    if lengths is not None:
        grid = sorted({int(n) for per in lengths.values() for n in per.values()}) or [2]
    mine = [i for i in range(count) if i % world == rank]
    targets = make_targets(lm, kind, count, target_length(config, protocol, grid), seed=seed)
    found = {r["key"]: r for r in latest([*known, *(log or [])])}
    final = lambda key: key in found and ("n" in found[key] or search_decided(found[key], config))

    def keep(m: int, n: int | None):
        def write(r: CramResult):
            rec = {"key": record_key(kind, m, r.index, n), "kind": kind, "model": lm.info.name,
                   **r.record(with_mem=n is None)}
            if n is not None:
                rec.update(n=n, solved=r.capacity >= n)
            old = found.get(rec["key"])
            if old is not None and chain_broken(old):    # searched again: it replaces the old record
                rec["redone"] = {k: old[k] for k in REDONE if k in old}
                rec["steps"] += int(old["steps"])
            if log is None:
                found[rec["key"]] = rec
                return
            if old is not None:      # an extended search: its time includes the first record's
                log.carry(old.get("seconds") or 0.0)
            found[rec["key"]] = log.append(rec, replace=old is not None)   # as the log keeps it
        return write

    def run(m: int, n: int | None, only: Sequence[int] | None = None) -> list[dict]:
        todo = [i for i in mine if (only is None or i in only) and not final(record_key(kind, m, i, n))]
        if todo:
            cfg, tg = (config, targets) if n is None else (config.fixed(n), targets[:, :n])
            saved = {} if inflight is None else inflight.states(done={k for k in found if final(k)})
            resume = {i: saved[k] for i in todo if (k := record_key(kind, m, i, n)) in saved}
            reopen = {i: found[k] for i in todo
                      if (k := record_key(kind, m, i, n)) in found and not chain_broken(found[k])}
            checkpoint = None if inflight is None else (
                lambda states: inflight.save({record_key(kind, m, i, n): v for i, v in states.items()}))
            cram(lm, tg[todo], m, cfg, seed=seed if init_seed is None else init_seed, indices=todo,
                 batch_size=batch_size, progress=progress, on_result=keep(m, n), resume=resume,
                 on_checkpoint=checkpoint, reopen=reopen)
        return [found[k] for i in (range(count) if only is None else only)
                if (k := record_key(kind, m, i, n)) in found]

    out = []
    for m in ms:
        if protocol == "search":
            out += run(m, None)
            continue
        points: dict[int, list[dict]] = {}

        def point(n: int, m=m, points=points) -> float:
            points[n] = run(m, n)
            return float(np.mean([r["solved"] for r in points[n]]))

        if lengths is not None:
            own = {i: int(n) for i, n in lengths.get(m, {}).items() if i < count}
            for n in sorted(set(own.values())):
                points[n] = run(m, n, only=[i for i, v in own.items() if v == n])
        elif grid is None:
            adaptive_scan(point, scan)
        else:
            for n in grid:
                point(int(n))
        out += [r for recs in points.values() for r in recs]
    if inflight is not None:
        inflight.clear(done={k for k in found if final(k)})
    return out
