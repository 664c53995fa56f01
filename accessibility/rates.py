"""Per-token information rates of cramming targets: what replaces ln|V| when targets are not uniform.

Corollary 4.6 counts sequences, so it constrains *uniformly random* targets, whose rate is ln|V| nats
per token. For targets drawn from a distribution Q the accessible ones carry probability at most
:math:`P^m \\max_s Q(s)`, so the slope becomes :math:`C_Q = \\ln P / h_\\infty` with the min-entropy rate
:math:`h_\\infty = -\\frac1n \\ln \\max_s Q(s)` (:func:`accessibility.bounds.target_slope`).

Q is not known for text; a reference language model stands in for it. :func:`target_rates` reads two
rates off the model's log-probabilities:

``entropy``
    the mean of :math:`-\\ln p(t_i \\mid t_{<i})` over the targets' tokens: the cross-entropy of the
    target text under the model, an estimate of the entropy rate. Used in place of :math:`h_\\infty`
    it gives the *typical-sequence heuristic* slope, not a bound.
``greedy``
    :math:`-\\frac1n \\ln Q(g)` for the greedy continuation g of each target's first token, averaged:
    for Q = the model, every sequence s has :math:`Q(s) \\le \\max Q`, so this is an **upper** bound on
    the min-entropy rate (it would be the rate itself if greedy found the most probable sequence), and
    :math:`\\ln P/h_{\\text{greedy}}` is a lower bound on the rigorous slope :math:`C_Q`.

For words drawn uniformly from a list, the rate is known without a model:
:func:`accessibility.bounds.word_rate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from accessibility.checks import InputError, at_least


@dataclass(frozen=True)
class TargetRates:
    """Per-token rates (nats) of a set of targets under a reference model.

    Attributes
    ----------
    model : the reference model's name.
    targets : number of targets; tokens : scored tokens per target (tokens 2..n, token 1 is context).
    entropy : mean -ln p(t_i | t_<i) of the targets' tokens (cross-entropy; entropy-rate estimate).
    greedy : mean -(1/n) ln Q(greedy continuation of t_1): an upper bound on the min-entropy rate of
        Q = the model.
    """

    model: str
    targets: int
    tokens: int
    entropy: float
    greedy: float


def _context(lm, targets: torch.Tensor) -> torch.Tensor:
    """The targets with the model's BOS (or its fixed prefix token) in front, as the model reads text."""
    first = lm.info.bos_token_id if lm.info.bos_token_id is not None else lm.info.prefix_token_id
    if first is None:
        return targets
    return torch.cat([torch.full((targets.shape[0], 1), first, dtype=targets.dtype), targets], dim=1)


@torch.no_grad()
def token_log_probs(lm, targets: torch.Tensor) -> torch.Tensor:
    """ln p(t_i | t_<i) for tokens 2..n of each target, shape (count, n - 1)."""
    ids = _context(lm, targets).to(lm.device)
    offset = ids.shape[1] - targets.shape[1]  # 1 with a BOS/prefix in front
    logits = lm.model(input_ids=ids).logits[:, offset:-1].float()  # predictions of tokens 2..n
    return logits.log_softmax(-1).gather(-1, ids[:, offset + 1:, None]).squeeze(-1).cpu()


@torch.no_grad()
def greedy_log_probs(lm, targets: torch.Tensor, n: int) -> torch.Tensor:
    """ln p of each of ``n`` greedy tokens continuing each target's first token, shape (count, n).

    Uses the model's own ``generate`` (no end-of-sequence stop), with the raw logits of every step.
    """
    from transformers import GenerationConfig

    ids = _context(lm, targets[:, :1]).to(lm.device)
    gen = GenerationConfig(do_sample=False, max_new_tokens=int(at_least("n", n, 1, integer=True)),
                           min_new_tokens=0, eos_token_id=None, pad_token_id=0, bos_token_id=None,
                           output_logits=True, return_dict_in_generate=True)
    out = lm.model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gen)
    chosen = out.sequences[:, ids.shape[1]:]                                  # (count, n)
    logp = torch.stack(out.logits, dim=1).float().log_softmax(-1)            # (count, n, vocab)
    return logp.gather(-1, chosen[..., None]).squeeze(-1).cpu()


def target_rates(lm, targets: torch.Tensor) -> TargetRates:
    """Entropy and greedy (min-entropy upper bound) rates of ``targets`` (count, n) under ``lm``."""
    targets = torch.as_tensor(targets)
    if targets.ndim != 2 or targets.shape[1] < 2:
        raise InputError(f"targets must have shape (count, n) with n >= 2, got {tuple(targets.shape)}")
    scored = token_log_probs(lm, targets)
    greedy = greedy_log_probs(lm, targets, targets.shape[1] - 1)
    return TargetRates(model=lm.info.name, targets=targets.shape[0], tokens=scored.shape[1],
                       entropy=float(-scored.mean()), greedy=float(-greedy.mean()))
