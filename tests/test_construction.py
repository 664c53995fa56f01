"""accessibility.construction: the hand-built transformer emits every sampled sequence of length k·m
under real greedy decoding, attains Corollary 4.6's slope, and factors through rounding to its grid."""

import math

import pytest
import torch

from accessibility import bounds
from accessibility import construction as K
from accessibility.checks import InputError

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model():
    return K.DigitTransformer(K.DigitConfig(d_model=8, vocab_size=16, digits=2, max_vectors=4))


@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_every_sampled_sequence_is_reproduced_by_greedy_decoding(model, m):
    cert = K.certify(model, m, 24, generator=torch.Generator().manual_seed(m))
    assert cert.length == 16 * m and cert.all_reproduced and cert.samples == 24


def test_k_attains_the_slope_at_the_construction_eps(model):
    cfg = model.config
    assert cfg.eps == pytest.approx(2 / 255) and cfg.tokens_per_vector == 16
    assert cfg.tokens_per_vector >= cfg.slope / 4  # the requirement; in fact k = C
    assert cfg.slope == pytest.approx(cfg.tokens_per_vector, rel=1e-12)
    for m in (1, 3):  # |V|^{km} distinct sequences from L^{dm} grid prompts: Theorem 4.5 with equality
        count = bounds.log_count(d_model=8, m=m, r=cfg.r, eps=cfg.eps)
        assert count == pytest.approx(16 * m * math.log(16), rel=1e-12)


def test_teacher_forced_argmax_agrees_with_greedy(model):
    """A second path: one forward pass over prompt + target (shifted) predicts every target token."""
    cfg, m = model.config, 3
    targets = torch.randint(16, (16, 16 * m), generator=torch.Generator().manual_seed(7))
    prompt = K.encode_prompt(cfg, targets)
    inputs = torch.cat([prompt, model.embed(targets[:, :-1])], dim=1)
    with torch.no_grad():
        predicted = model(inputs)[:, m - 1:].argmax(-1)
    assert torch.equal(predicted, targets) and torch.equal(K.generate(model, prompt, 16 * m), targets)


def test_the_model_factors_through_rounding_to_the_grid(model):
    """Prompts within 0.2ε of the grid decode identically; one grid step on one coordinate changes the
    output."""
    cfg, g = model.config, torch.Generator().manual_seed(3)
    targets = torch.randint(16, (8, 32), generator=g)
    prompt = K.encode_prompt(cfg, targets)
    noise = (torch.rand(prompt.shape, generator=g, dtype=prompt.dtype) - 0.5) * 0.4 * cfg.eps
    assert torch.equal(K.generate(model, prompt + noise, 32), targets)
    moved = prompt.clone()
    moved[:, 1, 3] += cfg.eps * torch.where(moved[:, 1, 3] < cfg.r - cfg.eps / 2, 1.0, -1.0)
    emitted = K.generate(model, moved, 32)
    assert torch.equal(emitted[:, :16], targets[:, :16])
    assert (emitted[:, 16:] != targets[:, 16:]).any(dim=1).all()


def test_float32_other_shapes_and_for_eps():
    small = K.DigitConfig(d_model=3, vocab_size=5, digits=3, r=7.0, max_vectors=3)
    model32 = K.DigitTransformer(small, dtype=torch.float32)
    cert = K.certify(model32, 3, 16, generator=torch.Generator().manual_seed(0))
    assert cert.all_reproduced and cert.length == 27
    fp16 = K.DigitConfig.for_eps(d_model=8, vocab_size=16, r=1.0, eps=2**-11)  # 1 + 2r/ε = 4097 >= 16^3
    assert fp16.digits == 3 and fp16.tokens_per_vector == 24
    ratio = fp16.tokens_per_vector / float(bounds.slope_bound(d_model=8, vocab_size=16, r=1.0, eps=2**-11))
    assert ratio == pytest.approx(K.lower_bound_ratio(vocab_size=16, r=1.0, eps=2**-11)) and 0.999 < ratio < 1
    expected = 2 / (math.log(4097) / math.log(50))
    assert K.lower_bound_ratio(vocab_size=50, r=1.0, eps=2**-11) == pytest.approx(expected)


def test_bad_input():
    with pytest.raises(InputError, match="vocab_size"):
        K.DigitConfig(vocab_size=1)
    with pytest.raises(InputError, match="<= 65536"):
        K.DigitConfig(vocab_size=300, digits=2)
    with pytest.raises(InputError, match="cannot hold a token"):
        K.DigitConfig.for_eps(d_model=4, vocab_size=16, r=1.0, eps=0.5)
    cfg = K.DigitConfig(max_vectors=2)
    with pytest.raises(InputError, match="shape"):
        K.encode_prompt(cfg, torch.zeros(2, 15, dtype=torch.long))
    with pytest.raises(InputError, match=r"\[0, 15\]"):
        K.encode_prompt(cfg, torch.full((1, 16), 16))
    with pytest.raises(InputError, match="context length"):
        K.DigitTransformer(cfg)(torch.zeros(1, cfg.context_length + 1, 8))
