"""Cramming: how long a sequence fits in m trainable prompt vectors (Kuratov et al. 2025).

A frozen causal LM reads ``[prefix] [mem]_1..[mem]_m t_1 .. t_{L-1}``; only the m vectors [mem]
(shape (m, d_model)) are trained, so that the teacher-forced argmax reproduces the target. Greedy
decoding from ``[prefix] [mem] t_1`` then emits t_2..t_L exactly when every teacher-forced argmax is
right, so the longest correct prefix ``c`` of one forward pass is the length the prompt reproduces
(the *prefix property*). Accessibility at length n is the fraction of targets with ``c >= n``.

The engine (:func:`cram`) runs many targets in one forward pass, each with its own [mem] rows, its
own AdamW state (:func:`adamw_step`, element-wise and per row) and its own step count; rows are
grouped by padded length (:data:`PAD_MULTIPLE`), so a batch reproduces one-at-a-time runs bit for bit.
A row is snapshotted each time its prefix grows and leaves the batch when done; a new target takes
its slot (continuous batching). The per-target capacity search grows the target length
geometrically, warm-started from the current [mem] and optimiser state, until a stage fails for
``patience`` steps or the step budget is spent. Each result is certified by a real greedy
``generate`` from the found prompt, without autocast (fp32 weights by default); the certified
length is the one reported. :mod:`accessibility.law` turns per-target capacities into
accessibility curves, n_50(m) and the linear law.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm  # not tqdm.auto: in a notebook without ipywidgets it warns on import

from accessibility.checks import InputError, at_least, in_range, one_of, positive
from accessibility.results import torch_generator
from accessibility.targets import INIT_STREAM

#: Autocast dtypes for the optimisation (certification runs without autocast). No fp16: it needs a
#: gradient scaler, which the published pipeline omitted.
DTYPES = ("float32", "bfloat16")
#: Why a target's search ended: it reached n_max, a stage made no progress for ``patience`` steps,
#: or ``max_steps`` were spent.
STOPS = ("full", "patience", "budget")
#: Forward passes between updates of the progress bar's pass counter.
PROGRESS_EVERY = 10
#: Rows are padded to a multiple of this many tokens and each bucket of equal padded length runs as
#: one forward pass. A row's arithmetic then depends on its own length only, not on its batch
#: companions (reductions over a padded sequence round differently for different padded lengths),
#: so batched runs reproduce one-at-a-time runs bit for bit, and padding wastes < 16 tokens a row.
PAD_MULTIPLE = 16


@dataclass(frozen=True)
class CramConfig:
    """How [mem] vectors are optimised and how each target's capacity is searched.

    Attributes
    ----------
    lr, betas, weight_decay, adam_eps : AdamW hyper-parameters (decoupled weight decay, no schedule).
    max_steps : optimiser steps per target in total, all stages together.
    patience : a stage fails after this many steps without more correct tokens in it.
    n_start, growth, n_max : stage lengths n_start, ceil(n_start*growth), ... capped at n_max (tokens,
        the given first token included). ``growth=1`` with ``n_start=n_max`` is the published
        fixed-length run.
    first_token_given : t_1 is fed as input and only t_2..t_n are predicted (published protocol), or
        [mem] must also produce t_1.
    prefix : ``"auto"`` (the model's ``info.prefix_token_id``), ``"none"`` ([mem] at position 0) or a
        token id placed before [mem]. Llama-style models use position 0 as an attention sink.
    init_scale : [mem] starts as N(0, 1) times this times the std of the input embeddings of the real
        tokens (as the model's embedding module returns them; Gemma scales by sqrt(d)).
    dtype : autocast dtype for the optimisation, "float32" (CPU) or "bfloat16" (GPU).
    """

    lr: float = 1e-2
    betas: tuple[float, float] = (0.9, 0.9)
    weight_decay: float = 0.01
    adam_eps: float = 1e-8
    max_steps: int = 3000
    patience: int = 500
    n_start: int = 8
    growth: float = 1.5
    n_max: int = 256
    first_token_given: bool = True
    prefix: str | int = "auto"
    init_scale: float = 1.0
    dtype: str = "float32"

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
        one_of("dtype", self.dtype, DTYPES)
        if not (self.prefix in ("auto", "none") or (isinstance(self.prefix, int) and self.prefix >= 0)):
            raise InputError(f"prefix must be 'auto', 'none' or a token id >= 0; got {self.prefix!r}")

    @classmethod
    def paper(cls, **changes) -> CramConfig:
        """The published optimiser: AdamW lr 1e-2, betas (0.9, 0.9), wd 0.01, 3000 steps, patience 500.

        Published quirks not copied: fp16 autocast without a gradient scaler (we use fp32 or bf16) and
        one fixed n per run (we grow n; set ``growth=1, n_start=n_max=n`` for the fixed-n protocol).
        """
        return replace(cls(), **changes)

    @classmethod
    def quick(cls, **changes) -> CramConfig:
        """What converges in minutes on CPU: lr 0.1, at most 300 steps, patience 100."""
        return replace(cls(lr=0.1, max_steps=300, patience=100, n_start=4, growth=1.25, n_max=128), **changes)

    @classmethod
    def preset(cls, name: str, **changes) -> CramConfig:
        one_of("preset", name, ("paper", "quick"))
        return getattr(cls, name)(**changes)


@dataclass
class CramResult:
    """One target crammed into m vectors.

    ``capacity`` is the certified length (tokens reproduced by greedy ``generate``, the given first
    token included); ``capacity_teacher`` the teacher-forced prefix found during optimisation (equal
    to it unless generate and the training forward disagree on a near tie). ``steps`` is the number
    of optimiser steps at the snapshot; ``steps_run`` all steps spent; ``stop`` is "full" (reached
    n_max), "patience" or "budget". ``mem`` has shape (m, d_model).
    """

    index: int
    m: int
    capacity: int
    capacity_teacher: int
    n_max: int
    steps: int
    steps_run: int
    stop: str
    mem: np.ndarray = field(repr=False)
    certificate: dict = field(default_factory=dict, repr=False)

    def record(self) -> dict:
        """A JSON-friendly dict ([mem] as a float32 list)."""
        out = {k: getattr(self, k) for k in ("index", "m", "capacity", "capacity_teacher", "n_max",
                                             "steps", "steps_run", "stop", "certificate")}
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


def prefix_token(lm, config: CramConfig) -> int | None:
    """The token placed before [mem], or None for [mem] at position 0."""
    if config.prefix == "auto":
        return lm.info.prefix_token_id
    return None if config.prefix == "none" else int(config.prefix)


def embedding_std(lm) -> float:
    """Std of all entries of the input embeddings of the real tokens, as the model embeds them."""
    ids = torch.as_tensor(lm.info.real_token_ids, device=lm.device)
    with torch.no_grad():
        return float(lm.embed(ids).float().std())


def build_inputs(lm, mem, tokens, prefix: int | None) -> torch.Tensor:
    """``[prefix] mem tokens`` as input embeddings, shape (rows, [1] + m + tokens.shape[1], d)."""
    parts = [mem.to(lm.input_embeddings().dtype), lm.embed(tokens)]
    if prefix is not None:
        pre = lm.embed(torch.tensor([[prefix]], device=tokens.device))
        parts.insert(0, pre.expand(mem.shape[0], 1, -1))
    return torch.cat(parts, dim=1)


def teacher_forced(lm, mem, targets, lengths, prefix, given: int, dtype: str = "float32",
                   pad_to: int | None = None):
    """Per-row loss, correct count and longest correct prefix of one teacher-forced pass.

    ``mem`` (rows, m, d); ``targets`` (rows, >= pad_to); ``lengths`` (rows,) tokens per row. Rows
    are right-padded to ``pad_to`` tokens (default: the longest row); causal attention makes the
    padding invisible to earlier positions. Only the positions that predict target tokens get
    logits. Returns ``loss`` (rows,), mean cross-entropy over each row's predicted tokens;
    ``correct`` (rows,); ``prefix_len`` (rows,), the given first token included.
    """
    L = int(pad_to or lengths.max())
    tokens = targets[:, :L]                                   # (rows, L)
    inputs = build_inputs(lm, mem, tokens[:, :L - 1], prefix)
    keep = L - given                                          # positions predicting t_{1+given}..t_L
    with torch.autocast(inputs.device.type, dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
        logits = lm.model(inputs_embeds=inputs, logits_to_keep=keep, use_cache=False).logits
    logits = logits.to(torch.promote_types(logits.dtype, torch.float32))   # (rows, keep, V)
    gold = tokens[:, given:]                                  # (rows, keep)
    valid = torch.arange(keep, device=gold.device) < (lengths - given)[:, None]
    ce = F.cross_entropy(logits.transpose(1, 2), gold, reduction="none")
    loss = (ce * valid).sum(1) / valid.sum(1)
    ok = (logits.argmax(-1) == gold) & valid
    prefix_len = given + ok.long().cumprod(1).sum(1)
    return loss, ok.sum(1), prefix_len


def padded_length(lengths: torch.Tensor) -> torch.Tensor:
    """Each row's length rounded up to a multiple of :data:`PAD_MULTIPLE` (its bucket)."""
    return (lengths + PAD_MULTIPLE - 1) // PAD_MULTIPLE * PAD_MULTIPLE


@torch.no_grad()
def certify(lm, mem, target, capacity: int, prefix, given: int) -> dict:
    """Greedy ``generate`` (fp32) from ``[prefix] mem [t_1]``: tokens emitted and how many match.

    Returns ``{"generated": ids, "matched": k, "ok": k == capacity - given}``; the certified length
    is ``given + matched``.
    """
    from transformers import GenerationConfig

    want = capacity - given
    if want <= 0:
        return {"generated": [], "matched": 0, "ok": True}
    lead = target[None, :given]                               # (1, given)
    inputs = build_inputs(lm, mem[None], lead, prefix)
    gen = GenerationConfig(do_sample=False, max_new_tokens=want, min_new_tokens=0, eos_token_id=None,
                           pad_token_id=0, bos_token_id=None)
    mask = torch.ones(inputs.shape[:2], dtype=torch.long, device=inputs.device)
    out = lm.model.generate(inputs_embeds=inputs, attention_mask=mask, generation_config=gen)
    out = out[0, -want:].tolist()
    expect = target[given:capacity].tolist()
    matched = next((i for i, (a, b) in enumerate(zip(out, expect)) if a != b), len(out))
    return {"generated": out, "matched": matched, "ok": matched == want}


class _Slots:
    """Optimisation state of the targets in the batch, one row per slot."""

    def __init__(self, size: int, m: int, d: int, n_max: int, device, dtype):
        z = lambda *s, dt=dtype: torch.zeros(*s, dtype=dt, device=device)
        self.mem, self.exp_avg, self.exp_avg_sq, self.best_mem = (z(size, m, d) for _ in range(4))
        width = int(padded_length(torch.tensor(n_max)))
        self.targets = torch.zeros(size, width, dtype=torch.long, device=device)
        self.step, self.length, self.best, self.best_step, self.stage_best, self.since = (
            z(size, dt=torch.long) for _ in range(6))
        self.owner: list[int | None] = [None] * size   # position in the caller's target list
        self.stop: list[str | None] = [None] * size

    def fill(self, s: int, owner: int, target, mem0, n_start: int, given: int):
        self.owner[s] = owner
        self.targets[s, :len(target)] = target                 # beyond n_max: padding (token 0)
        self.mem[s], self.best_mem[s] = mem0, mem0
        for t in (self.exp_avg, self.exp_avg_sq):
            t[s] = 0
        for t, v in ((self.step, 0), (self.length, n_start), (self.best, given), (self.best_step, 0),
                     (self.stage_best, -1), (self.since, 0)):
            t[s] = v


def initial_mem(index: int, m: int, d: int, std: float, seed: int) -> torch.Tensor:
    """[mem] of target ``index`` before training: N(0, 1) * std, shape (m, d), from its own stream."""
    return torch.randn(m, d, generator=torch_generator(seed, INIT_STREAM, index, m)) * std


def cram(lm, targets: torch.Tensor, m: int, config: CramConfig, *, seed: int = 0,
         indices: Sequence[int] | None = None, batch_size: int = 16, progress: bool = False,
         on_result: Callable[[CramResult], None] | None = None) -> list[CramResult]:
    """Cram each target into m vectors and find its capacity; results in the order of ``targets``.

    ``targets`` (K, >= n_max) token ids; ``indices`` (default 0..K-1) name the targets for their
    random initialisation, so a target's result does not depend on the batch it runs in.
    ``on_result`` is called as each target finishes (to write it to a log at once).
    """
    at_least("m", m, 1, integer=True)
    at_least("batch_size", batch_size, 1, integer=True)
    targets = torch.as_tensor(targets)
    if targets.dim() != 2 or targets.shape[1] < config.n_max:
        raise InputError(f"targets must have shape (K, >= n_max={config.n_max}); got {tuple(targets.shape)}")
    indices = list(range(len(targets))) if indices is None else list(indices)
    device, d = lm.device, lm.info.d_model
    std = embedding_std(lm) * config.init_scale
    prefix, given = prefix_token(lm, config), int(config.first_token_given)
    state_dtype = torch.promote_types(lm.input_embeddings().dtype, torch.float32)  # never below fp32
    slots = _Slots(min(batch_size, len(targets)), m, d, config.n_max, device, state_dtype)
    pending, results = list(range(len(targets))), [None] * len(targets)
    bar = tqdm(total=len(targets), desc=f"cram m={m}", disable=not progress, leave=False)
    passes = 0
    while pending or any(o is not None for o in slots.owner):
        for s in range(len(slots.owner)):
            if slots.owner[s] is None and pending:
                k = pending.pop(0)
                mem0 = initial_mem(indices[k], m, d, std, seed).to(device)
                slots.fill(s, k, targets[k, :config.n_max].to(device), mem0, config.n_start, given)
        passes += 1
        if progress and passes % PROGRESS_EVERY == 0:
            bar.set_postfix(passes=passes, longest_stage=int(slots.length.max()))
        for s in _step(lm, slots, config, prefix, given):
            k = slots.owner[s]
            results[k] = _finish(lm, slots, s, indices[k], m, config, prefix, given)
            slots.owner[s] = None
            bar.update(1)
            if on_result is not None:
                on_result(results[k])
    bar.close()
    return results


def _step(lm, slots: _Slots, config: CramConfig, prefix, given: int) -> list[int]:
    """One forward/backward over the active slots; updates them and returns the slots now done."""
    act = torch.tensor([s for s, o in enumerate(slots.owner) if o is not None], device=slots.mem.device)
    mem = slots.mem[act].clone().requires_grad_(True)                       # (b, m, d)
    length = slots.length[act]
    correct, plen = torch.zeros_like(length), torch.zeros_like(length)
    bucket = padded_length(length)
    for pad in bucket.unique().tolist():
        rows = (bucket == pad).nonzero()[:, 0]
        loss, correct[rows], plen[rows] = teacher_forced(
            lm, mem[rows], slots.targets[act[rows]], length[rows], prefix, given, config.dtype, pad_to=pad)
        loss.sum().backward()        # rows are independent: each row's gradient is its own loss's
    with torch.no_grad():
        better = plen > slots.best[act]
        slots.best[act] = torch.where(better, plen, slots.best[act])
        slots.best_step[act] = torch.where(better, slots.step[act], slots.best_step[act])
        slots.best_mem[act[better]] = mem[better].detach()
        cleared = plen >= length                                            # stage solved: grow
        full = cleared & (length >= config.n_max)
        grown = torch.maximum(torch.ceil(length * config.growth).long(), length + 1).clamp(max=config.n_max)
        slots.length[act] = torch.where(cleared, grown, length)
        gain = correct > slots.stage_best[act]
        slots.since[act] = torch.where(cleared | gain, 0, slots.since[act] + 1)
        slots.stage_best[act] = torch.where(cleared, -1, torch.maximum(correct, slots.stage_best[act]))
        stuck = slots.since[act] >= config.patience
        spent = slots.step[act] >= config.max_steps
        done = full | stuck | spent
        for s, why in zip(act[done].tolist(), torch.where(full, 0, torch.where(stuck, 1, 2))[done].tolist()):
            slots.stop[s] = STOPS[why]
        live = ~done
        rows = act[live]
        p, ea, eas = mem.detach()[live], slots.exp_avg[rows], slots.exp_avg_sq[rows]
        step = slots.step[rows] + 1
        adamw_step(p, mem.grad[live], ea, eas, step, lr=config.lr, betas=config.betas,
                   weight_decay=config.weight_decay, eps=config.adam_eps)
        slots.mem[rows], slots.exp_avg[rows], slots.exp_avg_sq[rows], slots.step[rows] = p, ea, eas, step
    return act[done].tolist()


def _finish(lm, slots: _Slots, s: int, index: int, m: int, config: CramConfig, prefix, given) -> CramResult:
    """The snapshot of slot ``s`` as a certified result."""
    teacher = int(slots.best[s])
    cert = certify(lm, slots.best_mem[s], slots.targets[s], teacher, prefix, given)
    return CramResult(index=index, m=m, capacity=given + cert["matched"], capacity_teacher=teacher,
                      n_max=config.n_max, steps=int(slots.best_step[s]), steps_run=int(slots.step[s]),
                      stop=slots.stop[s], mem=slots.best_mem[s].cpu().numpy().copy(), certificate=cert)


# --- the published per-point protocol and resumable sweeps ----------------------------------


def accessibility_points(lm, targets: torch.Tensor, m: int, ns: Sequence[int], config: CramConfig,
                         **kwargs) -> np.ndarray:
    """The published per-point protocol: for each n, one fixed-length run per target (no growth);
    accessibility(n) is the fraction reproduced exactly. ``kwargs`` go to :func:`cram`."""
    from accessibility.law import accessibility_curve

    out = []
    for n in ns:
        fixed = replace(config, n_start=int(n), n_max=int(n), growth=1.0)
        capacities = [r.capacity for r in cram(lm, targets[:, :n], m, fixed, **kwargs)]
        out.append(accessibility_curve(capacities, [n])[0])
    return np.array(out)


def record_key(kind: str, m: int, index: int) -> str:
    """Key of one (target, m) result in a :class:`~accessibility.results.RecordLog`."""
    return f"{kind}/m={m}/target={index}"


def capacities_by_m(records) -> dict[int, list[int]]:
    """{m: [capacity of each target, in target order]} from the records of one kind, the mapping
    :func:`sweep` returns (for :func:`accessibility.law.summarize`).

    >>> capacities_by_m([{"m": 2, "index": 1, "capacity": 9}, {"m": 1, "index": 0, "capacity": 5},
    ...                  {"m": 2, "index": 0, "capacity": 8}])
    {1: [5], 2: [8, 9]}
    """
    by_m: dict[int, list[int]] = {}
    for r in sorted(records, key=lambda r: (r["m"], r["index"])):
        by_m.setdefault(int(r["m"]), []).append(int(r["capacity"]))
    return by_m


def sweep(lm, kind: str, ms: Sequence[int], count: int, config: CramConfig, *, seed: int = 0,
          log=None, batch_size: int = 16, progress: bool = False, extra: dict | None = None) -> dict:
    """Capacities of targets 0..count-1 of ``kind`` for each m: {m: [capacity, ...]}.

    With a :class:`~accessibility.results.RecordLog` ``log``, each result is appended as it comes
    (with ``extra`` fields such as the config hash) and targets already in the log are skipped, so a
    killed sweep resumes without losing or repeating work.
    """
    from accessibility.targets import make_targets

    targets = make_targets(lm, kind, count, config.n_max, seed=seed)
    found = {}
    if log is not None:
        found = {r["key"]: r["capacity"] for r in log}

    def keep(r: CramResult):
        key = record_key(kind, r.m, r.index)
        found[key] = r.capacity
        if log is not None:
            log.append({"key": key, "kind": kind, "model": lm.info.name, **(extra or {}), **r.record()})

    for m in ms:
        todo = [i for i in range(count) if record_key(kind, m, i) not in found]
        if todo:
            cram(lm, targets[todo], m, config, seed=seed, indices=todo, batch_size=batch_size,
                 progress=progress, on_result=keep)
    return {m: [found[record_key(kind, m, i)] for i in range(count)] for m in ms}
