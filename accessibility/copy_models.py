"""The model zoo of the copy task: one transformer family with a positional-encoding switch, and an LSTM.

Every model maps token ids of shape ``(batch, T)`` to next-token logits ``(batch, T, vocab_size)``
through the same :class:`CopyModel` interface, so training, evaluation and greedy decoding in
:mod:`accessibility.copying` never look at the architecture.

Architectures (``CopyModelConfig.arch``)
----------------------------------------
``rope``
    GPT-NeoX (the Pythia architecture) with rotary embeddings on every head dimension.
``nope``
    The same GPT-NeoX with the rotary fraction set to 0: no positional information at all except
    what causal masking lets the model infer.
``alibi``
    The ``nope`` model plus the ALiBi bias :math:`-m_h (i - j)` of Press et al. added to the
    attention scores of head h (query i, key j), passed as a 4-D additive attention mask. One
    architecture for all three encodings, so they differ in the encoding only. (Falcon has an
    ``alibi`` switch too, but computes the bias in bfloat16 and scales it by
    :math:`1/\\sqrt{d_{head}}`; here it is the published formula, in float32.)
``lstm``
    A torch LSTM: the recurrent baseline, whose whole memory of the string is a state of
    ``2 * n_layers * d_model`` numbers, fixed whatever the length.

With ``pretrained`` set (the ``paper`` preset), a causal LM is loaded from disk (from the hub only
with ``allow_download``) and its embeddings resized to the 30 symbols of the task, as in the
published fine-tuning of Pythia-160m.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from accessibility.checks import InputError, at_least, one_of, positive

#: Positional encodings of the transformer family, then the recurrent baseline.
ARCHITECTURES = ("rope", "nope", "alibi", "lstm")
#: 26 letters + BOS, separator, EOS and pad (see :mod:`accessibility.copying`).
COPY_VOCAB_SIZE = 30
#: Context length of the from-scratch transformers: rotary tables and the ALiBi bias cover it.
MAX_POSITIONS = 4096
#: Std of the initial weights of the from-scratch transformers (the GPT-NeoX default).
INIT_STD = 0.02
#: Pythia-160m, the model the published copying experiment fine-tunes.
PAPER_MODEL = "EleutherAI/pythia-160m"


@dataclass(frozen=True)
class CopyModelConfig:
    """A copy-task model.

    Attributes
    ----------
    arch : one of :data:`ARCHITECTURES`.
    d_model : width of the residual stream (of the LSTM state for ``lstm``).
    n_layers : transformer blocks or stacked LSTM layers.
    n_heads : attention heads (unused by ``lstm``).
    mlp_ratio : width of the transformer's MLP relative to d_model (unused by ``lstm``).
    pretrained : name or folder of a causal LM to fine-tune instead of a from-scratch model
        (``rope`` only; its own width, depth and rotary fraction then apply).
    allow_download : let ``pretrained`` come from the hub when it is not on disk.
    """

    arch: str = "rope"
    d_model: int = 128
    n_layers: int = 2
    n_heads: int = 4
    mlp_ratio: int = 2
    pretrained: str | None = None
    allow_download: bool = False

    def __post_init__(self):
        one_of("arch", self.arch, ARCHITECTURES)
        at_least("d_model", self.d_model, 1, integer=True)
        at_least("n_layers", self.n_layers, 1, integer=True)
        at_least("n_heads", self.n_heads, 1, integer=True)
        at_least("mlp_ratio", self.mlp_ratio, 1, integer=True)
        if self.arch != "lstm" and self.d_model % self.n_heads:
            raise InputError(f"d_model must be a multiple of n_heads={self.n_heads}, got {self.d_model}",
                             "d_model")
        if self.pretrained is not None and self.arch != "rope":
            raise InputError(f"pretrained models are fine-tuned as they are (arch 'rope'); "
                             f"got arch {self.arch!r}")

    @classmethod
    def quick(cls, arch: str = "rope") -> CopyModelConfig:
        """Width 128, 2 layers, 4 heads, MLP ratio 2 (the defaults): copying needs attention
        more than MLP width, and half the usual MLP makes a training step about a quarter cheaper."""
        return cls(arch=arch)

    @classmethod
    def paper(cls, arch: str = "rope", allow_download: bool = False) -> CopyModelConfig:
        """Pythia-160m fine-tuned (``rope``); the other encodings from scratch at its shape."""
        if arch == "rope":
            return cls(arch=arch, d_model=768, n_layers=12, n_heads=12, pretrained=PAPER_MODEL,
                       allow_download=allow_download)
        return cls(arch=arch, d_model=768, n_layers=2 if arch == "lstm" else 12, n_heads=12, mlp_ratio=4)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi head slopes :math:`m_h`, shape ``(n_heads,)`` (Press et al. 2022).

    For a power of two H they are :math:`m_h = 2^{-8h/H}`, h = 1..H; otherwise those of the
    nearest smaller power of two, completed by every other slope of the next power of two.

    >>> alibi_slopes(4).tolist()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> alibi_slopes(6).tolist() == alibi_slopes(4).tolist() + alibi_slopes(8)[0::2][:2].tolist()
    True
    """
    at_least("n_heads", n_heads, 1, integer=True)
    base = 2 ** math.floor(math.log2(n_heads))
    slopes = [2.0 ** (-8.0 * h / base) for h in range(1, base + 1)]
    extra = [2.0 ** (-8.0 * h / (2 * base)) for h in range(1, 2 * base + 1, 2)]
    return torch.tensor(slopes + extra[: n_heads - base])


