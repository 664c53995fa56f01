"""Copying: how well a model trained on strings up to some length copies strings of every length.

The task of Jelassi et al. (2024) as used by the paper (:mod:`accessibility.copy_task`: examples
``$ s | s .`` with the loss on the copy and the EOS). A string is copied exactly when all ℓ letters
are right (the published metric); with ``count_eos`` the EOS must be right as well. Exact match
under teacher forcing equals that of greedy decoding: the first k argmax predictions are right given
the true prefix if and only if greedy decoding, fed its own (then identical) prefix at every step,
emits those k symbols.

:func:`run_copy` trains a model (:mod:`accessibility.copy_models`) until it meets the stopping rule
(:func:`stopping_rule`: a fresh batch of strings of the training maximum length, drawn at each check,
copied exactly at ``stop_checks`` consecutive checks) or spends its step budget, evaluates string
and character accuracy at lengths far beyond the training maximum, with Clopper-Pearson intervals,
at every integer length across the cliff, and the length ``copy_n50`` where string accuracy crosses
50%. Models and results are cached under a hash of every setting that changes them;
training writes a checkpoint at every check of the stopping rule (and, stopped by Ctrl-C or
SIGTERM, after the step in flight), so a killed run resumes.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from accessibility.checks import InputError, at_least, in_range, positive, seed
from accessibility.copy_models import MAX_POSITIONS, CopyModel, CopyModelConfig, build_model
from accessibility.copy_task import BOS_ID, IGNORE, SEP_ID, TASK_VERSION, Batch, eval_batch, packed_batch
from accessibility.models import torch_threads
from accessibility.results import held_signals, torch_generator

#: Keys of the independent random streams (with the seed, and the step of the check or the length):
#: training data, the fresh batch of each check of the stopping rule, each evaluation length (adding a
#: length changes no other). No string of a check is ever an evaluation string.
TRAIN_STREAM, STOP_STREAM, EVAL_STREAM = 0, 1, 2
#: Step budget of the CPU preset (:meth:`CopyConfig.quick`).
QUICK_BUDGET = 20_000
#: The longest string ℓ a model trains or is evaluated on: an example (BOS, ℓ letters, separator,
#: ℓ letters, EOS) must fit the :data:`~accessibility.copy_models.MAX_POSITIONS` positions of a model.
MAX_LENGTH = (MAX_POSITIONS - 3) // 2


@dataclass(frozen=True)
class CopyConfig:
    """Training and evaluation of one copy model; ``CopyConfig.quick()`` / ``.paper()`` presets.

    Attributes
    ----------
    model : the architecture (:class:`~accessibility.copy_models.CopyModelConfig`).
    train_lengths : (low, high), the range of ℓ in training.
    rows, row_tokens : a training batch is ``rows`` rows of ``row_tokens`` packed tokens.
    lr, weight_decay, betas : AdamW.
    warmup_steps : linear warm-up of the learning rate to ``lr``, then linear decay to 0 at
        ``max_steps`` (see :func:`learning_rate`).
    max_steps : the step budget.
    clip_norm : gradient-norm clipping.
    check_every : steps between checks of the stopping rule (and checkpoints).
    stop_strings : strings of length ``train_lengths[1]`` drawn afresh at each check (never
        trained on, never evaluated); a check passes when every one is copied exactly.
    stop_checks : training stops when this many consecutive checks pass (:func:`stopping_rule`).
    count_eos : exact match also requires the EOS after the copy; default: the ℓ letters only (the
        published metric). Used by the stopping rule and the evaluation.
    eval_lengths : lengths ℓ evaluated, one batched forward pass each (the training maximum is
        always evaluated too: fresh strings of the length the stopping rule checks).
    eval_cliff : also evaluate every integer length across the fall of string accuracy, so that
        ``copy_n50`` is resolved to one letter (see :func:`cliff_lengths`).
    eval_strings : strings per evaluation length.
    alpha : 1 - confidence level of the intervals.
    seed : model initialisation, training stream, held-out and evaluation strings.
    """

    model: CopyModelConfig = field(default_factory=CopyModelConfig)
    train_lengths: tuple[int, int] = (5, 20)
    rows: int = 16
    row_tokens: int = 128
    lr: float = 3e-3
    weight_decay: float = 0.1
    betas: tuple[float, float] = (0.9, 0.98)
    warmup_steps: int = 100
    max_steps: int = QUICK_BUDGET
    clip_norm: float = 1.0
    check_every: int = 25
    stop_strings: int = 128
    stop_checks: int = 2
    count_eos: bool = False
    eval_lengths: tuple[int, ...] = (5, 10, 15, 20, 25, 30, 40, 50, 60)
    eval_cliff: bool = True
    eval_strings: int = 200
    alpha: float = 0.05
    seed: int = 0

    def __post_init__(self):
        low, high = self.train_lengths
        at_least("train_lengths[0]", low, 1, integer=True)
        at_least("train_lengths[1]", high, low, integer=True)
        for name in ("rows", "max_steps", "check_every", "stop_strings", "stop_checks", "eval_strings"):
            at_least(name, getattr(self, name), 1, integer=True)
        in_range("train_lengths[1]", high, low, MAX_LENGTH)
        at_least("row_tokens", self.row_tokens, 2 * high + 3, integer=True)
        in_range("row_tokens", self.row_tokens, 2 * high + 3, MAX_POSITIONS)
        at_least("warmup_steps", self.warmup_steps, 0, integer=True)
        positive("lr", self.lr)
        at_least("weight_decay", self.weight_decay, 0)
        in_range("betas", self.betas, 0, 1)
        positive("clip_norm", self.clip_norm)
        in_range("alpha", self.alpha, 1e-6, 0.5)
        for name in ("count_eos", "eval_cliff"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"{name} must be True or False; got {getattr(self, name)!r}", name)
        if not self.eval_lengths:
            raise InputError("eval_lengths must not be empty", "eval_lengths")
        at_least("eval_lengths", self.eval_lengths, 1, integer=True)
        in_range("eval_lengths", self.eval_lengths, 1, MAX_LENGTH)
        seed("seed", self.seed)
        object.__setattr__(self, "eval_lengths", tuple(sorted({int(n) for n in self.eval_lengths})))
        object.__setattr__(self, "train_lengths", (int(low), int(high)))

    @classmethod
    def quick(cls, arch: str = "rope", **changes) -> CopyConfig:
        """CPU preset: width 128, 2 layers, ℓ in [5, 20], evaluated to ℓ = 60 (the defaults).

        16 rows of 128 tokens, AdamW at lr 3e-3 (from scratch; the published fine-tuning uses
        1e-5), weight decay 0.1 and the linear schedule as published, with 100 warm-up steps; the
        stopping rule is checked every 25 steps on 128 fresh strings of length 20 and must pass at
        2 consecutive checks, exact match without the EOS as published. The budget,
        :data:`QUICK_BUDGET` steps, is the one every architecture got in the shipped runs
        (``copy-<arch>``); a model that meets the stopping rule stops earlier.
        """
        return cls(model=CopyModelConfig.quick(arch), **changes)

    @classmethod
    def demo(cls, arch: str = "rope", quick: bool = False, **changes) -> CopyConfig:
        """A small model that learns to copy within a CPU-minute, for a live demonstration: the
        quick preset at width 128 on lengths 2..12 with 16 rows of 64 tokens, a budget of 1500
        steps (100 of them warm-up), evaluated at every length from 2 to 3x the training maximum; with
        ``quick``, width 64, lengths 2..8 and 600 steps (60 warm-up). Measured on one core of this
        kind of machine (RoPE): the rule met at step 1100 after 51 s of CPU time, and with ``quick``
        at step 475 after 14 s."""
        width, high, budget, warmup = (64, 8, 600, 60) if quick else (128, 12, 1500, 100)
        model = replace(CopyModelConfig.quick(arch), d_model=width)
        settings = dict(train_lengths=(2, high), rows=16, row_tokens=64, max_steps=budget,
                        warmup_steps=warmup,
                        eval_lengths=tuple(range(2, 3 * high + 1)))
        return cls(model=model, **(settings | changes))

    @classmethod
    def paper(cls, arch: str = "rope", allow_download: bool = False, **changes) -> CopyConfig:
        """The published setting, for GPU users: Pythia-160m fine-tuned on ℓ in [5, 50] with AdamW
        at lr 1e-5 and weight decay 0.1, a linear schedule, 2 rows of 2048 packed tokens, at most
        10k steps, stopping at the first check (every 500 steps) at which 12 strings of length 50
        are all copied exactly (without the EOS); evaluated at ℓ = 10..1000. Settings the
        publication leaves open or that differ here are listed in :data:`PAPER_DIFFERENCES`."""
        settings = dict(train_lengths=(5, 50), rows=2, row_tokens=2048, lr=1e-5, weight_decay=0.1,
                        betas=(0.9, 0.999), warmup_steps=0, max_steps=10_000, clip_norm=1.0,
                        check_every=500, stop_strings=12, stop_checks=1, count_eos=False, eval_strings=100,
                        eval_lengths=tuple(range(10, 100, 10)) + tuple(range(100, 1001, 50)))
        return cls(model=CopyModelConfig.paper(arch, allow_download), **(settings | changes))

    @classmethod
    def from_dict(cls, d: dict) -> CopyConfig:
        """Inverse of :func:`dataclasses.asdict` (for configs read back from JSON)."""
        d = dict(d)
        tuples = {k: tuple(d[k]) for k in ("train_lengths", "betas", "eval_lengths") if k in d}
        return cls(**{**d, **tuples, "model": CopyModelConfig(**d["model"])})

    def training_part(self) -> dict:
        """The settings that change the trained model (the key of the model cache), with the
        version of the data generator; not whether downloads are allowed."""
        part = {k: v for k, v in asdict(self).items() if k not in EVAL_FIELDS}
        part["model"].pop("allow_download")
        return part | {"task_version": TASK_VERSION}


#: The fields of CopyConfig that change the evaluation only, not the trained model.
EVAL_FIELDS = ("eval_lengths", "eval_strings", "eval_cliff", "alpha")

#: Where :meth:`CopyConfig.paper` departs from the published run or fills in a setting the
#: publication does not state: CopyConfig field -> what was published and what is done here.
PAPER_DIFFERENCES = {
    "eval_strings": "published: 12 strings per length; here more, so that the Clopper-Pearson "
                    "intervals are informative",
    "eval_lengths": "published: ℓ from 10 to 1000, grid not stated",
    "betas": "not stated; the torch and Hugging Face Trainer default (AdamW epsilon 1e-8 likewise)",
    "warmup_steps": "not stated; none, the Hugging Face Trainer default",
    "clip_norm": "not stated; the Hugging Face Trainer default (max_grad_norm)",
    "model": "published: Pythia-160m and Pythia-410m; the preset fine-tunes Pythia-160m (410m: set "
             "CopyModelConfig.pretrained with its shape)",
    "stop_checks": "published: stop at the first check at which the 12 strings are exact (whether they "
                   "are drawn afresh at each check is not stated; here they are)",
    "seed": "not stated",
}


def learning_rate(step: int, config: CopyConfig) -> float:
    """Linear warm-up to ``lr`` over ``warmup_steps``, then linear decay to 0 at ``max_steps`` (the
    decay of the Hugging Face ``linear`` schedule; its warm-up starts at 0, this one at lr/warmup).

    >>> c = CopyConfig(lr=1.0, warmup_steps=10, max_steps=110)
    >>> [round(learning_rate(s, c), 3) for s in (0, 9, 10, 60, 110)]
    [0.1, 1.0, 1.0, 0.5, 0.0]
    >>> learning_rate(0, CopyConfig(lr=1.0, warmup_steps=0, max_steps=4))
    1.0
    """
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    return config.lr * max(0.0, (config.max_steps - step) / max(1, config.max_steps - config.warmup_steps))


def copy_loss(model: CopyModel, batch: Batch) -> torch.Tensor:
    """Mean cross-entropy over the target positions (the copy and the EOS)."""
    logits = model(batch.ids)  # (rows, T, vocab)
    return F.cross_entropy(logits.flatten(0, 1), batch.targets.flatten(), ignore_index=IGNORE)


@torch.no_grad()
def teacher_forced(model: CopyModel, batch: Batch) -> torch.Tensor:
    """Whether each target is the argmax given the true prefix: bool ``(n, ℓ + 1)``, one forward pass.

    Expects :func:`eval_batch` rows (one example each, same length).
    """
    predictions = model(batch.ids).argmax(-1)  # (n, T)
    scored = batch.targets != IGNORE
    per_row = int(scored[0].sum())
    return (predictions == batch.targets)[scored].view(-1, per_row)


def exact_match(right: torch.Tensor, count_eos: bool = False) -> torch.Tensor:
    """Which strings are copied exactly, from :func:`teacher_forced`'s ``(n, ℓ + 1)`` verdicts: all
    ℓ letters right (the published metric), and with ``count_eos`` the EOS too.

    >>> right = torch.tensor([[True, True, False], [True, True, True]])  # ℓ = 2, then the EOS
    >>> exact_match(right).tolist(), exact_match(right, count_eos=True).tolist()
    ([True, True], [False, True])
    """
    return (right if count_eos else right[:, :-1]).all(1)


@torch.no_grad()
def greedy_copy(model: CopyModel, strings: torch.Tensor) -> torch.Tensor:
    """Greedy decoding after ``$ s |``: the ℓ + 1 emitted ids, ``(n, ℓ + 1)``.

    Recomputes the full forward pass at every step (no cache): an independent check of
    :func:`teacher_forced`, not a fast path.
    """
    n, length = strings.shape
    column = torch.ones(n, 1, dtype=torch.long, device=strings.device)
    ids = torch.cat([BOS_ID * column, strings, SEP_ID * column], 1)
    for _ in range(length + 1):
        ids = torch.cat([ids, model(ids)[:, -1].argmax(-1, keepdim=True)], 1)
    return ids[:, length + 2:]


@dataclass
class TrainLog:
    """How training went: steps taken, whether the stopping rule (:func:`stopping_rule`) was met,
    wall-clock and CPU time (of all the process's threads, summed over resumed sessions), the loss
    of every step and the checks of the stopping rule."""

    steps: int
    rule_met: bool
    train_seconds: float
    cpu_seconds: float
    losses: list[float]
    checks: list[tuple[int, float]]  # (step, exact-match accuracy on that check's fresh strings)


def stopping_rule(config: CopyConfig) -> str:
    """The stopping rule of ``config``, in words.

    >>> stopping_rule(CopyConfig())
    'every 25 steps, 128 fresh strings of length 20; stop when all are copied exactly at 2 consecutive checks'
    """
    when = ("at the first check where all are copied exactly" if config.stop_checks == 1 else
            f"when all are copied exactly at {config.stop_checks} consecutive checks")
    return (f"every {config.check_every} steps, {config.stop_strings} fresh strings of length "
            f"{config.train_lengths[1]}; stop {when}")


def passed_in_a_row(checks: list[tuple[int, float]]) -> int:
    """How many of the last checks passed (every string exact), counted back from the last one.

    >>> passed_in_a_row([(25, 1.0), (50, 0.99), (75, 1.0), (100, 1.0)])
    2
    """
    run = 0
    for _, accuracy in reversed(checks):
        if accuracy < 1.0:
            break
        run += 1
    return run


def stopping_outcome(log: TrainLog, max_steps: int) -> str:
    """How a run ended, in words: the step where the stopping rule was met, or the budget spent.

    >>> stopping_outcome(TrainLog(1875, True, 0, 0, [], []), 20_000)
    'met at step 1875'
    >>> stopping_outcome(TrainLog(20_000, False, 0, 0, [], []), 20_000)
    'not met in 20000 steps (budget spent)'
    """
    if log.rule_met:
        return f"met at step {log.steps}"
    if log.steps < max_steps:
        return f"not met after {log.steps} of {max_steps} steps (interrupted)"
    return f"not met in {max_steps} steps (budget spent)"


def train(config: CopyConfig, *, device: str | torch.device = "cpu", progress: bool = False,
          model: CopyModel | None = None, checkpoint: str | Path | None = None) -> tuple[CopyModel, TrainLog]:
    """Train a copy model (a fresh one from ``config.model`` unless given) until it meets the
    stopping rule (:func:`stopping_rule`) or has taken ``max_steps`` steps.

    Each check draws ``stop_strings`` fresh strings of the maximum training length from its own
    stream (keyed by the seed and the step) and passes when every one is copied exactly; training
    stops after ``stop_checks`` consecutive passing checks.

    With ``checkpoint``, the model, optimiser, data stream and log are written to that file at every
    check of the stopping rule and when training ends, and training resumes from it when it exists: a
    run killed and started again ends with the same model and log as one never interrupted (times
    aside). Ctrl-C or SIGTERM stops training after the step in flight, writes the checkpoint there
    and raises KeyboardInterrupt (a second one stops at once), so an interrupted run loses no step.
    """
    from tqdm import tqdm  # not tqdm.auto, as in cramming: without ipywidgets it warns on import

    model = model if model is not None else build_model(config.model, seed=config.seed, device=device)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, betas=config.betas,
                                  weight_decay=config.weight_decay)
    data = torch_generator(config.seed, TRAIN_STREAM)
    log = TrainLog(0, False, 0.0, 0.0, [], [])
    if checkpoint is not None and Path(checkpoint).exists():
        log = _resume(Path(checkpoint), model, optimizer, data, device)
    spent, cpu_spent = log.train_seconds, log.cpu_seconds  # by earlier sessions of a resumed run
    start, cpu_start = time.perf_counter(), time.process_time()

    def save():
        log.train_seconds = spent + time.perf_counter() - start
        log.cpu_seconds = cpu_spent + time.process_time() - cpu_start
        if checkpoint is not None:
            _save_checkpoint(Path(checkpoint), model, optimizer, data, log)

    end = log.steps if log.rule_met else config.max_steps      # a checkpoint saved as the rule was met
    with tqdm(range(log.steps, end), initial=log.steps, total=config.max_steps,
              disable=not progress, desc=f"copy {config.model.arch}") as bar, held_signals() as held:
        for step in bar:
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, config)
            batch = packed_batch(config.rows, config.row_tokens, config.train_lengths, data)
            loss = copy_loss(model, batch.to(device))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.clip_norm)
            optimizer.step()
            log.losses.append(loss.item())
            log.steps = step + 1
            if log.steps % config.check_every == 0:
                fresh = eval_batch(config.train_lengths[1], config.stop_strings,
                                   torch_generator(config.seed, STOP_STREAM, log.steps))
                model.eval()
                right = exact_match(teacher_forced(model, fresh.to(device)), config.count_eos)
                accuracy = right.float().mean().item()
                model.train()
                log.checks.append((log.steps, accuracy))
                log.rule_met = passed_in_a_row(log.checks) >= config.stop_checks
                bar.set_postfix(loss=f"{log.losses[-1]:.3f}", exact=f"{accuracy:.2f}")
                if log.rule_met:
                    break
                save()
            if held.signal is not None:       # Ctrl-C or SIGTERM during this step: stop after it
                break
        save()     # where training stopped (the rule met, the budget spent between two checks, or a held
        # signal, which the block's end then raises as KeyboardInterrupt)
    model.eval()
    return model, log


def _save_checkpoint(path: Path, model, optimizer, data: torch.Generator, log: TrainLog) -> None:
    """Write the training state atomically (a temporary file, then a rename)."""
    partial = path.with_name(path.name + ".partial")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "data": data.get_state(),
                "log": asdict(log)}, partial)
    os.replace(partial, path)


def _resume(path: Path, model, optimizer, data: torch.Generator, device) -> TrainLog:
    """Load a checkpoint written by :func:`_save_checkpoint` into the given objects; its log."""
    state = torch.load(path, map_location=device, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    data.set_state(state["data"])
    log = state["log"]
    return TrainLog(**{**log, "checks": [tuple(c) for c in log["checks"]]})


@dataclass(frozen=True)
class LossTrend:
    """The training loss at the end of a run: its mean over the last ``window`` steps (``last``)
    and over the ``window`` steps before them (``before``), and the least-squares slope over the
    last window, per 1000 steps."""

    window: int
    before: float
    last: float
    slope_per_1k: float


def loss_trend(log: TrainLog, window: int) -> LossTrend:
    """How the loss moved at the end of training (see :class:`LossTrend`); ``window`` is cut to half
    the steps when there are fewer than two windows.

    >>> loss_trend(TrainLog(6, False, 0, 0, [6.0, 5.0, 4.0, 3.0, 2.0, 1.0], []), window=3)
    LossTrend(window=3, before=5.0, last=2.0, slope_per_1k=-1000.0)
    """
    at_least("window", window, 1, integer=True)
    losses = np.asarray(log.losses, dtype=float)
    if losses.size < 2:
        raise InputError(f"loss_trend needs at least 2 logged steps; got {losses.size}")
    window = min(int(window), losses.size // 2)
    last, before = losses[-window:], losses[-2 * window:-window]
    slope = np.polyfit(np.arange(window), last, 1)[0] * 1000 if window > 1 else math.nan
    return LossTrend(window, float(before.mean()), float(last.mean()), float(slope))


def clopper_pearson(k, n: int, alpha: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """Exact two-sided 1 - alpha interval for a binomial proportion with k successes in n.

    >>> lo, hi = clopper_pearson(np.array([0, 200]), 200)
    >>> float(lo[0]), round(float(hi[0]), 4), round(float(lo[1]), 4), float(hi[1])
    (0.0, 0.0183, 0.9817, 1.0)
    """
    from scipy.stats import beta

    k = np.asarray(k, dtype=float)
    lo = np.where(k > 0, beta.ppf(alpha / 2, k, n - k + 1), 0.0)
    hi = np.where(k < n, beta.ppf(1 - alpha / 2, k + 1, n - k), 1.0)
    return np.nan_to_num(lo), np.nan_to_num(hi, nan=1.0)


@dataclass
class CopyEval:
    """Accuracy against length. Arrays are indexed like ``lengths``.

    Attributes
    ----------
    lengths : ℓ evaluated.
    n_strings : strings per length.
    correct : strings copied exactly (all ℓ letters; and the EOS if ``count_eos``).
    accuracy, ci_low, ci_high : exact-match string accuracy and its Clopper-Pearson interval.
    char_accuracy : fraction of the ℓ copied characters predicted right given the true prefix.
    position_accuracy : for each length, accuracy at each of the ℓ + 1 target positions (the last
        is the EOS).
    count_eos : whether exact match required the EOS.
    """

    lengths: np.ndarray
    n_strings: int
    correct: np.ndarray
    accuracy: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    char_accuracy: np.ndarray
    position_accuracy: list[np.ndarray]
    count_eos: bool = False

    @classmethod
    def from_json(cls, d: dict) -> CopyEval:
        """Inverse of :func:`accessibility.results.to_json` of a CopyEval."""
        scalars = ("n_strings", "position_accuracy", "count_eos")
        arrays = {k: np.asarray(v) for k, v in d.items() if k not in scalars}
        positions = [np.asarray(a) for a in d["position_accuracy"]]
        return cls(**arrays, n_strings=d["n_strings"], position_accuracy=positions,
                   count_eos=d.get("count_eos", True))  # records before the option counted the EOS


def evaluate(model: CopyModel, lengths, n_strings: int, *, seed: int = 0, alpha: float = 0.05,
             count_eos: bool = False, device: str | torch.device = "cpu") -> CopyEval:
    """Teacher-forced accuracy of ``n_strings`` fresh strings at each length, one forward pass each;
    exact match as in :func:`exact_match`."""
    lengths = np.asarray(sorted({int(n) for n in lengths}))
    model.eval()
    right = []
    for length in lengths:
        batch = eval_batch(int(length), n_strings, torch_generator(seed, EVAL_STREAM, int(length)))
        right.append(teacher_forced(model, batch.to(device)).cpu())
    correct = np.array([int(exact_match(r, count_eos).sum()) for r in right])
    lo, hi = clopper_pearson(correct, n_strings, alpha)
    return CopyEval(lengths=lengths, n_strings=n_strings, correct=correct, accuracy=correct / n_strings,
                    ci_low=lo, ci_high=hi,
                    char_accuracy=np.array([r[:, :-1].float().mean().item() for r in right]),
                    position_accuracy=[r.float().mean(0).numpy() for r in right], count_eos=count_eos)


@dataclass(frozen=True)
class CopyN50:
    """``n50``: the length where string accuracy first falls below 1/2 (linear interpolation between
    evaluated lengths; NaN if it is already below at the shortest, inf if never); [low, high]: the
    longest length of the leading run whose interval lies above 1/2 and the shortest length whose
    interval lies below it. For accuracy that falls with length this brackets the crossing at
    confidence about 1 - alpha, and no tighter than the evaluation grid."""

    n50: float
    low: float
    high: float


def copy_n50(result: CopyEval) -> CopyN50:
    """The copy analogue of n_50 with its bracketing interval (see :class:`CopyN50`).

    >>> e = CopyEval(np.array([10, 20, 30]), 100, np.array([100, 60, 40]), np.array([1, .6, .4]),
    ...              np.array([.96, .5, .3]), np.array([1, .7, .49]), None, None)
    >>> copy_n50(e)  # halfway between 20 (60%) and 30 (40%)
    CopyN50(n50=25.0, low=10.0, high=30.0)
    """
    L, acc = result.lengths.astype(float), result.accuracy
    below = np.flatnonzero(acc < 0.5)
    if below.size == 0:
        n50 = math.inf
    elif below[0] == 0:
        n50 = math.nan
    else:
        i = below[0]
        n50 = L[i - 1] + (acc[i - 1] - 0.5) / (acc[i - 1] - acc[i]) * (L[i] - L[i - 1])
    above = np.cumprod(result.ci_low > 0.5).astype(bool)
    low = float(L[above][-1]) if above.any() else 0.0
    confidently_below = np.flatnonzero(result.ci_high < 0.5)
    high = float(L[confidently_below[0]]) if confidently_below.size else math.inf
    return CopyN50(float(n50), low, high)


#: Accuracy at which a length counts as copied well when :func:`cliff_lengths` looks for the top of the fall.
CLIFF_TOP = 0.9


def cliff_span(result: CopyEval) -> tuple[int, int] | None:
    """The lengths across the fall of string accuracy: from the last evaluated length before the
    first one below 1/2 whose accuracy is at least :data:`CLIFF_TOP` (else the shortest) to the first
    length from there on where no string is copied (else the longest). None when accuracy never
    falls below 1/2 or is below it at the shortest length.

    >>> L, correct = np.array([5, 10, 20, 25, 30]), np.array([200, 196, 194, 0, 0])
    >>> cliff_span(CopyEval(L, 200, correct, correct / 200, None, None, None, None))
    (20, 25)
    """
    L, acc = result.lengths, result.accuracy
    below = np.flatnonzero(acc < 0.5)
    if below.size == 0 or below[0] == 0:
        return None
    i = below[0]
    top = np.flatnonzero(acc[:i] >= CLIFF_TOP)
    zero = np.flatnonzero(result.correct[i:] == 0)
    return (int(L[top[-1]]) if top.size else int(L[0]), int(L[i + zero[0]]) if zero.size else int(L[-1]))


def cliff_lengths(result: CopyEval) -> list[int]:
    """The integer lengths of :func:`cliff_span` not evaluated yet."""
    span = cliff_span(result)
    return [] if span is None else sorted(set(range(span[0], span[1] + 1)) - set(result.lengths.tolist()))


def evaluate_config(model: CopyModel, config: CopyConfig, device: str | torch.device = "cpu") -> CopyEval:
    """:func:`evaluate` at ``config.eval_lengths`` and the training maximum, then, with
    ``config.eval_cliff``, at every length :func:`cliff_lengths` adds, until it adds none."""
    lengths = set(config.eval_lengths) | {config.train_lengths[1]}
    while True:
        result = evaluate(model, lengths, config.eval_strings, seed=config.seed, alpha=config.alpha,
                          count_eos=config.count_eos, device=device)
        extra = cliff_lengths(result) if config.eval_cliff else []
        if not extra:
            return result
        lengths |= set(extra)


def fresh_at_max(result: CopyEval, config: CopyConfig) -> dict:
    """Exact-match accuracy, with its interval, on the evaluation's strings of the maximum training
    length (the length the stopping rule checks; no check ever used these strings)."""
    high = config.train_lengths[1]
    i = list(result.lengths).index(high)
    return {"length": high, "n_strings": result.n_strings, "accuracy": float(result.accuracy[i]),
            "ci": [float(result.ci_low[i]), float(result.ci_high[i])]}


@dataclass
class CopyRun:
    """One trained model and its evaluation (see :func:`run_copy`)."""

    config: CopyConfig
    model: CopyModel
    log: TrainLog
    eval: CopyEval
    n50: CopyN50
    folder: Path
    cached: bool

    def summary(self) -> dict:
        """The JSON-ready record printed by ``accessibility copy --json``."""
        e = self.eval
        return {
            "arch": self.config.model.arch, "train_lengths": list(self.config.train_lengths),
            "accuracy": dict(zip(e.lengths.tolist(), e.accuracy.tolist())),
            "accuracy_ci": {int(n): [lo, hi]
                            for n, lo, hi in zip(e.lengths, e.ci_low.tolist(), e.ci_high.tolist())},
            "char_accuracy": dict(zip(e.lengths.tolist(), e.char_accuracy.tolist())),
            "n_strings": e.n_strings, "copy_n50": self.n50.n50, "copy_n50_ci": [self.n50.low, self.n50.high],
            "train_seconds": self.log.train_seconds, "cpu_seconds": self.log.cpu_seconds,
            "count_eos": e.count_eos, "steps": self.log.steps, "max_steps": self.config.max_steps,
            "stopping_rule": stopping_rule(self.config), "stopping_rule_met": self.log.rule_met,
            "lr_fraction_at_stop": learning_rate(self.log.steps - 1, self.config) / self.config.lr,
            "fresh_at_max": fresh_at_max(e, self.config), "cached": self.cached, "folder": str(self.folder),
        }


def run_copy(config: CopyConfig, *, out: str | Path | None = None, device: str | torch.device = "cpu",
             progress: bool = False, retrain: bool = False, threads: int | None = None) -> CopyRun:
    """Train (or load from the cache) and evaluate one copy model.

    The model lives in ``<out>/copy-<hash of config.training_part()>/`` (``out`` defaults to
    ``cache_dir()/copying``) with ``config.json``, ``model.pt`` and ``train.json``; each evaluation in
    ``eval-<hash of the evaluation settings>.json`` next to them. While training, ``checkpoint.pt``
    there holds the state at the last check of the stopping rule (or at the step where Ctrl-C or
    SIGTERM stopped it), and a run started again resumes
    from it (see :func:`train`). ``retrain`` ignores a cached model and a checkpoint; ``threads``
    sets torch's thread count for the run (see :func:`accessibility.models.torch_threads`).
    """
    with torch_threads(threads):
        return _run_copy(config, out, device, progress, retrain)


def _run_copy(config, out, device, progress, retrain) -> CopyRun:
    from accessibility import cache_dir
    from accessibility.results import config_hash, read_json, run_folder, write_json

    out = Path(out) if out is not None else cache_dir() / "copying"
    folder = run_folder(out, "copy", config.training_part())
    weights, train_json, checkpoint = folder / "model.pt", folder / "train.json", folder / "checkpoint.pt"
    cached = weights.exists() and train_json.exists() and not retrain
    if retrain:
        checkpoint.unlink(missing_ok=True)
    if cached:
        model = build_model(config.model, seed=config.seed, device=device)
        model.load_state_dict(torch.load(weights, map_location=device, weights_only=True))
        model.eval()
        log = TrainLog(**read_json(train_json))
    else:
        model, log = train(config, device=device, progress=progress, checkpoint=checkpoint)
        torch.save(model.state_dict(), weights)
        write_json(train_json, log)
        checkpoint.unlink(missing_ok=True)
    evaluation = {**{k: getattr(config, k) for k in EVAL_FIELDS}, "seed": config.seed,
                  "count_eos": config.count_eos, "task_version": TASK_VERSION}
    eval_json = folder / f"eval-{config_hash(evaluation)}.json"
    if eval_json.exists() and cached:
        result = CopyEval.from_json(read_json(eval_json)["eval"])
    else:
        result = evaluate_config(model, config, device)
        write_json(eval_json, {"settings": evaluation, "eval": result})
    return CopyRun(config, model, log, result, copy_n50(result), folder, cached)


@dataclass
class CopyRecord:
    """A saved run without its weights: what a chapter reads (see :func:`load_record`). It has the
    ``config``, ``log``, ``eval`` and ``n50`` of a :class:`CopyRun`."""

    config: CopyConfig
    log: TrainLog
    eval: CopyEval
    n50: CopyN50
    command: str


def saved_summary(run: CopyRun) -> dict:
    """What ``accessibility copy`` saves as the run's summary besides its printed record: the training
    log (losses to 4 digits, a small file) and the full evaluation."""
    return {"log": replace(run.log, losses=[float(f"{x:.4g}") for x in run.log.losses]), "eval": run.eval}


def load_record(folder_or_name: str | Path) -> CopyRecord:
    """Read a run saved by ``accessibility copy --save DIR``, or a shipped one by name (``copy-rope``;
    :func:`accessibility.results.load_run`)."""
    from accessibility.results import load_run

    run = load_run(folder_or_name)
    result = CopyEval.from_json(run.summary["eval"])
    return CopyRecord(CopyConfig.from_dict(run.config["config"]), TrainLog(**run.summary["log"]), result,
                      copy_n50(result), run.command)


def with_arch(config: CopyConfig, arch: str) -> CopyConfig:
    """The same training and evaluation with another architecture of the same size."""
    return replace(config, model=replace(config.model, arch=arch))
