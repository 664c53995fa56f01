"""Geometry of the support on the toy model and on synthetic points: invariants and dense references."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from accessibility import bounds, geometry
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