def alibi_bias(n_heads: int, T: int, device=None) -> torch.Tensor:
    """Additive attention mask ``(1, n_heads, T, T)``: :math:`-m_h (i - j)` for keys j <= i, -inf after.

    >>> alibi_bias(2, 3)[0, 0]
    tensor([[-0.0000, -inf, -inf],
            [-0.0625, -0.0000, -inf],
            [-0.1250, -0.0625, -0.0000]])
    """
    pos = torch.arange(T, device=device)
    distance = (pos[:, None] - pos[None, :]).float()  # (T, T), query minus key
    bias = -alibi_slopes(n_heads).to(device)[:, None, None] * distance  # (H, T, T)
    return bias.masked_fill(distance < 0, float("-inf"))[None]


class CopyModel(nn.Module):
    """Token ids ``(batch, T)`` -> logits ``(batch, T, vocab)``, whatever the architecture."""

    def __init__(self, config: CopyModelConfig, net: nn.Module):
        super().__init__()
        self.config = config
        self.net = net
        self._alibi: torch.Tensor | None = None  # the ALiBi mask of the longest input so far

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        if self.config.arch == "lstm":
            return self.net(ids)
        if self.config.arch == "alibi":
            return self.net(ids, attention_mask=self.alibi_mask(ids.shape[1], ids.device)).logits
        return self.net(ids).logits

    def alibi_mask(self, T: int, device) -> torch.Tensor:
        """:func:`alibi_bias` for T positions, cut from a cached mask: -m_h (i - j) depends on i - j
        only, so the mask of T positions is the top-left block of any longer one."""
        cached = self._alibi
        if cached is None or cached.shape[-1] < T or cached.device != torch.device(device):
            cached = self._alibi = alibi_bias(self.config.n_heads, T, device=device)
        return cached[..., :T, :T]


class LSTMLanguageModel(nn.Module):
    """Embedding -> stacked LSTM -> linear read-out: the recurrent baseline."""

    def __init__(self, vocab_size: int, d_model: int, n_layers: int):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.lstm = nn.LSTM(d_model, d_model, num_layers=n_layers, batch_first=True)
        self.unembed = nn.Linear(d_model, vocab_size)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden, _ = self.lstm(self.embed(ids))  # (batch, T, d_model)
        return self.unembed(hidden)


def _transformer(config: CopyModelConfig, vocab_size: int) -> nn.Module:
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    hf_config = GPTNeoXConfig(
        vocab_size=vocab_size, hidden_size=config.d_model, num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads, intermediate_size=config.mlp_ratio * config.d_model,
        max_position_embeddings=MAX_POSITIONS, initializer_range=INIT_STD,
        rotary_pct=1.0 if config.arch == "rope" else 0.0,  # 0: no rotary dimension at all (NoPE)
        attention_dropout=0.0, hidden_dropout=0.0, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )
    return GPTNeoXForCausalLM(hf_config)


def _pretrained(config: CopyModelConfig, vocab_size: int) -> nn.Module:
    from transformers import AutoModelForCausalLM

    from accessibility.models import ModelUnavailableError

    try:
        net = AutoModelForCausalLM.from_pretrained(config.pretrained, dtype=torch.float32,
                                                   local_files_only=not config.allow_download)
    except OSError as err:
        hint = "" if config.allow_download else " (pass --allow-download to fetch it from the hub)"
        raise ModelUnavailableError(f"cannot load {config.pretrained!r} from disk{hint}: {err}") from None
    net.resize_token_embeddings(vocab_size)  # the first 30 rows, as the published fine-tuning does
    return net


def build_model(config: CopyModelConfig, *, seed: int = 0, vocab_size: int = COPY_VOCAB_SIZE,
                device: str | torch.device = "cpu") -> CopyModel:
    """A fresh copy-task model in training mode; identical weights for identical arguments.

    >>> m = build_model(CopyModelConfig(arch="alibi", d_model=16, n_layers=1, n_heads=2))
    >>> m(torch.zeros(3, 7, dtype=torch.long)).shape
    torch.Size([3, 7, 30])
    """
    at_least("vocab_size", vocab_size, 2, integer=True)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if config.pretrained is not None:
            net = _pretrained(config, vocab_size)
        elif config.arch == "lstm":
            net = LSTMLanguageModel(vocab_size, config.d_model, config.n_layers)
        else:
            net = _transformer(config, vocab_size)
    return CopyModel(config, net).to(device).train()


def n_parameters(model: nn.Module) -> int:
    """Number of trainable parameters."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def state_size(config: CopyModelConfig, T: int) -> int:
    """Numbers the model carries from the string to the copy at context length T.

    An LSTM carries ``2 * n_layers * d_model`` (h and c of every layer) whatever T; a transformer
    keeps keys and values of every earlier position, ``2 * n_layers * d_model * T``.

    >>> state_size(CopyModelConfig(arch="lstm"), 100), state_size(CopyModelConfig(), 100)
    (512, 51200)
    """
    positive("T", T)
    per_position = 2 * config.n_layers * config.d_model
    return per_position if config.arch == "lstm" else per_position * int(T)
