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
    with pytest.raises(InputError, match="cannot hold one of 16 tokens"):
        K.DigitConfig.for_eps(d_model=4, vocab_size=16, r=1.0, eps=2.5)  # 1 + 2r/ε < 2: not one binary digit
    with pytest.raises(InputError, match="cannot hold a token"):
        K.DigitConfig(d_model=1, vocab_size=16, digits=1, token_digits=2)

    cfg = K.DigitConfig(max_vectors=2)
    with pytest.raises(InputError, match="shape"):
        K.encode_prompt(cfg, torch.zeros(2, 15, dtype=torch.long))
    with pytest.raises(InputError, match=r"\[0, 15\]"):
        K.encode_prompt(cfg, torch.full((1, 16), 16))
    with pytest.raises(InputError, match="context length"):
        K.DigitTransformer(cfg)(torch.zeros(1, cfg.context_length + 1, 8))


# --- sub-token digits: the lower bound at the paper's precision ---------------------------------


def _layouts_by_brute_force(vocab_size, levels):
    """(j, q) for every base b >= 2 tried directly: the digits per token q (b^q >= |V|) and per
    coordinate j (b^j <= 1 + 2r/ε), by counting powers (no closed forms)."""
    out = []
    for base in range(2, vocab_size + 1):
        q = next(t for t in range(1, 64) if base**t >= vocab_size)
        j = max(t for t in range(0, 64) if base**t <= levels)
        out.append((j, q))
    return out


def _ratio(layouts, vocab_size, levels, d_model=None):
    best = max(j / q if d_model is None else (d_model * j // q) / d_model for j, q in layouts)
    return best * math.log(vocab_size) / math.log(levels)


def test_lower_bound_ratio_against_brute_force_and_the_built_configs():
    for vocab_size in (2, 5, 16, 50, 97, 300):
        for levels in (2.5, 17.0, 257.0, 4097.0, 1e6):
            eps, layouts = 2.0 / (levels - 1), _layouts_by_brute_force(vocab_size, levels)
            assert K.lower_bound_ratio(vocab_size=vocab_size, r=1.0, eps=eps) == pytest.approx(
                _ratio(layouts, vocab_size, levels), rel=1e-12)
            for d in (1, 3, 8):
                expected = _ratio(layouts, vocab_size, levels, d)
                assert K.lower_bound_ratio(vocab_size=vocab_size, r=1.0, eps=eps, d_model=d) == pytest.approx(
                    expected, rel=1e-12)
                if levels <= K.MAX_LEVELS and expected > 0:  # the construction itself reaches it
                    cfg = K.DigitConfig.for_eps(d_model=d, vocab_size=vocab_size, r=1.0, eps=eps)
                    c = float(bounds.slope_bound(d_model=d, vocab_size=vocab_size, r=1.0, eps=eps))
                    assert cfg.tokens_per_vector / c == pytest.approx(expected, rel=1e-12)
                    assert cfg.eps >= eps * (1 - 1e-12)  # its grid is at least ε apart


@pytest.mark.parametrize("d_model, vocab_size, digits, token_digits",
                         [(3, 100, 3, 2), (2, 50, 4, 3), (4, 7, 1, 3)])
def test_sub_token_digits_decode_every_sampled_sequence(d_model, vocab_size, digits, token_digits):
    """Tokens spread over q base-b digits (some vectors with unused digits) are emitted by greedy decoding,
    and the model still factors through rounding to its grid."""
    cfg = K.DigitConfig(d_model=d_model, vocab_size=vocab_size, digits=digits, token_digits=token_digits,
                        max_vectors=3)
    assert cfg.base**token_digits >= vocab_size > (cfg.base - 1) ** token_digits
    model = K.DigitTransformer(cfg)
    for m in (1, 3):
        cert = K.certify(model, m, 12, generator=torch.Generator().manual_seed(m))
        assert cert.all_reproduced and cert.length == m * (d_model * digits // token_digits)
    targets = torch.randint(vocab_size, (6, 2 * cfg.tokens_per_vector),
                            generator=torch.Generator().manual_seed(9))
    prompt = K.encode_prompt(cfg, targets)
    noise = (torch.rand(prompt.shape, generator=torch.Generator().manual_seed(4), dtype=prompt.dtype) - 0.5)
    assert torch.equal(K.generate(model, prompt + 0.4 * cfg.eps * noise, targets.shape[1]), targets)


def test_the_paper_vocabulary_at_fp16_precision():
    """|V| = 50304 at fp16 relative precision (1 + 2r/ε = 4097 < |V|): one base-|V| digit does not fit in a
    coordinate, four base-15 digits per token do; greedy decoding reproduces every sampled sequence, and
    k/C at fp16's ε is the lower_bound_ratio, above 0.9."""
    eps = 2.0**-11
    cfg = K.DigitConfig.for_eps(d_model=8, vocab_size=50304, r=1.0, eps=eps, max_vectors=2)
    assert (cfg.token_digits, cfg.base, cfg.digits, cfg.tokens_per_vector) == (4, 15, 3, 6)
    ratio = K.lower_bound_ratio(vocab_size=50304, r=1.0, eps=eps)
    c_fp16 = float(bounds.slope_bound(d_model=8, vocab_size=50304, r=1.0, eps=eps))
    assert ratio == pytest.approx(cfg.tokens_per_vector / c_fp16, rel=1e-12) and ratio >= 0.9
    assert cfg.tokens_per_vector <= cfg.slope <= c_fp16  # k below C at its own ε, itself below C at fp16's
    model = K.DigitTransformer(cfg)
    for m in (1, 2):
        cert = K.certify(model, m, 8, generator=torch.Generator().manual_seed(50 + m))
        assert cert.all_reproduced and cert.length == 6 * m


def test_a_dtype_that_cannot_hold_the_logits_is_refused():
    """float32 with |V| = 50304: logits reach 2(|V| - 1)^2 = 5.1e9, far past float32's exact integers."""
    big = K.DigitConfig.for_eps(d_model=4, vocab_size=50304, r=1.0, eps=2.0**-11, max_vectors=1)
    with pytest.raises(InputError, match=r"float32 cannot hold this network's logits exactly: .* 5.06e\+09"):
        K.DigitTransformer(big, dtype=torch.float32)
    assert big.largest_integer == 2.0 * 50303**2
    K.DigitTransformer(K.DigitConfig(d_model=2, vocab_size=16, digits=1), dtype=torch.float32)  # small: fine
