"""Frozen causal language models, loaded offline, with a description of what they are.

:func:`load_model` returns a :class:`LoadedModel`: the model (eval mode, gradients off), its
tokenizer (``None`` for the toy model) and a :class:`ModelInfo` with the facts every experiment needs
(width d, vocabulary size |V|, which rows are real tokens, BOS convention, context length, dtype).

Names
-----
``toy``
    A tiny GPT-NeoX built from a config with a fixed seed (no file at all): d = 64, 2 layers,
    |V| = 16, initialisation std 0.3. With these defaults the cramming law shows in minutes on a CPU;
    with the default init (std 0.02) or a 512-token vocabulary it does not (SPEC §8).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from accessibility.checks import InputError, at_least, positive

#: Defaults of the toy model: the smallest setting that shows the cramming law (SPEC §8).
TOY_D_MODEL = 64
TOY_LAYERS = 2
TOY_VOCAB = 16
TOY_HEADS = 4
#: Std of the toy's initial weights. 0.02 (the usual value) gives a model too smooth to cram.
TOY_INIT_STD = 0.3
TOY_CONTEXT = 1024


class ModelUnavailableError(InputError):
    """The model is not on disk (and downloads are not allowed); the message says how to get it."""


@dataclass(frozen=True)
class ModelInfo:
    """What a loaded model is.

    Attributes
    ----------
    name : the name it was loaded by.
    d_model : width d of the residual stream (rows of the final hidden state).
    vocab_size : |V|, rows of the unembedding matrix W_U (may exceed the tokenizer's size).
    real_token_ids : ids of rows that are real tokens (padding rows of W_U excluded), sorted.
    bos_token_id : the id the model expects at position 0 of a text, or None.
    prefix_token_id : default fixed token placed before the [mem] vectors when cramming, or None
        for [mem] at position 0 (Llama-style models use position 0 as an attention sink).
    context_length : the largest number of positions the model was trained on.
    dtype : the dtype of its weights.
    source : where the weights came from (a path, or "config" for random init).
    quantization : e.g. "Q4_1" when the weights were dequantized from a quantized file.
    """

    name: str
    d_model: int
    vocab_size: int
    real_token_ids: tuple[int, ...] = field(repr=False)
    bos_token_id: int | None
    prefix_token_id: int | None
    context_length: int
    dtype: torch.dtype
    source: str
    quantization: str | None = None

    @property
    def n_real_tokens(self) -> int:
        return len(self.real_token_ids)


@dataclass
class LoadedModel:
    model: torch.nn.Module
    tokenizer: object | None
    info: ModelInfo

    def input_embeddings(self) -> torch.Tensor:
        """The input-embedding matrix, shape (vocab_size, d_model)."""
        return self.model.get_input_embeddings().weight

    def unembedding(self) -> torch.Tensor:
        """W_U, shape (vocab_size, d_model): logits = h @ W_U.T (+ bias where the model has one)."""
        return self.model.get_output_embeddings().weight


def _freeze(model: torch.nn.Module) -> torch.nn.Module:
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def load_toy(d_model: int = TOY_D_MODEL, n_layers: int = TOY_LAYERS, vocab_size: int = TOY_VOCAB,
             n_heads: int = TOY_HEADS, init_std: float = TOY_INIT_STD, seed: int = 0,
             context_length: int = TOY_CONTEXT, dtype: torch.dtype = torch.float32,
             device: str | torch.device = "cpu") -> LoadedModel:
    """A tiny random GPT-NeoX, identical for identical arguments (no file, no download).

    >>> toy = load_toy()
    >>> toy.info.d_model, toy.info.vocab_size, toy.info.n_real_tokens
    (64, 16, 16)
    >>> bool((load_toy().unembedding() == toy.unembedding()).all())
    True
    """
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    at_least("d_model", d_model, 1, integer=True)
    at_least("n_layers", n_layers, 1, integer=True)
    at_least("vocab_size", vocab_size, 2, integer=True)
    positive("init_std", init_std)
    if d_model % n_heads:
        raise InputError(f"d_model must be a multiple of n_heads={n_heads}, got {d_model}")
    config = GPTNeoXConfig(
        vocab_size=vocab_size, hidden_size=d_model, num_hidden_layers=n_layers,
        num_attention_heads=n_heads, intermediate_size=4 * d_model,
        max_position_embeddings=context_length, initializer_range=init_std,
        bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPTNeoXForCausalLM(config)
    model = _freeze(model.to(device=device, dtype=dtype))
    info = ModelInfo(
        name="toy", d_model=d_model, vocab_size=vocab_size, real_token_ids=tuple(range(vocab_size)),
        bos_token_id=None, prefix_token_id=None, context_length=context_length, dtype=dtype,
        source="config",
    )
    return LoadedModel(model=model, tokenizer=None, info=info)


def load_model(name: str, *, dtype: torch.dtype | None = None, device: str | torch.device = "cpu",
               allow_download: bool = False, **options) -> LoadedModel:
    """Load a frozen causal LM by name, from disk only unless ``allow_download``.

    ``options`` go to the loader of that name (for ``toy``: :func:`load_toy`'s arguments).
    """
    key = name.strip().lower()
    if key == "toy":
        return load_toy(dtype=dtype or torch.float32, device=device, **options)
    raise ModelUnavailableError(f"model {name!r} is not available offline (known: toy)")
